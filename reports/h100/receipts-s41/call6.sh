#!/usr/bin/env bash
# Session 41, device call 6 (diagnostic): how long the merge kernel itself runs, against what it adds
# to a row in gated timing (calls 4-5: 11-15 us at b1 x 128K after the weights and batch changes).
# ncu serializes the kernels (no programmatic overlap), so gpu__time_duration is each kernel's own
# run. Rows: b1 x 128K / 32K / 4K bf16 window at both shapes, and d128 fp8 b1 x 128K. Then the same
# rows timed gated and partial-alone by bench attention (one process each), for the difference.
# Before the call: commit, tools/h200_snap.sh, carry .deps and .dev. Returns $OUT/c6.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c6; mkdir -p $W
pack() { tar czf $OUT/c6.tgz -C /tmp c6 2>/dev/null; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "build $((SECONDS-T0)) s"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
B=build/tools/tf-cuda-test
F='((24q/4kv/d256|32q/8kv/d128)/b1/(ctx131072|ctx32768|ctx4096)/bf16|32q/8kv/d128/b1/ctx131072/fp8)/window'
for t in gated partial; do
  timeout 60 $B bench attention --script-dir /tmp/nosdpa --filter "$F" --timing $t --out $W/b-$t.json > $W/b-$t.log 2>&1
  echo "bench $t rc=$? ($((SECONDS-T0)) s)"
done
timeout 240 ncu --clock-control none -k 'regex:attention_(merge|partial)' --metrics gpu__time_duration.sum,sm__cycles_active.avg \
  --csv $B bench attention --script-dir /tmp/nosdpa --filter "$F" --reps 3 --timing events > $W/ncu.csv 2> $W/ncu.err
echo "ncu rc=$? ($((SECONDS-T0)) s)"
pack
python3 - $W <<'PY' | tee $W/summary.txt
import csv, json, sys, io, statistics as st
w = sys.argv[1]
g = {r["config"] + "/" + r["format"]: r["median_us"] for r in json.load(open(w + "/b-gated.json"))["rows"]}
p = {r["config"] + "/" + r["format"]: r["median_us"] for r in json.load(open(w + "/b-partial.json"))["rows"]}
txt = open(w + "/ncu.csv").read()
lines = [l for l in txt.splitlines() if l.startswith('"')]
rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
# kernels in launch order; bench runs configs in its order: group by kernel name sequence
seq = [(r["Kernel Name"].split("(")[0].split("<")[0], r["Metric Name"], float(r["Metric Value"].replace(",", "")), r["Metric Unit"]) for r in rows]
dur = [(k, v, u) for k, m, v, u in seq if m == "gpu__time_duration.sum"]
print("ncu kernel durations in launch order (name, value, unit):")
for k, v, u in dur: print(f"  {k:45s} {v:10.2f} {u}")
print("bench: config, gated us, partial-alone us, difference")
for k in g: print(f"  {k:40s} {g[k]:8.2f} {p.get(k, 0):8.2f} {g[k] - p.get(k, 0):6.2f}")
PY
pack
echo "total $((SECONDS-T0)) s"
