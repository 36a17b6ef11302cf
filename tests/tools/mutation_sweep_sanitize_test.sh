#!/bin/sh
# tools/mutation_sweep.py's sanitize:TOOL:CONTRACT[:FILTER] check, end to end on a toy tree:
# a stand-in build (ninja with phony targets), a stand-in tf-cuda-test whose gates pass
# (--gates-only: exit 1, no failed gate) and a stand-in sanitizer (KC_SANITIZER) that reports
# a hazard only while the toy source has its barrier dropped. A mutant that only the
# sanitizer sees is caught by the check on cuda, and never red without cuda in --backends; a
# bad check is refused (exit 2) before anything is edited; the sanitizer gets the tool, exit
# code 99, the contract and the filter;
# the source is restored after each mutant. Then the sweep's verdicts on the same tree, with a
# stand-in contract whose gate fails while the source says "wrong" and a stand-in build that
# fails while it says "nocompile": a failed gate is caught, gates that held (--gates-only's exit
# 1, no failed gate named) survive, an `old` found twice is not applied and edits nothing, an
# edit that does not build is a build-error whose checks never run, a ctest: check builds
# `all`, and the sweep exits 1 with a single survivor and 0 when every mutant is caught. An
# --out in a missing folder is refused (exit 2) before anything is built or checked. A sweep
# stopped by SIGTERM while a check runs restores the file, exits 130 (not 0: a mutant was never
# tested) and writes a receipt that says "interrupted" and names the mutants not run.
src=$1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$tmp/tree" "$tmp/build/tools"
printf 'stage();\n__syncthreads();\nuse();\n' > "$tmp/tree/k.cu"
cat > "$tmp/build/build.ninja" <<N
rule compile
  command = if grep -q nocompile $tmp/tree/k.cu; then echo 'k.cu:1: error: nocompile'; exit 1; fi
rule mark
  command = echo all >> $tmp/built
build compiled: compile
build allmark: mark
build tools/tf-cuda-test: phony compiled
build all: phony compiled allmark
N
cat > "$tmp/build/tools/tf-cuda-test" <<T
#!/bin/sh
echo "\$@" >> "$tmp/tool.args"
if grep -q slow "$tmp/tree/k.cu"; then exec sleep 30; fi
if grep -q wrong "$tmp/tree/k.cu"; then echo "fp8-rows: fail because gate decode==reference failed"; exit 1; fi
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
  "why": "no effect", "expect": ["sanitize:racecheck:qwen-pages"]}]
J
cat > "$tmp/bad.json" <<'J'
[{"id": "bad-check", "file": "k.cu", "old": "stage();", "new": "stage(); /* dropped */",
  "why": "a check name with no such tool", "expect": ["sanitize:nosuchtool:qwen-pages"]}]
