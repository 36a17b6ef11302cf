#!/bin/sh
# Command-line cases under bad input (issue: replays, folders, outputs, seeds, devices,
# broken receipts, skipped gates). Usage: cli_cases.sh CASE TF_CUDA_TEST SOURCE_DIR [MUTANT]
# Each case runs the command a user would type and checks its exit code and message.
# Exit 0 pass, 1 fail, 77 skipped (CTest SKIP_RETURN_CODE).
set -u
case_name=$1 bin=$2 src=$3 mutant=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
h200=$src/reports/h200

fail() { echo "FAIL: $*"; exit 1; }
# expect RC PATTERN CMD...: runs CMD, checks its exit code and that its output contains PATTERN.
expect() {
  want=$1 pat=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*
$out"
  case "$out" in *"$pat"*) ;; *) fail "no '$pat' in the output of: $*
$out";; esac
}
# wait_for_mark: waits up to 30 s for $tmp/mark, which the slow_rename shim ($4) creates when a
# run reaches the rename (or lock) it holds open.
wait_for_mark() { i=0; while [ ! -e "$tmp/mark" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; }
# A cpu receipt of a contract (few cases) in $tmp/NAME.json.
cpu_receipt() { "$bin" "$1" --backend cpu --cases 2 --quiet --seed 7 --out "$tmp/$1.json" >/dev/null 2>&1; }

# serve_fixture FILE EDIT: the ci serve fixture with its models by absolute path, then the Python
# statements EDIT applied to it (as f), written to FILE.
serve_fixture() {
  python3 - "$src" "$1" "$2" <<'PY'
import json, sys
src, out, edit = sys.argv[1:4]
f = json.load(open(src + "/fixtures/serve/ci.json"))
f["model"] = src + "/fixtures/models/stdlib-bytes-3m"
f["draft"]["model"] = src + "/fixtures/models/stdlib-bytes-3m-draft1"
exec(edit)
json.dump(f, open(out, "w"))
PY
}
# kv_fixture FILE MODEL: the ci kv fixture with MODEL (a folder) and the token file by absolute path.
kv_fixture() {
  python3 - "$src" "$1" "$2" <<'PY'
import json, sys
src, out, model = sys.argv[1:4]
k = json.load(open(src + "/fixtures/kv/ci.json"))
k["model"] = model
k["tokens"]["file"] = src + "/fixtures/text/stdlib-heldout-3.11.7.txt"
json.dump(k, open(out, "w"))
PY
}
# The ci fixture's first 3 prompts, 4 new tokens, bf16 (the goldens, of 16 tokens, are EDIT's to drop or cut).
SMALL='f["prompts"], f["new_tokens"], f["cache_formats"] = f["prompts"][:3], 4, ["bf16"]'

case "$case_name" in
  # 1. A filter that matches no case fails in every contract; so does a --case line.
  filter-none-fp8) expect 1 "--filter nomatch matched none of the" "$bin" fp8-rows --backend cpu --quiet --filter nomatch ;;
  filter-none-q4) expect 1 "--filter nomatch matched none of the" "$bin" q4-rows --backend cpu --quiet --filter nomatch ;;
  filter-none-mxfp4) expect 1 "--filter nomatch matched none of the" "$bin" mxfp4-rows --backend cpu --quiet --filter nomatch ;;
  # A filter too long to compile safely (std::regex recurses: 20,000 nested groups overflowed the
  # stack, exit 139) is refused as bad usage, in a contract and in bench.
  filter-too-long)
    deep=$(python3 -c 'print("(" * 20000 + "a" + ")" * 20000)')
    expect 2 "--filter: 40001 bytes; at most 1000" "$bin" fp8-rows --backend cpu --quiet --cases 1 --filter "$deep"
    expect 2 "--filter: 40001 bytes; at most 1000" "$bin" bench attention --filter "$deep"
    expect 0 "fp8-rows: pass" "$bin" fp8-rows --backend cpu --quiet --cases 1 --filter "$(python3 -c 'print("(" * 498 + ")" * 498 + "fp8")')" ;;
  # A pattern that backtracks exponentially on a case line ran until stopped: after
  # kFilterSearchSeconds (10 s) on one line the command exits 2 naming the pattern and the line,
  # and writes nothing.
  filter-backtracks)
    expect 2 "--filter '(.|.)*X': searching 'fp8-rows(" "$bin" fp8-rows --backend cpu --quiet --cases 1 \
      --filter '(.|.)*X' --out "$tmp/r.json" --junit "$tmp/j.xml"
    case "$out" in *"took more than 10 s"*) ;; *) fail "the deadline is not named: $out";; esac
    [ -z "$(ls -A "$tmp")" ] || fail "a refused run wrote: $(ls -A "$tmp")" ;;
  case-none)
    expect 1 "--case 'fp8-rows(ptok=48,len=97+48)' matched none of the" \
      "$bin" fp8-rows --backend cpu --quiet --case 'fp8-rows(ptok=48,len=97+48)' ;;
  # A passing case's printed line, pasted into --case, runs that case alone.
  case-exact)
    line=$("$bin" fp8-rows --backend cpu --cases 5 --seed 11 2>&1 | sed -n 's/^  \.\. case 3\/5 //p')
    [ -n "$line" ] || fail "no case line printed"
    expect 0 "fp8-rows: pass" "$bin" fp8-rows --backend cpu --cases 5 --seed 11 --case "$line"
    case "$out" in *"cases run 1"*) ;; *) fail "--case ran other than one case: $out";; esac
    "$bin" fp8-rows --backend cpu --cases 5 --seed 11 --case "$line" 2>&1 | grep -q "^  \.\. case 3/5 " ||
      fail "--case ran another case than the one pasted" ;;
  # The replay: a mutant (E4M3 truncation) fails; its printed replay command, run as
  # printed, fails exactly that case and no other.
  replay-mutant)
    [ -x "$mutant" ] || { echo "mutant binary missing"; exit 1; }
    "$mutant" fp8-rows --backend cpu --cases 6 --seed 5 --quiet > "$tmp/first.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "the mutant passed (exit $rc)"
    cmd=$(sed -n 's/^replay: tf-cuda-test //p' "$tmp/first.txt" | head -n 1)
    [ -n "$cmd" ] || fail "no replay line printed: $(cat "$tmp/first.txt")"
    case "$cmd" in *"--case '"*) ;; *) fail "the replay names no case: $cmd";; esac
    line=$(printf '%s\n' "$cmd" | sed "s/.* --case '\(.*\)'\$/\1/")
    eval "\"\$mutant\" $cmd --quiet" > "$tmp/replay.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "the replay did not fail (exit $rc): $(cat "$tmp/replay.txt")"
    grep -q "cases run 1\$" "$tmp/replay.txt" || fail "the replay ran other than one case: $(cat "$tmp/replay.txt")"
    grep "^FAIL " "$tmp/replay.txt" | grep -v -F "$line" | grep -v "e4m3(" && fail "the replay failed another case"
    grep -q -F "FAIL codes==reference $line" "$tmp/replay.txt" || grep -q -F "$line" "$tmp/replay.txt" ||
      fail "the replay does not name the pasted case: $(cat "$tmp/replay.txt")"
    # --gates-only (how the cpu mutant tests run; here the sampled conversion gate fails before any
    # case, so the replay is the run's): the replay keeps it, and fails a gate again.
    "$mutant" fp8-rows --backend cpu --cases 6 --seed 5 --quiet --gates-only > "$tmp/go.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "the mutant passed --gates-only (exit $rc)"
    cmd=$(sed -n 's/^replay: tf-cuda-test //p' "$tmp/go.txt" | head -n 1)
    case "$cmd" in *" --gates-only"*) ;; *) fail "the --gates-only replay lost --gates-only: $cmd";; esac
    eval "\"\$mutant\" $cmd --quiet" > "$tmp/goreplay.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "the --gates-only replay did not fail (exit $rc): $(cat "$tmp/goreplay.txt")"
    grep -q "^FAIL " "$tmp/goreplay.txt" || fail "the --gates-only replay failed no gate: $(cat "$tmp/goreplay.txt")" ;;
  # A --gates-only run fails by design (no control ran); its replay keeps --gates-only (it was
  # dropped, and the printed command, run, passed), and a run's replay keeps its --shard (with
  # --case too: `--case L --shard 2/2` holds no case, and its replay without --shard passed). Every
  # replay, run as printed, fails again; the receipts still read (report: 1, not 2).
  replay-gates-only)
    "$bin" fp8-rows --backend cpu --cases 4 --gates-only --quiet --out "$tmp/go.json" > "$tmp/go.txt" 2>&1; rc=$?
    [ "$rc" -eq 1 ] || fail "a --gates-only run exited $rc, not 1"
    grep -q -x "replay: tf-cuda-test fp8-rows --backend cpu --seed 20261129 --cases 4 --gates-only" "$tmp/go.txt" ||
      fail "the printed replay is not the --gates-only run: $(grep replay "$tmp/go.txt")"
    line=$("$bin" fp8-rows --backend cpu --cases 4 2>&1 | sed -n 's/^  \.\. case 2\/4 //p')
    [ -n "$line" ] || fail "no case line printed"
    "$bin" fp8-rows --backend cpu --cases 4 --gates-only --quiet --shard 2/2 --out "$tmp/sh.json" >/dev/null 2>&1
    [ $? -eq 1 ] || fail "a --gates-only shard did not exit 1"
    "$bin" fp8-rows --backend cpu --cases 4 --quiet --case "$line" --shard 2/2 --out "$tmp/cs.json" >/dev/null 2>&1
    [ $? -eq 1 ] || fail "--case L --shard 2/2 did not exit 1"
    # A shard alone is refused by report (merged with its siblings or not shown: session 63).
    expect 2 "fp8-rows: shard 1/2 missing (1 of 2 given)" "$bin" report "$tmp/sh.json"
    expect 2 "fp8-rows: shard 1/2 missing (1 of 2 given)" "$bin" report "$tmp/cs.json"
    for r in go sh cs; do
      "$bin" report "$tmp/$r.json" >/dev/null 2>&1; rc=$?
      [ $r != go ] || [ $rc -eq 1 ] || fail "report $r.json: exit $rc, expected 1 (a failed, valid receipt)"
      python3 -c "import json,sys; [print(c) for c in json.load(open(sys.argv[1]))['replay']]" "$tmp/$r.json" > "$tmp/$r.cmds" ||
        fail "$r.json: no replay list"
      [ -s "$tmp/$r.cmds" ] || fail "$r.json: an empty replay list"
      while IFS= read -r c; do
        case "$r:$c" in
          go:*" --gates-only"*|sh:*" --gates-only"*" --shard 2/2"|cs:*" --shard 2/2") ;;
          *) fail "$r.json: replay '$c' is not the run";;
        esac
        eval "\"\$bin\" ${c#tf-cuda-test } --quiet" > "$tmp/out.txt" 2>&1; rc=$?
        [ $rc -eq 1 ] || fail "$r.json: the replay '$c' exited $rc, not 1 (a replayed failure came back green)"
      done < "$tmp/$r.cmds"
    done ;;
  # 2. File arguments that are folders or not regular files: exit 2, named, nothing printed.
  report-folder) mkdir "$tmp/receipts"; expect 2 "$tmp/receipts: is a folder" "$bin" report "$tmp/receipts" ;;
  diff-folder-base) mkdir "$tmp/receipts"; expect 2 "$tmp/receipts: is a folder" "$bin" diff "$tmp/receipts" "$h200/fp8-rows.json" ;;
  diff-folder-head) mkdir "$tmp/receipts"; expect 2 "$tmp/receipts: is a folder" "$bin" diff "$h200/fp8-rows.json" "$tmp/receipts" ;;
  report-device) expect 2 "/dev/null: not a regular file" "$bin" report /dev/null ;;
  report-missing) expect 2 "$tmp/none.json: no such file" "$bin" report "$tmp/none.json" ;;
  report-nothing-printed)
    mkdir "$tmp/d"; out=$("$bin" report "$h200/fp8-rows.json" "$tmp/d" 2>/dev/null); rc=$?
    [ "$rc" -eq 2 ] && [ -z "$out" ] || fail "exit $rc, printed: $out" ;;
  # 3. --out over something that is not a regular file is refused; a symlink is followed.
  out-fifo)
    mkfifo "$tmp/fifo"
    expect 2 "exists and is a FIFO" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/fifo"
    [ -p "$tmp/fifo" ] || fail "the FIFO was replaced" ;;
  out-folder) mkdir "$tmp/d"; expect 2 "exists and is a folder" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/d" ;;
  # A folder where no file can be made, though root passes access() there (procfs): refused
  # before the run, for a contract and a bench alike; a writable folder keeps no probe file.
  out-unwritable-folder)
    expect 2 "folder /proc is not writable" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out /proc/kc-receipt.json
    expect 2 "folder /proc is not writable" "$bin" bench pack --reps 1 --out /proc/kc-receipt.json
    expect 2 "so /proc/kc/r cannot be created" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out /proc/kc/r/x.json
    expect 2 "folder /proc is not writable" "$bin" kernel-contract --backend cpu --quiet --out-dir /proc/kc
    expect 0 "receipt: $tmp/r.json" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/r.json"
    [ -z "$(ls -A "$tmp" | grep -v '^r.json$')" ] || fail "left behind: $(ls -A "$tmp")" ;;
  out-symlink-to-device)
    ln -s /dev/null "$tmp/link.json"
    expect 2 "the symbolic link points to /dev/null" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/link.json"
    [ -c /dev/null ] || fail "/dev/null replaced" ;;
  out-symlink)
    echo old > "$tmp/target.json"; ln -s target.json "$tmp/link.json"
    expect 0 "receipt: $tmp/link.json" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/link.json"
    [ -L "$tmp/link.json" ] || fail "the link was replaced"
    grep -q '"kind": "contract"' "$tmp/target.json" || fail "the link's target holds no receipt" ;;
  bench-out-fifo)
    mkfifo "$tmp/fifo"; expect 2 "--out $tmp/fifo" "$bin" bench pack --reps 1 --out "$tmp/fifo" ;;
  out-dir-file)
    echo x > "$tmp/file"; expect 2 "--out-dir" "$bin" kernel-contract --backend cpu --quiet --out-dir "$tmp/file" ;;
  # 4. Missing folders are created (documented), for every command that writes.
  out-creates-folders)
    expect 0 "receipt: $tmp/a/b/r.json" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/a/b/r.json"
    [ -f "$tmp/a/b/r.json" ] || fail "no receipt written" ;;
  # 5. Seeds: 0 .. 2^64 - 1, printed the same everywhere.
  seed-negative) expect 2 "--seed '-1': expected a whole number from 0 to 18446744073709551615" "$bin" fp8-rows --seed -1 ;;
  seed-too-large)
    expect 2 "--seed '18446744073709551616': expected a whole number" "$bin" fp8-rows --seed 18446744073709551616 ;;
  seed-max)
    expect 0 "seed 18446744073709551615" "$bin" fp8-rows --backend cpu --cases 1 --quiet --seed 18446744073709551615 --out "$tmp/r.json"
    grep -q '"seed": 18446744073709551615' "$tmp/r.json" || fail "receipt seed differs"
    expect 0 "| seed | 18446744073709551615 |" "$bin" report "$tmp/r.json" ;;
  seed-high-bit)
    expect 0 "seed 9223372036854775808," "$bin" fp8-rows --backend cpu --cases 1 --quiet --seed 9223372036854775808 ;;
  # 6. No device: say what is missing, for which command; bench names no option it lacks.
  cuda-missing-says-what)
    out=$("$bin" fp8-rows --backend cuda --cases 1 2>&1); rc=$?
    [ "$rc" -eq 0 ] && exit 77  # a device is present
    [ "$rc" -eq 2 ] || fail "exit $rc: $out"
    case "$out" in
      *"fp8-rows --backend cuda: no CUDA device: no NVIDIA driver is installed"*|\
      *"fp8-rows --backend cuda: no CUDA device: the NVIDIA driver is too old"*|\
      *"fp8-rows --backend cuda: no CUDA device: the NVIDIA driver (CUDA "*") sees no GPU"*|\
      *"fp8-rows --backend cuda: no cuda backend: this build was configured without"*) ;;
      *) fail "does not say what is missing: $out";; esac
    case "$out" in *"insufficient for CUDA runtime"*) fail "the runtime's misleading message: $out";; esac ;;
  bench-missing-device)
    out=$("$bin" bench attention --reps 1 --script-dir "$src/tools" 2>&1); rc=$?
    case "$out" in *"bench attention needs a CUDA device"*) ;; *) exit 77;; esac
    [ "$rc" -eq 2 ] || fail "exit $rc"
    case "$out" in *"--backend"*) fail "bench has no --backend: $out";; esac ;;
  # bench rope-store / compact: bad arguments are refused before a device is asked for
  # (exit 2, the option named); without a device each says so (exit 2); with one, a tiny
  # row runs and is verified, and the target is not measured (no row of 64 MiB or more):
  # exit 1, never "met" on no row.
  bench-moves-bad-args)
    for b in rope-store compact; do
      expect 2 "--reps" "$bin" bench $b --reps 0
      expect 2 "--filter '(': not a valid regex" "$bin" bench $b --filter '('
      expect 2 "--filter 'nope' selects no row" "$bin" bench $b --filter nope
      expect 2 "--filter '1024MiB' selects no row" "$bin" bench $b --quick --filter 1024MiB
      expect 2 "--chunk applies to bench attention only" "$bin" bench $b --chunk 64
      expect 2 "--script-dir applies to bench attention and engine only" "$bin" bench $b --script-dir tools
    done
    expect 2 "--script-dir applies to bench attention and engine only" "$bin" bench pack --script-dir tools
    expect 2 "--filter applies to bench attention, rope-store and compact only" "$bin" bench pack --filter x
    expect 2 "--filter applies to bench attention, rope-store and compact only" "$bin" bench engine --filter x
    expect 2 "--chunk applies to bench attention only" "$bin" bench engine --chunk 64 ;;
  # The python a bench runs beside it must be there before anything runs (exit 2, the path named).
  bench-script-dir)
    expect 2 "bench attention: --script-dir $tmp: no $tmp/bench_sdpa.py" "$bin" bench attention --reps 1 --script-dir "$tmp"
    expect 2 "bench engine: --script-dir $tmp: no $tmp/transformers_decode_bench.py" "$bin" bench engine --script-dir "$tmp"
    (cd "$tmp" && expect 2 "no tools/bench_sdpa.py (run from the repository root" "$bin" bench attention --reps 1)
    # --transformers none runs no script: the folder is not asked for (the device is, next)
    out=$("$bin" bench engine --script-dir "$tmp" --transformers none --reps 1 2>&1)
    case "$out" in *"transformers_decode_bench.py"*) fail "--transformers none still asks for the script: $out";; esac
    # --sdpa none the same for bench attention; an empty --sdpa / --transformers is refused
    out=$("$bin" bench attention --script-dir "$tmp" --sdpa none --reps 1 2>&1)
    case "$out" in *"bench_sdpa.py"*) fail "--sdpa none still asks for the script: $out";; esac
    expect 2 "bench attention: --sdpa '': expected a python command, or none" "$bin" bench attention --sdpa ''
    expect 2 "bench engine: --transformers '': expected a python command, or none" "$bin" bench engine --transformers '' ;;
  bench-moves-device)
    for b in rope-store compact; do
      out=$("$bin" bench $b --reps 1 --quick --filter '^4MiB/bf16/window$' 2>&1); rc=$?
      case "$out" in
        *"bench $b needs a CUDA device"*) [ "$rc" -eq 2 ] || fail "exit $rc without a device: $out" ;;
        *) [ "$rc" -eq 1 ] || fail "bench $b on a device, no target row: exit $rc: $out"
           case "$out" in *"4MiB/bf16/window"*yes*) ;; *) fail "bench $b: the row was not verified: $out";; esac
           case "$out" in *"NOT measured (0 of 0 rows meet it)"*) ;; *) fail "bench $b: the target reads measured: $out";; esac ;;
      esac
    done ;;
  # 7. Receipts that contradict themselves or hold nonsense are refused.
  report-ratio-text)
    sed 's/"ratio": 0\.[0-9]*/"ratio": "x"/' "$h200/qwen-pages.json" > "$tmp/r.json"
    grep -q '"ratio": "x"' "$tmp/r.json" || fail "setup"
    expect 2 'worst.ratio: expected a number or "nan", got "x"' "$bin" report "$tmp/r.json" ;;
  report-pass-with-failed-gate)
    cpu_receipt fp8-rows || fail "setup"
    # the first gate (2 cases: 4 checks) made a consistent FAIL, the verdict left at pass
    sed '0,/"failed": 0,/s//"failed": 1,/; 0,/"ok": true,/s//"ok": false,/; 0,/"passed": 4,/s//"passed": 3,/; 0,/"status": "ok"/s//"status": "FAIL"/' \
      "$tmp/fp8-rows.json" > "$tmp/r.json"
    expect 2 "verdict: 'pass' contradicts gates[0]" "$bin" report "$tmp/r.json" ;;
  report-pass-with-green-control)
    cpu_receipt fp8-rows || fail "setup"
    sed '0,/"red": true/s//"red": false/' "$tmp/fp8-rows.json" > "$tmp/r.json"
    expect 2 "verdict: 'pass' contradicts controls[0]" "$bin" report "$tmp/r.json" ;;
  report-ok-contradicts-counts)
    cpu_receipt fp8-rows || fail "setup"
    sed '0,/"failed": 0,/s//"failed": 2,/; 0,/"passed": 4,/s//"passed": 2,/' "$tmp/fp8-rows.json" > "$tmp/r.json"
    expect 2 ".ok: true contradicts failed = 2" "$bin" report "$tmp/r.json" ;;
  # 8. Gates that did not run are skipped, with their reason, in the console, report and diff.
  skipped-console)
    expect 0 "device==host-twin                 skipped" "$bin" fp8-rows --backend cpu --cases 1 --quiet
    case "$out" in *"skipped device==host-twin: needs a CUDA device"*) ;; *) fail "no skip reason: $out";; esac ;;
  skipped-report)
    cpu_receipt scale-planes || fail "setup"
    expect 0 "| device==host-twin | skipped | 0 | 0 | 1 |" "$bin" report "$tmp/scale-planes.json"
    case "$out" in *"- device==host-twin: needs a CUDA device"*) ;; *) fail "no skip reason: $out";; esac ;;
  skipped-diff-cuda-cpu)
    cpu_receipt scale-planes || fail "setup"
    out=$("$bin" diff "$h200/scale-planes.json" "$tmp/scale-planes.json" 2>&1); rc=$?
    case "$out" in *"| device==host-twin | ok | skipped |"*"ok -> skipped"*) ;; *) fail "diff does not say skipped: $out";; esac
    case "$out" in *"device==host-twin removed"*) fail "called removed: $out";; esac
    [ "$rc" -eq 0 ] || fail "exit $rc (a skipped device gate is not a regression): $out" ;;
  # 9. Smaller: device line, ratio digits, bench seed, descriptions, summary line, timings.
  report-cpu-device-line)
    cpu_receipt fp8-rows || fail "setup"
    out=$("$bin" report "$tmp/fp8-rows.json" 2>&1)
    case "$out" in *"(compute"*|*"( , )"*|*"compute , "*) fail "empty device fields printed: $out";; esac ;;
  report-ratio-digits)
    sed 's/"ratio": 0\.[0-9]*/"ratio": 0.999999/' "$h200/qwen-pages.json" > "$tmp/r.json"
    expect 0 "| 0.999999 |" "$bin" report "$tmp/r.json" ;;
  report-bench-seed) expect 0 "| seed | none (a bench generates no cases) |" "$bin" report "$h200/bench-pack.json" ;;
  gate-descriptions)
    cpu_receipt fp8-rows || fail "setup"
    grep -q '"description": ""' "$tmp/fp8-rows.json" && fail "a gate or control without a description" || true ;;
  summary-line)
    expect 0 "fp8-rows: pass - 11 gates ok, 3 skipped; 13 of 13 controls red; 2 cases;" \
      "$bin" fp8-rows --backend cpu --cases 2 --quiet ;;
  gate-timings)
    cpu_receipt fp8-rows || fail "setup"
    n=$(grep -c '"time_s":' "$tmp/fp8-rows.json"); [ "$n" -ge 20 ] || fail "$n time_s fields" ;;
  qwen-rope-rows-path)  # cases 7 and 8 (q4, fp8) keep the shape whose rotary dims are not a
    # multiple of 8 (the rope store's block-per-row path for fp8 / q4 on cuda), for any seed
    "$bin" qwen-pages --backend cpu --cases 9 --seed 7 --gates-only --quiet --out "$tmp/r20.json" \
      --filter '^qwen-pages\(shape=gqa2-4q2kv-d128-r20,fmt=(q4|fp8),(?!.*probe=)' >/dev/null 2>&1  # drawn cases only
    [ $? -eq 1 ] || fail "a --gates-only run exits 1"
    grep -q '"run": 2' "$tmp/r20.json" || fail "not 2 cases on the r20 shape with q4 / fp8 among the first 9"
    grep -A3 '"format": {' "$tmp/r20.json" | grep -q '"fp8": 1' || fail "no fp8 case on the r20 shape"
    grep -A3 '"format": {' "$tmp/r20.json" | grep -q '"q4": 1' || fail "no q4 case on the r20 shape"
    grep -q '"status": "FAIL"' "$tmp/r20.json" && fail "a gate failed on the r20 cases" || true ;;
  h200-argv)  # the receipts the README cites were made by the README's commands
    for f in "$h200"/fp8-rows.json "$h200"/qwen-pages.json "$h200"/q4-rows.json "$h200"/mxfp4-rows.json \
             "$h200"/scale-planes.json "$h200"/bench-attention.json "$h200"/bench-pack.json; do
      grep -A1 '"argv": \[' "$f" | grep -q '"build/tools/tf-cuda-test"' || fail "$f: argv[0] is not the README's build/tools/tf-cuda-test"
    done ;;
  # 10. The main command builds tf-cuda-test alone; the tests build the rest.
  kc-run-builds-tool-only)
    out=$(KC_DRY_RUN=1 "$src/tools/kc.sh" run 2>&1) || fail "$out"
    case "$out" in *"--target tf-cuda-test"*) ;; *) fail "run does not build tf-cuda-test alone: $out";; esac
    out=$(KC_DRY_RUN=1 "$src/tools/kc.sh" test 2>&1) || fail "$out"
    case "$out" in *"--target"*) fail "test builds only a target: $out";; esac ;;
  # kc.sh's switches and KC_CUDA take only their documented values (KC_DRY_RUN=yes installed and
  # built for real; KC_CUDA=off built CUDA); KC_DEBUG_INFO=1 puts -g back explicitly (the cache kept
  # 0's flags); run works through a symbolic link and reads its arguments from the caller's folder;
  # a dry run's lines can be pasted back (quoted).
  kc-sh-values)
    expect 2 "KC_DRY_RUN='yes': expected 0 or 1" env KC_DRY_RUN=yes "$src/tools/kc.sh" build
    expect 2 "KC_CUDA='off': expected AUTO, ON or OFF" env KC_DRY_RUN=1 KC_CUDA=off "$src/tools/kc.sh" build
    expect 2 "KC_DEBUG_INFO='no': expected 0 or 1" env KC_DRY_RUN=1 KC_DEBUG_INFO=no "$src/tools/kc.sh" build
    expect 0 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2\\ -g\\ -DNDEBUG" env KC_DRY_RUN=1 KC_DEBUG_INFO=1 "$src/tools/kc.sh" build
    expect 0 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2\\ -DNDEBUG" env KC_DRY_RUN=1 KC_DEBUG_INFO=0 "$src/tools/kc.sh" build
    ln -s "$src/tools/kc.sh" "$tmp/kc" && mkdir "$tmp/here"
    out=$(cd "$tmp/here" && KC_DRY_RUN=1 "$tmp/kc" run --out-dir 'my r' 2>&1) || fail "kc.sh through a link: $out"
    case "$out" in *"+ cd $tmp/here"*"kernel-contract --out-dir my\ r"*) ;; *) fail "run does not run from the caller's folder, quoted: $out";; esac
    out=$(cd "$tmp/here" && KC_DRY_RUN=1 "$tmp/kc" run 2>&1) || fail "$out"
    case "$out" in *"kernel-contract --out-dir $src/receipts"*) ;; *) fail "run's default --out-dir is not the repository's receipts/: $out";; esac
    cmake -S "$src" -B "$tmp/b" -DKC_CUDA=off > "$tmp/cmake.out" 2>&1 && fail "CMake took KC_CUDA=off"
    grep -q "KC_CUDA='off': expected AUTO, ON or OFF" "$tmp/cmake.out" || fail "CMake's message: $(tail -3 "$tmp/cmake.out")" ;;
  # 11. The README links only to files in the repository.
  readme-links)
    [ -f "$src/docs/design.md" ] || fail "docs/design.md missing"
    grep -q '(docs/design.md)' "$src/README.md" || fail "README does not link docs/design.md"
    for l in $(grep -o '](\([^)#]*\))' "$src/README.md" | sed 's/^](\(.*\))$/\1/'); do
      case "$l" in http*) continue;; esac
      [ -e "$src/$l" ] || fail "README links $l, which is not in the repository"
    done
    grep -q "[^/]design\.md\`" "$src/README.md" && fail "README names a design.md outside docs/" || true ;;
  # make-model: a synthetic checkpoint, and bad input refused.
  make-model-tiny)
    expect 0 "" "$bin" make-model --preset tiny --seed 3 --out "$tmp/m"
    [ -f "$tmp/m/config.json" ] && [ -f "$tmp/m/model.safetensors" ] || fail "no checkpoint written" ;;
  # generate --prompt-file reads the file's bytes as the prompt, trailing newlines included: the
  # same prompt tokens (<|eos|> then the bytes) and continuation as --prompt with that text
  # (session 31's coverage audit: no test had read a prompt file).
  # A page larger than the model's context is refused before any allocation (--pages 1048576 held
  # 2 GiB for a two-token prompt); one of exactly the context runs and decodes as a window does.
  generate-page-too-large)
    m=$src/fixtures/models/stdlib-bytes-3m
    expect 2 "page size 1048576 exceeds max_position_embeddings 4096" \
      "$bin" generate --model "$m" --prompt hi --max-tokens 4 --pages 1048576 --backend cpu --out "$tmp/big.json"
    [ ! -e "$tmp/big.json" ] || fail "a refused generate wrote its receipt"
    # One past the context is refused too (session 64's mutation round: a bound of the context + 1
    # passed this case).
    expect 2 "page size 4097 exceeds max_position_embeddings 4096" \
      "$bin" generate --model "$m" --prompt hi --max-tokens 4 --pages 4097 --backend cpu
    expect 0 "" "$bin" generate --model "$m" --prompt hi --max-tokens 4 --pages 4096 --backend cpu --out "$tmp/p.json"
    expect 0 "" "$bin" generate --model "$m" --prompt hi --max-tokens 4 --backend cpu --out "$tmp/w.json"
    python3 -c "import json,sys; a,b=(json.load(open(x))['generate']['tokens'] for x in sys.argv[1:]); sys.exit(0 if a==b and a else 'pages %s, window %s' % (a,b))" \
      "$tmp/p.json" "$tmp/w.json" || fail "--pages 4096 and the window decoded differently" ;;
  # Input files read through one function (contracts/input_file.h): a FIFO given as generate's
  # --prompt-file or to report is refused at once (the prompt file's open waited for a writer
  # forever), and so are a folder, a missing file and a loop of symbolic links.
  input-files-s63)
    m=$src/fixtures/models/stdlib-bytes-3m
    mkfifo "$tmp/ff"
    expect 2 "--prompt-file $tmp/ff: cannot be read (not a regular file)" \
      timeout 20 "$bin" generate --model "$m" --prompt-file "$tmp/ff" --max-tokens 2 --backend cpu
    expect 2 "--prompt-file $tmp: cannot be read (is a folder, not a file)" \
      "$bin" generate --model "$m" --prompt-file "$tmp" --max-tokens 2 --backend cpu
    expect 2 "--prompt-file $tmp/none: cannot be read (cannot open: No such file or directory)" \
      "$bin" generate --model "$m" --prompt-file "$tmp/none" --max-tokens 2 --backend cpu
    expect 2 "$tmp/ff: not a regular file" timeout 20 "$bin" report "$tmp/ff"
    ln -s loop "$tmp/loop"
    expect 2 "$tmp/loop: cannot open: Too many levels of symbolic links" "$bin" report "$tmp/loop"
    expect 2 "$tmp: is a folder, expected a receipt file" "$bin" report "$tmp" ;;
  generate-prompt-file)
    m=$src/fixtures/models/stdlib-bytes-3m
    printf 'import os\n\n' > "$tmp/p.txt"
    p=$(printf 'import os\n\nx'); p=${p%x}
    expect 0 "" "$bin" generate --model "$m" --prompt-file "$tmp/p.txt" --max-tokens 8 --out "$tmp/f.json"
    expect 0 "" "$bin" generate --model "$m" --prompt "$p" --max-tokens 8 --out "$tmp/t.json"
    python3 - "$tmp/f.json" "$tmp/t.json" <<'PY' || fail "--prompt-file and --prompt differ"
