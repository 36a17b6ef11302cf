#!/usr/bin/env bash
# The verification of a change to the kernels on the GPU machine, in one go. Run it from the
# repository root of the head, committed (every receipt records git.dirty):
#   tools/h200_premerge.sh [OUT_DIR]                      (default premerge-h200)
# 1. builds, side by side, the head in build/ (so receipts' argv reads build/tools/tf-cuda-test,
#    as reports/h200's do) with the device mutants' binaries, and the base, from a worktree at
#    the commit that reports/h200's receipts name, in $TMPDIR/kc-base-build;
# 2. premerge --base reports/h200 --backend cuda --base-bin <the base build>: every contract,
#    the benches in the base receipts' modes, a re-run of slower benches, and a same-call A/B
#    against the base build of the rows slower in both runs, and the replay of every serve-gate
#    and kv-gate receipt in reports/h200 (about five minutes; KC_SKIP_GATES=1 passes --skip-gates)
#    (docs/design.md, premerge);
# 3. the cuda-labelled mutant tests (every device plant must turn its contract red);
# 4. qwen-pages on the tensor-core shapes (deep: --cases 120), then memcheck, synccheck and
#    racecheck over a part of those cases.
# 5. with KC_AB_CONTROL=1, the control of premerge's same-call A/B (below): it must go red.
# KC_DEADLINE_S: the seconds the run may take (a device call's limit, less the time to pack its
# output): the steps after premerge get what is left (tools/h200_steps.sh, step_within), and one
# that would get under 20 s is recorded "not run (time)" (exit 3), so the table still prints.
# KC_BASE_HERE=1: the base receipts are made first by the base build on this card (for a card
# other than reports/h200's; gates then not replayed): see make_base_receipts below.
# Environment: KC_PREFIX (CMAKE_PREFIX_PATH of the dependencies, e.g. $PWD/.deps/usr), KC_BASE
# (a base commit other than the receipts'), KC_SKIP_MUTANTS=1, KC_SKIP_SANITIZERS=1, KC_SKIP_GATES=1, KC_AB_CONTROL=1,
# KC_DEADLINE_S.
# Every step's output is in OUT_DIR/<step>.log (OUT_DIR/steps.txt: each step's start and end line as
# it goes), premerge's folder is OUT_DIR/pm. The table
# printed last gives each step's exit code and time; exit 1 when any step failed (premerge's
# regressions included), 2 when a build failed.
set -uo pipefail
out=${1:-premerge-h200}
mkdir -p "$out"
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
base=${KC_BASE:-$(python3 -c "import json; print(json.load(open('reports/h200/fp8-rows.json'))['git']['commit'])")}
[ -n "$base" ] || { echo "h200_premerge: no base commit (reports/h200/fp8-rows.json git.commit, or KC_BASE)"; exit 2; }
tmp=${TMPDIR:-/tmp}
base_src=$tmp/kc-base-src base_build=$tmp/kc-base-build
cfg() {  # cfg SRC BUILD [cmake args]: configure a Release cuda build for sm_90
  local src=$1 b=$2
  shift 2
  cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    ${KC_PREFIX:+-DCMAKE_PREFIX_PATH=$KC_PREFIX} "$@"
}
step_logs=$out
# shellcheck source=tools/h200_steps.sh
. "$(dirname "$0")/h200_steps.sh"
mutants=ON
[ "${KC_SKIP_MUTANTS:-0}" = 1 ] && mutants=OFF
# The head (tf-cuda-test and, with the device mutants on, every cuda mutant's binary) and the base
# build side by side, before anything is timed: no build runs beside premerge's benches.
build_head() {
  cfg . build -DKC_DEVICE_MUTANTS="$mutants" || return
  local targets=""
  [ "$mutants" = ON ] && targets=$(cuda_mutant_targets build)
  # shellcheck disable=SC2086  # one target per word
  ninja -C build tf-cuda-test $targets
}
# The base's source: the archive tools/h200_snap.sh wrote for it (a device copy made from a
# snapshot, tools/h200_git_from_snap.sh), else a worktree of the base commit.
build_base() {
  git worktree remove --force "$base_src" 2>/dev/null
  rm -rf "$base_src"
  # The archive first: a snapshot's git holds the base's commit and trees (so cat-file finds the
  # commit) but none of its files, which a worktree would need.
  if [ -f .dev/snap/base.tar.gz ] && [ "$(cat .dev/snap/base 2>/dev/null)" = "$base" ]; then
    mkdir -p "$base_src" && tar xzf .dev/snap/base.tar.gz -C "$base_src" || return
    # A git dir at the base commit, so the base build's receipts name it (commit "unknown" when
    # the snapshot's pack lacks it).
    bash tools/h200_git_from_snap.sh --base "$base_src" || echo "base git: none (its receipts name commit unknown)"
  elif git cat-file -e "$base^{commit}" 2>/dev/null; then
    git worktree add --detach "$base_src" "$base" || return
  else
    echo "h200_premerge: base $base is not in git and .dev/snap holds no archive of it (tools/h200_snap.sh)"
    return 2
  fi
  cfg "$base_src" "$base_build" -DKC_DEVICE_MUTANTS=OFF && ninja -C "$base_build" tf-cuda-test
}
# racecheck over the gates only: the receipt's verdict is fail by design (no control runs), so
# exit 1 with "0 hazards" is a clean run; a hazard makes compute-sanitizer exit 9.
racecheck_gates() {
  timeout "${step_limit:-400}" compute-sanitizer --tool racecheck --error-exitcode 9 "$@"
  local rc=$?
  [ "$rc" = 1 ] && return 0
  return $rc
}
t0=$SECONDS
build_base > "$step_logs/build-base.log" 2>&1 &
base_pid=$!
step build-head build_head
head_rc=$?
wait "$base_pid"
step_record build-base $? "$t0"
base_rc=$?
if [ "$head_rc" != 0 ] || [ "$base_rc" != 0 ]; then
  printf '%s' "$table"
  exit 2
