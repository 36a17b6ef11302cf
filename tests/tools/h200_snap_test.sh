#!/bin/bash
# tools/h200_snap.sh and tools/h200_git_from_snap.sh: a copy of a repository's tracked files
# without .git, given .dev/snap, gets a git dir whose HEAD is the snapshot's commit and whose
# git status is clean while the files are HEAD's and names a file changed after the copy; the
# base archive holds the base commit's files but not fixtures/models/ nor reports/ other than
# reports/schema/ (the build reads the receipt schema), and unpacked
# gets a git dir at the base commit (--base: clean, a changed file seen; a base the pack lacks is
# refused with no git dir left); KC_SNAP_BASE=0 writes no base archive; a copy without a snapshot is refused (exit 4); the size of
# what a device call sends is printed, and over 64 MiB (an untracked file, or a carried ignored
# one) h200_snap.sh exits 3, while an ignored file that is not carried does not count, nor does a
# tracked file deleted in the working tree. Runs on a
# repository of its own (the tools are the subject).
# Usage: h200_snap_test.sh SOURCE_DIR
set -u
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "h200_snap_test: $*"; exit 1; }
r=$t/repo
mkdir -p "$r/sub" "$r/reports/h200" "$r/reports/schema" "$r/fixtures/models"
cd "$r" || exit 1
git init -q && git config user.email t@t && git config user.name t
echo one > a.txt && echo base > sub/b.txt && echo model > fixtures/models/m.bin && echo '{}' > reports/h200/x.json
echo '{"s": 1}' > reports/schema/s.json && echo notes > reports/index.md
git add -A && git commit -qm base || fail "no base commit"
base=$(git rev-parse HEAD)
printf '{"git": {"commit": "%s"}}\n' "$base" > reports/h200/fp8-rows.json
echo two > a.txt && printf '#!/bin/sh\n' > run.sh && chmod +x run.sh
git add -A && git commit -qm head || fail "no head commit"
head=$(git rev-parse HEAD)
# KC_SNAP_BASE=0: the commits' pack and names, no base archive
out=$(KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1) || fail "KC_SNAP_BASE=0 h200_snap.sh failed: $out"
[ "$(cat .dev/snap/head)" = "$head" ] && ls .dev/snap/pack-*.pack > /dev/null 2>&1 || fail "KC_SNAP_BASE=0: no head or pack"
[ -e .dev/snap/base.tar.gz ] && fail "KC_SNAP_BASE=0 wrote the base archive"
out=$(bash "$src/tools/h200_snap.sh" 2>&1) || fail "h200_snap.sh failed: $out"
[ "$(cat .dev/snap/head)" = "$head" ] || fail "snap/head is not HEAD"
[ "$(cat .dev/snap/base)" = "$base" ] || fail "snap/base is not the commit fp8-rows.json names"
ls .dev/snap/pack-*.pack > /dev/null 2>&1 || fail "no pack"
# the pack holds no blob
for p in .dev/snap/pack-*.idx; do
  git verify-pack -v "$p" | grep -q ' blob ' && fail "the pack holds blobs"
done
tar tzf .dev/snap/base.tar.gz > "$t/base.list" || fail "base.tar.gz unreadable"
grep -qx 'sub/b.txt' "$t/base.list" || fail "base archive lacks sub/b.txt"
grep -qx 'reports/schema/s.json' "$t/base.list" || fail "base archive lacks reports/schema/s.json (the build reads the schema)"
grep -v '^reports/$\|^reports/schema/' "$t/base.list" | grep -q '^reports/\|^fixtures/models/' &&
  fail "base archive holds reports/ other than schema/, or fixtures/models/"
mkdir -p "$t/base" && tar xzf .dev/snap/base.tar.gz -C "$t/base" && [ "$(cat "$t/base/a.txt")" = one ] ||
  fail "base archive's a.txt is not the base's"
# the device's copy: tracked files and .dev, no .git
c=$t/copy
mkdir -p "$c" && git archive HEAD | tar -x -C "$c" && cp -r .dev "$c/" || fail "copy"
cd "$c" || exit 1
out=$(bash "$src/tools/h200_git_from_snap.sh") || fail "h200_git_from_snap.sh failed: $out"
[ "$out" = "head $head, changed tracked files: 0" ] || fail "unexpected: $out"
[ "$(git rev-parse HEAD)" = "$head" ] || fail "HEAD is not the snapshot's commit"
[ -z "$(git status --porcelain --untracked-files=no)" ] || fail "a clean copy reads dirty: $(git status --short)"
echo changed >> sub/b.txt
[ "$(git status --porcelain --untracked-files=no)" = " M sub/b.txt" ] || fail "a changed file is not seen: $(git status --short)"
out=$(bash "$src/tools/h200_git_from_snap.sh")
[ "$out" = "head $head, changed tracked files: 1" ] || fail "a rerun after the change says: $out"
# the base archive unpacked beside it gets a git dir at the base commit (--base): clean, though
# the archive leaves out reports/ but schema/, and fixtures/models/ (skip-worktree), and a changed
# file shows, the schema's too
b=$t/base-src
mkdir -p "$b" && tar xzf .dev/snap/base.tar.gz -C "$b" || fail "unpack base"
out=$(bash "$src/tools/h200_git_from_snap.sh" --base "$b") || fail "--base failed: $out"
[ "$out" = "base $base, changed tracked files: 0" ] || fail "--base says: $out"
[ "$(git -C "$b" rev-parse HEAD)" = "$base" ] || fail "the base's git dir is not at the base commit"
[ -e "$b/reports/h200" ] || [ -e "$b/reports/index.md" ] && fail "the base archive unpacked reports/ other than schema/"
echo '{"s": 2}' > "$b/reports/schema/s.json"
[ "$(git -C "$b" status --porcelain --untracked-files=no)" = " M reports/schema/s.json" ] ||
  fail "a changed base schema is not seen: $(git -C "$b" status --short)"
