#!/bin/bash
# Session 54: what session 53 owed, in one call (any card with about 60 GiB free).
#  1. kc_device_tests AttentionRows.* and EngineKernels.EmbedTakesMoreRowsThanAGridsY from a fresh
#     build of HEAD (2fde3ff's rows: the budget test's second batch has 5 chunks, not 256).
#  2. The mutant that survived session 53 (attn-batch-one-chunk-count, mutants-device-6.json) against
#     those rows. The sweep leaves its build folder mutated (--no-final-build), so step 3 runs a copy
#     of tf-cuda-test taken before it.
#  2b. keep over more lanes than a grid's y holds (KeepLanes.*, kernels/attention/keep.cu's
#     launches of kKeepGroupsPerLaunch groups) and its three mutants (mutants-device-7.json).
#  3. kv-gate fp8 on cuda, end to end, with a fixture that prefills 65536 rows in one forward
#     (h200-long.json's text and model, depth 66000, rows 32, decode_steps 2, prefill_chunk 65536:
#     its schema's maximum), until the call's time runs out.
#   device: bash reports/h200/receipts-s54/owed.sh tests   (1, 2, 2b), then at once on the warm machine
#           bash reports/h200/receipts-s54/owed.sh kv      (3: reuses step 1's tf-cuda-test copy where the
#           machine kept it, else builds)   (carry .deps.tgz and .dev)
T0=$(date +%s); ROOT=$PWD; LIMIT=${LIMIT:-590}
PART=${1:-tests}; W=/tmp/owed-$PART; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
pack(){ (cd /tmp && tar czf $OUT/owed-$PART.tgz.tmp owed-$PART && mv $OUT/owed-$PART.tgz.tmp $OUT/owed-$PART.tgz); }
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/head.txt; cat $W/head.txt
step(){ local n=$1 lim=$2; shift 2; local t0=$(date +%s); timeout $lim "$@" > $W/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(grep -v '^\s*$' $W/$n.log | tail -n 1 | cut -c1-150)" | tee -a $W/steps.txt; return $rc; }
B=/tmp/bh54
build(){ rm -rf $B; step build 300 bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr && ninja -C $B -j 16 tools/tf-cuda-test tests/kc_device_tests" && cp $B/tools/tf-cuda-test /tmp/tfct-head && cp $W/head.txt /tmp/tfct-head.txt; }
if [ $PART = tests ]; then
build
step head-tests 120 $B/tests/kc_device_tests --gtest_filter='AttentionRows.*:EngineKernels.EmbedTakesMoreRowsThanAGridsY:KeepLanes.*'
grep -E "^\[ +(OK|FAILED) +\]" $W/head-tests.log | tee -a $W/steps.txt
pack
step sweep 150 python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-device-6.json --only '^attn-batch-one-chunk-count$' \
  --build $B --backends cuda --timeout 60 --no-final-build --work $W/work --out $W/sweep.json
grep -E "^\[" $W/sweep.log | tee -a $W/steps.txt
step sweep7 200 python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-device-7.json \
  --build $B --backends cuda --timeout 60 --no-final-build --work $W/work7 --out $W/sweep-dev-7.json
grep -E "^\[" $W/sweep7.log | tee -a $W/steps.txt
pack
exit 0
fi
# kv: the copy of tf-cuda-test from a tests run of this tree, else a build of its own
cmp -s /tmp/tfct-head.txt $W/head.txt && [ -x /tmp/tfct-head ] && echo "tf-cuda-test from the tests run" | tee -a $W/steps.txt || build
python3 - $ROOT <<'PY'
import json, sys
root = sys.argv[1]
d = json.load(open(f"{root}/fixtures/kv/h200-long.json"))
d.pop("recall", None); d.pop("$schema", None)
d["tokens"]["file"] = f"{root}/fixtures/text/stdlib-heldout-3.11.7.txt"
d.update(name="kv-rows-65536", model=f"{root}/fixtures/models/stdlib-bytes-long", depths=[66000], rows=32,
         decode_steps=2, prefill_chunk=65536,
         note="one forward of 65536 prefill rows (the schema's prefill_chunk maximum) on cuda")
json.dump(d, open("/tmp/owed-kv/kv-rows-65536.json", "w"), indent=1)
PY
LEFT=$(( LIMIT - ($(date +%s) - T0) - 10 ))
echo "kv-gate gets ${LEFT}s" | tee -a $W/steps.txt
( while sleep 30; do echo "  kv-gate running $(( $(date +%s) - T0 ))s; $(nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader)"; done ) > $W/kv-progress.log 2>&1 & P=$!
step kv $LEFT /tmp/tfct-head kv-gate $W/kv-rows-65536.json --format fp8 --backend cuda --bf16-cache /tmp/kvc54 --out $W/kv-gate-rows-65536-fp8.json
kill $P 2>/dev/null
pack
grep -E "verdict|mean_kl|worst" $W/kv-gate-rows-65536-fp8.json 2>/dev/null | head -8
echo "done $(( $(date +%s) - T0 ))s"
