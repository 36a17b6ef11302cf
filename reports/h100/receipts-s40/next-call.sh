#!/usr/bin/env bash
# Prepared in session 40 for the next session's first device call (not run yet), at HEAD:
# 1. QwenPagesContract.CudaDefaultRunReachesEveryKernelPath (per format and head_dim since
#    325dde2) and CudaProbesAloneReachEveryTensorCoreKernel (9026d5f) green, and their control:
#    with KC_ATTN_SHORT=0 no short path is reached, so both must fail, each naming the six short
#    paths;
# 2. on an H200 only (the issue's targets are the H200's): the receipts the README cites,
#    re-made at HEAD by tools/h200_receipts.sh with KC_PREBUILT=1 (the seven contracts, then the
#    benches: the standing of d8bb6aa's q4 prologue), while KC_CALL_S (default 540) seconds last.
# Before the call: commit, tools/h200_snap.sh, carry .deps and .dev, timeout_s about KC_CALL_S + 40.
# Returns $OUT/next.tgz (the device returns at most 8 files).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/next; L=${KC_CALL_S:-540}; mkdir -p $W
pack() { tar czf $OUT/next.tgz -C /tmp next; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$card" | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test kc_contract_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
cov=QwenPagesContract.CudaDefaultRunReachesEveryKernelPath:QwenPagesContract.CudaProbesAloneReachEveryTensorCoreKernel
timeout 150 build/tests/kc_contract_tests --gtest_filter=$cov > $W/cov.log 2>&1
echo "kernel-path tests rc=$? (0 wanted): $(grep -E '^\[  (PASSED|FAILED) ' $W/cov.log | head -1)"
KC_ATTN_SHORT=0 timeout 150 build/tests/kc_contract_tests --gtest_filter=$cov > $W/cov-control.log 2>&1
echo "control KC_ATTN_SHORT=0 rc=$? (1 wanted): $(grep -o 'partial-short-cl\*' $W/cov-control.log | wc -l) short paths named (12 wanted: 6 per test)"
pack
case "$card" in
  *H200*)
    timeout $((L - SECONDS + T0 - 15)) env KC_PREBUILT=1 bash tools/h200_receipts.sh $W/r $W/r-logs > $W/receipts.out 2>&1
    echo "h200_receipts rc=$? ($((SECONDS-T0)) s)"
    tail -15 $W/receipts.out
    ;;
  *) echo "receipts: not made (card $card; the issue's targets are the H200's)";;
esac
pack
echo "total $((SECONDS-T0)) s"
