#!/usr/bin/env bash
# Session 40, device call 3: racecheck, synccheck and memcheck over the q4 cases of qwen-pages at
# HEAD with KC_ATTN_SHORT=0 (no short path: the cases call 2 ran on the cluster kernels go to the
# regular partials, q4 d256 regular among them, which call 2 never reached) (the kept prologue,
# kernels of d8bb6aa), the one sanitizer call 1's premerge run did not finish (its 520 s ran out
# inside racecheck). Before the call: tools/h200_snap.sh (carry .deps and .dev).
# Returns $OUT/s40-call3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w3; mkdir -p $W
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
# exit 1 with 0 hazards is a clean run (--gates-only: no control runs, so the verdict is fail);
# a hazard makes compute-sanitizer exit 9.
export KC_ATTN_SHORT=0
for tool in racecheck synccheck memcheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 build/tools/tf-cuda-test qwen-pages \
    --backend cuda --cases 8 --filter 'fmt=q4' --gates-only --out $W/san-$tool.json > $W/san-$tool.log 2>&1
  echo "$tool rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$tool.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$tool.log | tail -1
done
tar czf $OUT/s40-call3.tgz -C /tmp w3
echo "total $((SECONDS-T0)) s"
