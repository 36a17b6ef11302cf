#!/usr/bin/env bash
# Session 48, call 4 (session 47's call5b.sh for HEAD): on an H200 only (it stops at once on another
# card), HEAD's bench rope-store and qwen-pages receipts for reports/h200/,
# then two more bench rope-store runs of the same build (how much the rows move between runs). No
# A/B build: calls 1-4 (H100) give the same-call ratios.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s48c4; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
grep -q H200 $W/head.txt || { echo "not an H200: stopped"; exit 5; }
pack() { tar czf $OUT/s48c4.tgz -C /tmp s48c4 2>/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
timeout 60 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
echo "bench rope-store rc=$? at $((SECONDS-T0)) s"; grep -E "^target" $W/bench-rope-store.log | tail -2
pack
timeout 90 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
pack
for r in 2 3; do
  timeout 60 $H bench rope-store --filter '^(64|256)MiB/' --out $W/rope-$r.json > $W/rope-$r.log 2>&1; echo "rope run $r rc=$?"
done
pack
python3 - $W <<'PY'
import json, sys, os
W = sys.argv[1]
runs = [json.load(open(os.path.join(W, f))) for f in ('bench-rope-store.json', 'rope-2.json', 'rope-3.json') if os.path.exists(os.path.join(W, f))]
for r in runs[0]['rows']:
    if r['config'].startswith('64MiB'):
        o = [next((x['of_ceiling'] for x in R['rows'] if x['config'] == r['config']), None) for R in runs]
        print('%-20s %s %s' % (r['config'], ' '.join('%.3f' % x for x in o if x is not None), r.get('verified')))
T = runs[0].get('targets', [])
print('targets met: %d of %d; not met: %s' % (sum(bool(t.get('met')) for t in T), len(T), [(t['name'], round(t.get('value', 0), 3)) for t in T if not t.get('met')]))
PY
echo "done $((SECONDS-T0)) s"
