#!/usr/bin/env bash
# Session 46's third device call, at HEAD (the rope store's lean q4 encode merged, call 2's Q; the
# engine kernels' shared rms chain / factor helpers and xs_octet_full, PTX unchanged):
#  1. build HEAD: tf-cuda-test, kc_engine_tests, kc_q4_tests;
#  2. bench rope-store --out (the receipt for this card's folder), qwen-pages on cuda --out;
#  3. compute-sanitizer memcheck / synccheck / racecheck over the rope store's q4 and fp8 ring rows
#     (bench rope-store --reps 1);
#  4. the engine's cuda gtests and rows-invariant on cuda (the engine kernels' helpers).
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/s46c3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; DL=${TOTAL:-560}; W=/tmp/s46c3; rm -rf $W; mkdir -p $W
left() { echo $(( DL - (SECONDS - T0) )); }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s46c3.tgz -C /tmp s46c3 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test kc_engine_tests kc_q4_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
timeout 90 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
echo "bench rope-store rc=$? at $((SECONDS-T0)) s"; grep -E "target|verdict" $W/bench-rope-store.log | tail -4
timeout 90 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
pack
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^(16|64)MiB/(q4|fp8)/'; [ $t = racecheck ] && F='^64MiB/(q4|fp8)/p16'
  [ $(left) -gt 150 ] && { timeout 60 $SAN --tool $t $H bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
    echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1) at $((SECONDS-T0)) s"; }
done
pack
timeout 60 build/tests/kc_q4_tests > $W/q4-tests.log 2>&1
echo "kc_q4_tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/q4-tests.log | head -2 | tr '\n' ' ')"
timeout 90 build/tests/kc_engine_tests --gtest_filter='EngineBackend.*:EngineCuda.*' > $W/gtest.log 2>&1
echo "engine gtests rc=$?: $(grep -cE '^\[       OK \]' $W/gtest.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $W/gtest.log) failed, $(grep -cE '^\[  SKIPPED \] [A-Z]' $W/gtest.log) skipped"
[ $(left) -gt 70 ] && { timeout 60 $H rows-invariant --backend cuda --out $W/rows-invariant.json > $W/rows-invariant.log 2>&1
  echo "rows-invariant rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant.log | tail -1)"; }
pack
python3 - $W/bench-rope-store.json <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d['rows']:
    if int(r['config'].split('MiB')[0]) >= 64: print('%-20s %.3f %s' % (r['config'], r['of_ceiling'], r.get('verified')))
T = d.get('targets', [])
print('targets met: %d of %d; not met: %s' % (sum(bool(t.get('met')) for t in T), len(T), [(t['name'], round(t.get('value', 0), 3)) for t in T if not t.get('met')]))
EOF
echo "done $((SECONDS-T0)) s"
