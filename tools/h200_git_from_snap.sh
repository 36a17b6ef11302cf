#!/usr/bin/env bash
# On the device machine, in the copy of the working tree: replaces .git by a shallow git dir made
# from .dev/snap (tools/h200_snap.sh): HEAD is the snapshot's commit, the index is read from its
# tree and refreshed, so `git status --untracked-files=no` compares every tracked file's content
# with HEAD's. Prints the commit and the number of changed tracked files; exit 4 on failure.
set -uo pipefail
h=$(cat .dev/snap/head 2>/dev/null) || { echo "h200_git_from_snap: no .dev/snap/head (run tools/h200_snap.sh and carry .dev)"; exit 4; }
rm -rf .git && git init -q && cp .dev/snap/pack-*.pack .dev/snap/pack-*.idx .git/objects/pack/ && echo "$h" > .git/shallow &&
  git update-ref refs/heads/main "$h" && git symbolic-ref HEAD refs/heads/main && git read-tree HEAD || {
  echo "h200_git_from_snap: the snapshot did not load"
  exit 4
}
git update-index -q --refresh > /dev/null
echo "head $(git rev-parse HEAD), changed tracked files: $(git status --porcelain --untracked-files=no | wc -l)"
