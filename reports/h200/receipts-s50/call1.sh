#!/usr/bin/env bash
# Session 50, call 1 (any card). Builds HEAD (the receipts' build) and HEAD with -DKC_MMA_PHASES
# side by side. On an H200 first session 48's call4 steps for reports/h200/: bench rope-store
# (the receipt: sessions 47's and 48's rope kernels, never timed on an H200), qwen-pages on cuda,
# two more 64 / 256 MiB rope runs. Then, on any card, receipts-s49/call5-prepared.sh's diagnostic
# of the b1 x 4K short partial: the phase stamps over the b1 x 4K window rows (both shapes, every
# format), and ncu's stall sampling by SASS line on the d256 bf16 / q4 short kernels (skipped where
# the call has spent more than SKIP_NCU_AT seconds).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s50c1; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s50c1.tgz -C /tmp s50c1 2>/dev/null; }
SRC=$PWD
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B build $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
cmake -S . -B /tmp/b-ph $CFG -DKC_DEBUG_INFO=0 "-DCMAKE_CUDA_FLAGS=-DKC_MMA_PHASES" -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-ph.log 2>&1 || exit 2
ninja -C /tmp/b-ph -j 6 tf-cuda-test > $W/build-ph.log 2>&1 & PP=$!
ninja -C build -j 10 tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
if grep -q H200 $W/head.txt; then
  timeout 60 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
  echo "bench rope-store rc=$? at $((SECONDS-T0)) s"; grep -E "^target" $W/bench-rope-store.log | tail -2
  pack
  timeout 90 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
  echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
  for r in 2 3; do
    timeout 60 $H bench rope-store --filter '^(64|256)MiB/' --out $W/rope-$r.json > $W/rope-$r.log 2>&1; echo "rope run $r rc=$?"
  done
  pack
  python3 - $W <<'PY'
import json, sys, os
W = sys.argv[1]
runs = [json.load(open(os.path.join(W, f))) for f in ('bench-rope-store.json', 'rope-2.json', 'rope-3.json') if os.path.exists(os.path.join(W, f))]
for r in runs[0]['rows']:
    if r['config'].startswith('64MiB') or r['config'].startswith('256MiB'):
        o = [next((x['of_ceiling'] for x in R['rows'] if x['config'] == r['config']), None) for R in runs]
        print('%-20s %s %s' % (r['config'], ' '.join('%.3f' % x for x in o if x is not None), r.get('verified')))
T = runs[0].get('targets', [])
print('targets met: %d of %d; not met: %s' % (sum(bool(t.get('met')) for t in T), len(T), [(t['name'], round(t.get('value', 0), 3)) for t in T if not t.get('met')]))
PY
fi
wait $PP || { tail -20 $W/build-ph.log; pack; exit 2; }
echo "phases build done $((SECONDS-T0)) s"
for f in bf16 fp8 q4; do
  timeout 60 /tmp/b-ph/tools/tf-cuda-test bench attention --sdpa none --reps 5 \
    --filter "(24q/4kv/d256|32q/8kv/d128)/b1/ctx4096/$f/window" --out $W/ph-$f.json > $W/ph-$f.log 2>&1
  echo "phases $f rc=$?"; grep -iE "short phases" $W/ph-$f.log | tail -4 | cut -c1-400
done
pack
for f in bf16 q4; do
  [ $((SECONDS-T0)) -gt ${SKIP_NCU_AT:-420} ] && { echo "ncu $f skipped at $((SECONDS-T0)) s"; continue; }
  timeout 120 ncu --clock-control none --set full --import-source yes -k regex:partial_mma --launch-skip 2 --launch-count 1 \
    -o $W/ncu-d256-$f $H bench attention --sdpa none --reps 1 \
    --filter "24q/4kv/d256/b1/ctx4096/$f/window" --out $W/n-$f.json > $W/ncu-$f.log 2>&1
  echo "ncu $f rc=$?"
  ncu --import $W/ncu-d256-$f.ncu-rep --page source --csv --print-source sass > $W/ncu-d256-$f-sass.csv 2>/dev/null
  ncu --import $W/ncu-d256-$f.ncu-rep --section WarpStateStats --section SchedulerStats > $W/ncu-d256-$f-stalls.txt 2>&1
  grep -E "Duration|Warp Cycles|Issued|Eligible|No Eligible|Stall" $W/ncu-d256-$f-stalls.txt | head -12
  pack
done
pack
echo "done $((SECONDS-T0)) s"
