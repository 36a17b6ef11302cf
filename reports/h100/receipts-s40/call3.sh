#!/usr/bin/env bash
# Session 40, device call 3, at HEAD (the kept q4 prologue, kernels of d8bb6aa; qwen-pages with its
# 38th probe, which reaches the regular q4 d256 partial):
# 1. qwen-pages --backend cuda, the default run (a receipt: 68 cases, coverage.kernel_path);
# 2. QwenPagesContract.CudaDefaultRunReachesEveryKernelPath (now per format and head_dim), and
#    its control: with KC_ATTN_SHORT=0 no short path is reached, so it must fail;
# 3. racecheck, synccheck and memcheck over the q4 cases with KC_ATTN_SHORT=0 (the short-path
#    cases run the regular partials: call 2's racecheck never reached the regular q4 d256 one).
# Before the call: tools/h200_snap.sh (carry .deps and .dev). Returns $OUT/s40-call3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w3; mkdir -p $W
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test kc_contract_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
timeout 60 build/tools/tf-cuda-test qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages.log | tail -1)"
python3 -c "import json; kp=json.load(open('$W/qwen-pages.json'))['numbers']['coverage']['kernel_path']; print({k: v for k, v in kp.items() if 'partial-mma' in k})"
cov=QwenPagesContract.CudaDefaultRunReachesEveryKernelPath
timeout 90 build/tests/kc_contract_tests --gtest_filter=$cov > $W/cov.log 2>&1
echo "$cov rc=$? (0 wanted): $(grep -E '^\[  (PASSED|FAILED) ' $W/cov.log | head -1)"
KC_ATTN_SHORT=0 timeout 90 build/tests/kc_contract_tests --gtest_filter=$cov > $W/cov-control.log 2>&1
echo "control KC_ATTN_SHORT=0 rc=$? (1 wanted): $(grep -c 'partial-short-cl\* not reached' $W/cov-control.log) of 6 short paths named"
tar czf $OUT/s40-call3.tgz -C /tmp w3
# exit 1 with 0 hazards is a clean run (--gates-only: no control runs, so the verdict is fail);
# a hazard makes compute-sanitizer exit 9.
export KC_ATTN_SHORT=0
for ts in racecheck:120 synccheck:50 memcheck:70; do
  tool=${ts%:*}
  timeout ${ts#*:} compute-sanitizer --tool $tool --error-exitcode 9 build/tools/tf-cuda-test qwen-pages \
    --backend cuda --cases 8 --filter 'fmt=q4' --gates-only --out $W/san-$tool.json > $W/san-$tool.log 2>&1
  echo "$tool rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$tool.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$tool.log | tail -1
  tar czf $OUT/s40-call3.tgz -C /tmp w3
done
tar czf $OUT/s40-call3.tgz -C /tmp w3
echo "total $((SECONDS-T0)) s"
