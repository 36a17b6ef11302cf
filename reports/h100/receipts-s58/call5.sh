#!/usr/bin/env bash
# Session 58, call 5 (any card): bench attention's new kernel_paths field on the b1 x 4K rows
# (the short path) and the 32K x b8 rows (the regular kernels), both shapes and every format,
# events and partial timing; the receipts are checked by report.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s58c5; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tools/tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "built $((SECONDS-T0)) s"
F='(b1/ctx4096|b8/ctx32768)/(bf16|fp8|q4)/(window|p16)'
build/tools/tf-cuda-test bench attention --sdpa none --reps 3 --filter "$F" --out $W/bench-events.json > $W/bench-events.log 2>&1
echo "events rc=$?"
build/tools/tf-cuda-test bench attention --sdpa none --reps 3 --timing partial --filter "$F" --out $W/bench-partial.json > $W/bench-partial.log 2>&1
echo "partial rc=$?"
for m in events partial; do
  build/tools/tf-cuda-test report $W/bench-$m.json > $W/report-$m.md 2>&1; echo "report $m rc=$?"
done
python3 - $W <<'PY' | tee $W/summary.txt
import json, sys
for m in ("events", "partial"):
    r = json.load(open(f"{sys.argv[1]}/bench-{m}.json"))
    for x in r["rows"]:
        print(f"{m:8s} {x['config']:28s} {x['format']:5s} {x['addressing']:7s} {x.get('median_us', 0):8.1f} {x.get('kernel_paths')}")
PY
tar czf $OUT/s58c5.tgz -C /tmp s58c5
echo "done $((SECONDS-T0)) s"
