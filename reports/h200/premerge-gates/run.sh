#!/bin/bash
# Session 27: premerge's replay of serve-gate / kv-gate receipts on the H200, one call. Built in
# build/ from main's commit in kc-head.bundle; the base is a part of reports/h200: mxfp4-rows,
# the attention and pack benches, the three serve-gate receipts and the two cheapest kv-gate
# receipts (kv-gate-q4 on fixtures/kv/h200.json, kv-gate-ci-q4-cuda on fixtures/kv/ci.json).
# premerge runs from the repository root, as the receipts' commands did.
T0=$(date +%s)
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git fetch -q kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main || { echo "bundle fetch failed"; exit 4; }
mkdir -p $OUT/pm
{ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
    -DCMAKE_PREFIX_PATH=$PWD/.deps/usr && ninja -C build tf-cuda-test; } > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 4; }
echo "build $(( $(date +%s) - T0 ))s"
B=/tmp/pb; mkdir -p $B
cp reports/h200/{mxfp4-rows,bench-attention,bench-pack,serve-ci,serve-ci-q4,serve-suite12,kv-gate-q4,kv-gate-ci-q4-cuda}.json $B/
timeout 400 build/tools/tf-cuda-test premerge --base $B --contracts mxfp4-rows --backend cuda --out-dir $OUT/pm \
  --junit $OUT/pm/junit.xml > $OUT/premerge.log 2>&1
echo "premerge rc=$? $(( $(date +%s) - T0 ))s"
rm -rf $OUT/pm/head/kv-bf16-cache
grep -E "^premerge: (kv|serve)-gate" $OUT/premerge.log | cut -c1-200
tail -8 $OUT/premerge.log
sed -n '/### Receipts/,/### Not compared/p' $OUT/pm/premerge.md
