#!/bin/bash
# Session 54: keep's launches of 65535 lane groups (kernel argument g0, a loop on the host) against
# the keep before it (86714b2's keep.cu and launch.h, carried in .dev/keep-base), same call:
# bench compact three times each, interleaved (out_hash and ratios per row); then qwen-pages on
# cuda from the head build (its keep cases).   device: bash reports/h200/receipts-s54/ab-keep.sh
T0=$(date +%s); ROOT=$PWD; W=/tmp/abkeep; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
pack(){ (cd /tmp && tar czf $OUT/abkeep.tgz.tmp abkeep && mv $OUT/abkeep.tgz.tmp $OUT/abkeep.tgz); }
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/head.txt; cat $W/head.txt
rm -rf /tmp/kbase; mkdir -p /tmp/kbase
tar cf - --exclude=./.git --exclude=./.deps --exclude=./.deps.tgz --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/kbase
cp .dev/keep-base/keep.cu .dev/keep-base/launch.h /tmp/kbase/kernels/attention/
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr"
(cmake -S . -B /tmp/bkh $CFG > $W/cfg-head.log 2>&1 && ninja -C /tmp/bkh -j 8 tools/tf-cuda-test > $W/build-head.log 2>&1; echo "head build rc=$?" >> $W/steps.txt) &
(cmake -S /tmp/kbase -B /tmp/bkb $CFG > $W/cfg-base.log 2>&1 && ninja -C /tmp/bkb -j 8 tools/tf-cuda-test > $W/build-base.log 2>&1; echo "base build rc=$?" >> $W/steps.txt) &
wait; cat $W/steps.txt; echo "built at $(( $(date +%s) - T0 ))s"
for r in 1 2 3; do
  for v in head base; do
    b=/tmp/bkh; [ $v = base ] && b=/tmp/bkb
    timeout 90 $b/tools/tf-cuda-test bench compact --out $W/compact-$v-$r.json > $W/compact-$v-$r.log 2>&1
    echo "compact $v $r rc=$? at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
  done
  pack
done
timeout 120 /tmp/bkh/tools/tf-cuda-test qwen-pages --backend cuda --out $W/qwen-pages-cuda.json > $W/qwen-pages.log 2>&1
echo "qwen-pages cuda rc=$? at $(( $(date +%s) - T0 ))s: $(tail -n 1 $W/qwen-pages.log)" | tee -a $W/steps.txt
pack
python3 - $W <<'PY'
import json, sys, glob, statistics as st
w = sys.argv[1]; runs = {}
for f in sorted(glob.glob(f"{w}/compact-*.json")):
    v = f.split("compact-")[1].split("-")[0]
    d = json.load(open(f))
    for r in d["rows"]:
        key = (r.get("config") or r.get("name"), r.get("format"), r.get("addressing"), r.get("bytes"))
        runs.setdefault(key, {}).setdefault(v, []).append((r.get("median_us"), r.get("out_hash")))
print("row | head/base median time | hashes equal")
for k, x in runs.items():
    if "head" in x and "base" in x:
        h = st.median(t for t, _ in x["head"]); b = st.median(t for t, _ in x["base"])
        eq = len({hh for _, hh in x["head"] + x["base"]}) == 1
        print(k, f"{h / b:.3f}", eq)
PY
echo "done $(( $(date +%s) - T0 ))s"
