#!/usr/bin/env bash
set -u
export PATH=/usr/local/cuda/bin:$PATH
git fetch -q .dev/kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main
git log --oneline -1 > $OUT/head.txt; git status --short >> $OUT/head.txt
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > /tmp/cfg.log 2>&1
cmake --build build --target tf-cuda-test > /tmp/b.log 2>&1; echo "build rc=$?"
build/tools/tf-cuda-test bench pack --out $OUT/bench-pack.json > $OUT/bench-pack.log 2>&1; echo "bench pack rc=$?"
tail -4 $OUT/bench-pack.log
