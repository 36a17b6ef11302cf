#!/usr/bin/env bash
# Session 39, device call 4 (the short one, when too little device time was left for call 3's
# premerge): HEAD (the kept prologue, kept.patch over b07ff9e's kernel) against main's kernel
# (kept.patch reversed), same call: bench attention's q4 and bf16 rows of both shapes,
# interleaved, 2 rounds (out_fnv1a must match on every row); qwen-pages --backend cuda at HEAD
# (a receipt of a clean commit); memcheck and synccheck over its q4 cases; all within KC_CALL_S
# (default 200) seconds. Before the call: git apply reports/h100/receipts-s39/kept.patch, commit,
# tools/h200_snap.sh (carry .deps and .dev).
# Returns $OUT/s39-call4.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w4; L=${KC_CALL_S:-200}; mkdir -p $W /tmp/bin
S=reports/h100/receipts-s39
pack() { tar czf $OUT/s39-call4.tgz -C /tmp w4 2>/dev/null; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
git apply --check -R $S/kept.patch 2> /dev/null || { echo "HEAD does not hold kept.patch"; exit 2; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build HEAD $((SECONDS-T0)) s"
timeout 60 build/tools/tf-cuda-test qwen-pages --backend cuda --quiet --out $W/qp-head.json > $W/qp-head.log 2>&1
echo "qwen-pages HEAD rc=$? ($((SECONDS-T0)) s): $(tail -2 $W/qp-head.log | head -1)"
pack
cp build/tools/tf-cuda-test /tmp/bin/head
git apply -R $S/kept.patch && ninja -C build tf-cuda-test > $W/build-main.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/main \
  || { echo "build main failed"; tail -20 $W/build-main.log; }
git apply $S/kept.patch
echo "build main $((SECONDS-T0)) s"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='(24q/4kv/d256|32q/8kv/d128)/(b8/ctx32768|b32/ctx32768|b1/ctx131072|b8/ctx4096|b1/ctx4096)/(bf16|q4)/window'
for r in 1 2; do
  order="main head"; [ $r = 2 ] && order="head main"
  for v in $order; do
    [ -x /tmp/bin/$v ] || continue
    timeout 40 /tmp/bin/$v bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$F" --out $W/ab-$v-$r.json > $W/ab-$v-$r.log 2>&1
    echo "bench $v $r rc=$? ($((SECONDS-T0)) s)"
  done
done
pack
python3 - $W > $W/ab-summary.txt <<'PY'
import json, sys, glob
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/ab-*.json")):
    v = f.rsplit("/", 1)[1].split("-")[1]
    for r in json.load(open(f))["rows"]:
        t.setdefault(r["config"] + "/" + r["format"], {}).setdefault(v, []).append((r["median_us"], r.get("out_fnv1a")))
for k, x in t.items():
    if "main" not in x or "head" not in x: continue
    m, h = min(x["main"]), min(x["head"])
    same = all(y[1] == m[1] for y in x["head"] + x["main"])
    print(f"{k:44s} main {m[0]:8.2f} head {h[0]:8.2f} {h[0] / m[0]:.3f} {'same' if same else 'DIFF'}")
for k in ("24q/4kv/d256/b8/ctx32768", "32q/8kv/d128/b8/ctx32768"):
    for v in ("main", "head"):
        if v in t.get(k + "/q4", {}) and v in t.get(k + "/bf16", {}):
            print(f"q4/bf16 {k} {v}: {min(t[k + '/q4'][v])[0] / min(t[k + '/bf16'][v])[0]:.3f}")
PY
cat $W/ab-summary.txt
for tool in memcheck synccheck; do
  [ $((SECONDS-T0)) -lt $((L-40)) ] || { echo "$tool: not run (time)"; continue; }
  timeout $((L-SECONDS+T0-5)) compute-sanitizer --tool $tool --error-exitcode 9 /tmp/bin/head qwen-pages --backend cuda --cases 30 \
    --filter 'fmt=q4' --gates-only --quiet --out $W/san-$tool.json > $W/san-$tool.log 2>&1
  echo "$tool head rc=$? ($((SECONDS-T0)) s): $(grep -E 'ERROR SUMMARY' $W/san-$tool.log | tail -1)"
done
pack
echo "total $((SECONDS-T0)) s"
