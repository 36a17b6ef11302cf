#!/usr/bin/env bash
# Session 40, device call 3, at HEAD (the kept q4 prologue, kernels of d8bb6aa; qwen-pages with its
# 38th probe, which reaches the regular q4 d256 partial):
# 1. qwen-pages --backend cuda, the default run (a receipt: 68 cases, coverage.kernel_path);
# 2. racecheck over the q4 cases with KC_ATTN_SHORT=0 (the short-path cases run the regular
#    partials: call 2's racecheck never reached the regular q4 d256 one);
# 3. QwenPagesContract.CudaDefaultRunReachesEveryKernelPath (now per format and head_dim), and
#    its control: with KC_ATTN_SHORT=0 no short path is reached, so it must fail;
# 4. synccheck and memcheck as racecheck, while the call's KC_CALL_S (default 300) seconds last.
# Before the call: tools/h200_snap.sh (carry .deps and .dev). Returns $OUT/s40-call3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w3; mkdir -p $W
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
timeout 60 build/tools/tf-cuda-test qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages.log | tail -1)"
python3 -c "import json; kp=json.load(open('$W/qwen-pages.json'))['numbers']['coverage']['kernel_path']; print({k: v for k, v in kp.items() if 'partial-mma' in k})"
L=${KC_CALL_S:-300}
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/s40-call3.tgz -C /tmp w3; }
pack
# racecheck first (the one tool no call has run over the regular q4 d256 partial), then the
# kernel-path test and its control, synccheck, memcheck, while the call's KC_CALL_S seconds last.
# exit 1 with 0 hazards is a clean run (--gates-only: no control runs, so the verdict is fail);
# a hazard makes compute-sanitizer exit 9.
san() {  # san TOOL LIMIT_S
  local t=$(( $2 < $(left) - 5 ? $2 : $(left) - 5 ))
  [ "$t" -ge 20 ] || { echo "$1: not run (time)"; return; }
  KC_ATTN_SHORT=0 timeout $t compute-sanitizer --tool $1 --error-exitcode 9 build/tools/tf-cuda-test qwen-pages \
    --backend cuda --cases 8 --filter 'fmt=q4' --gates-only --out $W/san-$1.json > $W/san-$1.log 2>&1
  echo "$1 (KC_ATTN_SHORT=0, limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$1.log | tail -1
  pack
}
san racecheck 150
cov=QwenPagesContract.CudaDefaultRunReachesEveryKernelPath
if [ $(left) -gt 100 ] && timeout $(( $(left) - 60 )) ninja -C build kc_contract_tests > $W/build-tests.log 2>&1; then
  timeout 60 build/tests/kc_contract_tests --gtest_filter=$cov > $W/cov.log 2>&1
  echo "$cov rc=$? (0 wanted): $(grep -E '^\[  (PASSED|FAILED) ' $W/cov.log | head -1)"
  KC_ATTN_SHORT=0 timeout 60 build/tests/kc_contract_tests --gtest_filter=$cov > $W/cov-control.log 2>&1
  echo "control KC_ATTN_SHORT=0 rc=$? (1 wanted): $(grep -c 'partial-short-cl\* not reached' $W/cov-control.log) of 6 short paths named"
  pack
else
  echo "$cov: not run (time, or its build: build-tests.log)"
fi
san synccheck 50
san memcheck 70
echo "total $((SECONDS-T0)) s"
