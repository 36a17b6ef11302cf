#!/bin/sh
# tools/sanitize.py without a GPU: a stand-in compute-sanitizer runs the real tf-cuda-test on
# the cpu backend and prints the summary line the real tool prints, clean or with findings as
# the scenario asks. Checks the receipt, its verdict, exit codes and that `report` reads it.
#   sanitize_script_test.sh TF_CUDA_TEST SOURCE_DIR
set -u
bin=$1; src=$2
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat > "$t/fake-sanitizer" <<'FAKE'
#!/bin/sh
# --tool T --error-exitcode N BIN ARGS...: ARGS with cuda replaced by cpu.
tool=$2; code=$4; shift 4; exe=$1; shift
args=""; for a in "$@"; do [ "$a" = cuda ] && a=cpu; args="$args '$a'"; done
n=0; rc=0
# FAKE_SPANS: one line per run, "tool start end" in nanoseconds (what ran beside what).
t_begin=$(date +%s%N)
case "$exe" in
  *plant*) n=${FAKE_PLANT_FINDINGS:-3};;  # a plant binary is not run: only its summary matters
  *) eval "\"$exe\" $args"; rc=$?;;
esac
case " $* " in *" ${FAKE_FIND_CONTRACT:-none} "*) [ "$tool" = "${FAKE_FIND_TOOL:-none}" ] && n=${FAKE_FIND_N:-2};; esac
[ -n "${FAKE_SPANS:-}" ] && echo "$tool $t_begin $(date +%s%N)" >> "$FAKE_SPANS"
[ "${FAKE_NO_SUMMARY:-}" = "$tool" ] && exit 139
# FAKE_RACE_WARNINGS: racecheck's hazards are all warnings (its summary counts hazards = errors + warnings).
if [ "$tool" = racecheck ] && [ -n "${FAKE_RACE_WARNINGS:-}" ]; then echo "========= RACECHECK SUMMARY: $n hazards displayed (0 errors, $n warnings)"
elif [ "$tool" = racecheck ]; then echo "========= RACECHECK SUMMARY: $n hazards displayed ($n errors, 0 warnings)"
else echo "========= ERROR SUMMARY: $n errors"; fi
[ "$n" -gt 0 ] && exit "$code"; exit $rc
FAKE
chmod +x "$t/fake-sanitizer"
mkdir "$t/plants"
ln -s "$(realpath "$bin")" "$t/plants/tf-cuda-test-plant-merge-no-barrier"
ln -s "$(realpath "$bin")" "$t/plants/tf-cuda-test-plant-merge-read-past-end"
run() {  # run NAME [--jobs N] [ENV=V...]: the script on three cheap runs and both tools that have controls
  name=$1; shift; jobs=1
  [ "${1:-}" = --jobs ] && { jobs=$2; shift 2; }
  env "$@" python3 "$src/tools/sanitize.py" --bin "$bin" --sanitizer "$t/fake-sanitizer" --plant-bin "$t/plants" \
    --runs fp8-rows,scale-planes,rows-invariant --tools memcheck,racecheck --jobs "$jobs" --out "$t/$name.json" \
    --logs "$t/logs-$name" > "$t/$name.out" 2>&1
  echo $?
}
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

rc=$(run clean); [ "$rc" = 0 ] || { cat "$t/clean.out"; fail "clean run: exit $rc, expected 0"; }
[ "$(field "$t/clean.json" "d['verdict']")" = pass ] || fail "clean run: verdict not pass"
[ "$(field "$t/clean.json" "sum(g['status']=='ok' for g in d['gates'])")" = 6 ] || fail "clean run: 6 gates ok expected (2 tools x 3 runs)"
[ "$(field "$t/clean.json" "[c['red'] for c in d['controls']]")" = "[True, True]" ] || fail "clean run: controls not red"
# The binary's build id, as its own receipts name it (build.id).
want=$("$bin" rows-invariant --backend cpu --cases 1 --gates-only --quiet --out "$t/probe.json" > /dev/null 2>&1;
       field "$t/probe.json" "d['build']['id']")
