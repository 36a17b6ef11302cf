#!/usr/bin/env bash
# On the device machine, in the copy of the working tree: replaces .git by a shallow git dir made
# from .dev/snap (tools/h200_snap.sh): HEAD is the snapshot's commit, the index is read from its
# tree and refreshed, so `git status --untracked-files=no` compares every tracked file's content
# with HEAD's. Prints the commit and the number of changed tracked files; exit 4 on failure.
#   tools/h200_git_from_snap.sh              the copy (the current folder)
#   tools/h200_git_from_snap.sh --base DIR   DIR, where .dev/snap/base.tar.gz was unpacked: a git
#       dir at the base commit (.dev/snap/base), so a build there names it in its receipts; the
#       tracked paths the archive leaves out (reports/ but its schema/, fixtures/models/: no build
#       reads them) are skip-worktree, and git status compares every other tracked file with the
#       base's.
# A .git that this script did not make (no .git/kc-snap in it: a real repository, where .dev/snap
# also exists after h200_snap.sh) is never replaced: exit 4, unless KC_SNAP_REPLACE_GIT=1.
set -uo pipefail
snap=$PWD/.dev/snap
mode=head
if [ "${1:-}" = --base ]; then
  mode=base
  [ -n "${2:-}" ] || { echo "h200_git_from_snap: --base DIR: the folder is missing"; exit 4; }
  cd "$2" || exit 4
fi
c=$(cat "$snap/$mode" 2>/dev/null) || { echo "h200_git_from_snap: no .dev/snap/$mode (run tools/h200_snap.sh and carry .dev)"; exit 4; }
if [ -e .git ] && [ ! -e .git/kc-snap ] && [ "${KC_SNAP_REPLACE_GIT:-0}" != 1 ]; then
  echo "h200_git_from_snap: $PWD/.git is a repository this script did not make (no .git/kc-snap):" \
    "it runs on the device's copy, never in a checkout (KC_SNAP_REPLACE_GIT=1 replaces it anyway)"
  exit 4
fi
rm -rf .git && git init -q && : > .git/kc-snap && cp "$snap"/pack-*.pack "$snap"/pack-*.idx .git/objects/pack/ && echo "$c" > .git/shallow &&
  git update-ref refs/heads/main "$c" && git symbolic-ref HEAD refs/heads/main && git read-tree HEAD || {
  rm -rf .git
  echo "h200_git_from_snap: the snapshot did not load (its pack lacks $c?)"
  exit 4
}
if [ "$mode" = base ]; then
  git ls-files -z -- reports fixtures/models | while IFS= read -r -d '' f; do
    [ -e "$f" ] || printf '%s\0' "$f"
  done | git update-index -z --skip-worktree --stdin
fi
git update-index -q --refresh > /dev/null
echo "$mode $(git rev-parse HEAD), changed tracked files: $(git status --porcelain --untracked-files=no | wc -l)"
