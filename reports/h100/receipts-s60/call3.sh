#!/usr/bin/env bash
# Session 60, device call 3 (the least device time left: about 300 s with the start): only what
# session 59 left unrun on a device, built alone: contract.qwen-pages.cuda-merge-one-batch (the
# one-batch merge over many chunks, KC_MERGE_PIPE=0) and the device mutants merge-pipe-stale-dev
# (the two-batch merge never reloads its second register set: qwen-pages must be red, so the
# test passes) and merge-skip-nonfinite-dev. Before the call: commit, KC_SNAP_BASE=0
# tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c3; mkdir -p $W
pack() { tar czf $OUT/c3.tgz -C /tmp c3 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee -a $W/head.txt
cmake -S . -B /tmp/b3 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKC_DEVICE_MUTANTS=ON -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C /tmp/b3 tf-cuda-test tf-cuda-test-mutant-merge-pipe-stale-dev tf-cuda-test-mutant-merge-skip-nonfinite-dev \
  > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/b3 && ctest -j 3 --output-on-failure --timeout 200 \
  -R '^(contract[.]qwen-pages[.]cuda-merge-one-batch|mutant[.]merge-pipe-stale-dev|mutant[.]merge-skip-nonfinite-dev)$' \
  > $W/ctest.log 2>&1; echo "ctest rc=$? ($((SECONDS-T0)) s)")
grep -E "Test +#|tests passed|tests failed|Total Test" $W/ctest.log
grep -E "^qwen-pages:|gate .*FAIL|failed gate" $W/ctest.log | head -12
pack