import json, sys
f, t = (json.load(open(x))["generate"] for x in sys.argv[1:3])
want = [257] + list(b"import os\n\n")
if f["prompt_tokens"] != want: sys.exit("--prompt-file prompt tokens %s, expected %s" % (f["prompt_tokens"], want))
if t["prompt_tokens"] != want: sys.exit("--prompt prompt tokens %s, expected %s" % (t["prompt_tokens"], want))
if f["tokens"] != t["tokens"] or not f["tokens"]: sys.exit("continuations differ: %s vs %s" % (f["tokens"], t["tokens"]))
PY
    ;;
  make-model-bad-preset) expect 2 "is not a preset" "$bin" make-model --preset nope --out "$tmp/m" ;;
  make-model-bad-seed) expect 2 "--seed '-3': expected a whole number" "$bin" make-model --preset tiny --seed -3 --out "$tmp/m" ;;
  # export: inputs and our outputs for the oracle (tools/oracle_torch.py).
  export-unknown-contract) expect 2 "contract 'fp8-rows' has no export" "$bin" export fp8-rows --out "$tmp/e" ;;
  export-out-file) : > "$tmp/f"; expect 2 "--out $tmp/f: cannot create the folder" "$bin" export qwen-pages --backend cpu --out "$tmp/f" ;;
  export-writes)
    expect 0 "export: 3 cases of qwen-pages on cpu" "$bin" export qwen-pages --backend cpu --cases 3 --seed 5 --out "$tmp/e"
    for i in 0 1 2; do [ -s "$tmp/e/case$i.safetensors" ] || fail "case$i.safetensors not written"; done
    python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert len(m['cases']) == 3, 'cases'
assert m['seed'] == 5 and m['receipt_head']['git']['commit'], 'seed or git'
assert all(c['format'] in ('bf16', 'fp8') for c in m['cases']), 'formats'
" "$tmp/e/manifest.json" || fail "manifest.json incomplete"
    # Again into the same folder with one case: the previous export's case files go (the oracle
    # reads what the manifest lists, a reader of the folder would see them), any other file stays.
    : > "$tmp/e/notes.txt"; : > "$tmp/e/case1.safetensors.bak"
    expect 0 "export: 1 cases of qwen-pages on cpu" "$bin" export qwen-pages --backend cpu --cases 1 --seed 5 --out "$tmp/e"
    [ "$(ls "$tmp/e" | tr '\n' ' ')" = "case0.safetensors case1.safetensors.bak manifest.json notes.txt " ] ||
      fail "re-export left: $(ls "$tmp/e" | tr '\n' ' ')"
    # Only caseN.safetensors, N decimal digits, is an export's: case.safetensors (no number) and
    # case1-mine.safetensors (more than digits) stay through a third export.
    : > "$tmp/e/case.safetensors"; : > "$tmp/e/case1-mine.safetensors"
    expect 0 "export: 1 cases of qwen-pages on cpu" "$bin" export qwen-pages --backend cpu --cases 1 --seed 5 --out "$tmp/e"
    [ -f "$tmp/e/case.safetensors" ] && [ -f "$tmp/e/case1-mine.safetensors" ] ||
      fail "re-export removed a file it does not write: $(ls "$tmp/e" | tr '\n' ' ')"
    # fp8 cases: the stored V rows decode (E4M3 code x the row's v_scale) to the V given, within
    # E4M3's half ulp of each row's largest value (V is stored unrotated); K's scales are others.
    "$bin" export qwen-pages --backend cpu --cases 8 --seed 5 --out "$tmp/f" >/dev/null 2>&1 ||
      fail "export of fp8 cases failed"
    python3 - "$tmp/f" <<'PY' || fail "the exported fp8 V rows do not decode with v_scale"
import json, struct, sys
d = sys.argv[1]
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, t in h.items():
        if k == "__metadata__": continue
        s, e = t["data_offsets"]
        out[k] = (t["shape"], struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e]))
    return out
def e4m3(c):
    s = -1.0 if c & 0x80 else 1.0
    e, m = (c >> 3) & 15, c & 7
    return s * (m / 8.0 * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7))
cases = [c for c in json.load(open(d + "/manifest.json"))["cases"] if c["format"] == "fp8"]
assert cases, "no fp8 case"
for c in cases:
    t = tensors(d + "/" + c["file"])
    L, KH, D = t["v_codes"][0]
    codes, vs, v, ks = t["v_codes"][1], t["v_scale"][1], t["v"][1], t["k_scale"][1]
    assert any(abs(a - b) > 1e-3 * max(abs(a), abs(b)) for a, b in zip(vs, ks)), "K and V scales alike: no check"
    for r in range(L * KH):
        row = v[r * D:(r + 1) * D]
        amax = max(abs(x) for x in row)
        for j in range(D):
            got = e4m3(int(codes[r * D + j])) * vs[r]
            assert abs(got - row[j]) <= amax / 16 + 1e-30, (c["case"], r, j, got, row[j])
