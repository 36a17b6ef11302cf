#!/bin/sh
# --shard i/n and report's merge, on rows-invariant (cpu backend, under a second a run):
#   the two shards of 1/2 and 2/2 split the cases (each runs some, together all of them, and a
#   second run of a shard draws the same ones); report --merge-out merges them into a receipt
#   whose case count equals the unsharded run's, which diff compares with it (no regression);
#   an incomplete or mismatched set of shards, a bad --shard: exit 2 naming the problem.
#   and shards of two binaries of one commit (OTHER_BINARY, a cpu mutant) are refused.
#   shard_test.sh TF_CUDA_TEST OUT_DIR [OTHER_BINARY]   (the receipts and a JUnit file stay in
#                                         OUT_DIR for the schema and JUnit tests)
tool=$1 out=$2 other=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$out" && mkdir -p "$out" || fail "cannot make $out"
run() { "$tool" rows-invariant --backend cpu --quiet "$@" >"$out/log" 2>&1 || fail "rows-invariant $*: $(tail -3 "$out/log")"; }
run --out "$out/full/rows-invariant.json"
run --shard 1/2 --out "$out/s1/rows-invariant.json" --junit "$out/rows-invariant-shard1.junit.xml"
run --shard 2/2 --out "$out/s2/rows-invariant.json"
run --shard 1/2 --out "$out/again/rows-invariant.json"
cases() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['cases'][sys.argv[2]])" "$1" "$2"; }
full=$(cases "$out/full/rows-invariant.json" run) a=$(cases "$out/s1/rows-invariant.json" run) b=$(cases "$out/s2/rows-invariant.json" run)
[ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ $((a + b)) -eq "$full" ] || fail "shards ran $a + $b cases, the whole run $full"
[ "$(cases "$out/s1/rows-invariant.json" shard)" = 1/2 ] || fail "cases.shard not recorded"
[ "$(cases "$out/again/rows-invariant.json" run)" -eq "$a" ] || fail "shard 1/2 drew a different number of cases the second time"
python3 - "$out/s1/rows-invariant.json" "$out/again/rows-invariant.json" <<'PY' || fail "shard 1/2 differs between two runs"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
key = lambda r: [(g["name"], g["passed"], g["failed"], g["skipped"]) for g in r["gates"]]
sys.exit(0 if key(a) == key(b) else 1)
PY
echo "shards: $a + $b of $full cases; shard 1/2 the same twice"
"$tool" report "$out/s1/rows-invariant.json" "$out/s2/rows-invariant.json" --merge-out "$out/merged" >"$out/report.md" 2>&1 ||
  fail "report --merge-out: $(tail -3 "$out/report.md")"
grep -q 'merged from' "$out/report.md" || fail "the report does not say it merged"
[ "$(cases "$out/merged/rows-invariant.json" run)" -eq "$full" ] || fail "merged cases.run $(cases "$out/merged/rows-invariant.json" run), expected $full"
[ "$(cases "$out/merged/rows-invariant.json" filtered_out)" -eq "$(cases "$out/full/rows-invariant.json" filtered_out)" ] || fail "merged filtered_out"
[ "$(cases "$out/merged/rows-invariant.json" merged_shards)" -eq 2 ] || fail "merged_shards"
"$tool" diff "$out/full/rows-invariant.json" "$out/merged/rows-invariant.json" >"$out/diff.md" 2>&1 || fail "diff whole -> merged: $(grep -A3 Regressions "$out/diff.md")"
echo "merged: $full cases, diff against the whole run: no regression"
expect2() {  # pattern, command...
  pat=$1
  shift
  msg=$("$@" 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2"
  case "$msg" in *"$pat"*) echo "refused: $msg";; *) fail "$*: '$msg' lacks '$pat'";; esac
}
expect2 "rows-invariant: shard 2/2 missing (1 of 2 given)" "$tool" report "$out/s1/rows-invariant.json" --merge-out "$out/m2"
run --shard 1/3 --out "$out/t1/rows-invariant.json"
expect2 "cases.shard: 1/3, but $out/s1/rows-invariant.json is a shard of 2" "$tool" report "$out/s1/rows-invariant.json" "$out/t1/rows-invariant.json"
expect2 "and --merge-out name the same file" "$tool" report "$out/s1/rows-invariant.json" "$out/s2/rows-invariant.json" --merge-out "$out/mj" --junit "$out/mj/rows-invariant.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['host']=5; json.dump(r, open(sys.argv[2], 'w'))" \
  "$out/s2/rows-invariant.json" "$out/host5.json"
