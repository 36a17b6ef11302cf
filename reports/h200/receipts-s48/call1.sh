#!/usr/bin/env bash
# Session 48, call 1: the rope store's tail split (RopeUnits, f48a08f) against the old split in the
# same binary (KC_ROPE_TAIL=0 = A, default = B), every bench rope-store row, 3 rounds interleaved
# (A B, B A, A B), out_hash compared; the cuda test RopeStore.*; qwen-pages on cuda; memcheck /
# synccheck over the 16 / 64 MiB p16 rows and racecheck over the 64 MiB fp8 / q4 p16 rows (split on).
# Any card. On an H200 also HEAD's bench rope-store receipt (the default build).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s48c1; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s48c1.tgz -C /tmp s48c1 2>/dev/null; }
R=$PWD/reports/h200
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test kc_device_tests kc_contract_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
timeout 120 build/tests/kc_device_tests --gtest_filter='RopeStore.*' > $W/gtest-rope.log 2>&1
echo "RopeStore.* rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $W/gtest-rope.log | tr '\n' ' ')"
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="B A"; else ORD="A B"; fi
  for v in $ORD; do
    if [ $v = A ]; then E=0; else E=1; fi
    KC_ROPE_TAIL=$E timeout 60 $H bench rope-store --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
pack
timeout 120 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^16MiB/.*/p16|^64MiB/.*/p16'; [ $t = racecheck ] && F='^64MiB/(fp8|q4)/p16'
  timeout 150 $SAN --tool $t $H bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
pack
if grep -q H200 $W/head.txt; then
  timeout 60 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
  echo "H200 bench rope-store rc=$?"; pack
fi
grep -E "^(row|64MiB|256MiB)" $W/rope-summary.txt; tail -8 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
