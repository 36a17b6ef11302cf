#!/usr/bin/env bash
# Session 33, call 1: build HEAD with the device plants; the initcheck control's third form alone;
# then a full sanitize receipt (cut by the time limit; call 2 resumes it).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; DL=${DL:-575}
mkdir -p $OUT/h200 /tmp/w/logs
L=/tmp/w/logs
pack() { tar czf $OUT/logs.tgz -C /tmp/w logs 2>/dev/null; }
git rev-parse HEAD > $L/head.txt; git status --short --untracked-files=no >> $L/head.txt; pwd >> $L/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=ON > $L/cmake.log 2>&1 || { tail -20 $L/cmake.log; exit 2; }
P="tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten"
ninja -C build tf-cuda-test $P > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
timeout 90 python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build --runs rows-invariant --tools initcheck \
  --jobs 2 --out $OUT/h200/sanitize-initcheck-control.json --logs $L/san-ic > $L/san-ic.out 2>&1
echo "initcheck control rc=$? ($((SECONDS-T0)) s)"; grep -E "control|sanitize:|initcheck" $L/san-ic.out | tail -5
pack
timeout $((DL - (SECONDS-T0))) python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build --jobs 6 \
  --out $OUT/h200/sanitize-partial.json --logs $L/sanitize > $L/sanitize.out 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"
pack
grep -E "^(memcheck|racecheck|synccheck|initcheck|control)" $L/sanitize.out | awk '{printf "%s %s %s | ", $1, $2, $NF} END {print ""}'
tail -3 $L/sanitize.out
echo "total $((SECONDS-T0)) s"
