#!/usr/bin/env bash
# Session 42, device call 4 (a short grant, about 500 s): the lean part of next-call.sh and
# next-call-engine.sh at HEAD.
#  1. build tf-cuda-test, kc_engine_tests and the four merge plants (device mutants on);
#  2. tools/sanitize.py --runs qwen-pages-probes --tools synccheck,memcheck,initcheck with their
#     controls (synccheck has never run on main's merge, 59d72e4's kernels; racecheck's 175 s run
#     and 80 s control do not fit: racecheck ran on these merge kernels in session 41);
#  3. the pipelined product: EngineBackend.MatmulParts*OnCuda; rows-invariant and the ci serve gate
#     with KC_ENGINE_XS=pipe1 and pipe3; bench engine --profile per mode (staged, pipe1, pipe3),
#     one round, and a summary of the products' us per step.
# Returns $OUT/c4.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c4; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c4.tgz -C /tmp c4 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr \
  -DKC_DEVICE_MUTANTS=ON > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test kc_engine_tests tf-cuda-test-plant-merge-read-past-end \
  tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten > $W/build.log 2>&1 \
  || { tail -30 $W/build.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
timeout 100 python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build --runs qwen-pages-probes \
  --tools synccheck,memcheck,initcheck --jobs 8 --out $W/sanitize-probes.json --logs $W/san-logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -8 $W/sanitize.log
pack
build/tests/kc_engine_tests --gtest_filter='EngineBackend.MatmulParts*OnCuda' > $W/gtest.log 2>&1
echo "gtest rc=$?: $(grep -E '^\[  (PASSED|FAILED) |OK \]|FAILED  \]' $W/gtest.log | tr '\n' ' ')"
for m in pipe1 pipe3; do
  KC_ENGINE_XS=$m timeout 60 build/tools/tf-cuda-test rows-invariant --backend cuda --out $W/rows-invariant-$m.json > $W/rows-invariant-$m.log 2>&1
  echo "rows-invariant $m rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant-$m.log | tail -1)"
  KC_ENGINE_XS=$m timeout 60 build/tools/tf-cuda-test serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve-$m.json > $W/serve-$m.log 2>&1
  echo "serve-gate $m rc=$? $(grep -E '^serve-ci:' $W/serve-$m.log | tail -1)"
done
pack
for m in staged pipe1 pipe3; do
  KC_ENGINE_XS=$m timeout ${KC_PROF_S:-60} build/tools/tf-cuda-test bench engine --profile $W/profile-$m-1.json --transformers none --tokens 32 --reps 2 > $W/profile-$m-1.log 2>&1
  echo "profile $m rc=$? ($((SECONDS-T0)) s)"
  pack
done
S=reports/h200/receipts-s42/next-call-engine.sh
sed -n "/<<'PY'$/,/^PY$/p" $S | sed '1d;$d' > $W/summary.py
python3 $W/summary.py $W > $W/profile-summary.txt 2>&1; grep -E "p8|p1/bf16/window" $W/profile-summary.txt | head -24
pack
