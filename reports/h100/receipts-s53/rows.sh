#!/bin/bash
# Session 53: attention and the embedding over more than 65535 rows on cuda (a grid index's cap),
# with and without the fix (launch_partial / launch_merge in launches of kAttnRowsPerLaunch rows,
# embed_kernel walking rows by gridDim.y), and attention calls whose partials pass 1 GiB (the cuda
# backend's batches of rows, kAttnPartialBytes). One call, any card with about 60 GiB free:
#  head: kc_device_tests AttentionRows.* and EngineKernels.EmbedTakesMoreRowsThanAGridsY; kv-gate fp8
#        on cuda with a fixture that prefills 65536 rows in one forward (stdlib-bytes-long, depth
#        66000, prefill_chunk 65536: its schema's maximum); qwen-pages on cuda (the <= 65535-row
#        launches are unchanged); all of kc_device_tests.
#  control: the same tree with the fix reversed (.dev/rows-fix.patch, the fix's diff of kernels/):
#        the two tests and the kv-gate must go red; then mutants-device-6.json on the head build.
#   locally: git diff 4cd47ac^ <last fix> -- kernels/ > .dev/rows-fix.patch; bash tools/h200_snap.sh
#   device:  bash reports/h100/receipts-s53/rows.sh   (carry .deps.tgz and .dev)
T0=$(date +%s); ROOT=$PWD
W=/tmp/rows; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
pack(){ (cd /tmp && tar czf $OUT/rows.tgz.tmp rows && mv $OUT/rows.tgz.tmp $OUT/rows.tgz); }
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/head.txt; cat $W/head.txt
step(){ local n=$1 lim=$2; shift 2; local t0=$(date +%s); timeout $lim "$@" > $W/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(grep -v '^\s*$' $W/$n.log | tail -n 1 | cut -c1-150)" | tee -a $W/steps.txt; return $rc; }
rm -rf /tmp/ctl; mkdir -p /tmp/ctl
tar cf - --exclude=./.git --exclude=./.deps --exclude=./.deps.tgz --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/ctl
(cd /tmp/ctl && patch -p1 -R < $ROOT/.dev/rows-fix.patch) > $W/patch.log 2>&1 || { echo "the reverse patch failed"; cat $W/patch.log; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr"
(cmake -S . -B /tmp/bh $CFG > $W/cfg-head.log 2>&1 && ninja -C /tmp/bh -j 10 tools/tf-cuda-test tests/kc_device_tests > $W/build-head.log 2>&1; echo "head build rc=$?" >> $W/steps.txt) &
(cmake -S /tmp/ctl -B /tmp/bc $CFG > $W/cfg-ctl.log 2>&1 && ninja -C /tmp/bc -j 6 tools/tf-cuda-test tests/kc_device_tests > $W/build-ctl.log 2>&1; echo "control build rc=$?" >> $W/steps.txt) &
wait; cat $W/steps.txt; echo "built at $(( $(date +%s) - T0 ))s"
python3 - $ROOT <<'PY'
import json, sys
root = sys.argv[1]
d = json.load(open(f"{root}/fixtures/kv/h200-long.json"))
d.pop("recall", None)
d.update(name="kv-rows-65536", model=f"{root}/fixtures/models/stdlib-bytes-long", depths=[66000], rows=32,
         decode_steps=2, prefill_chunk=65536,
         note="session 53: one forward of 65536 prefill rows (the schema's prefill_chunk maximum) on cuda")
d.pop("$schema", None)
json.dump(d, open("/tmp/kv-rows-65536.json", "w"))
PY
F='AttentionRows.*:EngineKernels.EmbedTakesMoreRowsThanAGridsY'
step head-tests 150 /tmp/bh/tests/kc_device_tests --gtest_filter="$F"
step ctl-tests 120 /tmp/bc/tests/kc_device_tests --gtest_filter="$F"
pack
step head-kv 150 /tmp/bh/tools/tf-cuda-test kv-gate /tmp/kv-rows-65536.json --format fp8 --backend cuda --bf16-cache /tmp/kvc-head --out $W/kv-head.json
pack
step ctl-kv 60 /tmp/bc/tools/tf-cuda-test kv-gate /tmp/kv-rows-65536.json --format fp8 --backend cuda --bf16-cache /tmp/kvc-ctl --out $W/kv-ctl.json
pack
# Four mutants of the row batching (reports/mutation-sweep/mutants-device-6.json) on the head build.
step sweep 160 python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-device-6.json --build /tmp/bh \
  --backends cuda --timeout 120 --no-final-build --work $W/work --out $W/sweep-dev-6.json
grep -E "^\[" $W/sweep.log | tee -a $W/steps.txt
pack
step head-qwen-pages 60 /tmp/bh/tools/tf-cuda-test qwen-pages --backend cuda --out $W/qwen-pages-cuda.json
step head-device-tests 60 /tmp/bh/tests/kc_device_tests --gtest_brief=1
pack
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|error" $W/head-tests.log $W/ctl-tests.log | cut -c1-220 | head -20
echo "done $(( $(date +%s) - T0 ))s"