PY
    ;;
  # Every refusal (exit 2) reads "tf-cuda-test: error: COMMAND: why": the parse errors that CLI11
  # reports (an unknown option, a value out of its set, a missing required option) and
  # make-model / make-draft's own checks.
  refusal-prefix)
    pre() {  # pre PREFIX CMD...: exit 2 and the first line of stderr starts with PREFIX
      want=$1; shift
      err=$("$@" 2>&1 >/dev/null); rc=$?
      [ "$rc" -eq 2 ] || fail "exit $rc, expected 2: $*"
      first=$(printf '%s\n' "$err" | head -n 1)
      case "$first" in "$want"*) ;; *) fail "'$first' does not start with '$want': $*";; esac
    }
    pre "tf-cuda-test: error: fp8-rows: The following argument was not expected: --bogus" "$bin" fp8-rows --bogus
    pre "tf-cuda-test: error: qwen-pages: --backend: gpu not in" "$bin" qwen-pages --backend gpu
    pre "tf-cuda-test: error: fp8-rows: --cases: expected a decimal integer" "$bin" fp8-rows --cases x
    pre "tf-cuda-test: error: bench: --reps: expected a decimal integer" "$bin" bench attention --reps 007
    pre "tf-cuda-test: error: make-model: --preset is required" "$bin" make-model --out "$tmp/m"
    pre "tf-cuda-test: error: make-model: --preset: 'huge' is not a preset" "$bin" make-model --preset huge --out "$tmp/m"
    pre "tf-cuda-test: error: make-draft: --layers is required" "$bin" make-draft --from "$tmp" --out "$tmp/d"
    pre "tf-cuda-test: error: make-draft: " "$bin" make-draft --from "$tmp" --layers 1 --out "$tmp/d"
    pre "tf-cuda-test: error: unknown contract or command" "$bin" no-such-command
    "$bin" fp8-rows --bogus 2>&1 | grep -q "^Run 'tf-cuda-test fp8-rows --help' for more information" ||
      fail "the parse error does not say where the help is"
    [ ! -e "$tmp/m" ] && [ ! -e "$tmp/d" ] || fail "a refused make-model or make-draft wrote its folder" ;;
  # Whole-number options are decimal: 010 is not octal 8, 0x10 not 16.
  int-decimal)
    expect 2 "expected a decimal integer" "$bin" fp8-rows --backend cpu --quiet --cases 010
    expect 2 "expected a decimal integer" "$bin" q4-rows --backend cpu --quiet --cases 0x10
    expect 2 "expected a decimal integer" "$bin" bench attention --reps 007 ;;
  # Options of bench engine given to another bench are refused (before a device is asked for);
  # --profile writes no receipt, so --out beside it is refused.
  bench-engine-options)
    for o in "--tokens 100" "--layers 2" "--transformers none" "--engine-model $tmp"; do
      expect 2 "applies to bench engine only" "$bin" bench attention $o
    done
    for b in engine pack rope-store compact; do expect 2 "--sdpa applies to bench attention only" "$bin" bench $b --sdpa none; done
    expect 2 "--out $tmp/r.json would not be written" "$bin" bench engine --profile "$tmp/p.json" --out "$tmp/r.json" ;;
  # kernel-contract checks its serve fixture before anything runs: nothing is written.
  kc-bad-serve-fixture)
    expect 2 "--serve-fixture $tmp/nope.json: cannot be read" "$bin" kernel-contract --backend cpu --quiet \
      --serve-fixture "$tmp/nope.json" --out-dir "$tmp/k"
    sed 's/"new_tokens": 16/"new_tokens": 2/' "$src/fixtures/serve/ci.json" > "$tmp/bad.json"
    out=$("$bin" kernel-contract --backend cpu --quiet --serve-fixture "$tmp/bad.json" --out-dir "$tmp/k" 2>&1); rc=$?
    [ $rc -eq 2 ] || fail "a bad serve fixture: exit $rc: $out"
    case "$out" in *"field new_tokens: must be in 3..4096"*) ;; *) fail "the bad field is not named: $out";; esac
    [ ! -e "$tmp/k" ] || fail "--out-dir made before the fixture was refused: $(ls -A "$tmp/k")" ;;
  # A fixture field only the checkpoints can judge (draft.layers: the model has 4 layers) is
  # refused before any contract runs too: exit 2 naming it, no receipt written (it was refused
  # only by the serve gate, after every contract had run and written its receipt).
  kc-serve-fixture-checkpoint)
    sed -e 's|"model": "../models/stdlib-bytes-3m-draft1"|"layers": 4|' \
        -e "s|\"model\": \"../models/stdlib-bytes-3m\"|\"model\": \"$src/fixtures/models/stdlib-bytes-3m\"|" \
      "$src/fixtures/serve/ci.json" > "$tmp/layers.json"
    grep -q '"layers": 4' "$tmp/layers.json" || fail "the fixture was not rewritten: $(cat "$tmp/layers.json")"
    out=$("$bin" kernel-contract --backend cpu --quiet --serve-fixture "$tmp/layers.json" --out-dir "$tmp/k" 2>&1); rc=$?
    [ $rc -eq 2 ] || fail "draft.layers = the model's layers: exit $rc: $out"
    case "$out" in *"--serve-fixture $tmp/layers.json: field draft.layers: must be below the model's 4 layers"*) ;;
      *) fail "the bad field is not named: $out";; esac
    [ ! -e "$tmp/k" ] || fail "receipts written before the fixture was refused: $(ls -A "$tmp/k")" ;;
  # A serve fixture whose lanes' windows (context 2^20 positions, 64 lanes: 160 GiB of bf16
  # cache) pass half the memory is refused naming context, not pool_pages (20 pages of 16).
  serve-gate-arena-context)
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    [ "${mem_kb:-0}" -lt 300000000 ] || { echo "skipped: $mem_kb kB of memory hold the arena"; exit 77; }
    serve_fixture "$tmp/big.json" 'f["prompts"], f["parallel"], f["context"], f["cache_formats"] = ["a"] * 65, 64, 1048576, ["bf16"]; del f["golden"]' ||
      fail "could not write the fixture"
    expect 2 "$tmp/big.json: field context: 20 pages of 16 positions (bf16) and 64 lanes' windows of 1048576 positions" \
      "$bin" serve-gate "$tmp/big.json" --out "$tmp/r.json"
    [ ! -e "$tmp/r.json" ] || fail "a receipt was written" ;;
  # An empty shard counts the selected cases, not the refusal probes dealt beside them: fp8-rows
  # --cases 1 --shard 2/2 holds none of 1 case (it said 35, with "only shards 1 to 2 of 2").
  shard-empty-counts-cases)
    expect 1 "shard 2/2 holds none of the 1 cases (the selected cases are dealt to shards in turn, the k-th to shard k mod n + 1, so only shards 1 to 1 of 2 hold one)" \
      "$bin" rows-invariant --backend cpu --quiet --cases 1 --shard 2/2 ;;
  # --out (or serve-gate's --junit) naming the fixture, or kv-gate's token file, is refused before
  # anything runs: the receipt replaced the file the command had read (and the next run needs).
  out-names-input)
    serve_fixture "$tmp/sg.json" "$SMALL; del f['golden']" || fail "could not write the serve fixture"
    python3 - "$src" "$tmp" <<'PY' || fail "could not write the kv fixture"
import json, shutil, sys
src, tmp = sys.argv[1], sys.argv[2]
k = json.load(open(src + "/fixtures/kv/ci.json"))
k["model"] = src + "/fixtures/models/stdlib-bytes-3m"
shutil.copy(src + "/fixtures/text/stdlib-heldout-3.11.7.txt", tmp + "/tokens.txt")
k["tokens"]["file"] = tmp + "/tokens.txt"
json.dump(k, open(tmp + "/kv.json", "w"))
PY
    cp "$tmp/sg.json" "$tmp/sg.orig"; cp "$tmp/kv.json" "$tmp/kv.orig"; cp "$tmp/tokens.txt" "$tmp/tokens.orig"
    expect 2 "--out $tmp/sg.json names the fixture $tmp/sg.json: the receipt would replace it" \
      "$bin" serve-gate "$tmp/sg.json" --out "$tmp/sg.json"
    expect 2 "--junit $tmp/sub/../sg.json names the fixture $tmp/sg.json" \
      "$bin" serve-gate "$tmp/sg.json" --junit "$tmp/sub/../sg.json"
    expect 2 "--out $tmp/kv.json names the fixture $tmp/kv.json: the receipt would replace it" \
      "$bin" kv-gate "$tmp/kv.json" --format fp8 --bf16-cache "$tmp/c" --out "$tmp/kv.json"
    expect 2 "--out $tmp/tokens.txt names the token file $tmp/tokens.txt: the receipt would replace it" \
      "$bin" kv-gate "$tmp/kv.json" --format fp8 --bf16-cache "$tmp/c" --out "$tmp/tokens.txt"
    cmp -s "$tmp/sg.json" "$tmp/sg.orig" && cmp -s "$tmp/kv.json" "$tmp/kv.orig" && cmp -s "$tmp/tokens.txt" "$tmp/tokens.orig" ||
      fail "an input was replaced"
    [ ! -e "$tmp/c" ] || fail "the bf16 arm was computed before the refusal"
    # generate --out naming its --prompt-file, report --junit naming a receipt it reads.
    printf 'import os\n' > "$tmp/p.txt"; cp "$tmp/p.txt" "$tmp/p.orig"
    expect 2 "--out $tmp/p.txt names the prompt file $tmp/p.txt: the receipt would replace it" \
      "$bin" generate --model "$src/fixtures/models/stdlib-bytes-3m" --prompt-file "$tmp/p.txt" --max-tokens 2 --out "$tmp/p.txt"
    cp "$h200/fp8-rows.json" "$tmp/r.json"; cp "$tmp/r.json" "$tmp/r.orig"
    expect 2 "--junit $tmp/r.json names the receipt $tmp/r.json: the JUnit XML would replace it" \
      "$bin" report "$tmp/r.json" --junit "$tmp/r.json"
    cmp -s "$tmp/p.txt" "$tmp/p.orig" && cmp -s "$tmp/r.json" "$tmp/r.orig" || fail "an input was replaced" ;;
  # --out naming a file of a checkpoint the command reads (generate's --model, a serve fixture's
  # model and draft model, a kv fixture's model) is refused before anything runs: it once
  # replaced config.json or model.safetensors with the receipt and exited 0 (the next run failed).
  out-names-model)
    cp -r "$src/fixtures/models/stdlib-bytes-3m" "$tmp/m" && cp -r "$src/fixtures/models/stdlib-bytes-3m-draft1" "$tmp/d" ||
      fail "could not copy the models"
    serve_fixture "$tmp/sg.json" "$SMALL; del f['golden']; f['model'] = '$tmp/m'; f['draft']['model'] = '$tmp/d'" ||
      fail "could not write the serve fixture"
    kv_fixture "$tmp/kv.json" "$tmp/m" || fail "could not write the kv fixture"
    cp -r "$tmp/m" "$tmp/m.orig" && cp -r "$tmp/d" "$tmp/d.orig"
    expect 2 "--out $tmp/m/config.json names the model's file $tmp/m/config.json: the receipt would replace it" \
      "$bin" generate --model "$tmp/m" --prompt hi --max-tokens 2 --out "$tmp/m/config.json"
    expect 2 "--out $tmp/x/../m/model.safetensors names the model's file $tmp/m/model.safetensors: the receipt would replace it" \
      "$bin" generate --model "$tmp/m" --prompt hi --max-tokens 2 --out "$tmp/x/../m/model.safetensors"
    expect 2 "--out $tmp/m/model.safetensors names the model's file $tmp/m/model.safetensors: the receipt would replace it" \
      "$bin" serve-gate "$tmp/sg.json" --out "$tmp/m/model.safetensors"
    expect 2 "--out $tmp/d/config.json names the draft model's file $tmp/d/config.json: the receipt would replace it" \
      "$bin" serve-gate "$tmp/sg.json" --out "$tmp/d/config.json"
    expect 2 "--out $tmp/m/config.json names the model's file $tmp/m/config.json: the receipt would replace it" \
      "$bin" kv-gate "$tmp/kv.json" --format fp8 --bf16-cache "$tmp/c" --out "$tmp/m/config.json"
    diff -r "$tmp/m" "$tmp/m.orig" >/dev/null && diff -r "$tmp/d" "$tmp/d.orig" >/dev/null || fail "a model file was replaced"
    [ ! -e "$tmp/c" ] && [ ! -e "$tmp/x" ] || fail "something was written before the refusal" ;;
  # A serve gate that fails at run time (its golden hashes are of 16 new tokens, the fixture
  # asks for 4) fails kernel-contract while every contract passes (one shard of their cases):
  # exit 1, the serve gate's line FAIL. --quiet prints no progress on stderr, the serve gate's arm
  # and control lines included (they were printed); the FAIL lines are results, printed.
  # The same run's --out-dir held a receipt of an earlier run: the run names it (a note on
  # stderr, printed under --quiet too) and leaves it; its own receipts are not named.
  kc-serve-gate-fails)
    serve_fixture "$tmp/sg.json" "$SMALL; f['golden'] = {'bf16': f['golden']['bf16'][:3]}" || fail "could not write the fixture"
    mkdir -p "$tmp/k" && cp "$h200/fp8-rows.json" "$tmp/k/old-contract.json"
    # Eleven more (the note lists ten names, then how many more) and a folder named *.json (not a
    # file report would read: not named).
    for i in 01 02 03 04 05 06 07 08 09 10 11; do : > "$tmp/k/a$i.json"; done
    mkdir "$tmp/k/dir.json"
    out=$("$bin" kernel-contract --backend cpu --quiet --shard 3/3 --serve-fixture "$tmp/sg.json" --out-dir "$tmp/k" 2>"$tmp/err"); rc=$?
    grep -v -e '^FAIL ' -e '^tf-cuda-test: note: ' "$tmp/err" > "$tmp/progress"
    [ ! -s "$tmp/progress" ] || fail "kernel-contract --quiet printed progress on stderr: $(head -5 "$tmp/progress")"
    grep -q -x -F "tf-cuda-test: note: --out-dir $tmp/k also holds 12 JSON files this run did not write (report $tmp/k/*.json would read them too): a01.json a02.json a03.json a04.json a05.json a06.json a07.json a08.json a09.json a10.json and 2 more" "$tmp/err" \
      || fail "the earlier runs' files were not named (alone, ten of them): $(grep note "$tmp/err")"
    [ -f "$tmp/k/old-contract.json" ] && [ -f "$tmp/k/fp8-rows.json" ] || fail "a receipt is missing from --out-dir"
    for c in fp8-rows qwen-pages q4-rows scale-planes mxfp4-rows arena-offsets rows-invariant; do
      case "$out" in *"  $c: pass"*) ;; *) fail "contract $c did not pass, so the exit code says nothing of the serve gate: $out";; esac
    done
    case "$out" in *"serve-gate (sg.json): FAIL"*) ;; *) fail "the serve gate did not fail: $out";; esac
    [ $rc -eq 1 ] || fail "kernel-contract exit $rc with the serve gate failing (expected 1)" ;;
  # report's command row pastes back as the same argv (every shell metacharacter quoted).
  report-command-quoted)
    "$bin" fp8-rows --backend cpu --cases 2 --quiet --filter 'ptok;?' --out "$tmp/q.json" >/dev/null 2>&1
    expect 0 "--filter 'ptok;?'" "$bin" report "$tmp/q.json" ;;
  # diff: a gate added failing and a control added green are regressions, not improvements;
  # a gate that went from ok to not run in a full run is one too.
  diff-added-failing)
    cpu_receipt fp8-rows || fail "setup"
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
r['gates'].append({'name': 'new-gate', 'ok': False, 'passed': 0, 'failed': 1, 'skipped': 0, 'total': 1, 'failures': ['x']})
r['controls'].append({'name': 'new-control', 'red': False, 'caught_by': []})
r['verdict'] = 'fail'; r['verdict_reasons'] = ['new-gate failed']
json.dump(r, open(sys.argv[2], 'w'))
" "$tmp/fp8-rows.json" "$tmp/h.json"
    expect 1 "gate new-gate added, and it fails" "$bin" diff "$tmp/fp8-rows.json" "$tmp/h.json"
    case "$out" in *"control new-control added, and GREEN"*) ;; *) fail "the green control is not a regression: $out";; esac
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
g = next(g for g in r['gates'] if g['passed'] > 0)
g.update(passed=0, total=g['skipped'], status='not run'); g.pop('worst', None)
json.dump(r, open(sys.argv[2], 'w'))
" "$tmp/fp8-rows.json" "$tmp/n.json"
    expect 1 "ok -> not run" "$bin" diff "$tmp/fp8-rows.json" "$tmp/n.json"
    # The same head, but it ran fewer cases than the base (--cases 1 against the base's count):
    # gates it did not reach are no regression.
    python3 -c "
