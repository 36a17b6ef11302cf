#!/bin/bash
# tune3 call 1, as run (from /work/main/.kcgit/tune3/sweep.sh; carry [".kcgit/tune3"]): A/B of six
# stripped builds (B0 = main 3269773; B1..B5 variants, see issue20-tune3.md) at 32K x b8 window,
# rounds alternating order; then ncu of main's fp8 d128 row. (Left its files loose under $OUT:
# tar them next time, only 8 files come back.)
set -u
T0=$SECONDS; el() { echo $((SECONDS - T0)); }
W=.kcgit/tune3; X=/tmp/t3; R=$OUT/r; mkdir -p $X $R
tar -xJf $W/bins1.tar.xz -C $X || { echo "extract failed"; exit 3; }
echo "extracted at $(el)s" > $R/timeline.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $R/gpu.txt 2>&1
F='b8/ctx32768/(bf16|fp8|q4)/window'
for round in 1 2 3 4 5 6; do
  order="B0 B1 B2 B3 B4 B5"; [ $((round % 2)) = 0 ] && order="B5 B4 B3 B2 B1 B0"
  for v in $order; do
    [ $(el) -gt 48 ] && break 2
    timeout 20 $X/tf-cuda-test-$v bench attention --script-dir /nonexistent --filter "$F" --out $R/bench-$v-r$round.json > $R/bench-$v-r$round.log 2>&1
    echo "bench $v r$round rc=$? at $(el)s" >> $R/timeline.txt
  done
done
export PATH=/usr/local/cuda/bin:$PATH
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 25 $NCU --clock-control none -k regex:attention_partial_mma_kernel --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
  $X/tf-cuda-test-B0 bench attention --script-dir /nonexistent --reps 1 --filter 'd128/b8/ctx32768/fp8/window' > $R/ncu-fp8-d128-B0.txt 2>&1
echo "ncu rc=$? at $(el)s" >> $R/timeline.txt
cat $R/timeline.txt | tail -3
# (then a python summary: median/min of median_us per row and build, printed as the table in call1/sweep-call1.txt)
grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Warp Cycles Per Issued|Achieved Active|Registers Per|Issued Warp|Eligible" $R/ncu-fp8-d128-B0.txt | head -12
