#!/bin/bash
# Session 55: the whole CTest suite (cpu and cuda labels, device-side mutants built) from HEAD on a
# GPU machine, as a kernel engineer's `tools/kc.sh test` would run it there with our Debian deps.
#   locally: bash tools/h200_snap.sh; device (carry .deps.tgz and .dev):
#   bash reports/h100/receipts-s55/full-ctest.sh          (LIMIT: seconds in all, default 560; SUBSET=gpu below)
# DEVMUT=OFF: no device-side mutant builds (a shorter build; their tests are then absent).
# Writes $OUT/full-ctest/: head.txt, build.log, ctest.log (--output-on-failure), summary.txt.
T0=$(date +%s); ROOT=$PWD; LIMIT=${LIMIT:-560}; W=${OUT:=/tmp/out}/full-ctest; mkdir -p $W
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/head.txt; cat $W/head.txt
cmake -S . -B /tmp/fc -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKC_DEVICE_MUTANTS=${DEVMUT:-ON} -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr > $W/build.log 2>&1 &&
  ninja -C /tmp/fc -j 16 >> $W/build.log 2>&1
echo "build rc=$? at $(( $(date +%s) - T0 ))s" | tee $W/summary.txt
LEFT=$(( LIMIT - ($(date +%s) - T0) - 15 ))
# SUBSET=gpu: only what needs the device: the cuda label, and the cpu-labelled gtests named *Cuda*
# (they skip without a device), in one CTest run.
sel=(); [ "${SUBSET:-}" = gpu ] && sel=(-R 'Cuda|cuda|-dev$|-device$|-bench$|^mutant\.(mma-hi-only|pv-group-drop)$|^(DeviceArena|RopeStore|AttentionRows|KeepLanes|EngineKernels)\.|^bench\.')
(cd /tmp/fc && timeout $LEFT ctest -j 10 --output-on-failure --timeout 400 "${sel[@]}" > $W/ctest.log 2>&1; echo "ctest rc=$? at $(( $(date +%s) - T0 ))s" >> $W/summary.txt)
grep -E "tests passed|tests failed|Total Test time" $W/ctest.log >> $W/summary.txt
grep -E "\*\*\*Failed|\*\*\*Timeout|\(Failed\)|\(Timeout\)" $W/ctest.log | head -30 >> $W/summary.txt
echo "skipped: $(grep -c '(Skipped)' $W/ctest.log)" >> $W/summary.txt
grep "(Skipped)" $W/ctest.log >> $W/summary.txt
cat $W/summary.txt | head -60
