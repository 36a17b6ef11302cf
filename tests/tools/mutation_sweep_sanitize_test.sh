#!/bin/sh
# tools/mutation_sweep.py's sanitize:TOOL:CONTRACT[:FILTER] check, end to end on a toy tree:
# a stand-in build (ninja with phony targets), a stand-in tf-cuda-test whose gates pass
# (--gates-only: exit 1, no failed gate) and a stand-in sanitizer (KC_SANITIZER) that reports
# a hazard only while the toy source has its barrier dropped. A mutant that only the
# sanitizer sees is caught by the check on cuda, and never red without cuda in --backends or
# with a bad check; the sanitizer gets the tool, exit code 99, the contract and the filter;
# the source is restored after each mutant.
src=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$tmp/tree" "$tmp/build/tools"
printf 'stage();\n__syncthreads();\nuse();\n' > "$tmp/tree/k.cu"
printf 'rule nop\n  command = true\nbuild tools/tf-cuda-test: phony\nbuild all: phony\n' > "$tmp/build/build.ninja"
cat > "$tmp/build/tools/tf-cuda-test" <<'T'
#!/bin/sh
echo "verdict: fail (controls skipped: --gates-only)"; exit 1
T
cat > "$tmp/san" <<T
#!/bin/sh
echo "\$@" >> "$tmp/san.args"
if grep -q dropped "$tmp/tree/k.cu"; then echo "========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)"; exit 99; fi
shift 4
exec "\$@"
T
chmod +x "$tmp/build/tools/tf-cuda-test" "$tmp/san"
cat > "$tmp/m.json" <<'J'
[{"id": "drop-barrier", "file": "k.cu", "old": "__syncthreads();", "new": "/* dropped */",
  "why": "a race only racecheck sees", "expect": ["sanitize:racecheck:qwen-pages:len=9000"]},
 {"id": "harmless", "file": "k.cu", "old": "use();", "new": "use(); ",
  "why": "no effect", "expect": ["sanitize:racecheck:qwen-pages"]},
 {"id": "bad-check", "file": "k.cu", "old": "stage();", "new": "stage(); ",
  "why": "a check name with no such tool", "expect": ["sanitize:nosuchtool:qwen-pages"]}]
J
run() { KC_SANITIZER="$tmp/san" python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/build" \
  --work "$tmp/w" --no-final-build --timeout 30 --out "$tmp/$1.json" "$tmp/m.json" --backends "$2" > "$tmp/$1.log" 2>&1; }
run cuda cuda
[ $? -eq 1 ] || fail "the sweep's exit: $? (want 1: two survived)"
st() { python3 -c "import json,sys; r=json.load(open('$tmp/$1.json')); m={x['id']: x for x in r['mutants']}[sys.argv[1]]; print(m['status'], m.get('caught_by', ''), [c['rc'] for c in m['checks']])" "$2"; }
[ "$(st cuda drop-barrier)" = "caught sanitize:racecheck:qwen-pages:len=9000 [99]" ] || fail "drop-barrier on cuda: $(st cuda drop-barrier)"
[ "$(st cuda harmless)" = "survived  [1]" ] || fail "harmless on cuda: $(st cuda harmless)"
[ "$(st cuda bad-check)" = "survived  [-1]" ] || fail "bad-check: $(st cuda bad-check)"
grep -q -- "--tool racecheck --error-exitcode 99 $tmp/build/tools/tf-cuda-test qwen-pages --backend cuda --gates-only --quiet --out .* --filter len=9000" "$tmp/san.args" \
  || fail "the sanitizer's arguments: $(head -1 "$tmp/san.args")"
grep -q dropped "$tmp/tree/k.cu" && fail "the source was not restored"
run cpu cpu
[ "$(st cpu drop-barrier)" = "survived  [-1]" ] || fail "drop-barrier without cuda: $(st cpu drop-barrier)"
[ -e "$tmp/tree/.mutation-sweep-active" ] && fail "the marker was left behind"
echo "mutation_sweep sanitize check: ok"