# Refused as it is read, by the receipt schema (Receipt::check), before the merge looks at hosts.
expect2 "$out/host5.json: host: expected a string, got a number (receipt schema)" "$tool" report "$out/s1/rows-invariant.json" "$out/host5.json"
rm -f "$out/host5.json"
expect2 "shard 1/2 given twice" "$tool" report "$out/s1/rows-invariant.json" "$out/again/rows-invariant.json"
expect2 "--shard '3/2': expected i/n with 1 <= i <= n" "$tool" kernel-contract --backend cpu --shard 3/2 --out-dir "$out/no"
expect2 "--shard 'x': expected i/n" "$tool" q4-rows --backend cpu --shard x
expect2 "--shard '1/1025': expected i/n with 1 <= i <= n <= 1024" "$tool" q4-rows --backend cpu --shard 1/1025
# One case, two shards: the cases are dealt in turn, so shard 1 holds it; shard 2 ran only the
# case-independent gates, and fails so.
"$tool" rows-invariant --backend cpu --quiet --cases 1 --shard 1/2 --out "$out/one1.json" >"$out/log" 2>&1 ||
  fail "shard 1/2 of one case: $(tail -3 "$out/log")"
[ "$(cases "$out/one1.json" run)" -eq 1 ] || fail "shard 1/2 of one case passed with $(cases "$out/one1.json" run) cases"
if "$tool" rows-invariant --backend cpu --quiet --cases 1 --shard 2/2 --out "$out/one2.json" >"$out/log" 2>&1; then
  fail "shard 2/2 of one case passed"
fi
grep -q "holds none of the 1 cases" "$out/one2.json" || fail "shard 2/2 failed for another reason: $(tail -3 "$out/log")"
rm -f "$out"/one?.json
echo "an empty shard fails: holds none of the cases"
# Three cases in three shards: each holds one (a hash of the lines left shards empty; with
# arena-offsets' 3 cases, kernel-contract --shard i/4 could not pass on correct code).
for s in 1 2 3; do
  "$tool" rows-invariant --backend cpu --quiet --cases 3 --shard $s/3 --out "$out/three$s.json" >"$out/log" 2>&1 ||
    fail "shard $s/3 of three cases: $(tail -3 "$out/log")"
done
echo "three cases in three shards: every shard passes"
expect2 "arena-offsets has 3: use at most 3 shards" "$tool" kernel-contract --backend cpu --shard 1/4 --out-dir "$out/no"
# A filter that picks refusal probes: the merged filtered_out is the unsharded run's (the old
# arithmetic gave a negative count, which report then refused), and the merge checks itself.
"$tool" fp8-rows --backend cpu --quiet --cases 1 --filter refusals --out "$out/rf/full.json" >"$out/log" 2>&1 || fail "fp8-rows refusals: $(tail -3 "$out/log")"
for s in 1 2; do
  "$tool" fp8-rows --backend cpu --quiet --cases 1 --filter refusals --shard $s/2 --out "$out/rf/s$s.json" >"$out/log" 2>&1 ||
    fail "fp8-rows refusals shard $s/2: $(tail -3 "$out/log")"
done
"$tool" report "$out/rf/s1.json" "$out/rf/s2.json" --merge-out "$out/rf/m" >"$out/log" 2>&1 || fail "merge of the refusal shards: $(tail -3 "$out/log")"
for k in run filtered_out; do
  [ "$(cases "$out/rf/m/fp8-rows.json" $k)" -eq "$(cases "$out/rf/full.json" $k)" ] ||
    fail "merged cases.$k $(cases "$out/rf/m/fp8-rows.json" $k), the unsharded run's $(cases "$out/rf/full.json" $k)"
