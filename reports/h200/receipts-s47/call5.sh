#!/usr/bin/env bash
# Session 47, call 5: call 4 (same HEAD kernels) on an H200 only: it stops at once on another
# card. A = HEAD with kernels-vs-d52f0af-1a23d1c.patch reversed (rope_store.cu and q4.h as at
# d52f0af; regenerate it with `git diff d52f0af HEAD -- kernels/attention/rope_store.cu
# kernels/codecs/q4.h` if either file changes again). A same-call A/B against d52f0af's rope store, every bench row, 3 rounds interleaved; HEAD's
# bench rope-store and qwen-pages receipts for reports/h200/; the cuda QwenPagesContract tests.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s47c5; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
grep -q H200 $W/head.txt || { echo "not an H200: stopped"; exit 5; }
pack() { tar czf $OUT/s47c5.tgz -C /tmp s47c5 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-a && mkdir /tmp/src-a && git ls-files -z | xargs -0 cp --parents -t /tmp/src-a && cp -r .deps /tmp/src-a/ \
  && (cd /tmp/src-a && patch -R -p1 -s < $R/receipts-s47/kernels-vs-d52f0af-1a23d1c.patch) || { echo "A: patch -R failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B build $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
cmake -S /tmp/src-a -B /tmp/b-a $CFG -DKC_DEBUG_INFO=0 -DCMAKE_PREFIX_PATH=/tmp/src-a/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
ninja -C /tmp/b-a -j 6 tf-cuda-test > $W/build-a.log 2>&1 & PA=$!
ninja -C build -j 10 tf-cuda-test kc_contract_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
wait $PA || { tail -20 $W/build-a.log; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="H A"; else ORD="A H"; fi
  for v in $ORD; do
    X=$H; [ $v = A ] && X=/tmp/b-a/tools/tf-cuda-test
    timeout 60 $X bench rope-store --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
timeout 90 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
echo "bench rope-store rc=$? at $((SECONDS-T0)) s"; grep -E "^target" $W/bench-rope-store.log | tail -2
timeout 120 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
pack
timeout 150 build/tests/kc_contract_tests --gtest_filter='QwenPagesContract.Cuda*' > $W/gtest-cuda.log 2>&1
echo "QwenPagesContract.Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gtest-cuda.log | tr '\n' ' ')"
pack
grep -E "^(row|64MiB)" $W/rope-summary.txt; tail -10 $W/rope-summary.txt
python3 - $W/bench-rope-store.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d['rows']:
    if r['config'].startswith('64MiB'): print('%-20s %.3f %.2f us %s' % (r['config'], r['of_ceiling'], r['median_us'], r.get('verified')))
T = d.get('targets', [])
print('targets met: %d of %d; not met: %s' % (sum(bool(t.get('met')) for t in T), len(T), [(t['name'], round(t.get('value', 0), 3)) for t in T if not t.get('met')]))
PY
echo "done $((SECONDS-T0)) s"