[ "$(field "$t/clean.json" "d['build']['id']")" = "$want" ] || fail "clean run: build.id not the binary's ($want)"
"$bin" report "$t/clean.json" > "$t/report.md" 2>&1 || { cat "$t/report.md"; fail "report refused or failed the clean receipt"; }
grep -q 'memcheck:fp8-rows' "$t/report.md" || fail "report does not list memcheck:fp8-rows"

rc=$(run finding FAKE_FIND_TOOL=memcheck FAKE_FIND_CONTRACT=scale-planes)
[ "$rc" = 1 ] || fail "a memcheck finding: exit $rc, expected 1"
field "$t/finding.json" "d['verdict_reasons'][0]" | grep -q '^memcheck:scale-planes: 2 finding' || fail "finding not named"
"$bin" report "$t/finding.json" > /dev/null 2>&1; [ $? = 1 ] || fail "report of a failing sanitize receipt: exit not 1"

# One finding is a finding (the stand-in's default is 2), and racecheck's count is its hazards,
# warnings included: hazards that are all warnings are findings too (mutation sweep round 10).
rc=$(run onefinding FAKE_FIND_TOOL=memcheck FAKE_FIND_CONTRACT=scale-planes FAKE_FIND_N=1)
[ "$rc" = 1 ] || fail "a single memcheck finding: exit $rc, expected 1"
field "$t/onefinding.json" "d['verdict_reasons'][0]" | grep -q '^memcheck:scale-planes: 1 finding' || fail "a single finding not named"
rc=$(run racewarn FAKE_FIND_TOOL=racecheck FAKE_FIND_CONTRACT=fp8-rows FAKE_RACE_WARNINGS=1)
[ "$rc" = 1 ] || fail "racecheck hazards that are all warnings: exit $rc, expected 1"
field "$t/racewarn.json" "d['verdict_reasons'][0]" | grep -q '^racecheck:fp8-rows: 2 finding' || fail "racecheck warnings not counted as findings"

rc=$(run nosummary FAKE_NO_SUMMARY=racecheck)
[ "$rc" = 1 ] || fail "a crashed racecheck run (no summary): exit $rc, expected 1"
field "$t/nosummary.json" "d['verdict_reasons'][0]" | grep -q 'no racecheck summary' || fail "missing summary not named"

rc=$(run greencontrol FAKE_PLANT_FINDINGS=0)
[ "$rc" = 1 ] || fail "a plant with no findings (green control): exit $rc, expected 1"
[ "$(field "$t/greencontrol.json" "[c['red'] for c in d['controls']]")" = "[False, False]" ] || fail "green controls not recorded"

# --jobs: the runs at once, the receipt in the same order with the same results as one at a time.
rc=$(run jobs3 --jobs 3); [ "$rc" = 0 ] || { cat "$t/jobs3.out"; fail "--jobs 3 clean run: exit $rc, expected 0"; }
order="[(g['name'], g['status'], g['cases']) for g in d['gates']] + [(c['name'], c['red']) for c in d['controls']]"
[ "$(field "$t/jobs3.json" "$order")" = "$(field "$t/clean.json" "$order")" ] || fail "--jobs 3: gates or controls differ from --jobs 1"
# racecheck's runs and controls go alone: no other run's span overlaps one of theirs, while the
# other runs did overlap (or --jobs ran nothing at once and the check above proves little).
rc=$(run jobs3spans --jobs 3 FAKE_SPANS="$t/spans")
[ "$rc" = 0 ] || { cat "$t/jobs3spans.out"; fail "--jobs 3 with spans: exit $rc, expected 0"; }
python3 - "$t/spans" <<'PY' || fail "--jobs 3: racecheck ran beside another run, or nothing ran at once"
import sys
spans = [(l.split()[0], int(l.split()[1]), int(l.split()[2])) for l in open(sys.argv[1])]
over = lambda a, b: a[1] < b[2] and b[1] < a[2]
pairs = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if over(a, b)]
race = [p for p in pairs if "racecheck" in (p[0][0], p[1][0])]
n_race = sum(s[0] == "racecheck" for s in spans)
print(f"{len(spans)} spans ({n_race} racecheck), {len(pairs)} overlapping pairs, {len(race)} with racecheck")
sys.exit(1 if race or not pairs or n_race != 4 else 0)
PY
rc=$(run jobs3find --jobs 3 FAKE_FIND_TOOL=racecheck FAKE_FIND_CONTRACT=fp8-rows)
[ "$rc" = 1 ] || fail "--jobs 3 with a racecheck finding: exit $rc, expected 1"
field "$t/jobs3find.json" "d['verdict_reasons'][0]" | grep -q '^racecheck:fp8-rows: 2 finding' || fail "--jobs 3: finding not named"
python3 "$src/tools/sanitize.py" --bin "$bin" --jobs 0 > /dev/null 2>&1; [ $? = 2 ] || fail "--jobs 0: exit not 2"
# --seed takes 0 .. 2^64 - 1, as the contracts do: 2^64 is refused before anything runs.
python3 "$src/tools/sanitize.py" --bin "$bin" --seed 18446744073709551616 --dry-run > /dev/null 2>&1; [ $? = 2 ] ||
  fail "--seed 2^64: exit not 2"
