#!/usr/bin/env bash
# Writes .dev/snap/ for a device call over a copy of the working tree that has no .git (the device
# tool copies tracked files only, and the repository with its history is too large to carry):
#   head      HEAD's commit hash;
#   pack-*    HEAD's and the base's commit and tree objects (a pack of ~200 KB, no blobs);
#   base      the base commit (KC_BASE, else the commit reports/h200/fp8-rows.json names: the base
#             tools/h200_premerge.sh builds) and base.tar.gz, its tree without fixtures/models/
#             and without reports/ but for reports/schema/ (~0.7 MB: what a build and the benches
#             need; contracts/CMakeLists.txt reads the receipt schema). KC_SNAP_BASE=0 leaves
#             base.tar.gz out (0.8 MB of the device call's 64 MiB tree) where no premerge runs.
# On the device, tools/h200_git_from_snap.sh makes a shallow git dir from the pack (read-tree
# HEAD, update-index --refresh: every tracked file hashed), so git rev-parse / git status, and
# through them the receipts' git.commit and git.dirty, say what they would in a clone; and
# tools/h200_premerge.sh builds its base from base.tar.gz where the base commit is not in git.
# Last, it prints the size of what a device call sends (the tracked files in the working tree,
# the untracked files git does not ignore, and the carried paths: KC_CARRY, default
# ".deps.tgz .dev") against the tool's 64 MiB; over it (the call would be refused before any
# start) it exits 3, with the snapshot written, and within 2 MiB of it it warns.
# Usage: tools/h200_snap.sh   (from the repository root; carry .dev with the call)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rm -rf .dev/snap && mkdir -p .dev/snap
h=$(git rev-parse HEAD)
base=${KC_BASE:-$(python3 -c "import json; print(json.load(open('reports/h200/fp8-rows.json'))['git']['commit'])")}
base=$(git rev-parse --verify "$base^{commit}")
# The pack holds HEAD's and the base's commit and trees: the base's archive gets a git dir too.
{
  for c in "$h" "$base"; do
    echo "$c"
    git rev-parse "$c^{tree}"
    git ls-tree -r -t "$c" | awk '$2 == "tree" {print $3}'
  done
} | sort -u | git pack-objects -q .dev/snap/pack > /dev/null
echo "$h" > .dev/snap/head
echo "$base" > .dev/snap/base
# Every entry of the base's reports/ but schema/ left out (an exclusion would win over an include).
mapfile -t left_out < <(git ls-tree --name-only "$base" reports/ | grep -vx 'reports/schema' | sed 's/^/:!/')
[ "${KC_SNAP_BASE:-1}" = 0 ] ||
  git archive --format=tar.gz "$base" -- . "${left_out[@]}" ':!fixtures/models' > .dev/snap/base.tar.gz
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "h200_snap.sh: the working tree differs from HEAD: the device's git status will say so" >&2
echo "head $h, base $base"
# What the device call sends, against its limit (64 MiB; the tool refuses a larger tree at once).
# A path that is not there (a tracked file deleted in the working tree) adds nothing; stat's
# failure for it must not end the script (pipefail).
sum_sizes() { { xargs -0 -r stat -c %s -- 2> /dev/null || true; } | awk '{s += $1} END {printf "%d", s}'; }
# A carried path that git does not ignore counts once, as carried (it also shows as untracked).
tracked=$(git ls-files -z | sum_sizes)
read -r -a carry <<< "${KC_CARRY-.deps.tgz .dev}"
not_carried=(-e '^$')  # grep -v of nothing but the empty name
for c in "${carry[@]}"; do
  not_carried+=(-e "^$(printf '%s' "${c%/}" | sed 's/[].[\*^$]/\\&/g')\(/.*\)\{0,1\}$")
done
untracked=$(git ls-files -z --others --exclude-standard | { grep -zv "${not_carried[@]}" || true; } | sum_sizes)
carried=0
for c in "${carry[@]}"; do
  [ -e "$c" ] && carried=$((carried + $(find "$c" -type f -print0 | sum_sizes)))
done
total=$((tracked + untracked + carried)) limit=$((64 << 20))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
echo "device copy: $(mib $total) MiB of 64 (tracked $(mib $tracked), untracked $(mib $untracked), carried $(mib $carried): ${KC_CARRY-.deps.tgz .dev})"
if [ "$total" -gt "$limit" ]; then
  echo "h200_snap.sh: the device copy is $(mib $total) MiB, over the device tool's 64 MiB: a call would be refused; carry less or move files out of the tree" >&2
  exit 3
elif [ $((limit - total)) -lt $((2 << 20)) ]; then
  echo "h200_snap.sh: the device copy is within 2 MiB of the device tool's 64 MiB" >&2
fi
