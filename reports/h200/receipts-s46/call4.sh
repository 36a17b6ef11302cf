#!/usr/bin/env bash
# Session 46's fourth device call, at HEAD (call 3's code; since then host-side changes only): the
# rope store receipt and qwen-pages on cuda again, for the card this call gets (an H200's replace
# reports/h200/bench-rope-store.json and qwen-pages.json; an H100's stay in receipts-s46/).
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/s46c4.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s46c4; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s46c4.tgz -C /tmp s46c4 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
timeout 90 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
echo "bench rope-store rc=$? at $((SECONDS-T0)) s"; grep -E "^target" $W/bench-rope-store.log | tail -2
timeout 120 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
pack
python3 - $W/bench-rope-store.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d['rows']:
    if r['config'].startswith('64MiB'): print('%-20s %.3f %.2f us %s' % (r['config'], r['of_ceiling'], r['median_us'], r.get('verified')))
T = d.get('targets', [])
print('targets met: %d of %d; not met: %s' % (sum(bool(t.get('met')) for t in T), len(T), [(t['name'], round(t.get('value', 0), 3)) for t in T if not t.get('met')]))
PY
echo "done $((SECONDS-T0)) s"