python3 "$src/tools/sanitize.py" --bin "$bin" --seed 18446744073709551615 --runs fp8-rows --tools memcheck --skip-controls \
  --dry-run > /dev/null 2>&1 || fail "--seed 2^64 - 1: exit $?, expected 0"

# --resume: a receipt of memcheck alone, then the rest; only racecheck runs, and the receipt is
# the one-go run's. A kept FAIL stays a failure; another commit, seed or file is refused.
san() { python3 "$src/tools/sanitize.py" --bin "$bin" --sanitizer "$t/fake-sanitizer" --plant-bin "$t/plants" \
  --runs fp8-rows,scale-planes,rows-invariant "$@"; }
san --tools memcheck --out "$t/part.json" --logs "$t/logs-part" > "$t/part.out" 2>&1 || fail "memcheck-only run: exit $?"
rm -f "$t/spans"
FAKE_SPANS="$t/spans" san --tools memcheck,racecheck --resume "$t/part.json" --jobs 3 --out "$t/resumed.json" \
  --logs "$t/logs-resumed" > "$t/resumed.out" 2>&1 || { cat "$t/resumed.out"; fail "resumed run: exit $?"; }
[ "$(cut -d' ' -f1 "$t/spans" | sort | uniq -c | tr -s ' ')" = " 4 racecheck" ] || fail "--resume ran $(cut -d' ' -f1 "$t/spans" | sort | uniq -c | tr '\n' ' '), not racecheck's 4 alone"
[ "$(field "$t/resumed.json" "$order")" = "$(field "$t/clean.json" "$order")" ] || fail "--resume: gates or controls differ from one go"
[ "$(field "$t/resumed.json" "(d['verdict'], d['resumed_from']['gates_kept'], d['resumed_from']['controls_kept'])")" = "('pass', 3, 1)" ] ||
  fail "--resume: verdict or kept counts wrong"
FAKE_FIND_TOOL=memcheck FAKE_FIND_CONTRACT=scale-planes san --tools memcheck --out "$t/partfail.json" --logs "$t/l1" > /dev/null 2>&1
san --resume "$t/partfail.json" --out "$t/resfail.json" --logs "$t/l2" > /dev/null 2>&1; rc=$?
[ "$rc" = 1 ] || fail "--resume of a receipt with a memcheck finding: exit $rc, expected 1"
field "$t/resfail.json" "d['verdict_reasons'][0]" | grep -q '^memcheck:scale-planes: 2 finding' || fail "--resume: kept finding not named"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['git']['commit']='0'*40; json.dump(d, open(sys.argv[2], 'w'))" \
  "$t/part.json" "$t/partother.json"
