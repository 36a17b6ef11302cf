#!/bin/bash
# Session 56: bench attention at the key chunk 1024 against the default 512, same build, same call,
# interleaved (512, 1024, 512, 1024, then 256 once: the engine's default), every row of the grid.
# The first 512 run also times PyTorch SDPA (the ours / SDPA column for both chunks); the others
# pass --sdpa none. A row's sums are in the chunk's order, so out_fnv1a differs between chunks;
# within one chunk the two runs must agree (the check at the end).
#   device: bash reports/h200/receipts-s56/chunk.sh   (carry .deps.tgz and .dev)
# Writes $OUT/chunk.tgz: chunk/ with head.txt, steps.txt, bench-c<W>-r<k>.json and .log, summary.txt.
# (Session 56's call ran the version before the tarball: 6 of its 14 files did not come back.)
T0=$(date +%s); ROOT=$PWD; W=${OUT:=/tmp/out}/chunk; mkdir -p $W
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader >> $W/head.txt; cat $W/head.txt
step(){ local n=$1 lim=$2; shift 2; local t0=$(date +%s); timeout $lim "$@" > $W/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; return $rc; }
B=/tmp/bchunk
step build 300 bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr && ninja -C $B -j 16 tools/tf-cuda-test" || exit 1
T=$B/tools/tf-cuda-test
step bench-c512-r1 200 $T bench attention --chunk 512 --out $W/bench-c512-r1.json
step bench-c1024-r1 120 $T bench attention --chunk 1024 --sdpa none --out $W/bench-c1024-r1.json
step bench-c512-r2 120 $T bench attention --chunk 512 --sdpa none --out $W/bench-c512-r2.json
step bench-c1024-r2 120 $T bench attention --chunk 1024 --sdpa none --out $W/bench-c1024-r2.json
step bench-c256-r1 120 $T bench attention --chunk 256 --sdpa none --out $W/bench-c256-r1.json
python3 reports/h200/receipts-s56/chunk_summary.py $W | tee $W/summary.txt
(cd $OUT && tar czf chunk.tgz chunk && rm -rf chunk)  # a call returns at most 8 files