echo '{"s": 1}' > "$b/reports/schema/s.json"  # back (the pack holds no blob to check out)
echo changed >> "$b/a.txt"
[ "$(git -C "$b" status --porcelain --untracked-files=no)" = " M a.txt" ] || fail "a changed base file is not seen: $(git -C "$b" status --short)"
[ "$(git rev-parse HEAD)" = "$head" ] || fail "--base moved the copy's own HEAD"
# a snapshot whose pack lacks the base commit: refused, and no git dir is left
mkdir "$t/old" && cp .dev/snap/base .dev/snap/base.tar.gz "$t/old/" && cd "$t/old" && mkdir -p .dev/snap x &&
  mv base base.tar.gz .dev/snap/ && echo 0123456789012345678901234567890123456789 > .dev/snap/base &&
  cp "$c"/.dev/snap/pack-* .dev/snap/ || fail "old snapshot"
bash "$src/tools/h200_git_from_snap.sh" --base x > /dev/null 2>&1
[ $? = 4 ] || fail "a base not in the pack: exit 4 expected"
[ -e x/.git ] && fail "a failed --base left a git dir"
cd "$c" || exit 1
# a copy without the snapshot
rm -rf .dev .git
bash "$src/tools/h200_git_from_snap.sh" > /dev/null 2>&1
[ $? = 4 ] || fail "no snapshot: exit 4 expected"
# the device copy's size against the tool's 64 MiB
cd "$r" || exit 1
out=$(KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1) || fail "snap before the size checks: $out"
echo "$out" | grep -q '^device copy: [0-9.]* MiB of 64 (tracked [0-9.]*, untracked 0.0, carried [0-9.]*: .deps.tgz .dev)$' ||
  fail "no device copy line: $out"
truncate -s 65M big.bin  # sparse: the size counts, not the blocks
out=$(KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1); rc=$?
[ $rc = 3 ] || fail "an untracked 65 MiB file: exit 3 expected, got $rc: $out"
echo "$out" | grep -q 'over the device tool.s 64 MiB' || fail "no message for the oversize copy: $out"
[ -s .dev/snap/head ] || fail "the oversize check left no snapshot"
echo big.bin > .gitignore
out=$(KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1) || fail "an ignored big file counted: $out"
out=$(KC_CARRY="big.bin .dev" KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1); rc=$?
[ $rc = 3 ] || fail "a carried ignored 65 MiB file: exit 3 expected, got $rc: $out"
truncate -s 63M big.bin
out=$(KC_CARRY="big.bin" KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1) || fail "63 MiB carried: $out"
echo "$out" | grep -q 'within 2 MiB' || fail "no warning within 2 MiB of the limit: $out"
rm -f big.bin .gitignore
# a carried path that git does not ignore counts once, as carried (it was also counted untracked)
truncate -s 1M carry.bin
out=$(KC_CARRY="carry.bin" KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1) || fail "1 MiB carried: $out"
echo "$out" | grep -q 'untracked 0.0, carried 1.0: carry.bin)$' || fail "a carried, not ignored file counted twice: $out"
rm -f carry.bin
# in the repository itself (where h200_snap.sh leaves .dev/snap) the git dir is never replaced
n=$(git rev-list --count HEAD)
out=$(bash "$src/tools/h200_git_from_snap.sh" 2>&1); rc=$?
[ $rc = 4 ] || fail "h200_git_from_snap.sh in a checkout: exit 4 expected, got $rc: $out"
echo "$out" | grep -q 'a repository this script did not make' || fail "no reason for the refusal: $out"
[ "$(git rev-list --count HEAD)" = "$n" ] && [ ! -e .git/shallow ] || fail "the checkout's history was replaced"
out=$(bash "$src/tools/h200_git_from_snap.sh" --base 2>&1); rc=$?
[ $rc = 4 ] || fail "--base without a folder: exit 4 expected, got $rc: $out"
# a tracked file deleted in the working tree (the last one git lists) counts nothing and stops nothing
mv sub/b.txt "$t/b.txt"
out=$(KC_SNAP_BASE=0 bash "$src/tools/h200_snap.sh" 2>&1) || fail "a deleted tracked file stopped the snap: $out"
echo "$out" | grep -q '^device copy: ' || fail "no device copy line with a deleted tracked file: $out"
mv "$t/b.txt" sub/b.txt
echo "h200_snap_test: ok"
