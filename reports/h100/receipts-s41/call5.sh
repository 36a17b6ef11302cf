#!/usr/bin/env bash
# Session 41, device call 5: the merge's weights once per block with a batch that grows with the
# chunks (HEAD, merge-wa.patch: 16 up to 16 chunks, 32 up to 32, 64 above) against main (HEAD
# without it) and W (main + merge-w.patch: the weights once per block, batch 16). Call 4 measured W
# 2.2 % faster at b1 x 128K and call 4's HEAD (W with the next batch loaded before the current
# one's sums, merge-wp.patch) slower: it is dropped. Same values and order: out_fnv1a must be
# main's on every row.
#  1. builds: HEAD, main (git apply -R merge-wa.patch), W (main + merge-w.patch); build/ back to HEAD;
#  2. bench attention --timing gated, b1 x 4K / 32K / 128K and b8 x 32K / 128K rows, bf16 fp8 q4,
#     window and p16, main / W / HEAD interleaved, 3 rounds; main once with --timing partial;
#  3. HEAD: qwen-pages --backend cuda (default run), then racecheck and memcheck over the probes
#     that run many chunks through the merge (far-max: 43-44 chunks, batch 64), those that reach
#     the short kernels, and the drawn case of chunk 32 (about 282 chunks: the merge's second tile).
# Before the call: commit (HEAD holds merge-wa.patch), tools/h200_snap.sh, carry .deps and .dev.
# Returns $OUT/c5.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c5; L=${KC_CALL_S:-540}; mkdir -p $W /tmp/bin
S=reports/h100/receipts-s41
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c5.tgz -C /tmp c5 2>/dev/null; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
git apply --check -R $S/merge-wa.patch 2> /dev/null || { echo "HEAD does not hold merge-wa.patch"; exit 2; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp build/tools/tf-cuda-test /tmp/bin/head; echo "build head $((SECONDS-T0)) s"
git apply -R $S/merge-wa.patch && ninja -C build tf-cuda-test > $W/build-main.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/main \
  || { echo "build main failed"; tail -20 $W/build-main.log; }
git apply $S/merge-w.patch && ninja -C build tf-cuda-test > $W/build-w.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/w \
  || { echo "build W failed"; tail -20 $W/build-w.log; }
git apply -R $S/merge-w.patch && git apply $S/merge-wa.patch
echo "builds $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='(b1/ctx131072|b1/ctx32768|b8/ctx32768|b1/ctx4096|b8/ctx131072)/(bf16|fp8|q4)/(window|p16)'
for r in 1 2 3; do
  order="main w head"; [ $r = 2 ] && order="head main w"; [ $r = 3 ] && order="w head main"
  for v in $order; do
    timeout 120 /tmp/bin/$v bench attention --script-dir /tmp/nosdpa --filter "$F" --timing gated --out $W/ab-$v-$r.json > $W/ab-$v-$r.log 2>&1
    echo "bench $v $r rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
timeout 120 /tmp/bin/main bench attention --script-dir /tmp/nosdpa --filter "$F" --timing partial --out $W/partial-main.json > $W/partial-main.log 2>&1
echo "bench main partial rc=$? ($((SECONDS-T0)) s)"
python3 - $W > $W/ab-summary.txt <<'PY'
import json, sys, glob
w = sys.argv[1]
t = {}
for f in sorted(glob.glob(w + "/ab-*.json")):
    _, v, r = f.rsplit("/", 1)[1][:-5].split("-")
    for x in json.load(open(f))["rows"]:
        k = x["config"] + "/" + x["format"] + "/" + x["addressing"]
        t.setdefault(k, {}).setdefault(v, []).append((x["median_us"], x.get("out_fnv1a")))
part = {}
try:
    for x in json.load(open(w + "/partial-main.json"))["rows"]:
        part[x["config"] + "/" + x["format"] + "/" + x["addressing"]] = x["median_us"]
except Exception as e:
    print("partial-main unreadable:", e)
print(f"{'row (gated us, best of 3)':44s} {'partial':>8s} {'main':>8s} {'W':>8s} {'HEAD':>8s} {'W/main':>7s} {'HEAD/main':>9s} bytes")
groups = {}
for k in sorted(t):
    x = t[k]
    if not all(v in x for v in ("main", "w", "head")):
        print(k, "missing", list(x)); continue
    m, a, h = min(x["main"]), min(x["w"]), min(x["head"])
    same = len({y for v in x.values() for _, y in v}) == 1
    g = k.split("/")[3] + "/" + k.split("/")[4]
    groups.setdefault(g, []).append((a[0] / m[0], h[0] / m[0]))
    print(f"{k:44s} {part.get(k, 0):8.2f} {m[0]:8.2f} {a[0]:8.2f} {h[0]:8.2f} {a[0] / m[0]:7.3f} {h[0] / m[0]:9.3f} {'same' if same else 'DIFF'}")
for g, v in groups.items():
    a = sorted(x for x, _ in v); h = sorted(y for _, y in v)
    print(f"{g}: W/main median {a[len(a) // 2]:.3f} ({a[0]:.3f}-{a[-1]:.3f}), HEAD/main median {h[len(h) // 2]:.3f} ({h[0]:.3f}-{h[-1]:.3f}), {len(v)} rows")
PY
cat $W/ab-summary.txt; pack
timeout 120 /tmp/bin/head qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages head rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages.log | tail -1)"
pack
san() {  # san TOOL LIMIT_S: probes through the merge's batches and tiles, and the short kernels
  local t=$(( $2 < $(left) - 10 ? $2 : $(left) - 10 ))
  [ "$t" -ge 20 ] || { echo "$1: not run (time)"; return; }
  timeout $t compute-sanitizer --tool $1 --error-exitcode 9 /tmp/bin/head qwen-pages --backend cuda --cases 3 \
    --filter 'probe=(chunks|far-max|peaked|tiny|q4-ties)|chunk=32,' --gates-only --out $W/san-$1.json > $W/san-$1.log 2>&1
  echo "$1 (limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$1.log | tail -1
  python3 -c "import json; kp=json.load(open('$W/san-$1.json'))['numbers']['coverage']['kernel_path']; print(sorted(k for k in kp if 'short' in k or 'merge' in k))" 2>/dev/null
  pack
}
san racecheck 200
san memcheck 120
pack
echo "total $((SECONDS-T0)) s"
