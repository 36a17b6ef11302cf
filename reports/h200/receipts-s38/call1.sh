#!/usr/bin/env bash
# Session 38, device call 1: diagnostics for issue 20 (nothing here is a receipt).
#  1. floor.cu: what CUDA events around one or two launches cost on an idle device (the
#     b1 x 4K rows are timed that way: the host's enqueue is inside the events);
#  1b. imma_probe.cu: the q4 score step's issue cost, fp16 (today) against int8 IMMA with q in 2 or 3 digits;
#  2. bench attention b1 x 4K, bf16 / fp8 / q4 window, both shapes, timing events, graph and gated;
#  3. ncu (--clock-control none, --set full) of one launch of the q4 tensor-core partial at
#     32K x b8 window, d256 and d128, and its SASS with per-instruction executed counts
#     (session 36's call3.sh);
#  4. ncu of the b1 x 4K d256 bf16 row's launches (short path partial and merge).
# Returns $OUT/s38-call1.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w1; mkdir -p $W
pack() { tar czf $OUT/s38-call1.tgz -C /tmp w1 2>/dev/null; }
H=$(cat .dev/snap/head)
rm -rf .git && git init -q && cp .dev/snap/pack-*.pack .dev/snap/pack-*.idx .git/objects/pack/ && echo $H > .git/shallow \
  && git update-ref refs/heads/main $H && git symbolic-ref HEAD refs/heads/main && git read-tree HEAD \
  && { git update-index -q --refresh > /dev/null; true; } || { echo "git snapshot failed"; exit 4; }
echo "head $H, changed tracked files: $(git status --short --untracked-files=no | wc -l)" | tee $W/head.txt
nvcc -arch=sm_90 -O2 -o $W/floor reports/h200/receipts-s38/floor.cu > $W/floor-build.log 2>&1 && $W/floor > $W/floor.txt 2>&1
cat $W/floor.txt
nvcc -arch=sm_90 -O3 -o $W/imma reports/h200/receipts-s38/imma_probe.cu > $W/imma-build.log 2>&1 && $W/imma > $W/imma.txt 2>&1
cat $W/imma.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
B=build/tools/tf-cuda-test
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
for tm in events graph gated events; do
  timeout 60 $B bench attention --reps 40 --timing $tm --script-dir /tmp/nosdpa --filter 'b1/ctx4096/(bf16|fp8|q4)/window' \
    --out $W/b1-$tm.json > $W/b1-$tm.log 2>&1; echo "b1 $tm rc=$?"
  python3 -c "
import json,sys; d=json.load(open('$W/b1-$tm.json'))
print('  $tm', ' '.join(f\"{r['config'].split('/')[2]}/{r['format']} {r['median_us']:.1f}\" for r in d['rows']), '| floor', d.get('launch_floor_us'))"
done
pack
for s in "d256 24q/4kv/d256" "d128 32q/8kv/d128"; do set -- $s
  timeout 120 ncu --clock-control none -k regex:attention_partial_mma_q4_kernel -c 1 --set full --import-source no \
    -o $W/q4-$1 $B bench attention --reps 1 --script-dir /tmp/nosdpa --filter "$2/b8/ctx32768/q4/window" \
    > $W/ncu-q4-$1.log 2>&1
  echo "ncu q4 $1 rc=$? ($((SECONDS-T0)) s)"
  ncu -i $W/q4-$1.ncu-rep --page details > $W/details-q4-$1.txt 2>&1
  ncu -i $W/q4-$1.ncu-rep --page source --csv --print-source sass > $W/sass-q4-$1.csv 2>&1
  grep -E "Duration|Registers Per|Executed Instructions  |Issued Warp Per|No Eligible|Achieved Occupancy|DRAM Throughput" $W/details-q4-$1.txt | head -9
  python3 reports/h200/receipts-s38/sass_mix.py $W/sass-q4-$1.csv 22 > $W/mix-q4-$1.txt 2>&1; head -24 $W/mix-q4-$1.txt
  pack
done
timeout 120 ncu --clock-control none -c 12 --set full -o $W/b1-d256 $B bench attention --reps 1 --script-dir /tmp/nosdpa \
  --filter "24q/4kv/d256/b1/ctx4096/bf16/window" > $W/ncu-b1.log 2>&1
echo "ncu b1 rc=$? ($((SECONDS-T0)) s)"
ncu -i $W/b1-d256.ncu-rep --page details > $W/details-b1-d256.txt 2>&1
grep -E "^  [a-z_]+.*\(|Duration|Grid Size|Cluster Size|Registers Per" $W/details-b1-d256.txt | head -60
pack
echo "total $((SECONDS-T0)) s"
