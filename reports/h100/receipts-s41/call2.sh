#!/usr/bin/env bash
# Session 41, device call 2, at HEAD:
# 1. readprobe.cu: how fast each load method reads the 16 MB of a b1 x 4K row from DRAM, cold
#    (issue 20's b1 x 4K lead; the short path's phases read them at about 2.4 TB/s);
# 2. bench attention's b1 x 4K rows in each timing (events, gated, graph, partial);
# 3. on an H200 only (the issue's targets are the H200's): the receipts the README cites, re-made
#    at HEAD by tools/h200_receipts.sh with KC_PREBUILT=1, while KC_CALL_S (default 540) seconds last.
# Before the call: commit, tools/h200_snap.sh, carry .deps and .dev, timeout_s about KC_CALL_S + 40.
# Returns $OUT/c2.tgz (the device returns at most 8 files).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c2; L=${KC_CALL_S:-540}; mkdir -p $W
pack() { tar czf $OUT/c2.tgz -C /tmp c2; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$card" | tee -a $W/head.txt
nvcc -O3 -std=c++17 -arch=sm_90 reports/h100/receipts-s41/readprobe.cu -o $W/readprobe > $W/probe-build.log 2>&1 &&
  timeout 60 $W/readprobe > $W/readprobe.txt 2>&1
echo "readprobe rc=$? ($((SECONDS-T0)) s)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; pack; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "build $((SECONDS-T0)) s"
pack
for t in events gated graph partial; do
  timeout 90 build/tools/tf-cuda-test bench attention --filter 'b1/ctx4096/' --timing $t --out $W/b1-$t.json > $W/b1-$t.log 2>&1
  echo "b1 x 4K --timing $t rc=$? ($((SECONDS-T0)) s)"
done
python3 - $W <<'EOF' | tee $W/b1-table.txt
import json, sys
w = sys.argv[1]
t = {}
for m in ("events", "gated", "graph", "partial"):
    try:
        for r in json.load(open(f"{w}/b1-{m}.json"))["rows"]:
            t.setdefault((r["config"], r["format"], r.get("addressing", "")), {})[m] = r.get("median_us")
    except Exception as e:
        print(m, "unreadable:", e)
print("row (b1 x 4K)", *("events gated graph partial".split()), sep="\t")
for k in sorted(t):
    print("/".join(k).replace("/b1/ctx4096", ""), *(f"{t[k].get(m, 0):.1f}" for m in ("events", "gated", "graph", "partial")), sep="\t")
EOF
pack
case "$card" in
  *H200*)
    timeout $((L - SECONDS + T0 - 15)) env KC_PREBUILT=1 bash tools/h200_receipts.sh $W/r $W/r-logs > $W/receipts.out 2>&1
    echo "h200_receipts rc=$? ($((SECONDS-T0)) s)"
    tail -15 $W/receipts.out
    ;;
  *) echo "receipts: not made (card $card; the issue's targets are the H200's)";;
esac
pack
cat $W/readprobe.txt
echo "total $((SECONDS-T0)) s"
