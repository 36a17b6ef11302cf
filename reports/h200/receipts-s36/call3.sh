#!/usr/bin/env bash
# Session 36, device call 3 (the last ~300 s of the session's device time): where the q4
# tensor-core partial's instructions go, for issue 20's q4 target. ncu (--clock-control none,
# --set full, source counters) of one launch of attention_partial_mma_q4_kernel at 32K x b8
# window, d256 (24q/4kv: hi and lo parts in two mma) and d128 (32q/8kv: packed), and the
# kernels' SASS with each instruction's executed count (ncu --page source --print-source sass).
# Returns $OUT/q4-ncu.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w3; mkdir -p $W
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
for s in "d256 24q/4kv/d256" "d128 32q/8kv/d128"; do set -- $s
  timeout 100 ncu --clock-control none -k regex:attention_partial_mma_q4_kernel -c 1 --set full --import-source no \
    -o $W/$1 build/tools/tf-cuda-test bench attention --reps 1 --script-dir /tmp/nosdpa --filter "$2/b8/ctx32768/q4/window" \
    > $W/ncu-$1.log 2>&1
  echo "ncu $1 rc=$? ($((SECONDS-T0)) s)"
  ncu -i $W/$1.ncu-rep --page details > $W/details-$1.txt 2>&1
  ncu -i $W/$1.ncu-rep --page source --csv --print-source sass > $W/sass-$1.csv 2>&1
  grep -E "Duration|Registers Per|Issued Instructions  |Issued Warp Per|No Eligible|Achieved Occupancy" $W/details-$1.txt | head -8
  tar czf $OUT/q4-ncu.tgz -C /tmp w3
done
echo "total $((SECONDS-T0)) s"