import json, sys
r = json.load(open(sys.argv[1])); r['cases']['requested'] = 1
json.dump(r, open(sys.argv[2], 'w'))
" "$tmp/n.json" "$tmp/n1.json"
    expect 0 "Regressions (0)" "$bin" diff "$tmp/fp8-rows.json" "$tmp/n1.json" ;;
  # A receipt write that fails on a full disk (a 300 KB tmpfs, filled) says why and leaves
  # nothing: neither the file nor the folders the write made (they once stayed). Needs a tmpfs
  # mount (root); skipped where none can be made.
  out-full-disk)
    mkdir -p "$tmp/small"
    mount -t tmpfs -o size=300k tmpfs "$tmp/small" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$tmp/small" 2>/dev/null; rm -rf "$tmp"' EXIT
    dd if=/dev/zero of="$tmp/small/fill" bs=1k count=400 2>/dev/null
    expect 2 "$tmp/small/new/sub/r.json: write failed (No space left on device)" \
      "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/small/new/sub/r.json" --junit "$tmp/j.xml"
    [ "$(ls -A "$tmp/small")" = fill ] || fail "the failed write left: $(ls -A "$tmp/small")"
    # No JUnit beside an exit 2: it read green (failures=0) where the receipt was never written.
    [ ! -e "$tmp/j.xml" ] || fail "a JUnit was written for a run that exits 2"
    # A receipt marked immutable cannot be replaced: refused before the run (it ran, then failed).
    cp "$h200/fp8-rows.json" "$tmp/imm.json"
    if chattr +i "$tmp/imm.json" 2>/dev/null; then
      expect 2 "$tmp/imm.json: cannot be replaced: the file is marked immutable (chattr)" \
        "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/imm.json"
      chattr -i "$tmp/imm.json"
      case "$out" in *"fp8-rows: pass"*) fail "the run ran before the refusal";; esac
    fi ;;
  # serve-gate --out on a full disk with --junit: exit 2, and no JUnit (session 62's audit: the
  # receipt for --junit was handed over before the write, so a green JUnit stood beside exit 2).
  serve-gate-full-disk-junit)
    mkdir -p "$tmp/small"
    mount -t tmpfs -o size=300k tmpfs "$tmp/small" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$tmp/small" 2>/dev/null; rm -rf "$tmp"' EXIT
    dd if=/dev/zero of="$tmp/small/fill" bs=1k count=400 2>/dev/null
    serve_fixture "$tmp/s.json" "$SMALL; f.pop('golden', None)"
    expect 2 "$tmp/small/r.json: write failed (No space left on device)" \
      "$bin" serve-gate "$tmp/s.json" --backend cpu --quiet --out "$tmp/small/r.json" --junit "$tmp/j.xml"
    [ ! -e "$tmp/j.xml" ] || fail "a JUnit was written for a serve-gate run that exits 2" ;;
  # kernel-contract whose receipts cannot be written (a full disk) exits 2 and writes no JUnit:
  # it would read green beside receipts that were never written (host mutation sweep, round 18:
  # with kernel-contract's own "not written" rule gone, only serve-gate's and a contract's cases
  # saw one). The run stops at the first contract, one shard of its cases.
  kc-full-disk-junit)
    mkdir -p "$tmp/small"
    mount -t tmpfs -o size=300k tmpfs "$tmp/small" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$tmp/small" 2>/dev/null; rm -rf "$tmp"' EXIT
    mkdir "$tmp/small/k" && dd if=/dev/zero of="$tmp/small/fill" bs=1k count=400 2>/dev/null
    serve_fixture "$tmp/sg.json" "$SMALL; f.pop('golden', None)"
    expect 2 "--junit $tmp/j.xml not written (the run exits 2)" \
      "$bin" kernel-contract --backend cpu --quiet --shard 3/3 --serve-fixture "$tmp/sg.json" --out-dir "$tmp/small/k" --junit "$tmp/j.xml"
    case "$out" in *"write failed (No space left on device)"*) ;; *) fail "no receipt write failed: $out";; esac
    # It stops at the first receipt it cannot write: the contracts after it and the serve gate
    # do not run.
    case "$out" in *"kernel-contract stopped after 1 of "*"could not be written"*) ;; *) fail "the run did not stop at the first unwritten receipt: $out";; esac
    case "$out" in *": receipt not written"*": not run"*"serve-gate (sg.json): not run"*) ;; *) fail "the list does not mark what did not run: $out";; esac
    [ "$(printf '%s\n' "$out" | grep -c '^verdict:')" = 1 ] || fail "a second contract ran after a receipt could not be written: $out"
    [ ! -e "$tmp/j.xml" ] || fail "a JUnit was written for a kernel-contract run that exits 2"
    [ -z "$(ls -A "$tmp/small/k")" ] || fail "files left in --out-dir: $(ls -A "$tmp/small/k")" ;;
  # make-model / make-draft never remove what they did not create (session 62's audit: the
  # cleanup of a failed run removed an existing folder that "missing/../name" named, make-draft's
  # own source among them, and a dangling symbolic link given as --out).
  make-out-existing-untouched)
    "$bin" make-model --preset tiny --out "$tmp/m" >/dev/null 2>&1 || fail "make-model did not write $tmp/m"
    cp -r "$tmp/m" "$tmp/victim" && echo keep > "$tmp/victim/notes.txt"
    expect 2 "'..' after $tmp/nonexist, which does not exist" "$bin" make-model --preset tiny --out "$tmp/nonexist/../victim"
    expect 2 "is not a preset" "$bin" make-model --preset nope --out "$tmp/nonexist/../victim"
    expect 2 "'..' after $tmp/zz, which does not exist" "$bin" make-draft --from "$tmp/victim" --layers 1 --out "$tmp/zz/../victim"
    [ -f "$tmp/victim/notes.txt" ] && [ -f "$tmp/victim/model.safetensors" ] || fail "a refused run removed $tmp/victim"
    [ ! -e "$tmp/nonexist" ] && [ ! -e "$tmp/zz" ] || fail "a refused run left a folder it made"
    ln -s "$tmp/nowhere" "$tmp/dangling"
    expect 2 "$tmp/dangling is a symbolic link to nothing" "$bin" make-model --preset tiny --out "$tmp/dangling"
    expect 2 "$tmp/dangling is a symbolic link to nothing" "$bin" make-draft --from "$tmp/m" --layers 1 --out "$tmp/dangling/sub"
    [ -L "$tmp/dangling" ] || fail "a refused run removed the symbolic link $tmp/dangling"
    # Spelled as it may be, a path through an existing folder still works, and make-draft's files
    # do not depend on how --from is spelled.
    mkdir -p "$tmp/a/b"
    expect 0 "" "$bin" make-model --preset tiny --out "$tmp/a/b/../c"
    [ -f "$tmp/a/c/model.safetensors" ] || fail "--out a/b/../c did not write a/c"
    expect 0 "" "$bin" make-draft --from "$tmp/m" --layers 1 --out "$tmp/d1"
    (cd "$tmp/m" && "$bin" make-draft --from . --layers 1 --out "$tmp/d2" >/dev/null 2>&1) || fail "make-draft --from . failed"
    cmp -s "$tmp/d1/model.safetensors" "$tmp/d2/model.safetensors" || fail "make-draft --from . wrote other bytes than --from m" ;;
  # Runs into one --out at once: one writes, the others are refused, and the folder holds the
  # winner's whole checkpoint (session 62's audit: the loser's cleanup removed the winner's folder,
  # 40 of 40 tries, because it removed "the folder that was missing when it started").
  make-out-concurrent)
    "$bin" make-model --preset tiny --out "$tmp/m" >/dev/null 2>&1 || fail "setup"
    for i in 1 2 3 4; do ("$bin" make-draft --from "$tmp/m" --layers 1 --out "$tmp/new/d" > "$tmp/o$i" 2>&1; echo $? > "$tmp/rc$i") & done
    wait
    ok=0
    for i in 1 2 3 4; do
      case "$(cat "$tmp/rc$i")" in
        0) ok=$((ok + 1)) ;;
        2) grep -q "another make-model or make-draft is writing it\|exists and is not empty" "$tmp/o$i" || fail "run $i: $(cat "$tmp/o$i")" ;;
        *) fail "run $i exited $(cat "$tmp/rc$i"): $(cat "$tmp/o$i")" ;;
      esac
    done
    [ "$ok" = 1 ] || fail "$ok of 4 runs wrote the folder"
    [ "$(ls -A "$tmp/new/d" | sort | tr '\n' ' ')" = "config.json model.safetensors " ] || fail "the folder holds: $(ls -A "$tmp/new/d")"
    expect 0 "" "$bin" generate --model "$tmp/new/d" --prompt hi --max-tokens 2 --backend cpu ;;
  # Names the system refuses in a fixture's files and folders, a FIFO as the fixture, and a model
  # folder holding a loop of symbolic links: exit 2 with the reason (or a normal run), never an
  # abort or a read that blocks (session 62's audit: std::filesystem exceptions, exit 134).
  engine-input-names)
    long=$(printf 'x%.0s' $(seq 300))
    serve_fixture "$tmp/s.json" "$SMALL; f.pop('golden', None); f['model'] = '$long'"
    expect 2 "$long is not a folder (File name too long)" "$bin" serve-gate "$tmp/s.json" --backend cpu
    serve_fixture "$tmp/s.json" "$SMALL; f.pop('golden', None); f['draft']['model'] = '$long'"
    expect 2 "$long is not a folder (File name too long)" "$bin" serve-gate "$tmp/s.json" --backend cpu
    kv_fixture "$tmp/k.json" "$long"
    expect 2 "$long is not a folder (File name too long)" "$bin" kv-gate "$tmp/k.json" --format fp8 --backend cpu
    kv_fixture "$tmp/k.json" "$src/fixtures/models/stdlib-bytes-3m"
    python3 -c "import json,sys; k=json.load(open(sys.argv[1])); k['tokens']['file']=sys.argv[2]; json.dump(k,open(sys.argv[1],'w'))" \
      "$tmp/k.json" "$tmp/loop"
    ln -s "$tmp/loop" "$tmp/loop"
    expect 2 "field tokens.file: $tmp/loop: cannot be read (cannot open: Too many levels of symbolic links)" \
      "$bin" kv-gate "$tmp/k.json" --format fp8 --backend cpu
    mkfifo "$tmp/ff"
    expect 2 "$tmp/ff: cannot be read (not a regular file)" timeout 20 "$bin" serve-gate "$tmp/ff" --backend cpu
    expect 2 "$tmp/ff: cannot be read (not a regular file)" timeout 20 "$bin" kv-gate "$tmp/ff" --format fp8 --backend cpu
    expect 2 "$tmp: cannot be read (is a folder, not a file)" "$bin" kv-gate "$tmp" --format fp8 --backend cpu
    "$bin" make-model --preset tiny --out "$tmp/m" >/dev/null 2>&1 || fail "make-model did not write $tmp/m"
    ln -s loop2 "$tmp/m/loop2"
    expect 0 "" "$bin" generate --model "$tmp/m" --prompt hi --max-tokens 2 --backend cpu --out "$tmp/g.json"
    [ -f "$tmp/g.json" ] || fail "generate wrote no receipt"
    expect 2 "File name too long" "$bin" generate --model "$tmp/m" --prompt hi --max-tokens 2 --out "$tmp/$long.json" ;;
  # A drafted arm whose draft never agrees (a 1-layer random model) verifies drafts but accepts
  # none: the accept path was never compared, so the gate fails and says why (session 63's audit:
  # the gate passed, 0 of 18 drafted tokens accepted).
  serve-gate-no-accept)
    "$bin" make-model --preset tiny --layers 1 --seed 7 --out "$tmp/d" >/dev/null 2>&1 || fail "setup"
    serve_fixture "$tmp/s.json" "$SMALL; f.pop('golden', None); f['new_tokens'] = 8; f['draft'] = {'model': '$tmp/d', 'tokens': 1, 'tree': [8]}"
    expect 1 "the arm accepted no drafted token (18 verifies, 18 drafted, 0 accepted)" \
      "$bin" serve-gate "$tmp/s.json" --backend cpu --quiet ;;
  # serve-gate --junit may not name a file of the fixture's models (as --out may not).
  serve-gate-junit-model)
    cp -r "$src/fixtures/models/stdlib-bytes-3m" "$tmp/mc"
    serve_fixture "$tmp/s.json" "$SMALL; f.pop('golden', None); f['model'] = '$tmp/mc'"
    expect 2 "--junit $tmp/mc/config.json names the model's file" \
      "$bin" serve-gate "$tmp/s.json" --backend cpu --quiet --junit "$tmp/mc/config.json"
    cmp -s "$tmp/mc/config.json" "$src/fixtures/models/stdlib-bytes-3m/config.json" || fail "--junit replaced the model's config.json" ;;
  # serve-memory without --prompts takes as many of the default lengths as there are lanes; a
  # context too small for them says the defaults are to blame.
  serve-memory-default-prompts)
    expect 0 "2 cases" "$bin" serve-memory --preset tiny --parallel 2 --out "$tmp/m.json"
    expect 2 "more than --context 1000 (the default --prompts; give --prompts lengths that fit)" \
      "$bin" serve-memory --preset tiny --context 1000 ;;
  # Receipts that contradict themselves in ways session 62's audit found report reading as a pass.
  # edit FILE OUT PYTHON: the receipt FILE with the statements PYTHON applied (as r), written to OUT.
  report-contradictions-s62)
    edit() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(r, open(sys.argv[2],'w'))" "$@"; }
    "$bin" fp8-rows --backend cpu --quiet --out "$tmp/full.json" >/dev/null 2>&1 || fail "setup: a default fp8-rows run"
    # A failure listed under a gate that says it held.
    edit "$tmp/full.json" "$tmp/f1.json" "r['gates'][3]['failures']=['x: error 5 > bound']"
    expect 2 "gates[3].failures: 1 entries contradict failed = 0" "$bin" report "$tmp/f1.json"
    # A pass without cases.run: the filter that matched none, with its verdict edited.
    "$bin" fp8-rows --backend cpu --quiet --cases 2 --filter nomatch --out "$tmp/nm.json" >/dev/null 2>&1
    edit "$tmp/nm.json" "$tmp/nm1.json" "r['verdict']='pass'; r['verdict_reasons']=[]; r['replay']=[]; del r['cases']"
    expect 2 "'pass' without cases.run" "$bin" report "$tmp/nm1.json"
    edit "$tmp/nm.json" "$tmp/nm2.json" "r['verdict']='pass'; r['verdict_reasons']=[]; r['replay']=[]; del r['cases']['run']"
    expect 2 "'pass' without cases.run" "$bin" report "$tmp/nm2.json"
    # A pass with cases.run 0 beside numbers.refusal_probes: probes excuse a shard of probes alone,
    # never an unsharded run (session 64's mutation round: the shard condition dropped, no case
    # noticed; the unit test's receipt has no refusal_probes).
    edit "$tmp/full.json" "$tmp/r0.json" "r['cases']['run']=0"
    expect 2 "'pass' with cases.run 0" "$bin" report "$tmp/r0.json"
    # A gate that checked nothing in a run of every case.
    grep -q '"every_case": true' "$tmp/full.json" || fail "a default run's receipt does not say every_case true"
    edit "$tmp/full.json" "$tmp/e1.json" "g=r['gates'][3]; g.update(passed=0,total=0,status='not run'); g.pop('worst',None)"
    expect 2 "at total 0 in a run of every case" "$bin" report "$tmp/e1.json"
    edit "$tmp/full.json" "$tmp/e2.json" "r['cases']['filter']='x'"
    expect 2 "cases.every_case: true contradicts cases.filter" "$bin" report "$tmp/e2.json"
    expect 0 "" "$bin" report "$tmp/full.json" ;;
  # cases.every_case is held to the receipt's own fields (cases.default beside it): an every_case
  # edited to false no longer lets a gate at total 0 pass in a run of every case (session 62's
  # gap), and one edited to true in a short run is refused too.
  every-case-consistent)
    edit() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(r, open(sys.argv[2],'w'))" "$@"; }
    "$bin" fp8-rows --backend cpu --quiet --out "$tmp/full.json" >/dev/null 2>&1 || fail "setup: a default fp8-rows run"
    "$bin" fp8-rows --backend cpu --quiet --cases 2 --out "$tmp/short.json" >/dev/null 2>&1 || fail "setup: fp8-rows --cases 2"
    grep -q '"default": ' "$tmp/full.json" || fail "the receipt has no cases.default"
    grep -q '"every_case": false' "$tmp/short.json" || fail "a --cases 2 run's receipt does not say every_case false"
    expect 0 "" "$bin" report "$tmp/short.json"
    edit "$tmp/full.json" "$tmp/e1.json" "g=r['gates'][3]; g.update(passed=0,total=0,status='not run'); g.pop('worst',None); r['cases']['every_case']=False"
    expect 2 "cases.every_case: false contradicts the receipt's selection" "$bin" report "$tmp/e1.json"
    edit "$tmp/short.json" "$tmp/e2.json" "r['cases']['every_case']=True"
    expect 2 "cases.every_case: true contradicts the receipt's selection" "$bin" report "$tmp/e2.json"
    edit "$tmp/full.json" "$tmp/e3.json" "del r['cases']['every_case']"
    expect 2 "cases.every_case: missing beside cases.default" "$bin" report "$tmp/e3.json"
    edit "$tmp/full.json" "$tmp/e4.json" "r['cases']['default']=0"
    expect 2 "cases.default: expected at least 1" "$bin" report "$tmp/e4.json" ;;
  # A SIGTERM or SIGHUP inside a run's final write (its renames held open by the slow_rename shim,
  # $4) is held off until the receipt and its junit are whole: the run then ends by the signal,
  # and no temp file is left (session 62's gap: *.tmp.<pid> files and no receipt).
  write-signal-held)
    export ASAN_OPTIONS=verify_asan_link_order=0
    for sig in 15 1; do
      d="$tmp/s$sig"; mkdir -p "$d"; rm -f "$tmp/mark"
      LD_PRELOAD=$mutant KC_SLOW_RENAME=fixed:1500 KC_SLOW_RENAME_MARK="$tmp/mark" \
        "$bin" fp8-rows --backend cpu --quiet --cases 2 --out "$d/r.json" --junit "$d/j.xml" > "$d.out" 2>&1 &
      pid=$!
      wait_for_mark
      [ -e "$tmp/mark" ] || { kill -9 $pid; fail "signal $sig: the run never reached its final write: $(cat "$d.out")"; }
      kill -$sig $pid
      wait $pid; rc=$?
      [ "$rc" -eq $((128 + sig)) ] || fail "signal $sig: exit $rc, expected $((128 + sig)) (ended by the signal): $(cat "$d.out")"
      left=$(ls -A "$d" | grep '\.tmp\.' || true)
      [ -z "$left" ] || fail "signal $sig: temp files left: $left"
      [ -f "$d/r.json" ] && [ -f "$d/j.xml" ] || fail "signal $sig: the pair was not written: $(ls -A "$d" | tr '\n' ' ')"
      expect 0 "" "$bin" report "$d/r.json"
    done ;;
  # make-model and make-draft stopped by SIGTERM or SIGINT while they write (the config's rename
  # held open by the shim, $4): the run ends by the signal and the folder it made is gone, where
  # it was left locked with temp files. An --out that existed, empty, stays, empty.
  make-out-signal)
    export ASAN_OPTIONS=verify_asan_link_order=0
    "$bin" make-model --preset tiny --out "$tmp/m" >/dev/null 2>&1 || fail "setup"
    mkdir "$tmp/empty"
    for run in "15 make-model --preset tiny --out $tmp/new/a" "2 make-draft --from $tmp/m --layers 1 --out $tmp/new/b" \
               "15 make-model --preset tiny --out $tmp/empty"; do
      set -- $run; sig=$1; shift; rm -f "$tmp/mark"
      # SIGINT back at its default (a background job of sh starts with it ignored).
      LD_PRELOAD=$mutant KC_SLOW_RENAME=fixed:1500 KC_SLOW_RENAME_MARK="$tmp/mark" python3 -c \
        'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
        "$bin" "$@" > "$tmp/out" 2>&1 &
      pid=$!
      wait_for_mark
      [ -e "$tmp/mark" ] || { kill -9 $pid; fail "$1: never reached its write: $(cat "$tmp/out")"; }
      kill -$sig $pid
      wait $pid; rc=$?
      [ "$rc" -eq $((128 + sig)) ] || fail "$1 signal $sig: exit $rc, expected $((128 + sig)): $(cat "$tmp/out")"
    done
    [ ! -e "$tmp/new" ] || fail "the interrupted runs left: $(find "$tmp/new" | tr '\n' ' ')"
    # A SIGTERM after the last tensor (during model.safetensors' rename, the second held rename)
    # undoes the folder too: it ended the run with a whole checkpoint in place.
    rm -f "$tmp/mark"
    LD_PRELOAD=$mutant KC_SLOW_RENAME=fixed:1500 KC_SLOW_RENAME_MARK="$tmp/mark" \
      "$bin" make-model --preset tiny --out "$tmp/late/a" > "$tmp/out" 2>&1 &
    pid=$!
    wait_for_mark
    sleep 2.2
    kill -15 $pid
    wait $pid; rc=$?
    [ "$rc" -eq 143 ] || fail "a SIGTERM in the last rename: exit $rc: $(cat "$tmp/out")"
    [ ! -e "$tmp/late" ] || fail "a SIGTERM in the last rename left: $(find "$tmp/late" | tr '\n' ' ')"
    # A SIGINT the run was started to ignore (sh's background job) stays ignored: the run completes.
    rm -f "$tmp/mark"
    LD_PRELOAD=$mutant KC_SLOW_RENAME=fixed:1500 KC_SLOW_RENAME_MARK="$tmp/mark" \
      "$bin" make-model --preset tiny --out "$tmp/ign" > "$tmp/out" 2>&1 &
    pid=$!
    wait_for_mark
    kill -2 $pid
    wait $pid; rc=$?
    [ "$rc" -eq 0 ] && [ -f "$tmp/ign/model.safetensors" ] || fail "an ignored SIGINT stopped make-model: exit $rc: $(cat "$tmp/out")"
    [ -d "$tmp/empty" ] && [ -z "$(ls -A "$tmp/empty")" ] || fail "the existing empty --out holds: $(ls -A "$tmp/empty")"
    expect 0 "" "$bin" make-model --preset tiny --out "$tmp/empty" ;;
  # A run that looks at a missing --out, then waits (the shim, $4) while another make-draft claims,
  # writes and releases it, then takes the lock: it is refused and removes only its lock, never
  # the other run's checkpoint (its cleanup removed config.json and model.safetensors).
  make-out-late-lock)
    export ASAN_OPTIONS=verify_asan_link_order=0
    "$bin" make-model --preset tiny --out "$tmp/m" >/dev/null 2>&1 || fail "setup"
    LD_PRELOAD=$mutant KC_SLOW_LOCK=2000 "$bin" make-draft --from "$tmp/m" --layers 1 --out "$tmp/new/d" > "$tmp/late" 2>&1 &
    pid=$!
    sleep 0.5
    expect 0 "" "$bin" make-draft --from "$tmp/m" --layers 1 --out "$tmp/new/d"
    wait $pid; rc=$?
    [ "$rc" -eq 2 ] || fail "the late run exited $rc: $(cat "$tmp/late")"
    grep -q "exists and is not empty" "$tmp/late" || fail "the late run's reason: $(cat "$tmp/late")"
    [ "$(ls -A "$tmp/new/d" | sort | tr '\n' ' ')" = "config.json model.safetensors " ] || fail "the folder holds: $(ls -A "$tmp/new/d")"
    expect 0 "" "$bin" generate --model "$tmp/new/d" --prompt hi --max-tokens 2 --backend cpu ;;
  # A run waiting for another run's folder lock ends on SIGTERM at once, writing nothing (it waited
  # until the other run let go: 18 s, or for ever behind a stopped run).
  write-lock-wait-signal)
    export ASAN_OPTIONS=verify_asan_link_order=0
    mkdir "$tmp/d"
    LD_PRELOAD=$mutant KC_SLOW_RENAME=fixed:20000 KC_SLOW_RENAME_MARK="$tmp/mark" \
      "$bin" fp8-rows --backend cpu --quiet --cases 2 --out "$tmp/d/a.json" > /dev/null 2>&1 &
    pa=$!
    wait_for_mark
    [ -e "$tmp/mark" ] || { kill -9 $pa; fail "the first run never reached its write"; }
    "$bin" fp8-rows --backend cpu --quiet --cases 2 --out "$tmp/d/b.json" > "$tmp/b.out" 2>&1 &
    pb=$!
    sleep 2
    t0=$(date +%s)
    kill -15 $pb
    wait $pb; rc=$?
    t1=$(date +%s)
    kill -9 $pa 2>/dev/null; wait $pa 2>/dev/null
    [ "$rc" -eq 143 ] || fail "the waiting run exited $rc: $(cat "$tmp/b.out")"
    [ $((t1 - t0)) -le 3 ] || fail "the waiting run took $((t1 - t0)) s to end on SIGTERM"
    [ ! -e "$tmp/d/b.json" ] || fail "the interrupted run wrote its receipt"
    left=$(ls -A "$tmp/d" | grep 'b\.json\.tmp' || true)
    [ -z "$left" ] || fail "temp files left: $left" ;;
  # Two runs writing one --out and one --junit at once (renames slowed by random amounts, $4):
  # the pair left is one run's (session 62's gap: renamed one at a time, it could be two runs').
  write-pair-one-run)
    export ASAN_OPTIONS=verify_asan_link_order=0
    for t in 1 2 3 4 5 6 7 8 9 10 11 12; do
      for seed in 11 22; do
        LD_PRELOAD=$mutant KC_SLOW_RENAME=random:300 \
          "$bin" fp8-rows --backend cpu --quiet --cases 2 --seed $seed --out "$tmp/r.json" --junit "$tmp/j.xml" > /dev/null 2>&1 &
      done
      wait
      seed=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['seed'])" "$tmp/r.json") || fail "try $t: no receipt"
      grep -q -- "--seed $seed " "$tmp/j.xml" || fail "try $t: the receipt is seed $seed's run, the junit the other's"
      left=$(ls -A "$tmp" | grep '\.tmp\.' || true)
      [ -z "$left" ] || fail "try $t: temp files left: $left"
    done ;;
  # Shards that hold refusal probes alone ran cases (shards 6 and 7 of fp8-rows --cases 5 failed
  # on correct code, "holds none of the 5 cases"); a selected probe another shard runs counts among
  # cases.other_shards (run + other_shards = matched); and the merge of either set of shards is the
  # unsharded run's counts (session 63's audit).
  shard-probes-alone)
    for i in 1 2 3 4 5 6 7; do
      expect 0 "" "$bin" fp8-rows --backend cpu --quiet --cases 5 --shard $i/7 --out "$tmp/x$i.json"
    done
    expect 0 "" "$bin" report --merge-out "$tmp/m7" "$tmp"/x?.json
    "$bin" fp8-rows --backend cpu --quiet --cases 5 --out "$tmp/u.json" >/dev/null 2>&1 || fail "the unsharded run failed"
    for i in 1 2 3; do
      expect 0 "" "$bin" fp8-rows --backend cpu --quiet --filter 'ptok=1,|arg=n,' --shard $i/3 --out "$tmp/f$i.json"
    done
    expect 0 "" "$bin" report --merge-out "$tmp/m3" "$tmp/f1.json" "$tmp/f2.json" "$tmp/f3.json"
    "$bin" fp8-rows --backend cpu --quiet --filter 'ptok=1,|arg=n,' --out "$tmp/uf.json" >/dev/null 2>&1 || fail "the filtered run failed"
    python3 - "$tmp" <<'PY' || fail "counts"
