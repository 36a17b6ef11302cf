#!/usr/bin/env bash
# Prepared in session 49, not run (no device time left): where each b1 x 4K short block spends its
# serial path (call 4: main's short partial reads at 31 % / 11 % of the DRAM peak, bf16 / q4).
# On an H200 first session 48's call4.sh receipts (then stop). Elsewhere: HEAD built with
# -DKC_MMA_PHASES (the short kernels stamp clock64() at their phase boundaries and print the
# grid's mean cycles to each, short_path.cuh), over the b1 x 4K window rows of both shapes and
# every format; then ncu's warp-stall sampling by source line on the d256 bf16 and q4 short
# kernels (--set full: source counters, stall reasons) for the next change's target.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash reports/h200/receipts-s48/call4.sh; fi
T0=$SECONDS; W=/tmp/s49c5; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s49c5.tgz -C /tmp s49c5 2>/dev/null; }
SRC=$PWD
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B /tmp/b-h $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-h.log 2>&1 || exit 2
cmake -S . -B /tmp/b-ph $CFG -DKC_DEBUG_INFO=0 "-DCMAKE_CUDA_FLAGS=-DKC_MMA_PHASES" -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-ph.log 2>&1 || exit 2
ninja -C /tmp/b-ph -j 8 tf-cuda-test > $W/build-ph.log 2>&1 & PP=$!
ninja -C /tmp/b-h -j 8 tf-cuda-test > $W/build-h.log 2>&1 || { tail -20 $W/build-h.log; exit 2; }
wait $PP || { tail -20 $W/build-ph.log; exit 2; }
echo "built $((SECONDS-T0)) s"
for f in bf16 fp8 q4; do
  timeout 60 /tmp/b-ph/tools/tf-cuda-test bench attention --sdpa none --reps 5 \
    --filter "(24q/4kv/d256|32q/8kv/d128)/b1/ctx4096/$f/window" --out $W/ph-$f.json > $W/ph-$f.log 2>&1
  echo "phases $f rc=$?"; grep -iE "phase|cycles" $W/ph-$f.log | sort | uniq -c | head -8
done
pack
for f in bf16 q4; do
  timeout 150 ncu --clock-control none --set full --import-source yes -k regex:partial_mma --launch-skip 2 --launch-count 1 \
    -o $W/ncu-d256-$f /tmp/b-h/tools/tf-cuda-test bench attention --sdpa none --reps 1 \
    --filter "24q/4kv/d256/b1/ctx4096/$f/window" --out $W/n-$f.json > $W/ncu-$f.log 2>&1
  echo "ncu $f rc=$?"
  ncu --import $W/ncu-d256-$f.ncu-rep --page source --csv --print-source sass > $W/ncu-d256-$f-sass.csv 2>/dev/null
  ncu --import $W/ncu-d256-$f.ncu-rep --section WarpStateStats --section SchedulerStats > $W/ncu-d256-$f-stalls.txt 2>&1
  tail -30 $W/ncu-d256-$f-stalls.txt
done
pack
echo "done $((SECONDS-T0)) s"
