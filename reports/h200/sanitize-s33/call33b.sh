#!/usr/bin/env bash
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; mkdir -p $OUT/h200 /tmp/w2/logs; L=/tmp/w2/logs
git rev-parse HEAD > $L/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=ON > $L/cmake.log 2>&1 || { tail -20 $L/cmake.log; exit 2; }
P="tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten"
ninja -C build tf-cuda-test $P > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
timeout 540 python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build --jobs 6 --resume .dev/sanitize-partial.json \
  --out $OUT/h200/sanitize.json --logs $L/sanitize > $L/sanitize.out 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"
tar czf $OUT/logs.tgz -C /tmp/w2 logs
tail -8 $L/sanitize.out