import json, sys
t = sys.argv[1]
c = lambda f: json.load(open(t + "/" + f))["cases"]
strip = lambda d: {k: v for k, v in d.items() if k != "merged_shards"}
if strip(c("m7/fp8-rows.json")) != c("u.json"): sys.exit("7 shards merged: %s, unsharded: %s" % (c("m7/fp8-rows.json"), c("u.json")))
if strip(c("m3/fp8-rows.json")) != c("uf.json"): sys.exit("3 filtered shards merged: %s, unsharded: %s" % (c("m3/fp8-rows.json"), c("uf.json")))
for i in (1, 2, 3):
    s = c("f%d.json" % i)
    if s["run"] + s["other_shards"] != s["matched"]: sys.exit("shard %d: run %d + other_shards %d != matched %d" % (i, s["run"], s["other_shards"], s["matched"]))
PY
    ;;
  # Checking that an output does not name an input writes nothing into the input's folder
  # (session 63's audit: same_output made and removed a .kc-write-probe-* file in the fixture's and
  # the model's folders, changing their modification times).
  inputs-not-written)
    mkdir -p "$tmp/in" "$tmp/o"
    cp -r "$src/fixtures/models/stdlib-bytes-3m" "$src/fixtures/models/stdlib-bytes-3m-draft1" "$tmp/in/"
    serve_fixture "$tmp/in/s.json" "$SMALL; f.pop('golden', None); f['model'] = '$tmp/in/stdlib-bytes-3m'; f['draft']['model'] = '$tmp/in/stdlib-bytes-3m-draft1'"
    touch -d '2020-01-01 00:00:00' "$tmp/in" "$tmp/in/stdlib-bytes-3m" "$tmp/in/stdlib-bytes-3m-draft1"
    expect 0 "" "$bin" serve-gate "$tmp/in/s.json" --backend cpu --quiet --out "$tmp/o/r.json" --junit "$tmp/o/j.xml"
    for d in "$tmp/in" "$tmp/in/stdlib-bytes-3m" "$tmp/in/stdlib-bytes-3m-draft1"; do
      [ "$(date -r "$d" +%Y)" = 2020 ] || fail "$d was written to (modified $(date -r "$d"))"
    done ;;
  # Session 63's audit of the outputs: a merged receipt's command is the unsharded run's (it was
  # shard 1's, --shard 1/2 and all); "... N more" counts the gate's failed checks, not the 8 lines
  # the receipt keeps; export removes only the case files it writes (case007 is not one).
  views-audit-s63)
    for i in 1 2; do "$bin" fp8-rows --backend cpu --quiet --cases 6 --shard $i/2 --out "$tmp/s$i.json" >/dev/null 2>&1; done
    expect 0 "" "$bin" report --merge-out "$tmp/m" --junit "$tmp/m.xml" "$tmp/s1.json" "$tmp/s2.json"
    if grep -q -- "--shard" "$tmp/m/fp8-rows.json" "$tmp/m.xml"; then fail "the merged receipt's command keeps --shard"; fi
    out=$("$bin" report "$tmp/m/fp8-rows.json" 2>&1)
    case "$out" in *"| command |"*"fp8-rows --backend cpu --quiet --cases 6 --out"*) ;; *) fail "report's command line: $out" ;; esac
    "$bin" fp8-rows --backend cpu --quiet --cases 12 --out "$tmp/r.json" >/dev/null 2>&1 || fail "setup"
    python3 - "$tmp/r.json" "$tmp/f.json" <<'PY' || fail "setup: the edit"
import json, sys
r = json.load(open(sys.argv[1]))
g = next(g for g in r["gates"] if g["name"] == "codes==reference")
n = g["passed"]
g.update(passed=0, failed=n, ok=False, status="FAIL", failures=["case %d: code 3 != 4" % i for i in range(8)])
g.pop("worst", None)
r.update(verdict="fail", verdict_reasons=["gate codes==reference failed %d of %d checks" % (n, n)], replay=["tf-cuda-test fp8-rows --backend cpu --cases 12"])
json.dump(r, open(sys.argv[2], "w"))
PY
    expect 1 "... 7 more failed checks" "$bin" report "$tmp/f.json"
    # A full shard beside a --gates-only shard merges into a failed run, in either order (shard 1's
    # controls_skipped alone was kept: one order refused the merge as self-contradicting).
    # (the default case count: a run of every case, whose every_case the skipped controls decide)
    for i in 1 2; do
      "$bin" fp8-rows --backend cpu --quiet --shard $i/2 --out "$tmp/d$i.json" >/dev/null 2>&1
      "$bin" fp8-rows --backend cpu --quiet --gates-only --shard $i/2 --out "$tmp/g$i.json" >/dev/null 2>&1
    done
    expect 1 "controls skipped" "$bin" report "$tmp/d1.json" "$tmp/g2.json"
    expect 1 "controls skipped" "$bin" report "$tmp/g1.json" "$tmp/d2.json"
    # The merge's controls_skipped is the unsharded run's: the controls, every shard's same ones,
    # not the shards' sum (26 for fp8-rows' 13); a full shard beside a --gates-only one skipped
    # them all too. And --shard=i/n leaves the merged command as --shard i/n does (session 64's
    # mutation round: the last shard's count, and the --shard=i/n word kept, went unnoticed).
    "$bin" fp8-rows --backend cpu --quiet --gates-only --out "$tmp/gu.json" >/dev/null 2>&1
    expect 1 "controls skipped" "$bin" report --merge-out "$tmp/mg" "$tmp/g1.json" "$tmp/g2.json"
    expect 1 "controls skipped" "$bin" report --merge-out "$tmp/mh" "$tmp/d1.json" "$tmp/g2.json"
    expect 1 "controls skipped" "$bin" report --merge-out "$tmp/mi" "$tmp/g1.json" "$tmp/d2.json"
    python3 -c "import json,sys; n=[json.load(open(f)).get('controls_skipped') for f in sys.argv[1:]]; sys.exit(0 if n[0] and n[0] >= 1 and n[1:] == [n[0]] * 5 else 'controls_skipped: unsharded %s, shards %s and %s merged into %s, full + gates-only into %s and %s' % tuple(n))" \
      "$tmp/gu.json" "$tmp/g1.json" "$tmp/g2.json" "$tmp/mg/fp8-rows.json" "$tmp/mh/fp8-rows.json" "$tmp/mi/fp8-rows.json" || fail "the merged controls_skipped"
    for i in 1 2; do "$bin" fp8-rows --backend cpu --quiet --cases 6 --shard=$i/2 --out "$tmp/e$i.json" >/dev/null 2>&1; done
    expect 0 "" "$bin" report --merge-out "$tmp/me" "$tmp/e1.json" "$tmp/e2.json"
    if grep -q -- "--shard" "$tmp/me/fp8-rows.json"; then fail "the merged receipt's command keeps --shard=i/n"; fi
    mkdir "$tmp/ex"; touch "$tmp/ex/case007.safetensors" "$tmp/ex/case9.safetensors"
    expect 0 "" "$bin" export qwen-pages --backend cpu --cases 2 --out "$tmp/ex"
    [ -f "$tmp/ex/case007.safetensors" ] || fail "export removed case007.safetensors, a file it never writes"
    [ ! -e "$tmp/ex/case9.safetensors" ] || fail "export left the previous export's case9.safetensors" ;;
  # kv-gate (session 63's audit): the checkpoint hash, the bf16 cache's key, covers a shard the
  # index names whatever its file name (weights in shard.bin were read and never hashed, so a
  # changed model reused its stale bf16 arm); a recall probe is beyond the training context only
  # when a row it scores is (depth 513 of a 512-position context was marked).
  kv-audit-s63)
    python3 - "$src" "$tmp" <<'PY' || fail "setup"
import json, os, shutil, struct, sys
src, t = sys.argv[1:3]
m = src + "/fixtures/models/stdlib-bytes-3m"
b = open(m + "/model.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
for d, scale in (("a", 1.0), ("b", 1.15)):
    os.makedirs(t + "/" + d); shutil.copy(m + "/config.json", t + "/" + d); shutil.copy(m + "/fixture.json", t + "/" + d)
    json.dump({"weight_map": {k: "shard.bin" for k in h if k != "__metadata__"}}, open(t + "/" + d + "/model.safetensors.index.json", "w"))
    bb = bytearray(b); s, e = h["model.norm.weight"]["data_offsets"]
    for i in range(8 + n + s, 8 + n + e, 2):
        f = struct.unpack("<f", struct.pack("<I", struct.unpack("<H", bb[i:i + 2])[0] << 16))[0] * scale
        bb[i:i + 2] = struct.pack("<f", f)[2:4]
    open(t + "/" + d + "/shard.bin", "wb").write(bb)
k = json.load(open(src + "/fixtures/kv/ci.json")); k.pop("$schema", None)
k["model"] = m; k["tokens"]["file"] = src + "/fixtures/text/stdlib-heldout-3.11.7.txt"
k["recall"] = [{"name": "ind", "passphrase": "token", "plant": "\nzqxw_token = 1\n", "ask": "\nprint(zqxw_", "depths": [512, 513, 514]}]
json.dump(k, open(t + "/kv.json", "w"))
PY
    expect 0 "" "$bin" generate --model "$tmp/a" --prompt hi --max-tokens 2 --backend cpu --out "$tmp/ga.json"
    expect 0 "" "$bin" generate --model "$tmp/b" --prompt hi --max-tokens 2 --backend cpu --out "$tmp/gb.json"
    python3 -c "import json,sys; a,b=(json.load(open(x))['generate']['checkpoint_sha256'] for x in sys.argv[1:]); sys.exit('one hash for two weights: ' + a if a == b else 0)" \
      "$tmp/ga.json" "$tmp/gb.json" || fail "the shard's bytes are not in the checkpoint hash"
    expect 0 "" "$bin" kv-gate "$tmp/kv.json" --format fp8 --backend cpu --quiet --bf16-cache "$tmp/c" --out "$tmp/k.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); f=[(x['depth'], x['beyond_training']) for x in r['kv']['recall']]; sys.exit(0 if f == [(512, False), (513, False), (514, True)] else 'beyond_training: %s' % f)" \
      "$tmp/k.json" || fail "the probes' beyond_training" ;;
  # diff (session 63's audit): checks turned into skips at the same total, a failing gate turned
  # off (FAIL -> skipped on the same device), and a target the base did not measure that the head
  # misses are regressions; each read as no change or as a fix before.
  diff-audit-s63)
    "$bin" q4-rows --backend cpu --quiet --cases 4 --out "$tmp/b.json" >/dev/null 2>&1 || fail "setup: q4-rows"
    python3 - "$tmp" "$src/reports/h200/bench-compact.json" <<'PY' || fail "setup: edits"
import json, sys
t, src = sys.argv[1:3]
def gate(r): return next(g for g in r["gates"] if g["name"] == "qk-bound")
r = json.load(open(t + "/b.json")); gate(r).update(passed=2, skipped=6, skip_reason="every row has a poisoned group")
json.dump(r, open(t + "/h_skips.json", "w"))
b = json.load(open(t + "/b.json"))
gate(b).update(passed=7, failed=1, ok=False, status="FAIL", failures=["case x: error 2 > bound"])
b.update(verdict="fail", verdict_reasons=["gate qk-bound failed 1 of 8 checks"], replay=["tf-cuda-test q4-rows --backend cpu --cases 4"])
json.dump(b, open(t + "/b_fail.json", "w"))
h = json.load(open(t + "/b.json")); g = gate(h)
g.update(passed=0, skipped=8, status="skipped", skip_reason="every row has a poisoned group"); g.pop("worst", None)
json.dump(h, open(t + "/h_off.json", "w"))
h = json.load(open(t + "/b.json")); g = gate(h); g.update(passed=0, total=0, status="not run"); g.pop("worst", None)
json.dump(h, open(t + "/h_notrun.json", "w"))
b = json.load(open(src)); del b["targets"][0]; json.dump(b, open(t + "/bn.json", "w"))
p = json.load(open(src.replace("bench-compact", "bench-pack"))); p["rows"][0]["note"] = "timed with the fallback kernel"
json.dump(p, open(t + "/pn.json", "w"))
b = json.load(open(src)); b["targets"][0].update(measured=False, met=False); json.dump(b, open(t + "/bb.json", "w"))
h = json.load(open(src)); h["targets"][0].update(value=0.5, met=False); h["verdict_reasons"].append("x")
json.dump(h, open(t + "/bh.json", "w"))
PY
    expect 1 "gate qk-bound checks fewer: passed 8/8 -> 2/8" "$bin" diff "$tmp/b.json" "$tmp/h_skips.json"
    expect 1 "gate qk-bound FAIL -> skipped on the same backend and device: the failing check no longer runs" \
      "$bin" diff "$tmp/b_fail.json" "$tmp/h_off.json"
    expect 1 "target 64MiB/bf16/p16: achieved / ceiling: not measured -> NOT met" "$bin" diff "$tmp/bb.json" "$tmp/bh.json"
    # Session 64's mutation round, each rule dropped and no case noticed: a failing gate that does
    # not run in the head's full run, and a target new in the head and missed, are regressions; a
    # row's note is free text, not part of its name (the row read as removed and another added);
    # report lists a gate's failures without "... 0 more" when it lists them all.
    expect 1 "gate qk-bound FAIL -> not run in the head's full run: the failing check no longer runs" \
      "$bin" diff "$tmp/b_fail.json" "$tmp/h_notrun.json"
    expect 1 "target 64MiB/bf16/p16: achieved / ceiling: new -> NOT met" "$bin" diff "$tmp/bn.json" "$tmp/bh.json"
    n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['rows']))" "$tmp/pn.json")
    expect 0 "Rows: 0 faster, 0 slower (beyond 3 %), $n within 3 %, 0 in one receipt only" \
      "$bin" diff "$src/reports/h200/bench-pack.json" "$tmp/pn.json"
    expect 1 "- case x: error 2 > bound" "$bin" report "$tmp/b_fail.json"
    case "$out" in *"more failed checks"*) fail "report says more failed checks than it lists: $out";; esac
    expect 0 "" "$bin" diff "$tmp/b.json" "$tmp/b.json" ;;
  # report --merge-out: a shard receipt whose argv has no --shard says no shard (the relabelled
  # copy of shard 1 with --shard taken out of its argv merged and passed).
  merge-shard-argv-missing)
    "$bin" fp8-rows --backend cpu --quiet --cases 6 --shard 1/2 --out "$tmp/s1.json" >/dev/null 2>&1 || fail "setup"
    python3 -c "
