#!/usr/bin/env bash
# Session 47, call 6 (any card): ncu source counters (per-SASS-instruction executed counts and
# stall samples) of the attention partials at 32K x b8, window: q4 d256 (the regular q4 tensor-core
# kernel), q4 d128 (the packed kernel) and bf16 d256, for the issue-20 q4 / bf16 leads (the
# rope store's counters found 100 of 359 instructions per warp and row to be per-block work).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s47c6; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s47c6.tgz -C /tmp s47c6 2>/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "built $((SECONDS-T0)) s"
H=build/tools/tf-cuda-test
for row in 24q/4kv/d256/b8/ctx32768/q4/window 32q/8kv/d128/b8/ctx32768/q4/window 24q/4kv/d256/b8/ctx32768/bf16/window; do
  n=$(echo $row | tr '/' '-')
  timeout 150 ncu --clock-control none -k regex:attention_partial -c 1 --section SourceCounters --import-source no \
    -o $W/src-$n $H bench attention --sdpa none --reps 1 --filter "$row" --out $W/bench-$n.json > $W/ncu-$n.log 2>&1
  echo "ncu $row rc=$? at $((SECONDS-T0)) s"
  ncu -i $W/src-$n.ncu-rep --page source --csv --print-source sass > $W/src-$n.csv 2> $W/src-$n.err
  gzip -f $W/src-$n.csv; rm -f $W/src-$n.ncu-rep
  pack
done
ls -la $W
echo "done $((SECONDS-T0)) s"
