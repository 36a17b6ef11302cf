#!/usr/bin/env bash
# Session 41, device call 7: the merge with more partials in flight. Call 6's ncu: the merge kernel
# alone runs 12.6-15.9 us at b1 x 128K (4.6-4.9 us at 4K), on 24-32 blocks. Variants (A = main
# after call 5: weights once per block, batch 16/32/64, kept 16):
#   B (merge-b.patch on A): batch 128 above 64 chunks (b1 x 128K: 2 batches);
#   C (HEAD, merge-c.patch on A): B, and a head's elements split over S blocks (at least two warps
#     each) while q heads x rows is below the SM count (b1: S = 2 at d128, 4 at d256).
# Same values and order: out_fnv1a must be A's on every row.
#  1. builds: HEAD (C), A (git apply -R merge-c.patch), B (A + merge-b.patch); build/ back to HEAD;
#  2. bench attention --timing gated, b1 x 4K / 32K / 128K and b8 x 32K, bf16 fp8 q4, window and
#     p16, A / B / C interleaved, 3 rounds;
#  3. HEAD: qwen-pages --backend cuda (default run); racecheck, synccheck and memcheck over the merge's
#     many-chunk cases (chunks and far-max probes: batches of 32 and 64; the drawn case of chunk 32:
#     the second tile, batch 128), while KC_CALL_S (default 400) seconds last.
# Before the call: commit (HEAD holds merge-c.patch), tools/h200_snap.sh, carry .deps and .dev.
# Returns $OUT/c7.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c7; L=${KC_CALL_S:-400}; mkdir -p $W /tmp/bin
S=reports/h100/receipts-s41
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c7.tgz -C /tmp c7 2>/dev/null; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
git apply --check -R $S/merge-c.patch 2> /dev/null || { echo "HEAD does not hold merge-c.patch"; exit 2; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp build/tools/tf-cuda-test /tmp/bin/c; echo "build C $((SECONDS-T0)) s"
git apply -R $S/merge-c.patch && ninja -C build tf-cuda-test > $W/build-a.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/a \
  || { echo "build A failed"; tail -20 $W/build-a.log; }
if [ "${KC_LEAN:-0}" != 1 ]; then  # KC_LEAN=1: A and C only, 2 rounds, shorter sanitizer limits (a short grant)
  git apply $S/merge-b.patch && ninja -C build tf-cuda-test > $W/build-b.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/b \
    || { echo "build B failed"; tail -20 $W/build-b.log; }
  git apply -R $S/merge-b.patch
fi
git apply $S/merge-c.patch
echo "builds $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='(b1/ctx131072|b1/ctx32768|b8/ctx32768|b1/ctx4096)/(bf16|fp8|q4)/(window|p16)'
rounds="1 2 3"; [ "${KC_LEAN:-0}" = 1 ] && rounds="1 2"
for r in $rounds; do
  order="a b c"; [ $r = 2 ] && order="c a b"; [ $r = 3 ] && order="b c a"
  for v in $order; do
    [ -x /tmp/bin/$v ] || continue
    timeout 90 /tmp/bin/$v bench attention --script-dir /tmp/nosdpa --filter "$F" --timing gated --out $W/ab-$v-$r.json > $W/ab-$v-$r.log 2>&1
    echo "bench $v $r rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 - $W > $W/ab-summary.txt <<'PY'
import json, sys, glob
w = sys.argv[1]
t = {}
for f in sorted(glob.glob(w + "/ab-*.json")):
    _, v, r = f.rsplit("/", 1)[1][:-5].split("-")
    for x in json.load(open(f))["rows"]:
        k = x["config"] + "/" + x["format"] + "/" + x["addressing"]
        t.setdefault(k, {}).setdefault(v, []).append((x["median_us"], x.get("out_fnv1a")))
print(f"{'row (gated us, best of 3)':44s} {'A':>8s} {'B':>8s} {'C':>8s} {'B/A':>6s} {'C/A':>6s} bytes")
groups = {}
for k in sorted(t):
    x = t[k]
    if not all(v in x for v in "ac"):
        print(k, "missing", list(x)); continue
    a, c = min(x["a"]), min(x["c"])
    b = min(x["b"]) if "b" in x else (0.0, None)
    same = len({y for v in x.values() for _, y in v}) == 1
    g = k.split("/")[3] + "/" + k.split("/")[4]
    groups.setdefault(g, []).append((b[0] / a[0], c[0] / a[0]))
    print(f"{k:44s} {a[0]:8.2f} {b[0]:8.2f} {c[0]:8.2f} {b[0] / a[0]:6.3f} {c[0] / a[0]:6.3f} {'same' if same else 'DIFF'}")
for g, v in groups.items():
    b = sorted(x for x, _ in v); c = sorted(y for _, y in v)
    print(f"{g}: B/A median {b[len(b) // 2]:.3f} ({b[0]:.3f}-{b[-1]:.3f}), C/A median {c[len(c) // 2]:.3f} ({c[0]:.3f}-{c[-1]:.3f}), {len(v)} rows")
PY
cat $W/ab-summary.txt | tail -6; pack
timeout 100 /tmp/bin/c qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages C rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages.log | tail -1)"
pack
san() {  # san TOOL LIMIT_S
  local t=$(( $2 < $(left) - 5 ? $2 : $(left) - 5 ))
  [ "$t" -ge 20 ] || { echo "$1: not run (time)"; return; }
  timeout $t compute-sanitizer --tool $1 --error-exitcode 9 /tmp/bin/c qwen-pages --backend cuda --cases 3 \
    --filter 'probe=(chunks|far-max)|chunk=32,' --gates-only --out $W/san-$1.json > $W/san-$1.log 2>&1
  echo "$1 (limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$1.log | tail -1
  pack
}
if [ "${KC_LEAN:-0}" = 1 ]; then san racecheck 70; san memcheck 40; else san racecheck 120; san synccheck 60; san memcheck 60; fi
echo "total $((SECONDS-T0)) s"