import json,sys
r=json.load(open(sys.argv[1])); i=r['argv'].index('--shard'); del r['argv'][i:i+2]; r['cases']['shard']='2/2'
json.dump(r, open(sys.argv[2],'w'))" "$tmp/s1.json" "$tmp/fake2.json"
    expect 2 "cases.shard 2/2 but its command (argv) has no --shard" "$bin" report --merge-out "$tmp/m" "$tmp/s1.json" "$tmp/fake2.json"
    [ ! -e "$tmp/m" ] || fail "the refused merge wrote $tmp/m" ;;
  # --junit that cannot be written (a full disk) leaves the receipt it goes with unwritten, and an
  # earlier receipt at --out as it was: one write for both (contract, report --merge-out, serve-gate).
  junit-full-disk-receipt-kept)
    mkdir -p "$tmp/small"
    mount -t tmpfs -o size=128k tmpfs "$tmp/small" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$tmp/small" 2>/dev/null; rm -rf "$tmp"' EXIT
    # room R: fill the tmpfs until R bytes (rounded up to its 4 KiB pages) stay free.
    room() {
      rm -f "$tmp/small/fill"
      want=$(( ($1 + 4095) / 4096 * 4096 )); free=$(df -B1 --output=avail "$tmp/small" | tail -1)
      dd if=/dev/zero of="$tmp/small/fill" bs=4096 count=$(( (free - want) / 4096 )) 2>/dev/null
      [ "$(df -B1 --output=avail "$tmp/small" | tail -1)" -eq "$want" ] || { echo "skipped: cannot leave $want bytes free"; exit 77; }
    }
    "$bin" fp8-rows --backend cpu --cases 3 --quiet --out "$tmp/x.json" --junit "$tmp/x.xml" >/dev/null 2>&1 || fail "setup"
    room "$(wc -c < "$tmp/x.json")"  # the receipt fits, the JUnit beside it does not
    expect 2 "write failed (No space left on device)" \
      "$bin" fp8-rows --backend cpu --cases 3 --quiet --out "$tmp/small/r.json" --junit "$tmp/small/j.xml"
    case "$out" in *"$tmp/small/j.xml: write failed"*) ;; *) fail "the JUnit's write is not the one that failed: $out";; esac
    [ "$(ls -A "$tmp/small")" = fill ] || fail "files left beside an exit 2: $(ls -A "$tmp/small")"
    # An earlier receipt stays as it was.
    echo '{"earlier": true}' > "$tmp/small/r.json"
    room "$(wc -c < "$tmp/x.json")"
    expect 2 "$tmp/small/j.xml: write failed (No space left on device)" \
      "$bin" fp8-rows --backend cpu --cases 3 --quiet --out "$tmp/small/r.json" --junit "$tmp/small/j.xml"
    [ "$(cat "$tmp/small/r.json")" = '{"earlier": true}' ] || fail "the earlier receipt was replaced although the run exits 2"
    [ "$(ls -A "$tmp/small" | sort | tr '\n' ' ')" = "fill r.json " ] || fail "files left: $(ls -A "$tmp/small")"
    "$bin" fp8-rows --backend cpu --quiet --cases 6 --shard 1/2 --out "$tmp/s1.json" >/dev/null 2>&1
    "$bin" fp8-rows --backend cpu --quiet --cases 6 --shard 2/2 --out "$tmp/s2.json" >/dev/null 2>&1
    "$bin" report --merge-out "$tmp/mm" "$tmp/s1.json" "$tmp/s2.json" >/dev/null 2>&1 || fail "setup: the merge"
    mkdir "$tmp/small/m" && echo '{"earlier": true}' > "$tmp/small/m/fp8-rows.json"
    room "$(wc -c < "$tmp/mm/fp8-rows.json")"
    expect 2 "$tmp/small/j.xml: write failed (No space left on device)" \
      "$bin" report --merge-out "$tmp/small/m" --junit "$tmp/small/j.xml" "$tmp/s1.json" "$tmp/s2.json"
    [ "$(cat "$tmp/small/m/fp8-rows.json")" = '{"earlier": true}' ] || fail "report replaced the earlier merged receipt although it exits 2"
    [ ! -e "$tmp/small/j.xml" ] || fail "report left a JUnit"
    # serve-gate: the same one write.
    serve_fixture "$tmp/s.json" "$SMALL; f.pop('golden', None)"
    "$bin" serve-gate "$tmp/s.json" --backend cpu --quiet --out "$tmp/sg.json" >/dev/null 2>&1 || fail "setup: serve-gate"
    room "$(wc -c < "$tmp/sg.json")"
    expect 2 "$tmp/small/j.xml: write failed (No space left on device)" \
      "$bin" serve-gate "$tmp/s.json" --backend cpu --quiet --out "$tmp/small/r.json" --junit "$tmp/small/j.xml"
    [ "$(cat "$tmp/small/r.json")" = '{"earlier": true}' ] || fail "serve-gate replaced the earlier receipt although it exits 2"
    [ ! -e "$tmp/small/j.xml" ] || fail "serve-gate left a JUnit" ;;
  # premerge --head naming the --base folder compares every receipt with itself.
  premerge-head-is-base)
    mkdir -p "$tmp/b" && cp "$src"/reports/cpu/*.json "$tmp/b/" && ln -s "$tmp/b" "$tmp/lnb"
    for h in "$tmp/b" "$tmp/b/" "$tmp/lnb"; do
      expect 2 "is the --base folder" "$bin" premerge --base "$tmp/b" --head "$h" --backend cpu --skip-gates --quiet --out-dir "$tmp/o"
    done
    [ ! -e "$tmp/o" ] || fail "premerge wrote $tmp/o before the refusal" ;;
  # Empty values and empty list items: --shard "" (an unset variable) ran every case on every
  # runner; premerge --contracts , took the next option as a contract.
  empty-shard-and-items)
    expect 2 "fp8-rows: --shard: empty value" "$bin" fp8-rows --backend cpu --cases 2 --quiet --shard ''
    expect 2 "kernel-contract: --shard: empty value" "$bin" kernel-contract --backend cpu --quiet --shard ''
    expect 2 "premerge --contracts ',': an empty item (expected A,B,...)" \
      "$bin" premerge --base "$src/reports/cpu" --backend cpu --skip-gates --quiet --contracts , --out-dir "$tmp/o"
    expect 2 "premerge --contracts 'q4-rows,': an empty item" \
      "$bin" premerge --base "$src/reports/cpu" --backend cpu --skip-gates --quiet --contracts q4-rows, --out-dir "$tmp/o"
    expect 2 "serve-memory --prompts '2,,3': an empty item (expected N,N,...)" "$bin" serve-memory --preset tiny --prompts 2,,3
    [ ! -e "$tmp/o" ] || fail "premerge wrote $tmp/o" ;;
  # What report, diff, premerge and JUnit print of valid receipts (session 62's audit): a target
  # value is never rounded onto its limit; Markdown shows a name's "<!--" instead of opening a
  # comment; a bench row that failed to run is that row failed, not a row removed; diff counts
  # rows, not times; a base receipt from before cases.every_case is not "other cases".
  views-s62)
    edit() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); exec(sys.argv[3]); json.dump(r, open(sys.argv[2],'w'))" "$@"; }
    edit "$h200/bench-compact.json" "$tmp/c.json" "
for t in r['targets']:
    if t['name'] == '64MiB/bf16/p16: achieved / ceiling': t['value'] = 0.850004
    if t['name'] == '64MiB/bf16/p256: achieved / ceiling': t['value'], t['met'] = 0.84996, False
r['verdict'] = 'fail'; r['verdict_reasons'] = (r.get('verdict_reasons') or []) + ['target 64MiB/bf16/p256 not met']"
    out=$("$bin" report "$tmp/c.json" --junit "$tmp/c.xml" 2>&1)
    case "$out" in *"| 64MiB/bf16/p16: achieved / ceiling | 0.850004 | >= 0.85 | met |"*) ;; *) fail "a met target printed at its limit: $out";; esac
    case "$out" in *"| 64MiB/bf16/p256: achieved / ceiling | 0.84996 | >= 0.85 | NOT met |"*) ;; *) fail "a missed target printed at its limit: $out";; esac
    grep -q 'wanted 0.84996 &gt;= 0.85' "$tmp/c.xml" || fail "JUnit rounds the target onto its limit: $(grep -o 'wanted[^"]*' "$tmp/c.xml" | head -3)"
    edit "$h200/serve-ci.json" "$tmp/s.json" "r['name'] = 'ci <!-- x'"
    out=$("$bin" report "$tmp/s.json" 2>&1)
    case "$out" in *"<!--"*) fail "report's Markdown opens a comment: $out";; esac
    case "$out" in *"ci &lt;!-- x"*) ;; *) fail "the name is not shown: $out";; esac
    out=$("$bin" diff "$tmp/s.json" "$tmp/s.json" 2>&1)
    case "$out" in *"<!--"*) fail "diff's Markdown opens a comment: $out";; esac
    edit "$h200/bench-pack.json" "$tmp/p1.json" "
x = r['rows'][0]; r['rows'][0] = {'config': x['config'], 'format': x['format'], 'addressing': x['addressing'], 'error': 'CUDA error (unspecified launch failure)'}
r['verdict'] = 'fail'; r['verdict_reasons'] = ['row ' + r['rows'][0]['config'] + ': CUDA error (unspecified launch failure)']"
    out=$("$bin" diff "$h200/bench-pack.json" "$tmp/p1.json" 2>&1)
    case "$out" in *"row 16MiB/bf16/p16 bf16 p16 failed to run: CUDA error"*) ;; *) fail "a row that failed to run is not said so: $out";; esac
    case "$out" in *"removed"*) fail "a row that failed to run reads as removed: $out";; esac
    edit "$h200/bench-pack.json" "$tmp/p2.json" "x = r['rows'][0]; x['pack_us'] *= 1.2"
    out=$("$bin" diff "$h200/bench-pack.json" "$tmp/p2.json" 2>&1)
    n=$(python3 -c "import json; print(len(json.load(open('$h200/bench-pack.json'))['rows']))")
    case "$out" in *"Rows: 0 faster, 1 slower (beyond 3 %), $((n - 1)) within 3 %"*) ;; *) fail "diff counts times, not rows: $(echo "$out" | grep Rows:)";; esac
    "$bin" fp8-rows --backend cpu --quiet --seed 20261129 --out "$tmp/f.json" > /dev/null 2>&1 || fail "setup: fp8-rows"
    out=$("$bin" diff "$src/reports/cpu/fp8-rows.json" "$tmp/f.json" 2>&1)
    case "$out" in *"seeds or case counts differ"*) fail "the same seed and cases said to differ: $out";; esac ;;
  # A packer that leaves a field out (the pack-skip-scales mutant) writes a shorter blob: the
  # scale-planes contract fails its refusals by name, and its receipt's replay lines are intact
  # (the refusal edits once wrote past the blob and mangled them: "d=3\x05\x00...").
  mutant-short-blob)
    [ -x "$mutant" ] || { echo "mutant binary missing"; exit 1; }
    expect 1 "fewer than its header and the layout's" \
      "$mutant" scale-planes --backend cpu --cases 3 --gates-only --out "$tmp/r.json"
    python3 - "$tmp/r.json" <<'PY' || fail "a replay line holds a byte outside printable ASCII"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["replay"], "no replay line"
for line in r["replay"]:
    assert all(32 <= ord(ch) < 127 for ch in line), repr(line)
PY
    ;;
  # kernel-contract --out-dir over an earlier run's receipts: they go before the run starts, so a
  # run stopped part way (SIGTERM) leaves only its own (the earlier ones read as one passing run
  # with them, in report and premerge --head).
  kc-out-dir-stale)
    mkdir -p "$tmp/k" && cp "$src"/reports/cpu/*.json "$tmp/k/" && cp "$src/reports/cpu-serve/serve-ci.json" "$tmp/k/serve-gate.json" 2>/dev/null
    n=$(ls "$tmp/k" | wc -l)
    "$bin" kernel-contract --backend cpu --shard 3/3 --out-dir "$tmp/k" --quiet > "$tmp/out" 2> "$tmp/err" &
    pid=$!; sleep 3; kill -TERM $pid 2>/dev/null; wait $pid
    grep -q "removed $n receipts of an earlier run under the names this run writes" "$tmp/err" ||
      fail "the earlier receipts were not removed and named: $(cat "$tmp/err")"
    python3 - "$tmp/k" "$src/reports/cpu" "$src/reports/cpu-serve/serve-ci.json" <<'PY' || fail "an earlier run's receipt is still there"
import glob, json, sys
old = {json.load(open(f))["git"]["commit"] for f in glob.glob(sys.argv[2] + "/*.json") + [sys.argv[3]]}
left = [f for f in glob.glob(sys.argv[1] + "/*.json") if json.load(open(f))["git"]["commit"] in old]
print("\n".join(left)); sys.exit(1 if left else 0)
PY
    ;;
  # Text after a NUL byte was never read (nlohmann stops there as at the end): a receipt, a serve
  # fixture and a model's config.json with a NUL and garbage after it are refused, the offset named.
  json-nul-byte)
    cp "$h200/fp8-rows.json" "$tmp/r.json" && printf '\000 garbage {{{' >> "$tmp/r.json"
    n=$(( $(wc -c < "$h200/fp8-rows.json") ))
    expect 2 "$tmp/r.json: not JSON: a NUL byte at offset $n (JSON text holds none)" "$bin" report "$tmp/r.json"
    serve_fixture "$tmp/sg.json" "$SMALL; del f['golden']" || fail "could not write the serve fixture"
    printf '\000garbage' >> "$tmp/sg.json"
    expect 2 "a NUL byte at offset" "$bin" serve-gate "$tmp/sg.json" --out "$tmp/s.json"
    [ ! -e "$tmp/s.json" ] || fail "a receipt was written"
    cp -r "$src/fixtures/models/stdlib-bytes-3m" "$tmp/m" && printf '\000x' >> "$tmp/m/config.json"
    expect 2 "a NUL byte at offset" "$bin" generate --model "$tmp/m" --prompt hi --max-tokens 2 ;;
  # The receipt reader follows the schema, and a contract run's pass needs a control and a check.
  report-schema-rules)
    cpu_receipt fp8-rows || fail "setup"
    ed() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $1; json.dump(r, open(sys.argv[2],'w'))" "$tmp/fp8-rows.json" "$tmp/e.json"; }
    ed "r['backend']='tpu'"; expect 2 "backend: 'tpu' is not one of cpu, cuda" "$bin" report "$tmp/e.json"
    ed "r['cases']['shard']=2"; expect 2 "cases.shard: expected a string i/n" "$bin" report "$tmp/e.json"
    ed "r['controls']=[]"; expect 2 "'pass' with no control" "$bin" report "$tmp/e.json"
    ed "r['controls'][0]['errors']=['boom']"; expect 2 "true, but the control had errors" "$bin" report "$tmp/e.json"
    ed "r['gates'][0]['passed']=2**64-1"; expect 2 "count 18446744073709551615 out of range" "$bin" report "$tmp/e.json"
    # A gate with no failure whose worst ratio is above 1 contradicts itself (a check above 1 fails).
    ed "g=next(g for g in r['gates'] if 'worst' in g and isinstance(g['worst'].get('ratio'), float)); g['worst']['ratio']=57.0"
    expect 2 "57 contradicts failed = 0" "$bin" report "$tmp/e.json"
    ed "r['verdict_reasons']=['gate x failed']"; expect 2 "'pass' with 1 reasons to fail" "$bin" report "$tmp/e.json"
    ed "r['timings']['total_s']=-1"; expect 2 "timings.total_s: a time below 0" "$bin" report "$tmp/e.json"
    python3 -c "import sys; n=100000; open(sys.argv[1],'w').write('{\"numbers\": '+'{\"a\":'*n+'1'+'}'*n+'}')" "$tmp/deep.json"
    expect 2 "nested deeper than 256 levels" "$bin" report "$tmp/deep.json"
    python3 -c "
import json, sys; r = json.load(open(sys.argv[1])); d = dict(r['kv']['depths'][0]); r['kv']['depths'].append(d)
json.dump(r, open(sys.argv[2], 'w'))" "$h200/kv-gate-long-fp8.json" "$tmp/kvdup.json"
    expect 2 "appears twice" "$bin" report "$tmp/kvdup.json"
    python3 -c "
import json, sys; r = json.load(open(sys.argv[1])); p = next(p for p in r['kv']['recall'] if p['outcome'] == 'lost'); p['outcome'] = 'recalled'
json.dump(r, open(sys.argv[2], 'w'))" "$h200/kv-gate-long-q4.json" "$tmp/kvout.json"
    expect 2 "'recalled' contradicts bf16.recalled true and quant.recalled false" "$bin" report "$tmp/kvout.json"
    # A gate receipt's own fields (serve-gate's arms, arm_fields; both gates' fixture, sha256 and
    # model): refused by report and diff alike, the file and the field named.
    ged() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2; json.dump(r, open(sys.argv[2],'w'))" "$1" "$tmp/g.json"; }
    ged "$h200/serve-ci.json" "r['arms']='x'"; expect 2 "$tmp/g.json: arms: expected an array, got a string" "$bin" report "$tmp/g.json"
    expect 2 "$tmp/g.json: arms: expected an array" "$bin" diff "$h200/serve-ci.json" "$tmp/g.json"
    ged "$h200/serve-ci.json" "r['arms'][0]['format']='fp7'"
    expect 2 "$tmp/g.json: arms[0].format: \"fp7\" is not one of bf16, fp8, q4, mxfp4 (receipt schema)" "$bin" diff "$h200/serve-ci.json" "$tmp/g.json"
    ged "$h200/serve-ci.json" "r['arms'][0]['decode_tok_s']='fast'"
    expect 2 "arms[0].decode_tok_s: expected a number, got a string" "$bin" report "$tmp/g.json"
    ged "$h200/serve-ci.json" "del r['fixture_sha256']"; expect 2 "$tmp/g.json: fixture_sha256: missing" "$bin" report "$tmp/g.json"
    ged "$h200/serve-ci.json" "r['arm_fields']=5"; expect 2 "arm_fields: expected an object, got a number" "$bin" report "$tmp/g.json"
    ged "$h200/kv-gate-fp8.json" "r['fixture']=1"; expect 2 "$tmp/g.json: fixture: expected a string, got a number" "$bin" report "$tmp/g.json" ;;
  # diff: the rules that judge a head by its own numbers (a looser limit or bar, a command that
  # cannot be read, a verification dropped, fewer checks of the same cases) and the same-device
  # rules on one device whatever its driver.
  diff-hardening)
    cpu_receipt fp8-rows || fail "setup"
    ed() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2; json.dump(r, open(sys.argv[3],'w'))" "$1" "$2" "$3"; }
    ed "$h200/bench-attention.json" "t=r['targets'][6]; t['limit']=0.9; t['met']=True; t=r['targets'][7]; t['limit']=0.9; t['met']=True; r['verdict']='pass'; r['verdict_reasons']=[]" "$tmp/t.json"
    expect 1 "limit loosened (<= 0.4 -> <= 0.9)" "$bin" diff "$h200/bench-attention.json" "$tmp/t.json"
    ed "$h200/bench-pack.json" "[x.pop('verified') for x in r['rows']]; [x.pop('verification', None) for x in r['rows']]" "$tmp/v.json"
    expect 1 "verified -> no verification recorded" "$bin" diff "$h200/bench-pack.json" "$tmp/v.json"
    ed "$h200/serve-ci-q4.json" "r['argv'][1]='serve_gate'" "$tmp/a.json"
    expect 1 "the head's command cannot be read" "$bin" diff "$h200/serve-ci-q4.json" "$tmp/a.json"
    ed "$h200/serve-ci.json" "g=next(g for g in r['gates'] if g['passed'] > 1); g.update(passed=1, total=1+g['skipped']); r['device']['driver']='driver 99999, runtime 13000'" "$tmp/s.json"
    expect 1 "checks fewer" "$bin" diff "$h200/serve-ci.json" "$tmp/s.json"
    ed "$tmp/fp8-rows.json" "g=next(g for g in r['gates'] if g['passed'] > 1); g.update(passed=1, total=1+g['skipped'])" "$tmp/c.json"
    expect 1 "checks fewer" "$bin" diff "$tmp/fp8-rows.json" "$tmp/c.json"
    ed "$tmp/fp8-rows.json" "r['device']['name']='another cpu'; g=next(g for g in r['gates'] if g['passed'] > 0 and g['failed'] == 0); g.update(passed=0, skipped=g['total'], status='skipped', skip_reason='x'); g.pop('worst', None)" "$tmp/k.json"
    expect 1 "ok -> skipped on the same backend and device" "$bin" diff "$tmp/fp8-rows.json" "$tmp/k.json"
    ed "$h200/kv-gate-long-fp8.json" "[d.update(rows=4) for d in r['kv']['depths']]" "$tmp/kr.json"
    expect 1 "scored rows 256 -> 4" "$bin" diff "$h200/kv-gate-long-fp8.json" "$tmp/kr.json"
    "$bin" serve-memory --preset tiny --out "$tmp/sm.json" >/dev/null 2>&1 || fail "serve-memory"
    ed "$tmp/sm.json" "g=next(g for g in r['gates'] if g['passed'] > 1); g.update(passed=1, total=1+g['skipped'])" "$tmp/sm1.json"
    expect 1 "checks fewer" "$bin" diff "$tmp/sm.json" "$tmp/sm1.json" ;;
  # A base merged from shards (report --merge-out, what premerge asks of a sharded base) counts each
  # check outside the cases once per shard: an unsharded head of the same seed and cases checks
  # no fewer (diff said "checks fewer", premerge failed; the note said the seeds or cases differ).
  diff-merged-base)
    for i in 1 2; do
      "$bin" fp8-rows --backend cpu --cases 3 --seed 7 --quiet --shard $i/2 --out "$tmp/s$i.json" >/dev/null 2>&1 ||
        fail "shard $i/2"
    done
    "$bin" fp8-rows --backend cpu --cases 3 --seed 7 --quiet --out "$tmp/whole.json" >/dev/null 2>&1 || fail "whole run"
    "$bin" report "$tmp/s1.json" "$tmp/s2.json" --merge-out "$tmp/base" >/dev/null 2>&1 || fail "merge"
    expect 0 "merged from 2 shard(s) -> 1" "$bin" diff "$tmp/base/fp8-rows.json" "$tmp/whole.json"
    case "$out" in *"seeds or case counts differ"*) fail "the same seed and cases said to differ: $out";; esac
    expect 0 "premerge: PASS" "$bin" premerge --base "$tmp/base" --backend cpu --contracts fp8-rows --quiet --out-dir "$tmp/pm"
    # A head of fewer checks than a base of as many shards is still a regression.
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); g=next(g for g in r['gates'] if g['passed'] > 1); g.update(passed=1, total=1+g['skipped']); json.dump(r, open(sys.argv[2],'w'))" \
      "$tmp/s1.json" "$tmp/s1c.json"
    "$bin" report "$tmp/s1c.json" "$tmp/s2.json" --merge-out "$tmp/head" >/dev/null 2>&1 || fail "merge of the head"
    expect 1 "checks fewer" "$bin" diff "$tmp/base/fp8-rows.json" "$tmp/head/fp8-rows.json" ;;
  # A merged receipt's numbers are the whole run's: the refusal probes, dealt to the shards, are
  # summed, and a number the shards disagree on is listed per shard only (shard 1's stood alone for
  # the run: fp8-rows' refusal_probes 17 of 34, q4-rows' worst unclipped ratio 0.34 of 0.59).
  merge-numbers)
    for c in fp8-rows:2 q4-rows:3; do
      name=${c%:*} n=${c#*:}
      i=1; while [ $i -le $n ]; do
        "$bin" $name --backend cpu --cases 5 --seed 7 --quiet --shard $i/$n --out "$tmp/$name/s$i.json" >/dev/null 2>&1 ||
          fail "$name shard $i/$n"
        i=$((i + 1))
      done
      "$bin" $name --backend cpu --cases 5 --seed 7 --quiet --out "$tmp/$name/whole.json" >/dev/null 2>&1 || fail "$name whole"
      "$bin" report "$tmp/$name"/s*.json --merge-out "$tmp/m" >/dev/null 2>&1 || fail "$name merge"
      python3 - "$tmp/m/$name.json" "$tmp/$name/whole.json" <<'PY' || fail "$name: the merged numbers are not the whole run's"
import json, sys
m, w = (json.load(open(f))["numbers"] for f in sys.argv[1:3])
bad = [(k, v, w.get(k)) for k, v in m.items() if k not in ("coverage", "per_shard") and v != w.get(k)]
print(bad) if bad else None
sys.exit(1 if bad else 0)
PY
    done
    grep -q '"per_shard"' "$tmp/m/q4-rows.json" || fail "q4-rows: no number listed per shard" ;;
  # The printed oracle command runs as printed: a folder with a space is quoted (it was not).
  export-path-quoted)
    expect 0 "python3 tools/oracle_torch.py '$tmp/e x'" "$bin" export qwen-pages --backend cpu --cases 1 --out "$tmp/e x" ;;
  # kernel-contract's outputs may not replace the serve fixture it reads: --junit naming it ran
  # every contract and wrote the XML over it; nor may --out-dir's serve-gate.json be the fixture.
  kc-out-names-fixture)
    mkdir "$tmp/fx"
    serve_fixture "$tmp/fx/ci.json" "$SMALL; del f['golden']" || fail "setup"
    cp "$tmp/fx/ci.json" "$tmp/ci.copy"
    expect 2 "--junit $tmp/fx/ci.json names the serve fixture $tmp/fx/ci.json" \
      "$bin" kernel-contract --backend cpu --quiet --serve-fixture "$tmp/fx/ci.json" --junit "$tmp/fx/ci.json" --out-dir "$tmp/k"
    cmp -s "$tmp/fx/ci.json" "$tmp/ci.copy" || fail "the fixture was replaced"
    [ ! -e "$tmp/k" ] || fail "receipts written before the outputs were refused: $(ls -A "$tmp/k")"
    cp "$tmp/fx/ci.json" "$tmp/fx/serve-gate.json"
    expect 2 "--out-dir $tmp/fx names the serve fixture $tmp/fx/serve-gate.json" \
      "$bin" kernel-contract --backend cpu --quiet --serve-fixture "$tmp/fx/serve-gate.json" --out-dir "$tmp/fx"
    cmp -s "$tmp/fx/serve-gate.json" "$tmp/ci.copy" || fail "the fixture was replaced by the receipt"
    [ ! -e "$tmp/fx/fp8-rows.json" ] || fail "receipts written before the outputs were refused" ;;
  # report --merge-out may not replace a receipt it reads: shard 1's <contract>.json, merged into
  # its own folder, was replaced by the merge.
  merge-out-names-input)
    for i in 1 2; do
      "$bin" fp8-rows --backend cpu --cases 2 --seed 7 --quiet --shard $i/2 --out "$tmp/s$i/fp8-rows.json" >/dev/null 2>&1 ||
        fail "shard $i/2"
    done
    cp "$tmp/s1/fp8-rows.json" "$tmp/s1.copy"
    expect 2 "--merge-out $tmp/s1 names the receipt $tmp/s1/fp8-rows.json" \
      "$bin" report "$tmp/s1/fp8-rows.json" "$tmp/s2/fp8-rows.json" --merge-out "$tmp/s1"
    cmp -s "$tmp/s1/fp8-rows.json" "$tmp/s1.copy" || fail "the shard's receipt was replaced" ;;
  # premerge writes the head's receipts to --out-dir's head/: a base that is that folder (the last
  # premerge's head/ as the next base, the default --out-dir) had its receipts replaced.
  premerge-base-is-head-out)
    mkdir -p "$tmp/pm/head" && cp "$src/reports/cpu/fp8-rows.json" "$tmp/pm/head/" && cp "$tmp/pm/head/fp8-rows.json" "$tmp/b.copy"
    expect 2 "--base $tmp/pm/head/ is --out-dir $tmp/pm's head/" \
      "$bin" premerge --base "$tmp/pm/head/" --out-dir "$tmp/pm" --backend cpu --contracts fp8-rows --quiet
    cmp -s "$tmp/pm/head/fp8-rows.json" "$tmp/b.copy" || fail "the base receipt was replaced"
    [ ! -e "$tmp/pm/premerge.md" ] || fail "premerge.md written before the refusal"
    mkdir -p "$tmp/premerge" && mv "$tmp/pm/head" "$tmp/premerge/"
    cd "$tmp" && expect 2 "--base premerge/head is --out-dir premerge's head/" \
      "$bin" premerge --base premerge/head --backend cpu --contracts fp8-rows --quiet
    cmp -s "$tmp/premerge/head/fp8-rows.json" "$tmp/b.copy" || fail "the base receipt was replaced (default --out-dir)" ;;
  # premerge --head reads one head: a *.json that is no regular file (a symlink loop aborted it,
  # exit 134) is listed as not compared; a receipt of another commit (the base's own, copied
  # in, read as PASS) or a bench of another backend is refused; a contract this build registers
  # but the folder lacks is a lost receipt (a regression), even with --allow-contract-changes.
  premerge-head-folder)
    for h in h1 h2 h3 h4; do mkdir -p "$tmp/$h" && cp "$src"/reports/cpu/*.json "$tmp/$h/"; done
    ln -s loop.json "$tmp/h1/loop.json"
    expect 0 "premerge: PASS" "$bin" premerge --base "$src/reports/cpu" --head "$tmp/h1" --backend cpu --out-dir "$tmp/o1" --quiet
    grep -q -F "head loop.json: not a regular file (Too many levels of symbolic links)" "$tmp/o1/premerge.md" ||
      fail "premerge.md does not list the loop: $(cat "$tmp/o1/premerge.md")"
    python3 -c "import json,sys; f=sys.argv[1]; r=json.load(open(f)); r['git']['commit']='0'*40; json.dump(r, open(f,'w'))" "$tmp/h2/q4-rows.json"
    expect 2 "commit mismatch inside the head: " "$bin" premerge --base "$src/reports/cpu" --head "$tmp/h2" --backend cpu --out-dir "$tmp/o2" --quiet
    case "$out" in *"$tmp/h2/q4-rows.json"*) ;; *) fail "the other commit's receipt is not named: $out";; esac
    [ ! -e "$tmp/o2/premerge.md" ] || fail "premerge.md written before the refusal"
    rm "$tmp/h3/q4-rows.json"
    expect 1 "the head folder $tmp/h3 has no receipt of it, but this build registers q4-rows (a lost receipt, not a removed contract)" \
      "$bin" premerge --base "$src/reports/cpu" --head "$tmp/h3" --backend cpu --allow-contract-changes --out-dir "$tmp/o3" --quiet
    # (its commit made the head's, so that the backend is what differs)
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['git']=json.load(open(sys.argv[2]))['git']; json.dump(r, open(sys.argv[3],'w'))" \
      "$h200/bench-attention.json" "$tmp/h4/fp8-rows.json" "$tmp/h4/bench-attention.json"
    expect 2 "backend mismatch inside the head: $tmp/h4/bench-attention.json ran on cuda, the head's contract receipts on cpu" \
      "$bin" premerge --base "$src/reports/cpu" --head "$tmp/h4" --backend cpu --out-dir "$tmp/o4" --quiet
    # One binary: two receipts of one commit written by two builds (build.id) are refused; receipts
    # that name no build (older ones) do not count against it.
    mkdir -p "$tmp/h5" && cp "$src"/reports/cpu/*.json "$tmp/h5/"
    for f in fp8-rows:aa q4-rows:bb; do
      python3 -c "import json,sys; f=sys.argv[1]; r=json.load(open(f)); r['build']={'id': sys.argv[2]*20}; json.dump(r, open(f,'w'))" \
        "$tmp/h5/${f%%:*}.json" "${f##*:}"
    done
    expect 2 "build mismatch inside the head: " "$bin" premerge --base "$src/reports/cpu" --head "$tmp/h5" --backend cpu --out-dir "$tmp/o5" --quiet
    for id in aa bb; do
      case "$out" in *"$(printf "$id%.0s" $(seq 20))"*) ;; *) fail "build id ${id}.. is not named: $out";; esac
    done
    [ ! -e "$tmp/o5/premerge.md" ] || fail "premerge.md written before the refusal"
    python3 -c "import json,sys; f=sys.argv[1]; r=json.load(open(f)); r['build']={'id': 'aa'*20}; json.dump(r, open(f,'w'))" "$tmp/h5/q4-rows.json"
    expect 0 "premerge: PASS" "$bin" premerge --base "$src/reports/cpu" --head "$tmp/h5" --backend cpu --out-dir "$tmp/o6" --quiet ;;
  # premerge --contracts: premerge.md lists the base's contract receipts it left out (a PASS said
  # nothing of them).
  premerge-contracts-listed)
    mkdir "$tmp/head" && cp "$src"/reports/cpu/*.json "$tmp/head/"
    expect 0 "premerge: PASS" "$bin" premerge --base "$src/reports/cpu" --head "$tmp/head" --backend cpu \
      --contracts fp8-rows --out-dir "$tmp/pm" --quiet
    grep -q -F "q4-rows.json: not among --contracts" "$tmp/pm/premerge.md" ||
      fail "premerge.md does not list q4-rows as not compared: $(cat "$tmp/pm/premerge.md")"
    if grep -q -F "fp8-rows.json: not among" "$tmp/pm/premerge.md"; then fail "fp8-rows listed as left out"; fi ;;
  # premerge runs the head with the base's case count: a count --cases cannot take is refused
  # (4294967297 ran as 1 case, and premerge passed).
  premerge-base-cases-range)
    mkdir "$tmp/b"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['cases']['requested']=4294967297; json.dump(r, open(sys.argv[2],'w'))" \
      "$src/reports/cpu/fp8-rows.json" "$tmp/b/fp8-rows.json"
    expect 2 "base $tmp/b/fp8-rows.json: cases.requested 4294967297: expected 1 to 2147483647" \
      "$bin" premerge --base "$tmp/b" --backend cpu --contracts fp8-rows --out-dir "$tmp/pm" --quiet
    [ ! -e "$tmp/pm" ] || fail "premerge wrote before refusing" ;;
  # 10. Bytes that are not UTF-8 on the command line reach the receipt as \xNN (the JSON writer
  # threw and the process aborted after the run).
  argv-not-utf8)
    f=$(printf '(\377\376)?')
    "$bin" fp8-rows --backend cpu --cases 1 --quiet --filter "$f" --out "$tmp/r.json" >"$tmp/log" 2>&1 ||
      fail "exit $? with a non-UTF-8 --filter: $(tail -3 "$tmp/log")"
    grep -q '"(\\\\xFF\\\\xFE)?"' "$tmp/r.json" || fail "argv not written as \\xFF\\xFE: $(grep -A8 argv "$tmp/r.json")"
    "$bin" report "$tmp/r.json" >/dev/null 2>&1 || fail "report refuses the receipt" ;;
  # 11. --junit and --out naming one file: refused before the run (the XML replaced the receipt).
  out-junit-same)
    expect 2 "name the same file" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/same.json" --junit "$tmp/same.json"
    expect 2 "name the same file" "$bin" fp8-rows --backend cpu --cases 1 --quiet --out "$tmp/same.json" --junit "$tmp/./same.json"
    expect 2 "name the same file" "$bin" kernel-contract --backend cpu --quiet --out-dir "$tmp/d" --junit "$tmp/d/q4-rows.json"
    [ ! -e "$tmp/same.json" ] && [ ! -e "$tmp/d" ] || fail "a refused run wrote or created something" ;;
  # 12. A refused command leaves no folder behind (the output checks created the missing ones).
  refused-no-folders)
    expect 2 "is a folder" "$bin" fp8-rows --backend cpu --cases 1 --quiet --junit "$tmp/nd2/deep/j.xml" --out "$tmp"
    [ ! -e "$tmp/nd2" ] || fail "the refused run left $tmp/nd2"
    if ! "$bin" list 2>/dev/null | grep -q .; then fail "list"; fi
    if nvidia-smi >/dev/null 2>&1; then exit 0; fi  # no refusal for a missing device on a GPU machine
    expect 2 "" "$bin" fp8-rows --backend cuda --quiet --out "$tmp/nd1/sub/x.json"
    expect 2 "" "$bin" kernel-contract --backend cuda --quiet --out-dir "$tmp/nd3/receipts"
    [ ! -e "$tmp/nd1" ] && [ ! -e "$tmp/nd3" ] || fail "a refused run left its --out / --out-dir folders" ;;
  # 13. diff: a gate that checked and now skips, on the same backend and device, is a regression.
  skipped-diff-same-device)
    cpu_receipt fp8-rows || fail "setup"
    python3 -c "
import json,sys
r=json.load(open(sys.argv[1])); g=r['gates'][0]
g.update(skipped=g['passed'], passed=0, status='skipped', skip_reason='planted for the test'); g.pop('worst', None)
json.dump(r, open(sys.argv[2],'w'))" "$tmp/fp8-rows.json" "$tmp/skip.json"
    expect 1 "ok -> skipped on the same backend and device: planted for the test" "$bin" diff "$tmp/fp8-rows.json" "$tmp/skip.json" ;;
  # 14. diff on bench rows: a verified row removed, or no longer verified, is a regression.
  diff-bench-rows)
    ed() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $1; json.dump(r, open(sys.argv[2],'w'))" "$h200/bench-rope-store.json" "$tmp/e.json"; }
    ed "r['rows'].pop(0)"; expect 1 "removed" "$bin" diff "$h200/bench-rope-store.json" "$tmp/e.json"
    # (an unverified row fails the bench, so the head's verdict says so whatever the receipt's own verdict is)
    ed "r['rows'][0]['verified']=False; r['verdict']='fail'; r['verdict_reasons']=['row %s not verified' % r['rows'][0]['config']]"
    expect 1 "verified -> not verified" "$bin" diff "$h200/bench-rope-store.json" "$tmp/e.json" ;;
  # 15. diff: a gate that fails already and fails more checks (a depth more) is a regression.
  diff-gate-fails-more)
    python3 -c "
import json,sys
r=json.load(open(sys.argv[1])); g=r['gates'][0]; g['failed']=g['failed']+1; g['total']=g['total']+1
json.dump(r, open(sys.argv[2],'w'))" "$h200/kv-gate-q4.json" "$tmp/more.json"
    expect 1 "fails more: 4 -> 5 failed checks" "$bin" diff "$h200/kv-gate-q4.json" "$tmp/more.json" ;;
  # 16. Receipts that contradict themselves are refused by every reader (exit 2).
  report-more-contradictions)
    ed() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $2; json.dump(r, open(sys.argv[3],'w'))" "$1" "$2" "$tmp/e.json"; }
    ed "$h200/kv-gate-fp8.json" "r['verdict']='pass'; r['verdict_reasons']=[]; [g.update(passed=g['passed']+g['failed'], failed=0, ok=True, status='ok') or g.pop('failures', None) for g in r['gates'] if g['failed'] > 0]; [g['worst'].update(ratio=0.5) for g in r['gates'] if isinstance(g.get('worst'), dict) and isinstance(g['worst'].get('ratio'), (int, float)) and g['worst']['ratio'] > 1]; r['kv']['depths'][0]['verdict']='fail'"
    expect 2 "'pass' contradicts kv.depths[0].verdict" "$bin" report "$tmp/e.json"
    ed "$h200/bench-pack.json" "r['verdict']='pass'; r['verdict_reasons']=[]; [t.update(met=True, value=max(t['value'], t['limit'] + 1) if t['at_least'] else t['value'], measured=True) for t in r['targets']]; r['rows'][0]['verified']=False"
    expect 2 "'pass' contradicts rows[0] (not verified)" "$bin" report "$tmp/e.json"
    ed "$h200/bench-rope-store.json" "r['targets'].append(dict(r['targets'][0]))"
    expect 2 "appears twice" "$bin" report "$tmp/e.json"
    ed "$h200/kv-gate-long-fp8.json" "d=[d for d in r['kv']['depths'] if d['verdict']=='pass'][0]; d['mean_kl']=5.0"
    expect 2 "].verdict: 'pass' contradicts mean_kl 5 > " "$bin" report "$tmp/e.json"
    ed "$h200/kv-gate-fp8.json" "r['kv']['depths'][0]['verdict']='maybe'"
    expect 2 "kv.depths[0].verdict: 'maybe' is not one of pass, fail" "$bin" report "$tmp/e.json"
    # a control caught by a gate the receipt does not have (the contract run's; sanitize's name tools)
    ed "$h200/fp8-rows.json" "r['controls'][0]['caught_by'] = ['no-such-gate']"
    expect 2 "controls[0].caught_by: 'no-such-gate' is not a gate of this receipt" "$bin" report "$tmp/e.json"
    expect 0 "" "$bin" report "$h200/sanitize.json"
    # started_at is a UTC time to the second, as every writer gives it
    ed "$h200/fp8-rows.json" "r['started_at'] = 'yesterday'"
    expect 2 "started_at" "$bin" report "$tmp/e.json" ;;
  # 19. diff: rows timed under two L2 rules (flush, warm) are not compared, and it says so.
  diff-bench-policies)
    python3 -c "
import json,sys
r=json.load(open(sys.argv[1])); r['l2_policy']='warm'
for row in r['rows']: row['median_us'] = row['median_us'] * 0.5
json.dump(r, open(sys.argv[2],'w'))" "$h200/bench-rope-store.json" "$tmp/warm.json"
    out=$("$bin" diff "$h200/bench-rope-store.json" "$tmp/warm.json" 2>&1)
    case "$out" in *"timed under different rules (l2_policy flush -> warm)"*"Rows: 0 faster, 0 slower"*) ;; *) fail "rows of two L2 rules compared: $out";; esac ;;
  # 17. The html report on extreme values: no crash (an empty tick list segfaulted).
  html-extreme-values)
    python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))
for i,row in enumerate(r['rows']): row['of_ceiling'] = 1e308 if i % 2 else -1e308
json.dump(r, open(sys.argv[2],'w'))" "$h200/bench-attention.json" "$tmp/huge.json"
    "$bin" report --format html "$tmp/huge.json" > "$tmp/h.html" 2>&1; rc=$?
    [ $rc -le 2 ] || fail "report --format html on extreme values: exit $rc" ;;
  # 18. JUnit XML of a run whose argv holds U+FFFF (not an XML character): still well-formed.
  junit-xml-nonchars)
    f=$(printf 'x\357\277\277|')
    "$bin" fp8-rows --backend cpu --cases 1 --quiet --filter "$f" --out "$tmp/u.json" --junit "$tmp/u.xml" >/dev/null 2>&1
    python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$tmp/u.xml" || fail "malformed JUnit XML" ;;
  # kv-gate --bf16-cache that can never hold the bf16 arm (a regular file, or a folder under one):
  # exit 2 naming --bf16-cache and why, before any arm runs, nothing written. --bf16-only computed
  # the arm, warned "not stored" and printed "computed and stored" with exit 0.
  kv-cache-not-folder)
    echo hi > "$tmp/plain"; cp "$tmp/plain" "$tmp/plain.orig"
    before=$(ls -A "$tmp")
    expect 2 "--bf16-cache $tmp/plain: exists and is not a folder" \
      "$bin" kv-gate "$src/fixtures/kv/ci.json" --bf16-only --backend cpu --bf16-cache "$tmp/plain"
    case "$out" in *stored\ in*|*"computed and"*) fail "said stored: $out";; esac
    expect 2 "--bf16-cache $tmp/plain/sub: cannot be created: $tmp/plain is not a folder" \
      "$bin" kv-gate "$src/fixtures/kv/ci.json" --bf16-only --backend cpu --bf16-cache "$tmp/plain/sub"
    expect 2 "--bf16-cache $tmp/plain: exists and is not a folder" \
      "$bin" kv-gate "$src/fixtures/kv/ci.json" --format q4 --backend cpu --bf16-cache "$tmp/plain" --out "$tmp/r.json"
    [ "$(ls -A "$tmp")" = "$before" ] || fail "a refused kv-gate wrote something: $(ls -A "$tmp")"
    cmp -s "$tmp/plain" "$tmp/plain.orig" || fail "the plain file was changed" ;;
  # A fixture's name becomes its receipt's (kv-gate: NAME/FORMAT), which report reads only as a file
  # name: a fixture whose name is none is refused at once, field name, nothing written.
  fixture-name-file-name)
    python3 -c "
import json, sys; k = json.load(open(sys.argv[1] + '/fixtures/kv/ci.json')); k['name'] = '../x'
k['model'] = sys.argv[1] + '/fixtures/models/stdlib-bytes-3m'; k['tokens']['file'] = sys.argv[1] + '/fixtures/text/' + k['tokens']['file'].split('/')[-1]
json.dump(k, open(sys.argv[2], 'w'))" "$src" "$tmp/kvname.json" || fail "could not write the kv fixture"
    expect 2 "field name: must be a file name" "$bin" kv-gate "$tmp/kvname.json" --format q4 --backend cpu --bf16-cache "$tmp/c"
    [ ! -e "$tmp/c" ] || fail "the bf16 arm's folder was made before the refusal"
    serve_fixture "$tmp/sgname.json" "$SMALL; f['name'] = 'a/b'" || fail "could not write the serve fixture"
    expect 2 "field name: must be a file name" "$bin" serve-gate "$tmp/sgname.json" --out "$tmp/sg.json"
    [ ! -e "$tmp/sg.json" ] || fail "a serve-gate receipt was written" ;;
  # A receipt's name is used as a file name (report --merge-out writes DIR/<name>.json): shards
  # named "../../escaped" wrote DIR/../../escaped.json, outside DIR. Refused (exit 2, the file and
  # the field named), nothing written anywhere.
  merge-out-name-traversal)
    for i in 1 2 3; do
      "$bin" fp8-rows --backend cpu --cases 6 --quiet --shard $i/3 --out "$tmp/in/s$i.json" >/dev/null 2>&1; [ $? -le 1 ] || fail "shard $i/3"
    done
    for n in '../../escaped' '..' 'a\\b'; do
      for i in 1 2 3; do
        python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['name']=sys.argv[3]; json.dump(r, open(sys.argv[2],'w'))" \
          "$tmp/in/s$i.json" "$tmp/e$i.json" "$n" || fail "edit"
      done
      expect 2 "$tmp/e1.json: name: " "$bin" report --merge-out "$tmp/out/a/b/m" "$tmp/e1.json" "$tmp/e2.json" "$tmp/e3.json"
      case "$out" in *"is not a file name"*) ;; *) fail "the name '$n' is not said to be no file name: $out";; esac
      [ ! -e "$tmp/out" ] || fail "name '$n': report --merge-out wrote $(find "$tmp/out")"
      [ -z "$(find "$tmp" -name 'escaped*')" ] || fail "name '$n': wrote $(find "$tmp" -name 'escaped*')"
    done
    # The same for every other kind: a serve-memory name with a /, a kv-gate's NAME/FORMAT with ..
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['name']='x/../../y'; json.dump(r, open(sys.argv[2],'w'))" \
      "$src/reports/cpu-serve/serve-memory-qwen35-27b-attn-p4-c32768-fp8.json" "$tmp/sm.json"
    expect 2 "$tmp/sm.json: name: \"x/../../y\" is not a file name" "$bin" report "$tmp/sm.json"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['name']='../q4'; json.dump(r, open(sys.argv[2],'w'))" \
      "$h200/kv-gate-long-q4.json" "$tmp/kv.json"
    expect 2 "$tmp/kv.json: name: \"../q4\" is not FIXTURE/FORMAT, each part a file name" "$bin" diff "$tmp/kv.json" "$tmp/kv.json" ;;
  # report and diff read a contract receipt only of a contract this build knows (or the oracle's and
  # sanitizer's receipts): exit 2 naming the file and the field, nothing printed.
  report-unknown-contract)
    cpu_receipt fp8-rows || fail "setup"
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['name']='no-such-contract'; json.dump(r, open(sys.argv[2],'w'))" \
      "$tmp/fp8-rows.json" "$tmp/u.json"
    msg="$tmp/u.json: name: 'no-such-contract' is not a known contract (known: fp8-rows, qwen-pages"
    expect 2 "$msg" "$bin" report "$tmp/u.json"
    [ -z "$("$bin" report "$tmp/fp8-rows.json" "$tmp/u.json" 2>/dev/null)" ] || fail "report printed before the refusal"
    expect 2 "$msg" "$bin" diff "$tmp/u.json" "$tmp/fp8-rows.json"
    expect 2 "$msg" "$bin" diff "$tmp/fp8-rows.json" "$tmp/u.json"
    [ -z "$("$bin" diff "$tmp/fp8-rows.json" "$tmp/u.json" 2>/dev/null)" ] || fail "diff printed before the refusal"
    # The receipts of kind contract that tools/oracle_torch.py and tools/sanitize.py write still read.
    for f in "$h200/oracle.json" "$h200/receipts-s36/sanitize-probes-983675a.json"; do
      "$bin" report "$f" >/dev/null 2>&1; rc=$?; [ $rc -le 1 ] || fail "report $f: exit $rc"
    done ;;
  # serve-gate and kv-gate --quiet: no progress line on stderr, the same FAIL lines there, the same
  # summary on stdout and the same verdict as without it (which prints progress: which arm, which
  # control). The serve fixture fails (goldens of 16 tokens cut to 4), the kv fixture passes.
  gates-quiet)
    serve_fixture "$tmp/sg.json" "$SMALL; f['golden'] = {'bf16': f['golden']['bf16'][:3]}" || fail "could not write the serve fixture"
    kv_fixture "$tmp/kv.json" "$src/fixtures/models/stdlib-bytes-3m" || fail "could not write the kv fixture"
    for g in sg kv; do
      if [ $g = sg ]; then set -- serve-gate "$tmp/sg.json" --backend cpu; else set -- kv-gate "$tmp/kv.json" --format fp8 --backend cpu --bf16-cache "$tmp/c"; fi
      "$bin" "$@" --out "$tmp/$g-loud.json" > "$tmp/$g-loud.out" 2> "$tmp/$g-loud.err"; rc_loud=$?
      "$bin" "$@" --quiet --out "$tmp/$g-quiet.json" > "$tmp/$g-quiet.out" 2> "$tmp/$g-quiet.err"; rc_quiet=$?
      [ $rc_loud -le 1 ] && [ $rc_quiet -eq $rc_loud ] || fail "$1: exit $rc_loud, with --quiet $rc_quiet"
      # A failing check's line is an error, not progress: it stays (the serve fixture's cut goldens
      # fail); so do warnings (kv-gate's stored bf16 arm in a dirty tree).
      grep -v -e '^FAIL ' -e '^[a-z-]*: warning: ' "$tmp/$g-quiet.err" > "$tmp/$g-quiet.progress"
      [ -s "$tmp/$g-quiet.progress" ] && fail "$1 --quiet printed progress on stderr: $(head -3 "$tmp/$g-quiet.progress")"
      [ "$(grep -c '^FAIL ' "$tmp/$g-quiet.err")" = "$(grep -c '^FAIL ' "$tmp/$g-loud.err")" ] ||
        fail "$1: --quiet changed the FAIL lines on stderr"
      grep -q "^$1: .* arm\|^$1: bf16: solo" "$tmp/$g-loud.err" || fail "$1 without --quiet printed no progress: $(head -3 "$tmp/$g-loud.err")"
      grep -q "control .*: red" "$tmp/$g-loud.err" || fail "$1 without --quiet named no control"
      for f in "$tmp/$g-loud.out" "$tmp/$g-quiet.out"; do
        grep -q "controls red" "$f" && grep -q "^receipt: " "$f" || fail "$1: no summary or receipt line in $f: $(tail -3 "$f")"
      done
      python3 -c "import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:3]); sys.exit(a['verdict'] != b['verdict'])" \
        "$tmp/$g-loud.json" "$tmp/$g-quiet.json" || fail "$1: --quiet changed the verdict"
    done ;;
  # premerge's JUnit reports a receipt compared on one side only (a contract new in the head, with
  # --allow-contract-changes) as skipped, never as passed; and premerge.md counts a bench target
  # the base missed and the head meets as an improvement (mutation sweep round 19).
  premerge-one-sided-and-improved)
    mkdir "$tmp/b" "$tmp/h"
    cp "$src"/reports/cpu/*.json "$tmp/h/"
    for f in "$src"/reports/cpu/*.json; do case $f in */qwen-pages.json) ;; *) cp "$f" "$tmp/b/" ;; esac; done
    expect 0 "premerge: PASS" "$bin" premerge --base "$tmp/b" --head "$tmp/h" --backend cpu --allow-contract-changes \
      --out-dir "$tmp/o" --junit "$tmp/j.xml" --quiet
    python3 - "$tmp/j.xml" <<'PY' || fail "premerge's JUnit: $(grep -A1 'classname="premerge"' "$tmp/j.xml" | head -20)"