fi
bin=build/tools/tf-cuda-test
# KC_BASE_HERE=1: the base's receipts are made here first, by the base build, on this card:
# every contract (kernel-contract) and the four benches, into OUT_DIR/base-here, and premerge
# compares the head with them. For a card other than reports/h200's: premerge compares bench
# ratios of one card only (across cards every row would go to the same-call A/B). The gates
# are not replayed then (reports/h200's gate receipts are the H200's).
base_receipts=reports/h200
make_base_receipts() {
  local b=$base_build/tools/tf-cuda-test d=$out/base-here rc
  rm -rf "$d" && mkdir -p "$d" || return 2
  "$b" kernel-contract --backend cuda --out-dir "$d" --quiet > "$out/base-here-contracts.log" 2>&1
  rc=$?
  [ "$rc" -le 1 ] || { tail -5 "$out/base-here-contracts.log"; return "$rc"; }
  for w in attention pack compact rope-store; do
    local extra=""
    [ "$w" = attention ] && extra="--script-dir tools"
    [ "$w" = compact ] || [ "$w" = rope-store ] && extra="--l2 flush"
    # shellcheck disable=SC2086  # options, one per word
    "$b" bench "$w" $extra --out "$d/bench-$w.json" > "$out/base-here-bench-$w.log" 2>&1
    rc=$?
    [ "$rc" -le 1 ] || { tail -5 "$out/base-here-bench-$w.log"; return "$rc"; }
  done
  echo "base receipts on $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device']['name'])" "$d/bench-attention.json"): $(ls "$d" | wc -l) files"
}
if [ "${KC_BASE_HERE:-0}" = 1 ]; then
  base_receipts=$out/base-here
  step base-here make_base_receipts
fi
gates_flag=$([ "${KC_SKIP_GATES:-0}" = 1 ] || [ "${KC_BASE_HERE:-0}" = 1 ] && echo --skip-gates)
step premerge "$bin" premerge --base "$base_receipts" --backend cuda --base-bin "$base_build/tools/tf-cuda-test" \
  --out-dir "$out/pm" --junit "$out/pm/junit.xml" $gates_flag
if [ "$mutants" = ON ]; then
  step_within mutants 600 ctest --test-dir build -L cuda -R '^mutant[.]' --no-tests=error -j4 --output-on-failure
fi
f='d(128|256)(-r64|-r20)?,fmt=(q4|fp8|bf16)'
step_within deep 400 "$bin" qwen-pages --backend cuda --cases 120 --filter "$f" --quiet --out "$out/qwen-pages-deep.json"
if [ "${KC_SKIP_SANITIZERS:-0}" != 1 ]; then
  # The limits are several times the H200's times at 4f51b6e (memcheck 26 s, synccheck 11 s,
  # racecheck 52 s).
  step_within memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin" qwen-pages --backend cuda \
    --cases 32 --filter "$f" --quiet --out "$out/san-memcheck.json"
  step_within synccheck 200 compute-sanitizer --tool synccheck --error-exitcode 9 "$bin" qwen-pages --backend cuda \
    --cases 12 --filter "$f" --quiet --out "$out/san-synccheck.json"
  step_within racecheck 400 racecheck_gates "$bin" qwen-pages --backend cuda --cases 6 --filter "$f" --gates-only --quiet \
    --out "$out/san-racecheck.json"
fi
# The same-call A/B's control (KC_AB_CONTROL=1): premerge against a base of reports/h200's bench
# attention and one small contract, with the head's short-row path off (KC_ATTN_SHORT=0: the
# b1 x 4K rows run the regular kernels, about 1.3x slower, so they are slower in both runs) and
# the base build's on (a wrapper unsets KC_ATTN_SHORT). The A/B runs the base build as its own
# process and must confirm the slowdown: premerge exits 1 and names rows "slower in every round".
# (The held verdict is premerge_test.sh's, on crafted receipts: launch-bound rows' per-process
# noise would make a GPU control of it flaky.)
ab_control() {
  local cb=$out/ab-control-base pm=$out/pm-ab-control wrap=$out/ab-control-base-bin
  local want='slower in every round of the same-call A/B'
  rm -rf "$cb" "$pm" && mkdir -p "$cb" && cp reports/h200/mxfp4-rows.json reports/h200/bench-attention.json "$cb"/ ||
    return 2
  printf '#!/bin/sh\nexec env -u KC_ATTN_SHORT %s "$@"\n' "$base_build/tools/tf-cuda-test" > "$wrap" && chmod +x "$wrap"
  KC_ATTN_SHORT=0 timeout 240 "$bin" premerge --base "$cb" --contracts mxfp4-rows --backend cuda --base-bin "$wrap" \
    --out-dir "$pm"
  local rc=$? n
  n=$(grep -c "$want" "$pm/premerge.md" 2>/dev/null)
  echo "ab-control: premerge exit $rc (1 wanted), ${n:-0} rows '$want'"
  [ "$rc" = 1 ] && [ "${n:-0}" -gt 0 ]
}
[ "${KC_AB_CONTROL:-0}" = 1 ] && step ab-control ab_control
git worktree remove --force "$base_src" 2>/dev/null
printf '%s' "$table"
echo "base $base, head $(git rev-parse HEAD) (changed tracked files: $(git status --porcelain --untracked-files=no | wc -l)); logs in $out"
[ "$worst" -gt 1 ] && worst=1
exit "$worst"
