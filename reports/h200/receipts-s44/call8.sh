#!/usr/bin/env bash
# Session 44, device call 8, at HEAD: the staged product with call 7's B (first weights before the
# staging, staging 8 float4 ahead) and C (an unguarded octet step where nr == R and the group's 4
# outputs exist). B = HEAD without C (.dev/c.patch reversed) is built beside it.
#  1. build HEAD's tf-cuda-test and kc_engine_tests, and B's tf-cuda-test;
#  2. HEAD: the product's byte tests and EngineCuda.*, rows-invariant, the ci serve gate;
#  3. bench engine --profile, HEAD and B interleaved, two rounds each;
#  4. HEAD: memcheck, racecheck and synccheck over rows-invariant; SASS of matmul_xs_kernel<8>;
#  5. HEAD: bench engine --out (the receipt), last.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c8.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c8; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c8.tgz -C /tmp c8 2>/dev/null; }
SRC=$PWD
rm -rf /tmp/srcb && mkdir /tmp/srcb && git ls-files -z | xargs -0 cp --parents -t /tmp/srcb && cp -r .deps /tmp/srcb/ \
  && (cd /tmp/srcb && patch -R -p1 -s < $SRC/.dev/c.patch) || { echo "patch failed"; exit 3; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake-h.log 2>&1 \
  && cmake -S /tmp/srcb -B /tmp/buildb -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=/tmp/srcb/.deps/usr > $W/cmake-b.log 2>&1 \
  || { tail -20 $W/cmake-*.log; exit 2; }
ninja -C /tmp/buildb tf-cuda-test > $W/build-b.log 2>&1 &
ninja -C build tf-cuda-test kc_engine_tests > $W/build-h.log 2>&1 || { tail -30 $W/build-h.log; pack; exit 2; }
wait $! || { tail -30 $W/build-b.log; pack; exit 2; }
H=build/tools/tf-cuda-test; B=/tmp/buildb/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
cuobjdump -sass $H 2>/dev/null | awk '/Function : .*matmul_xs_kernelILi8EE/{p=1} p&&/Function : /&&!/matmul_xs_kernelILi8EE/{p=0} p' | gzip > $W/sass-xs8-head.txt.gz
build/tests/kc_engine_tests --gtest_filter='EngineBackend.*OnCuda:EngineCuda.*' > $W/gtest.log 2>&1
echo "gtest rc=$?: $(grep -cE '^\[       OK \]' $W/gtest.log) ok, $(grep -E '^\[  (PASSED|FAILED) |FAILED  \]|SKIPPED \]' $W/gtest.log | tr '\n' ' ')"
timeout 60 $H rows-invariant --backend cuda --out $W/rows-invariant.json > $W/rows-invariant.log 2>&1
echo "rows-invariant rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant.log | tail -1)"
timeout 60 $H serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve.json > $W/serve.log 2>&1
echo "serve-gate rc=$? $(grep -E '^serve-ci:' $W/serve.log | tail -1)"
gzip -f $W/serve.json; pack
for round in 1; do
  for t in b c; do
    if [ $t = b ]; then X=$B; else X=$H; fi
    timeout 50 $X bench engine --profile $W/profile-$t-$round.json --transformers none --tokens 32 --reps 2 > $W/profile-$t-$round.log 2>&1
    echo "profile $t round $round rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 reports/h200/receipts-s43/summary.py $W b c > $W/profile-summary.txt 2>&1; grep -E "p8|p1/bf16/window" $W/profile-summary.txt | head -30
pack
timeout 120 python3 tools/sanitize.py --bin $H --runs rows-invariant --skip-controls \
  --tools memcheck,racecheck,synccheck --jobs 4 --out $W/sanitize-rows.json --logs $W/san-logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -4 $W/sanitize.log
pack
for round in 2; do
  for t in b c; do
    if [ $t = b ]; then X=$B; else X=$H; fi
    timeout 50 $X bench engine --profile $W/profile-$t-$round.json --transformers none --tokens 32 --reps 2 > $W/profile-$t-$round.log 2>&1
    echo "profile $t round $round rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 reports/h200/receipts-s43/summary.py $W b c > $W/profile-summary.txt 2>&1; grep -E "p8|p1/bf16/window" $W/profile-summary.txt | head -30
gzip -f $W/profile-*.json; pack
timeout 200 $H bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
echo "bench engine rc=$? ($((SECONDS-T0)) s)"; sed -n '/^targets:/,$p' $W/bench-engine.log | head -14
pack
