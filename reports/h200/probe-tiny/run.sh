#!/bin/bash
# Session 27: qwen-pages' new probe tiny (K and V rows at 2^-140 .. 2^-118) on the H200, from
# main's commit in kc-head.bundle: the probes alone, then the whole contract if time allows.
T0=$(date +%s)
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git fetch -q kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main || { echo "bundle fetch failed"; exit 4; }
{ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
    -DCMAKE_PREFIX_PATH=$PWD/.deps/usr && ninja -C build tf-cuda-test; } > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 4; }
echo "build $(( $(date +%s) - T0 ))s"
build/tools/tf-cuda-test qwen-pages --backend cuda --filter 'probe=' --out $OUT/qwen-pages-probes.json > $OUT/probes.log 2>&1
echo "probes rc=$? $(( $(date +%s) - T0 ))s"; grep -E "^FAIL|^qwen-pages:" $OUT/probes.log | head
build/tools/tf-cuda-test qwen-pages --backend cuda --out $OUT/qwen-pages.json > $OUT/qp.log 2>&1
echo "qwen-pages rc=$? $(( $(date +%s) - T0 ))s"; grep -E "^FAIL|^qwen-pages:" $OUT/qp.log | head
