#!/bin/bash
# Session 54: the kv-gate's planted arms on the real engine (engine/kv_plant_backend.h's
# KvPlantEngine: on cuda the cache stays held) against the planted arms on the host twins (the
# header before, carried in .dev/kvplant-base), same call:
#  1. kc_engine_tests KvPlant.* (the engine path's bytes equal the Backend path's, cpu and cuda);
#  2. kv-gate h200.json fp8 on cuda by both builds (verdict, every control red, times);
#  3. kv-gate of 65536 prefill rows (owed.sh's fixture; 410 s before, 400 of them controls) by
#     the head build, in what time is left.   device: bash reports/h200/receipts-s54/kv-plant.sh
#   locally first: mkdir -p .dev/kvplant-base && git show b4eb858^:engine/kv_plant_backend.h > .dev/kvplant-base/kv_plant_backend.h;
#   bash tools/h200_snap.sh   (carry .deps.tgz and .dev)
# SHORT=1 (little device time): no base build and no base run; steps 1, 2 (head) and 3 as time allows.
T0=$(date +%s); ROOT=$PWD; LIMIT=${LIMIT:-560}; W=/tmp/kvplant; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
pack(){ (cd /tmp && tar czf $OUT/kvplant.tgz.tmp kvplant && mv $OUT/kvplant.tgz.tmp $OUT/kvplant.tgz); }
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/head.txt; cat $W/head.txt
step(){ local n=$1 lim=$2; shift 2; local t0=$(date +%s); timeout $lim "$@" > $W/$n.log 2>&1; local rc=$?
  echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(grep -v '^\s*$' $W/$n.log | tail -n 1 | cut -c1-150)" | tee -a $W/steps.txt; return $rc; }
rm -rf /tmp/kpb; mkdir -p /tmp/kpb
tar cf - --exclude=./.git --exclude=./.deps --exclude=./.deps.tgz --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/kpb
cp .dev/kvplant-base/kv_plant_backend.h /tmp/kpb/engine/
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr"
(cmake -S . -B /tmp/kph $CFG > $W/cfg-head.log 2>&1 && ninja -C /tmp/kph -j 9 tools/tf-cuda-test tests/kc_engine_tests > $W/build-head.log 2>&1; echo "head build rc=$?" >> $W/steps.txt) &
[ -z "$SHORT" ] && (cmake -S /tmp/kpb -B /tmp/kpbb $CFG > $W/cfg-base.log 2>&1 && ninja -C /tmp/kpbb -j 7 tools/tf-cuda-test > $W/build-base.log 2>&1; echo "base build rc=$?" >> $W/steps.txt) &
wait; cat $W/steps.txt; echo "built at $(( $(date +%s) - T0 ))s"
step tests 90 /tmp/kph/tests/kc_engine_tests --gtest_filter='KvPlant.*'
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]" $W/tests.log | tee -a $W/steps.txt
pack
step kv-head 120 /tmp/kph/tools/tf-cuda-test kv-gate fixtures/kv/h200.json --format fp8 --backend cuda --bf16-cache /tmp/kvc --out $W/kv-gate-fp8-head.json
[ -z "$SHORT" ] && step kv-base 120 /tmp/kpbb/tools/tf-cuda-test kv-gate fixtures/kv/h200.json --format fp8 --backend cuda --bf16-cache /tmp/kvc --out $W/kv-gate-fp8-base.json
pack
python3 - $ROOT <<'PY'
import json, sys
root = sys.argv[1]
d = json.load(open(f"{root}/fixtures/kv/h200-long.json"))
d.pop("recall", None); d.pop("$schema", None)
d["tokens"]["file"] = f"{root}/fixtures/text/stdlib-heldout-3.11.7.txt"
d.update(name="kv-rows-65536", model=f"{root}/fixtures/models/stdlib-bytes-long", depths=[66000], rows=32,
         decode_steps=2, prefill_chunk=65536,
         note="one forward of 65536 prefill rows (the schema's prefill_chunk maximum) on cuda")
json.dump(d, open("/tmp/kvplant/kv-rows-65536.json", "w"), indent=1)
PY
LEFT=$(( LIMIT - ($(date +%s) - T0) - 10 ))
echo "kv-gate 65536 gets ${LEFT}s" | tee -a $W/steps.txt
step kv-rows $LEFT /tmp/kph/tools/tf-cuda-test kv-gate $W/kv-rows-65536.json --format fp8 --backend cuda --bf16-cache /tmp/kvc54 --out $W/kv-gate-rows-65536-fp8-head.json
pack
python3 - $W <<'PY'
import json, sys, os
w = sys.argv[1]
for f in ["kv-gate-fp8-base.json", "kv-gate-fp8-head.json", "kv-gate-rows-65536-fp8-head.json"]:
    p = os.path.join(w, f)
    if not os.path.exists(p): print(f, "missing"); continue
    d = json.load(open(p))
    print(f, d["verdict"], "total %.1f s" % d["timings"]["total_s"],
          [(c["name"], c["red"], round(c.get("time_s", 0), 1)) for c in d["controls"]])
PY
echo "done $(( $(date +%s) - T0 ))s"