J
run() { KC_SANITIZER="$tmp/san" python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/build" \
  --work "$tmp/w" --no-final-build --timeout 30 --out "$tmp/$1.json" "$tmp/m.json" --backends "$2" > "$tmp/$1.log" 2>&1; }
cp "$tmp/tree/k.cu" "$tmp/k.orig"
msg=$(KC_SANITIZER="$tmp/san" python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/build" \
  --work "$tmp/w" --no-final-build --timeout 30 --out "$tmp/bad-out.json" "$tmp/bad.json" --backends cuda 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$msg" | grep -q "unknown check 'sanitize:nosuchtool:qwen-pages'" ||
  fail "a bad check: exit $rc (want 2, naming it): $msg"
[ -e "$tmp/bad-out.json" ] || [ -e "$tmp/san.args" ] || [ -e "$tmp/build/MUTATED-BUILD.txt" ] &&
  fail "a bad check was refused after the sweep started"
cmp -s "$tmp/k.orig" "$tmp/tree/k.cu" || fail "a bad check's mutant was applied"
run cuda cuda
[ $? -eq 1 ] || fail "the sweep's exit: $? (want 1: one survived)"
st() { python3 -c "import json,sys; r=json.load(open('$tmp/$1.json')); m={x['id']: x for x in r['mutants']}[sys.argv[1]]; print(m['status'], m.get('caught_by', ''), [c['rc'] for c in m['checks']])" "$2"; }
[ "$(st cuda drop-barrier)" = "caught sanitize:racecheck:qwen-pages:len=9000 [99]" ] || fail "drop-barrier on cuda: $(st cuda drop-barrier)"
[ "$(st cuda harmless)" = "survived  [1]" ] || fail "harmless on cuda: $(st cuda harmless)"
grep -q -- "--tool racecheck --error-exitcode 99 $tmp/build/tools/tf-cuda-test qwen-pages --backend cuda --gates-only --quiet --out .* --filter len=9000" "$tmp/san.args" \
  || fail "the sanitizer's arguments: $(head -1 "$tmp/san.args")"
grep -q dropped "$tmp/tree/k.cu" && fail "the source was not restored"
grep -q "no-final-build left this build's objects from mutated sources" "$tmp/build/MUTATED-BUILD.txt" 2>/dev/null \
  || fail "--no-final-build left no MUTATED-BUILD.txt in the build folder"
run cpu cpu
[ "$(st cpu drop-barrier)" = "survived  [-1]" ] || fail "drop-barrier without cuda: $(st cpu drop-barrier)"
[ -e "$tmp/tree/.mutation-sweep-active" ] && fail "the marker was left behind"
printf 'x();\nx();\n' > "$tmp/tree/k2.cu"
cat > "$tmp/vm.json" <<'J'
[{"id": "gate-red", "file": "k.cu", "old": "use();", "new": "use(); /* wrong */", "expect": ["fp8-rows"]},
 {"id": "gates-hold", "file": "k.cu", "old": "stage();", "new": "stage(); ", "expect": ["fp8-rows"]},
 {"id": "twice", "file": "k2.cu", "old": "x();", "new": "y();", "expect": ["fp8-rows"]},
 {"id": "no-build", "file": "k.cu", "old": "use();", "new": "use(); /* nocompile wrong */", "expect": ["fp8-rows"]},
 {"id": "ctest-all", "file": "k.cu", "old": "use();", "new": "use();  ", "expect": ["ctest:^no-such-test$"]}]
J
vrun() { python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/build" --work "$tmp/w" --no-final-build \
  --timeout 30 --backends cpu --out "$tmp/$1.json" "$tmp/vm.json" $2 > "$tmp/$1.log" 2>&1; }
rm -f "$tmp/built"
vrun v; rc=$?
[ "$(st v gate-red)" = "caught fp8-rows/cpu [1]" ] || fail "a failed gate: $(st v gate-red)"
[ "$(st v gates-hold)" = "survived  [1]" ] || fail "gates that held (exit 1, no failed gate named): $(st v gates-hold)"
[ "$(st v twice)" = "not-applied  []" ] || fail "an old found twice: $(st v twice)"
[ "$(cat "$tmp/tree/k2.cu")" = "$(printf 'x();\nx();\n')" ] || fail "an old found twice was edited"
[ "$(st v no-build)" = "build-error  []" ] || fail "an edit that does not build: $(st v no-build)"
grep -q nocompile "$tmp/tree/k.cu" && fail "the edit that does not build was not restored"
grep -qx all "$tmp/built" 2>/dev/null || fail "a ctest: check did not build all"
[ $rc -eq 1 ] || fail "the verdict sweep's exit: $rc (want 1)"
vrun one "--only ^gates-hold$"; rc=$?
[ $rc -eq 1 ] || fail "a single survivor: exit $rc (want 1)"
vrun none "--only ^gate-red$"; rc=$?
[ $rc -eq 0 ] || fail "every mutant caught: exit $rc (want 0)"
rm -f "$tmp/tool.args" "$tmp/build/MUTATED-BUILD.txt"
msg=$(python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/build" --work "$tmp/w" --no-final-build \
  --timeout 30 --backends cpu --out "$tmp/no-such-folder/r.json" "$tmp/vm.json" --only '^gate-red$' 2>&1); rc=$?
[ $rc -eq 2 ] && [ "$(echo "$msg" | wc -l)" -eq 1 ] && echo "$msg" | grep -q -- "--out: $tmp/no-such-folder" ||
  fail "--out in a missing folder: exit $rc (want 2 at the start, one line naming --out): $msg"
[ -e "$tmp/tool.args" ] || [ -e "$tmp/build/MUTATED-BUILD.txt" ] && fail "--out in a missing folder: the sweep ran first"
cat > "$tmp/im.json" <<'J'
[{"id": "first", "file": "k.cu", "old": "use();", "new": "use(); /* wrong */", "expect": ["fp8-rows"]},
 {"id": "slow", "file": "k.cu", "old": "stage();", "new": "stage(); /* slow */", "expect": ["fp8-rows"]},
 {"id": "last", "file": "k.cu", "old": "use();", "new": "use(); /* wrong */", "expect": ["fp8-rows"]}]
J
python3 "$src/tools/mutation_sweep.py" --root "$tmp/tree" --build "$tmp/build" --work "$tmp/w" --no-final-build \
  --timeout 30 --backends cpu --out "$tmp/int.json" "$tmp/im.json" > "$tmp/int.log" 2>&1 &
pid=$!
n=0
until grep -q slow "$tmp/tree/k.cu" 2>/dev/null && grep -q '^\[1/3\]' "$tmp/int.log"; do
  n=$((n + 1)); [ $n -lt 200 ] || { kill $pid; fail "the slow mutant never started: $(cat "$tmp/int.log")"; }
  sleep 0.05
done
sleep 0.5
kill -TERM $pid
wait $pid; rc=$?
[ $rc -eq 130 ] || fail "an interrupted sweep: exit $rc (want 130): $(cat "$tmp/int.log")"
grep -q slow "$tmp/tree/k.cu" && fail "an interrupted sweep did not restore the file"
[ -e "$tmp/tree/.mutation-sweep-active" ] && fail "an interrupted sweep left its marker"
[ "$(python3 -c "import json; r=json.load(open('$tmp/int.json')); print(r.get('interrupted'), r.get('not_run'), r['summary'])")" = \
  "True ['slow', 'last'] {'caught': 1, 'not-run': 2}" ] || fail "an interrupted sweep's receipt: $(cat "$tmp/int.json")"
echo "mutation_sweep sanitize check and verdicts: ok"
