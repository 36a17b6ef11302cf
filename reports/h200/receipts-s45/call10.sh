#!/usr/bin/env bash
# Session 45's second device call, at HEAD (the merge of call 9's winners as plain code: the
# unguarded octet step, the product tree by exchanging halves, the staging before the first
# weights, the residual add joined with the RMSNorm after it, q_norm and k_norm in one launch;
# rows-invariant's joined==plain gate, its joined-ulp control and refusal probes):
#  1. build HEAD (tf-cuda-test, kc_engine_tests) and OLD = HEAD with old-code.patch applied
#     (the engine code of 473c438, the commit call 9 built as HEAD), tf-cuda-test only;
#  2. HEAD: the engine gtests on cuda (the byte tests of the joined launches among them),
#     rows-invariant on cuda (13 gates, 8 controls), the ci serve gate;
#  3. compute-sanitizer memcheck / racecheck / synccheck over the joined launches' byte tests,
#     and tools/sanitize.py over rows-invariant (--skip-controls: the contract's controls are not rerun);
#  4. bench engine --profile, OLD and HEAD interleaved, two rounds;
#  5. HEAD: bench engine --out, on an H200 only (the receipt replaces reports/h200/bench-engine.json).
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c10.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c10; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c10.tgz -C /tmp c10 2>/dev/null; }
SRC=$PWD
O=/tmp/buildo/tools/tf-cuda-test
rm -rf /tmp/srco && mkdir /tmp/srco && git ls-files -z | xargs -0 cp --parents -t /tmp/srco && cp -r .deps /tmp/srco/ \
  && (cd /tmp/srco && patch -p1 -s < $SRC/reports/h200/receipts-s45/old-code.patch) || { echo "OLD: patch failed"; O=""; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake-h.log 2>&1 \
  || { tail -20 $W/cmake-h.log; exit 2; }
[ -n "$O" ] && { cmake -S /tmp/srco -B /tmp/buildo -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=/tmp/srco/.deps/usr > $W/cmake-o.log 2>&1 || { echo "OLD: cmake failed"; O=""; }; }
OB=""
if [ -n "$O" ]; then ninja -C /tmp/buildo tf-cuda-test > $W/build-o.log 2>&1 & OB=$!; fi
ninja -C build tf-cuda-test kc_engine_tests > $W/build-h.log 2>&1 || { tail -30 $W/build-h.log; pack; exit 2; }
H=build/tools/tf-cuda-test
[ -n "$OB" ] && { wait $OB || { echo "OLD did not build:"; tail -15 $W/build-o.log; O=""; }; }
echo "built $((SECONDS-T0)) s"
build/tests/kc_engine_tests --gtest_filter='EngineBackend.*OnCuda:EngineCuda.*' > $W/gtest.log 2>&1
echo "gtest rc=$?: $(grep -cE '^\[       OK \]' $W/gtest.log) ok, $(grep -cE '^\[  FAILED  \] [A-Z]' $W/gtest.log) failed"
timeout 60 $H rows-invariant --backend cuda --out $W/rows-invariant.json > $W/rows-invariant.log 2>&1
echo "rows-invariant rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant.log | tail -1)"
timeout 60 $H serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve.json > $W/serve.log 2>&1
echo "serve-gate rc=$? $(grep -E '^serve-ci:' $W/serve.log | tail -1)"; gzip -f $W/serve.json
pack
F='EngineBackend.AddRmsNorm*OnCuda:EngineBackend.RmsNormParts*OnCuda'
for t in memcheck racecheck synccheck; do
  timeout 90 compute-sanitizer --tool $t --error-exitcode 9 build/tests/kc_engine_tests --gtest_filter="$F" > $W/san-gtest-$t.log 2>&1
  echo "$t over the joined byte tests rc=$? | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/san-gtest-$t.log | tail -1) | $(grep -cE '^\[       OK \]' $W/san-gtest-$t.log) ok"
done
timeout 150 python3 tools/sanitize.py --bin $H --runs rows-invariant --skip-controls \
  --tools memcheck,racecheck,synccheck --jobs 3 --out $W/sanitize-rows.json --logs $W/san-logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -5 $W/sanitize.log
pack
for round in 1 2; do
  for t in ${O:+o} h; do
    if [ $t = h ]; then X=$H; else X=$O; fi
    timeout 50 $X bench engine --profile $W/profile-$t-$round.json --transformers none --tokens 32 --reps 2 > $W/profile-$t-$round.log 2>&1
    echo "profile $t round $round rc=$? ($((SECONDS-T0)) s)"
  done
done
python3 reports/h200/receipts-s44/summary.py $W o h > $W/profile-summary.txt 2>&1
grep -E "step|p8/bf16/window (matmul|add|rms)" $W/profile-summary.txt | head -40
gzip -f $W/profile-*.json; pack
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 200 $H bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
  echo "bench engine rc=$? ($((SECONDS-T0)) s)"; sed -n '/^targets:/,$p' $W/bench-engine.log | head -14
else echo "bench engine: skipped (not an H200)"; fi
pack
