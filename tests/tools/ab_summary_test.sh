#!/bin/sh
# tools/ab_summary.py over session 59's call 4 receipts (two builds, four rounds, bytes equal),
# then over copies edited to disagree: a row's bytes differ (exit 1, DIFF), a row a variant lacks
# (exit 1, missing), and bad input (exit 2, naming the file or --out: never 1, which a script
# would read as a byte mismatch): a row that is not an object, a median_us of true, an --out in a
# missing folder or naming a folder.
# usage: ab_summary_test.sh REPO_ROOT
set -u
root=$1
tool="python3 $root/tools/ab_summary.py"
src=$root/reports/h100/receipts-s59/call4-eaf06eb
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$($tool "$src" --base n) || fail "call 4's receipts: exit $? (want 0)"
echo "$out" | grep -q '^24q/4kv/d256/b1/ctx4096/q4/p16  *16.48  *16.03  *0.973  same$' || fail "q4 p16 row: $(echo "$out" | grep q4/p16)"
echo "$out" | grep -q '^b1/ctx4096: r/n median 0.987 (0.973-1.008), 18 rows$' || fail "b1/ctx4096 group"
echo "$out" | grep -q "rounds {'n': 4, 'r': 4}; rows whose bytes differ or a variant lacks: 0" || fail "last line"

cp "$src"/ab-*.json "$t"/
python3 - "$t/ab-r-3.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["rows"][0]["out_fnv1a"] = "0123456789abcdef"
json.dump(r, open(sys.argv[1], "w"))
PY
$tool "$t" --base n > "$t/out" 2>&1; rc=$?
[ $rc = 1 ] || fail "bytes differ in one round: exit $rc (want 1)"
grep -q 'DIFF$' "$t/out" || fail "no DIFF row"
grep -q 'rows whose bytes differ or a variant lacks: 1$' "$t/out" || fail "DIFF count"

cp "$src"/ab-*.json "$t"/
python3 - "$t"/ab-n-*.json <<'PY'
import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    r["rows"] = [x for x in r["rows"] if x["config"] != "24q/4kv/d256/b1/ctx131072"]
    json.dump(r, open(f, "w"))
PY
$tool "$t" --base n > "$t/out" 2>&1; rc=$?
[ $rc = 1 ] || fail "rows a variant lacks: exit $rc (want 1)"
grep -q '^24q/4kv/d256/b1/ctx131072/bf16/window  *missing in n$' "$t/out" || fail "no missing row"

cp "$src"/ab-*.json "$t"/
$tool "$t" --base x > "$t/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "base x: not among the variants" "$t/out" || fail "unknown --base: exit $rc"
echo '{"rows": [' > "$t/ab-n-1.json"
$tool "$t" --base n > "$t/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "ab-n-1.json: not a bench receipt" "$t/out" || fail "truncated receipt: exit $rc"
echo '{"rows": []}' > "$t/ab-n-1.json"
$tool "$t" --base n > "$t/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "ab-n-1.json: rows: empty" "$t/out" || fail "empty rows: exit $rc"
rm -f "$t"/ab-*.json; echo '{}' > "$t/ab-n-x-1.json"
$tool "$t" --base n > "$t/out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "not named ab-<variant>-<round>.json" "$t/out" || fail "bad name: exit $rc"
bad_row() {  # bad_row WHAT WORD PYTHON-EDIT: the edit on ab-n-1.json's rows exits 2 naming WORD
  rm -f "$t"/ab-*.json; cp "$src"/ab-*.json "$t"/
  python3 -c "import json, sys; r = json.load(open(sys.argv[1])); rows = r['rows']; $3; json.dump(r, open(sys.argv[1], 'w'))" \
    "$t/ab-n-1.json"
  $tool "$t" --base n > "$t/out" 2>&1; rc=$?
  [ $rc = 2 ] && [ "$(wc -l < "$t/out")" = 1 ] && grep -q "ab-n-1.json: .*$2" "$t/out" || fail "$1: exit $rc (want 2): $(tail -1 "$t/out")"
}
bad_row "a row that is not an object" "a row that is not an object" "rows[0] = 1"
bad_row "median_us true" "median_us True is not a positive number" "rows[0]['median_us'] = True"
bad_row "a hash that is not a string" "is not a string" "rows[0]['out_fnv1a'] = [1]"
rm -f "$t"/ab-*.json; cp "$src"/ab-*.json "$t"/
for out in "$t/no-such-folder/x" "$t"; do
  $tool "$t" --base n --out "$out" > "$t/out" 2>&1; rc=$?
  [ $rc = 2 ] && [ "$(wc -l < "$t/out")" = 1 ] && grep -q -- "--out: " "$t/out" || fail "--out $out: exit $rc (want 2): $(tail -1 "$t/out")"
done
$tool "$t" --base n --out "$t/summary.txt" > "$t/out" || fail "--out: exit $?"
cmp -s "$t/out" "$t/summary.txt" || fail "--out: the file is not what was printed"
echo "ab_summary: ok"
