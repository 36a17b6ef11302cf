#!/usr/bin/env bash
# Session 51, call 1: the rope store's H200 receipts (sessions 47's and 48's rope kernels, never
# timed on an H200). Stops at once (rc 0, "not an H200") on any other card, so a drawn H100 costs
# only the probe. On an H200: builds HEAD (the receipts' build), bench rope-store (the receipt),
# qwen-pages on cuda (the receipt), and two more 64 / 256 MiB rope runs for the spread (ROPE_EXTRA=n:
# n more; 0 where the device time left is short).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: $(nvidia-smi --query-gpu=name --format=csv,noheader)"; exit 0; }
T0=$SECONDS; W=/tmp/s51c1; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s51c1.tgz -C /tmp s51c1 2>/dev/null; }
SRC=$PWD
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B build $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
timeout 60 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
echo "bench rope-store rc=$? at $((SECONDS-T0)) s"; grep -E "^target" $W/bench-rope-store.log | tail -2
pack
timeout 120 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
for r in $(seq 2 $((1 + ${ROPE_EXTRA:-2}))); do
  timeout 60 $H bench rope-store --filter '^(64|256)MiB/' --out $W/rope-$r.json > $W/rope-$r.log 2>&1; echo "rope run $r rc=$?"
done
pack
python3 - $W <<'PY'
import json, sys, os
W = sys.argv[1]
runs = [json.load(open(os.path.join(W, f))) for f in ('bench-rope-store.json', 'rope-2.json', 'rope-3.json') if os.path.exists(os.path.join(W, f))]
for r in runs[0]['rows']:
    o = [next((x['of_ceiling'] for x in R['rows'] if x['config'] == r['config']), None) for R in runs]
    print('%-24s %s %s' % (r['config'], ' '.join('%.3f' % x for x in o if x is not None), r.get('verified')))
T = runs[0].get('targets', [])
print('targets met: %d of %d; not met: %s' % (sum(bool(t.get('met')) for t in T), len(T), [(t['name'], round(t.get('value', 0), 3)) for t in T if not t.get('met')]))
PY
pack
echo "done $((SECONDS-T0)) s"