san --resume "$t/partother.json" --out "$t/resother.json" --logs "$t/l3" > /dev/null 2>&1; rc=$?
[ "$rc" = 1 ] || fail "--resume of another commit's receipt: exit $rc, expected 1"
field "$t/resother.json" "d['errors'][0]" | grep -q "names git" || fail "--resume: another commit not named"
# Resumed again with nothing left to run, a receipt with errors stays failed (its errors kept).
san --resume "$t/resother.json" --out "$t/resother2.json" --logs "$t/l4" > /dev/null 2>&1; rc=$?
[ "$rc" = 1 ] || fail "--resume of a failed receipt with nothing left to run: exit $rc, expected 1"
field "$t/resother2.json" "d['errors'][0]" | grep -q "names git" || fail "--resume dropped the resumed receipt's errors"
# Only a control left: no gate names the binary's commit, so a cpu run of rows-invariant does.
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['controls']=d['controls'][:1]; d['git']['commit']='0'*40; json.dump(d, open(sys.argv[2], 'w'))" \
  "$t/clean.json" "$t/ctlonly.json"
san --tools memcheck,racecheck --resume "$t/ctlonly.json" --out "$t/resctl.json" --logs "$t/l5" > /dev/null 2>&1; rc=$?
[ "$rc" = 1 ] || fail "--resume with only a control left, of another commit: exit $rc, expected 1"
field "$t/resctl.json" "d['errors'][0]" | grep -q "names git" || fail "--resume with only a control left: commit not checked"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['controls']=d['controls'][:1]; json.dump(d, open(sys.argv[2], 'w'))" \
  "$t/clean.json" "$t/ctlonly2.json"
san --tools memcheck,racecheck --resume "$t/ctlonly2.json" --out "$t/resctl2.json" --logs "$t/l6" > /dev/null 2>&1 ||
  fail "--resume with only a control left, same commit: exit $?, expected 0"
# A control kept green stays a failure; a receipt of another device is refused like one of
# another commit (mutation sweep round 10).
san --tools memcheck,racecheck --resume "$t/greencontrol.json" --out "$t/resgreen.json" --logs "$t/l7" > /dev/null 2>&1; rc=$?
[ "$rc" = 1 ] || fail "--resume of a receipt with green controls: exit $rc, expected 1"
field "$t/resgreen.json" "d['verdict_reasons'][0]" | grep -q '^control merge-barrier-dropped: green in' || fail "--resume: kept green control not named"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['device']['name']='another device'; json.dump(d, open(sys.argv[2], 'w'))" \
  "$t/part.json" "$t/partdev.json"
san --tools memcheck,racecheck --resume "$t/partdev.json" --out "$t/resdev.json" --logs "$t/l8" > /dev/null 2>&1; rc=$?
[ "$rc" = 1 ] || fail "--resume of another device's receipt: exit $rc, expected 1"
field "$t/resdev.json" "d['errors'][0]" | grep -q "names device" || fail "--resume: another device not named"
san --resume "$t/part.json" --seed 2 --out "$t/x.json" > /dev/null 2>&1; [ $? = 2 ] || fail "--resume with another seed: exit not 2"
san --resume "$t/nothing.json" --out "$t/x.json" > /dev/null 2>&1; [ $? = 2 ] || fail "--resume of a missing file: exit not 2"
san --resume "$src/reports/h200/scale-planes.json" --out "$t/x.json" > /dev/null 2>&1; [ $? = 2 ] || fail "--resume of a contract receipt: exit not 2"
[ -e "$t/x.json" ] && fail "a refused --resume wrote a receipt"

# The engine's runs replay fixtures: no --seed / --quiet (the gates have none), the fixture by its
# absolute path (the script may run from anywhere), the kv gate's bf16 arm in a folder of its own.
python3 "$src/tools/sanitize.py" --bin "$bin" --runs serve-gate,kv-gate --tools memcheck,initcheck --skip-controls \
  --dry-run > "$t/engine.out" 2>&1 || fail "engine runs, dry run: exit $?"
[ "$(grep -c '^would run:' "$t/engine.out")" = 4 ] || { cat "$t/engine.out"; fail "engine runs: 4 commands expected"; }
grep -q -- '--seed\|--quiet' "$t/engine.out" && fail "engine runs: a fixture gate was given --seed or --quiet"
grep -q "serve-gate --backend cuda --out .* $src/fixtures/serve/ci.json --kv-cache bf16,fp8,q4,mxfp4\$" "$t/engine.out" ||
  fail "engine runs: serve-gate's command"
