#!/bin/sh
# tools/mutation_sweep.py's selection and refusals, without building or mutating anything
# (--list): --only, --files and --shard select from the lists; the shards of a list are
# disjoint and cover it; a bad regex, an empty selection, a tree holding the sweep's marker, a
# mutant that is not an object and a check name the sweep does not know (in "expect" or --then:
# a typo, a test binary or sanitizer tool that does not exist) each exit 2 with the reason, at
# load time (--list already refuses them).
src=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sweep() { python3 "$src/tools/mutation_sweep.py" --root "$src" --build "$tmp/none" --out "$tmp/o.json" --list "$@"; }
dev=$src/reports/mutation-sweep/mutants-device.json
host=$src/reports/mutation-sweep/mutants-host.json
all=$(sweep "$dev" | wc -l)
[ "$all" -ge 10 ] || fail "the device list has $all mutants"
out=$(sweep "$dev" --only '^q4mma-') || fail "--only exited $?"
[ -n "$out" ] || fail "--only '^q4mma-' selected nothing"
echo "$out" | awk '{print $1}' | grep -v '^q4mma-' && fail "--only let another id through"
out=$(sweep "$host" --files '\.h$') || fail "--files exited $?"
[ -n "$out" ] || fail "--files selected nothing"
echo "$out" | awk '{print $2}' | grep -v '\.h$' && fail "--files let another file through"
for i in 0 1 2; do sweep "$dev" --shard $i/3 >> "$tmp/shards" || fail "--shard $i/3 exited $?"; done
[ "$(wc -l < "$tmp/shards")" -eq "$all" ] || fail "the three shards hold $(wc -l < "$tmp/shards") of $all mutants"
[ "$(sort -u "$tmp/shards" | wc -l)" -eq "$all" ] || fail "the shards overlap"
sweep "$dev" | sort > "$tmp/full"
sort "$tmp/shards" | cmp -s - "$tmp/full" || fail "the shards are not the list"
msg=$(sweep "$host" --files '(' 2>&1); rc=$?
[ $rc -eq 2 ] || fail "a bad --files regex exited $rc"
echo "$msg" | grep -q -- '--files' || fail "a bad regex's message does not name --files: $msg"
msg=$(sweep "$dev" --only 'no-such-mutant' 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q 'no mutant selected' || fail "an empty selection exited $rc: $msg"
mkdir "$tmp/tree" && echo "pid 1" > "$tmp/tree/.mutation-sweep-active"
msg=$(python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/none" --out "$tmp/o.json" --list "$dev" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q 'exists' || fail "a tree with the marker was not refused (exit $rc): $msg"
refused() {  # refused WHAT WORD JSON [OPTIONS]: exit 2 and a message naming WORD
  printf '%s\n' "$3" > "$tmp/bad.json"; what=$1; word=$2; shift 3
  msg=$(sweep "$tmp/bad.json" "$@" 2>&1); rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc (want 2): $msg"
  [ "$(echo "$msg" | wc -l)" -eq 1 ] && echo "$msg" | grep -q -- "$word" || fail "$what: the message does not name $word: $msg"
}
ok='[{"id": "m", "file": "CMakeLists.txt", "old": "project(", "new": "project (", "expect": ["fp8-rows"]}]'
printf '%s\n' "$ok" > "$tmp/ok.json"
sweep "$tmp/ok.json" --then 'serve-gate, gtest:kc_unit_tests:Bf16.*,sanitize:memcheck:q4-rows' > /dev/null ||
  fail "known checks in --then refused"
refused "a typo in expect" "unknown check 'q4-row'" '[{"id": "m", "file": "CMakeLists.txt", "old": "a", "new": "b", "expect": ["q4-row"]}]'
refused "an unknown test binary" "kc_nosuch_tests" \
  '[{"id": "m", "file": "CMakeLists.txt", "old": "a", "new": "b", "expect": ["gtest:kc_nosuch_tests:*"]}]'
refused "an unknown sanitizer tool" "sanitize:helgrind:qwen-pages" \
  '[{"id": "m", "file": "CMakeLists.txt", "old": "a", "new": "b", "expect": ["sanitize:helgrind:qwen-pages"]}]'
refused "a typo in --then" "--then" "$ok" --then 'contracts,serve-gat'
refused "a mutant that is not an object" "mutant 0: not an object" '[1]'
echo "mutation_sweep selection: ok ($all device mutants in three shards; unknown checks refused at load)"
