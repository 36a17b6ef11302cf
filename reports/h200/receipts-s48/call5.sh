#!/usr/bin/env bash
# Session 48, call 5: the final kernels (HEAD; its A patch regenerated at the comment-only change after 54f8d34). RopeStore.*, qwen-pages on cuda (the receipt),
# QwenPagesContract.Cuda* (wants "rope-ring, deep"), memcheck / synccheck over the 1 / 16 / 64 MiB
# p16 rows; then against A = c3efaef's rope store (kernels-vs-c3efaef-final.patch reversed): every
# bench rope-store row, 3 rounds (A H, H A, A H), out_hash compared; on an H200 HEAD's bench
# rope-store receipt. Any card.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s48c5; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s48c5.tgz -C /tmp s48c5 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-a && mkdir /tmp/src-a && git ls-files -z | xargs -0 cp --parents -t /tmp/src-a && cp -r .deps /tmp/src-a/ \
  && (cd /tmp/src-a && patch -R -p1 -s < $R/receipts-s48/kernels-vs-c3efaef-final.patch) || { echo "A: patch -R failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B build $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
cmake -S /tmp/src-a -B /tmp/b-a $CFG -DKC_DEBUG_INFO=0 -DCMAKE_PREFIX_PATH=/tmp/src-a/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
ninja -C /tmp/b-a -j 6 tf-cuda-test > $W/build-a.log 2>&1 & PA=$!
ninja -C build -j 10 tf-cuda-test kc_contract_tests kc_device_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
timeout 100 build/tests/kc_device_tests --gtest_filter='RopeStore.*' > $W/gtest-rope.log 2>&1
echo "RopeStore.* rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $W/gtest-rope.log | tr '\n' ' ')"
timeout 120 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
timeout 150 build/tests/kc_contract_tests --gtest_filter='QwenPagesContract.Cuda*' > $W/gtest-cuda.log 2>&1
echo "QwenPagesContract.Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gtest-cuda.log | tr '\n' ' ')"
pack
wait $PA || { tail -20 $W/build-a.log; exit 2; }
echo "A built $((SECONDS-T0)) s"
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="H A"; else ORD="A H"; fi
  for v in $ORD; do
    X=$H; [ $v = A ] && X=/tmp/b-a/tools/tf-cuda-test
    n=$v; [ $v = H ] && n=B
    timeout 60 $X bench rope-store --out $W/rope/$n-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
pack
if grep -q H200 $W/head.txt; then
  timeout 60 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
  echo "H200 bench rope-store rc=$? $(grep -E '^target' $W/bench-rope-store.log | tail -1)"; pack
fi
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck; do
  timeout 100 $SAN --tool $t $H bench rope-store --reps 1 --filter '^(1|16|64)MiB/.*/p16' --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY' $W/$t.log | tail -1)"
done
pack
grep -E "^(row|1MiB|64MiB)" $W/rope-summary.txt; tail -10 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