import sys, xml.etree.ElementTree as ET
cases = {c.get("name"): c for s in ET.parse(sys.argv[1]).getroot() for c in s.iter("testcase") if c.get("classname") == "premerge"}
new = cases.get("qwen-pages")
assert new is not None and new.find("skipped") is not None, "qwen-pages (no base receipt) is not skipped"
assert cases["fp8-rows"].find("skipped") is None and cases["fp8-rows"].find("failure") is None, "fp8-rows (both sides) is not passed"
PY
    mkdir "$tmp/bb" "$tmp/hb"
    for f in fp8-rows bench-attention; do cp "$h200/$f.json" "$tmp/bb/"; cp "$h200/$f.json" "$tmp/hb/"; done
    python3 -c "
import json, sys
f = sys.argv[1]; r = json.load(open(f))
t = r['targets'][0]; assert t['met'] and t['at_least'], t
t['value'], t['met'] = t['limit'] * 0.9, False
json.dump(r, open(f, 'w'))" "$tmp/bb/bench-attention.json"
    expect 0 "premerge: PASS" "$bin" premerge --base "$tmp/bb" --head "$tmp/hb" --out-dir "$tmp/ob" --quiet
    grep -q '^| bench attention | fail -> fail | 0 | 1 |' "$tmp/ob/premerge.md" ||
      fail "the target met again is not an improvement: $(grep '^| bench attention' "$tmp/ob/premerge.md")" ;;
  # export's tensors are what the oracle (tools/oracle_torch.py, PyTorch: not in CI) checks; this
  # checks the bf16 cases the same way in float64: q_rot is q rotated at the manifest's
  # pos_offset + the query's position (rotate-half RoPE of rot_dims, rope_base), and out is
  # softmax(scale q_rot . K) V over the keys 0..the query's own position, K and V as stored
  # (mutation sweep round 19: queries that missed their own key, and rope without pos_offset,
  # passed export-writes).
  export-oracle-bf16)
    expect 0 "export: 4 cases of qwen-pages on cpu" "$bin" export qwen-pages --backend cpu --cases 4 --seed 5 --out "$tmp/e"
    python3 - "$tmp/e" <<'PY' || fail "the exported bf16 cases disagree with the float64 oracle"
