#!/usr/bin/env bash
# Session 43, device call 5, at HEAD: the staged product is the pipelined kernel (pipe1 of call 4)
# with the tree in two passes where one pass leaves fewer groups per block (o_proj at p8).
#  1. build tf-cuda-test and kc_engine_tests;
#  2. the product's byte tests (both tree passes), EngineCuda.*, rows-invariant and the ci serve
#     gate at the default and with KC_ENGINE_TREE=2 (two passes wherever the staged kernel runs);
#  3. bench engine --profile with KC_ENGINE_TREE=1 (one pass: call 4's pipe1) and at the default,
#     two rounds each, interleaved, and the products' us per step;
#  4. bench engine (the receipt, transformers in the same run);
#  5. memcheck, racecheck and synccheck over rows-invariant with KC_ENGINE_TREE=2 (no controls:
#     call 4's ran at 91a4948 on the same sanitizer; the default takes one pass on its model).
# Returns $OUT/c5.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c5; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c5.tgz -C /tmp c5 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr \
  > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test kc_engine_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
build/tests/kc_engine_tests --gtest_filter='EngineBackend.*OnCuda:EngineCuda.*' > $W/gtest.log 2>&1
echo "gtest rc=$?: $(grep -cE '^\[       OK \]' $W/gtest.log) ok, $(grep -E '^\[  (PASSED|FAILED) |FAILED  \]|SKIPPED \]' $W/gtest.log | tr '\n' ' ')"
for t in default 2; do
  if [ $t = default ]; then E=""; else E="KC_ENGINE_TREE=$t"; fi
  env $E timeout 60 build/tools/tf-cuda-test rows-invariant --backend cuda --out $W/rows-invariant-$t.json > $W/rows-invariant-$t.log 2>&1
  echo "rows-invariant tree=$t rc=$? $(grep -E '^rows-invariant:' $W/rows-invariant-$t.log | tail -1)"
  env $E timeout 60 build/tools/tf-cuda-test serve-gate fixtures/serve/ci.json --backend cuda --out $W/serve-$t.json > $W/serve-$t.log 2>&1
  echo "serve-gate tree=$t rc=$? $(grep -E '^serve-ci:' $W/serve-$t.log | tail -1)"
done
pack
for round in 1 2; do
  for t in 1 default; do
    if [ $t = default ]; then E=""; else E="KC_ENGINE_TREE=$t"; fi
    env $E timeout 60 build/tools/tf-cuda-test bench engine --profile $W/profile-$t-$round.json --transformers none --tokens 32 --reps 2 > $W/profile-$t-$round.log 2>&1
    echo "profile tree=$t round $round rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 reports/h200/receipts-s43/summary.py $W 1 default > $W/profile-summary.txt 2>&1; grep -E "p8|p1/bf16/window" $W/profile-summary.txt | head -30
pack
timeout 240 build/tools/tf-cuda-test bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
echo "bench engine rc=$? ($((SECONDS-T0)) s)"; grep -E "transformers|verdict|target" $W/bench-engine.log | head -20
pack
for t in 2; do
  if [ $t = default ]; then E=""; else E="KC_ENGINE_TREE=$t"; fi
  env $E timeout 120 python3 tools/sanitize.py --bin build/tools/tf-cuda-test --runs rows-invariant --skip-controls \
    --tools memcheck,racecheck,synccheck --jobs 4 --out $W/sanitize-rows-$t.json --logs $W/san-logs-$t > $W/sanitize-$t.log 2>&1
  echo "sanitize tree=$t rc=$? ($((SECONDS-T0)) s)"; tail -5 $W/sanitize-$t.log
  pack
done