[ "$(grep -o -- '--bf16-cache [^ ]*' "$t/engine.out" | sort -u | wc -l)" = 2 ] || fail "engine runs: kv-gate runs share a bf16 folder"
# racecheck does not run the fixture gates: each is a skipped gate with its reason, and the verdict
# stands on the other tools (a stand-in run: the kv gate's ci fixture in fp8 on cpu).
san --runs kv-gate --tools memcheck,racecheck --skip-controls --out "$t/kvgate.json" --logs "$t/l-kv" > "$t/kvgate.out" 2>&1 ||
  { cat "$t/kvgate.out"; fail "kv-gate under memcheck + racecheck: exit $?, expected 0"; }
[ "$(field "$t/kvgate.json" "[(g['name'], g['status']) for g in d['gates']]")" = "[('memcheck:kv-gate', 'ok'), ('racecheck:kv-gate', 'skipped')]" ] ||
  fail "kv-gate: memcheck ok and racecheck skipped expected"
field "$t/kvgate.json" "d['gates'][1]['skip_reason']" | grep -q 'rows-invariant' || fail "kv-gate: racecheck's skip has no reason"
for f in $(grep -o "$src/fixtures/[^ ]*" "$t/engine.out"); do [ -f "$f" ] || fail "engine runs: $f missing"; done
python3 "$src/tools/sanitize.py" --bin "$bin" --tools memcheck,helgrind > /dev/null 2>&1; [ $? = 2 ] || fail "unknown tool: exit not 2"
# Nothing sanitized is never a pass: an empty --tools and a --bin that is not tf-cuda-test (its
# --help lists none of the runs' contracts) exit 2 and write nothing; a receipt whose every gate
# was skipped (racecheck does not take the kv gate) fails.
python3 "$src/tools/sanitize.py" --bin "$bin" --tools , --out "$t/none.json" --logs "$t/l-none" > "$t/none.out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q -- '--tools' "$t/none.out" || fail "an empty --tools: exit $rc (want 2): $(cat "$t/none.out")"
printf '#!/bin/sh\nexit 0\n' > "$t/not-tf-cuda-test"; chmod +x "$t/not-tf-cuda-test"
python3 "$src/tools/sanitize.py" --bin "$t/not-tf-cuda-test" --sanitizer "$t/fake-sanitizer" --skip-controls --tools memcheck \
  --out "$t/none.json" --logs "$t/l-none" > "$t/none.out" 2>&1; rc=$?
[ $rc = 2 ] && grep -q -- "--bin: .*lists none of the runs' contracts" "$t/none.out" ||
  fail "a --bin that is not tf-cuda-test: exit $rc (want 2): $(cat "$t/none.out")"
[ -e "$t/none.json" ] || [ -e "$t/l-none" ] && fail "a refused run wrote a receipt or its logs folder"
san --runs kv-gate --tools racecheck --skip-controls --out "$t/skipped.json" --logs "$t/l-skip" > "$t/skipped.out" 2>&1; rc=$?
[ $rc = 1 ] || fail "every gate skipped: exit $rc (want 1): $(cat "$t/skipped.out")"
[ "$(field "$t/skipped.json" "(d['verdict'], d['numbers']['runs'])")" = "('fail', 0)" ] || fail "every gate skipped: not a failed receipt"
field "$t/skipped.json" "d['verdict_reasons']" | grep -q 'nothing sanitized' || fail "every gate skipped: the reason is not given"
python3 "$src/tools/sanitize.py" --bin "$t/nothing" > /dev/null 2>&1; [ $? = 2 ] || fail "missing binary: exit not 2"
echo "sanitize.py: clean 0, finding 1 (one, racecheck warnings), no summary 1, green control 1, --jobs 3 as --jobs 1 with racecheck alone, --resume as one go, the engine runs' commands, nothing sanitized never a pass, bad arguments 2: ok"