done
"$tool" report "$out/rf/m/fp8-rows.json" >/dev/null 2>&1 || fail "report refuses the merged refusal shards"
echo "merged refusal shards: run and filtered_out equal the unsharded run's"
# No filter, a contract with refusal probes (q4-rows): every probe runs in one shard, and counts
# as no generated case there or in cases.matched, so the shards merge into a pass whose run equals
# the unsharded run's (cases.matched once counted the probes: "the shards ran 2 cases, but 36
# were selected", a fail on correct code).
"$tool" q4-rows --backend cpu --quiet --cases 2 --out "$out/qp/full.json" >"$out/log" 2>&1 || fail "q4-rows: $(tail -3 "$out/log")"
for s in 1 2; do
  "$tool" q4-rows --backend cpu --quiet --cases 2 --shard $s/2 --out "$out/qp/s$s.json" >"$out/log" 2>&1 ||
    fail "q4-rows shard $s/2: $(tail -3 "$out/log")"
done
"$tool" report "$out/qp/s1.json" "$out/qp/s2.json" --merge-out "$out/qp/m" >"$out/log" 2>&1 || fail "merge of q4-rows' shards: $(grep -i -m3 'fail\|shards ran' "$out/log")"
[ "$(cases "$out/qp/m/q4-rows.json" run)" -eq "$(cases "$out/qp/full.json" run)" ] ||
  fail "merged q4-rows cases.run $(cases "$out/qp/m/q4-rows.json" run), the unsharded run's $(cases "$out/qp/full.json" run)"
"$tool" diff "$out/qp/full.json" "$out/qp/m/q4-rows.json" >"$out/diff.md" 2>&1 || fail "diff q4-rows whole -> merged: $(grep -A3 Regressions "$out/diff.md")"
echo "shards of a contract with refusal probes, no filter: the merge passes, run equals the unsharded run's"
# Shards of a run of every case in which no shard checked a gate: the merge fails, as the
# unsharded run would (edited copies of the two shards of rows-invariant).
mkdir -p "$out/nr"
for s in 1 2; do
  python3 - "$out/s$s/rows-invariant.json" "$out/nr/s$s.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g = r["gates"][0]
g.update(passed=0, failed=0, skipped=0, total=0, status="not run", ok=True)
g.pop("worst", None)
json.dump(r, open(sys.argv[2], "w"), indent=1)
PY
done
gname=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['gates'][0]['name'])" "$out/nr/s1.json")
if "$tool" report "$out/nr/s1.json" "$out/nr/s2.json" --merge-out "$out/nr/m" >"$out/log" 2>&1; then fail "a gate no shard checked: the merge passed"; fi
grep -q "gate $gname checked nothing in a run of every case" "$out/nr/m/rows-invariant.json" || fail "the merge did not name gate $gname"
echo "a gate no shard of a full run checked: the merge fails"
# Shard 2/2 from another binary of the same commit (a cpu mutant whose plant is in another
# contract's codec, so rows-invariant passes on it): one commit, one seed, both shards pass, and
# they used to merge into one pass that no binary earned. Refused by build.id.
if [ -n "$other" ]; then
  "$other" rows-invariant --backend cpu --quiet --shard 2/2 --out "$out/ob/s2.json" >"$out/log" 2>&1 ||
    fail "rows-invariant shard 2/2 on $other: $(tail -3 "$out/log")"
  a=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['build']['id'])" "$out/s1/rows-invariant.json")
  b=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['build']['id'])" "$out/ob/s2.json")
  [ "$a" != "$b" ] && [ "$a" != none ] && [ "$b" != none ] || fail "build ids of two binaries: '$a' and '$b'"
  expect2 "$out/ob/s2.json: build.id \"$b\" differs from $out/s1/rows-invariant.json's \"$a\": shards of two binaries do not merge" \
    "$tool" report "$out/s1/rows-invariant.json" "$out/ob/s2.json" --merge-out "$out/om"
  rm -rf "$out/ob"
else
  echo "the build-id merge check: no second binary given"
fi
[ ! -e "$out/m2" ] && [ ! -e "$out/no" ] && [ ! -e "$out/mj" ] && [ ! -e "$out/om" ] || fail "a refused command wrote its output"
rm -rf "$out/t1" "$out/again" "$out/rf" "$out/qp" "$out/nr" "$out"/three?.json
