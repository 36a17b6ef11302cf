#!/usr/bin/env bash
# Session 51, call 2 (the H100 that call 1's probe drew, still warm): the contracts on cuda from HEAD,
# after the day's host changes (bound_ratio in the q4-rows and rows-invariant gates, round 16's tests,
# serve-gate's decode rate): kernel-contract --backend cuda, then the cuda cases of the contract tests.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s51c2; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s51c2.tgz -C /tmp s51c2 2>/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test kc_contract_tests kc_q4_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "built $((SECONDS-T0)) s"
timeout 230 build/tools/tf-cuda-test kernel-contract --backend cuda --out-dir $W/kc > $W/kc.log 2>&1
echo "kernel-contract cuda rc=$? at $((SECONDS-T0)) s"; tail -12 $W/kc.log
pack
timeout 60 build/tests/kc_contract_tests --gtest_filter='*Cuda*' > $W/gt-contract.log 2>&1; echo "kc_contract_tests *Cuda* rc=$?"; tail -3 $W/gt-contract.log
timeout 30 build/tests/kc_q4_tests --gtest_filter='*Cuda*' > $W/gt-q4.log 2>&1; echo "kc_q4_tests *Cuda* rc=$?"; tail -3 $W/gt-q4.log
pack
echo "done $((SECONDS-T0)) s"
