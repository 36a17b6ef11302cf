#!/usr/bin/env bash
# Writes .dev/snap/: HEAD's commit and tree objects (a pack of ~100 KB, no blobs) and the commit's
# hash, for a device call over a copy of the working tree that has no .git (the device tool copies
# tracked files only, and the repository with its history is too large to carry). On the device,
# reports/h200/receipts-s36/call1.sh shows the use: a shallow git dir from the pack, read-tree HEAD,
# update-index --refresh (hashes every tracked file), so git rev-parse / git status, and through
# them the receipts' git.commit and git.dirty, say what they would in a clone.
# Usage: tools/h200_snap.sh   (from the repository root; carry .dev with the call)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
rm -rf .dev/snap && mkdir -p .dev/snap
h=$(git rev-parse HEAD)
{ echo "$h"; git rev-parse "HEAD^{tree}"; git ls-tree -r -t HEAD | awk '$2 == "tree" {print $3}'; } | git pack-objects -q .dev/snap/pack > /dev/null
echo "$h" > .dev/snap/head
[ -z "$(git status --porcelain --untracked-files=no)" ] || echo "h200_snap.sh: the working tree differs from HEAD: the device's git status will say so" >&2
echo "$h"
