#!/usr/bin/env bash
# Session 40, device call 2: racecheck over the q4 cases of qwen-pages at HEAD (the kept prologue,
# kernels of d8bb6aa), the one sanitizer call 1's premerge run did not finish (its 520 s ran out
# inside racecheck). Before the call: tools/h200_snap.sh (carry .deps and .dev).
# Returns $OUT/s40-call2.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w2; mkdir -p $W
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
# exit 1 with 0 hazards is a clean run (--gates-only: no control runs, so the verdict is fail);
# a hazard makes compute-sanitizer exit 9.
timeout ${KC_RACE_S:-330} compute-sanitizer --tool racecheck --error-exitcode 9 build/tools/tf-cuda-test qwen-pages \
  --backend cuda --cases 8 --filter 'fmt=q4' --gates-only --out $W/san-racecheck.json > $W/san-racecheck.log 2>&1
echo "racecheck rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-racecheck.log | tail -2 | tr '\n' ' ')"
grep -E '^qwen-pages:' $W/san-racecheck.log | tail -1
tar czf $OUT/s40-call2.tgz -C /tmp w2
echo "total $((SECONDS-T0)) s"