import json, math, struct, sys
d = sys.argv[1]
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, t in h.items():
        if k == "__metadata__": continue
        s, e = t["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        if t["dtype"] == "F32":
            v = struct.unpack("<%df" % (len(raw) // 4), raw)
        elif t["dtype"] == "BF16":
            v = [struct.unpack("<f", struct.pack("<I", x << 16))[0] for x in struct.unpack("<%dH" % (len(raw) // 2), raw)]
        else:
            sys.exit("dtype " + t["dtype"])
        out[k] = (t["shape"], v)
    return out
cases = json.load(open(d + "/manifest.json"))["cases"]
assert len(cases) == 4 and all(c["format"] == "bf16" for c in cases), [c["format"] for c in cases]
assert any(c["pos_offset"] > 0 and c["len"] > 1 for c in cases), "no case with a RoPE offset and more than one key"
for c in cases:
    t = tensors(d + "/" + c["file"])
    D, QH, KH, rot, base = c["head_dim"], c["q_heads"], c["kv_heads"], c["rot_dims"], c["rope_base"]
    L, Q, first = c["len"], c["queries"], c["first_query_pos"]
    assert first == L - Q, (c["case"], first, L, Q)
    q, qr, out = t["q"][1], t["q_rot"][1], t["out"][1]
    K, V = t["k_cache"][1], t["v_cache"][1]
    h2 = rot // 2
    for r in range(Q):
        pos = c["pos_offset"] + first + r
        for h in range(QH):
            x = q[(r * QH + h) * D:(r * QH + h + 1) * D]
            y = list(x)
            for i in range(h2):
                a = pos * base ** (-2.0 * i / rot)
                y[i] = x[i] * math.cos(a) - x[i + h2] * math.sin(a)
                y[i + h2] = x[i + h2] * math.cos(a) + x[i] * math.sin(a)
            got = qr[(r * QH + h) * D:(r * QH + h + 1) * D]
            amax = max(abs(v) for v in x)
            for j in range(D):
                assert abs(got[j] - y[j]) <= 1e-4 * amax, ("q_rot", c["case"], r, h, j, got[j], y[j])
            kvh = h // (QH // KH)
            n = first + r + 1
            s = [c["scale"] * sum(got[j] * K[(p * KH + kvh) * D + j] for j in range(D)) for p in range(n)]
            m = max(s)
            w = [math.exp(v - m) for v in s]
            tot = sum(w)
            o = out[(r * QH + h) * D:(r * QH + h + 1) * D]
            for j in range(D):
                col = [V[(p * KH + kvh) * D + j] for p in range(n)]
                want = sum(w[p] * col[p] for p in range(n)) / tot
                assert abs(o[j] - want) <= 1e-4 * max(abs(v) for v in col) + 1e-30, ("out", c["case"], r, h, j, o[j], want)
PY
    ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
exit 0
