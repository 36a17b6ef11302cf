#!/usr/bin/env bash
# Session 41, device call 3: the short path's softmax and p.v with their loads batched (HEAD,
# short-batch.patch), against main (HEAD without the patch), on the b1 x 4K rows (issue 20).
# The patch changes only the short-row kernels (their PTX; every regular kernel's PTX is main's,
# checked here): warp_softmax takes 8 of a lane's scores per batch, p's fragments and the p.v
# are unrolled by 4; the sums run in the same order, so out_fnv1a must equal main's on every row.
#  1. readprobe.cu (its L2 flush now by reads): 16 MB read cold, by load method;
#  2. builds: HEAD, main (git apply -R), and HEAD with -DKC_MMA_PHASES (the short kernels' phase
#     stamps, stderr);
#  3. bench attention, b1 x 4K rows, gated and graph timing, main / HEAD interleaved, 3 rounds;
#  4. HEAD: qwen-pages --backend cuda (default run: 72 cases, every short kernel), then racecheck and
#     synccheck over qwen-pages cases, while KC_CALL_S (default 540) seconds last;
#  5. the phases build's b1 x 4K rows (--timing partial).
# Before the call: commit (HEAD holds the patch), tools/h200_snap.sh, carry .deps and .dev.
# Returns $OUT/c3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c3; L=${KC_CALL_S:-540}; mkdir -p $W /tmp/bin
S=reports/h100/receipts-s41
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c3.tgz -C /tmp c3 2>/dev/null; }
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
git apply --check -R $S/short-batch.patch 2> /dev/null || { echo "HEAD does not hold short-batch.patch"; exit 2; }
nvcc -O3 -std=c++17 -arch=sm_90 $S/readprobe.cu -o $W/readprobe > $W/probe-build.log 2>&1 && timeout 60 $W/readprobe > $W/readprobe.txt 2>&1
echo "readprobe rc=$? ($((SECONDS-T0)) s)"
conf() {  # conf DIR [extra cmake args]
  local d=$1; shift
  cmake -S . -B $d -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF "$@" > $W/cmake-$(basename $d).log 2>&1
}
conf build && ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp build/tools/tf-cuda-test /tmp/bin/head; echo "build head $((SECONDS-T0)) s"
git apply -R $S/short-batch.patch && ninja -C build tf-cuda-test > $W/build-main.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/main \
  || { echo "build main failed"; tail -20 $W/build-main.log; }
git apply $S/short-batch.patch
echo "build main $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
# the phases build in the background while the A/B runs on the device (16 cores)
(conf /tmp/bph "-DCMAKE_CUDA_FLAGS=-DKC_MMA_PHASES" && nice ninja -C /tmp/bph tf-cuda-test > $W/build-phases.log 2>&1) &
bg=$!
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
for r in 1 2 3; do
  order="main head"; [ $r = 2 ] && order="head main"
  for v in $order; do
    for t in gated graph; do
      timeout 60 /tmp/bin/$v bench attention --reps 40 --script-dir /tmp/nosdpa --filter 'b1/ctx4096/' --timing $t \
        --out $W/ab-$v-$t-$r.json > $W/ab-$v-$t-$r.log 2>&1
      echo "bench $v $t $r rc=$? ($((SECONDS-T0)) s)"
    done
  done
  pack
done
python3 - $W > $W/ab-summary.txt <<'PY'
import json, sys, glob
w = sys.argv[1]
t = {}
for f in sorted(glob.glob(w + "/ab-*.json")):
    _, v, tm, r = f.rsplit("/", 1)[1][:-5].split("-")
    for x in json.load(open(f))["rows"]:
        k = (x["config"].replace("/b1/ctx4096", "") + "/" + x["format"] + "/" + x["addressing"], tm)
        t.setdefault(k, {}).setdefault(v, []).append((x["median_us"], x.get("out_fnv1a")))
ratios = {"gated": [], "graph": []}
slow = {}
print(f"{'row (b1 x 4K)':34s} {'timing':6s} {'main us':>8s} {'head us':>8s} {'head/main':>9s} bytes")
for (k, tm) in sorted(t):
    x = t[(k, tm)]
    if "main" not in x or "head" not in x:
        print(k, tm, "missing", list(x)); continue
    m, h = min(x["main"]), min(x["head"])
    same = len({y for _, y in x["main"] + x["head"]}) == 1
    ratios[tm].append(h[0] / m[0])
    fmt = k.split("/")[3]
    slow.setdefault((k.split("/")[2], tm), {}).setdefault("main", []).append(m[0])
    slow[(k.split("/")[2], tm)].setdefault("head", []).append(h[0])
    print(f"{k:34s} {tm:6s} {m[0]:8.2f} {h[0]:8.2f} {h[0] / m[0]:9.3f} {'same' if same else 'DIFF'}")
for tm, r in ratios.items():
    if r:
        r.sort()
        print(f"{tm}: head/main median {r[len(r) // 2]:.3f}, min {r[0]:.3f}, max {r[-1]:.3f} over {len(r)} rows")
for (d, tm), v in sorted(slow.items()):
    print(f"slowest row {d} {tm}: main {max(v['main']):.2f} us, head {max(v['head']):.2f} us")
PY
cat $W/ab-summary.txt; pack
timeout 150 /tmp/bin/head qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages head rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages.log | tail -1)"
pack
san() {  # san TOOL LIMIT_S: the default cases reach every short kernel (probes 38-42)
  local t=$(( $2 < $(left) - 60 ? $2 : $(left) - 60 ))
  [ "$t" -ge 20 ] || { echo "$1: not run (time)"; return; }
  timeout $t compute-sanitizer --tool $1 --error-exitcode 9 /tmp/bin/head qwen-pages --backend cuda --cases 4 \
    --gates-only --out $W/san-$1.json > $W/san-$1.log 2>&1
  echo "$1 (limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1.log | tail -1)"
  pack
}
san racecheck 150
san synccheck 90
wait $bg; echo "phases build rc=$? ($((SECONDS-T0)) s)"
if [ -x /tmp/bph/tools/tf-cuda-test ] && [ $(left) -gt 40 ]; then
  timeout $(( $(left) - 20 )) /tmp/bph/tools/tf-cuda-test bench attention --reps 5 --script-dir /tmp/nosdpa \
    --filter 'b1/ctx4096/.*/window' --timing partial --out $W/phases.json > $W/phases.log 2>&1
  echo "phases rc=$? ($((SECONDS-T0)) s)"
  grep "short phases" $W/phases.log | awk '{k=$3" "$4" "$5" "$6; c[k]++; if (c[k]==4) print}'
fi
pack
cat $W/readprobe.txt
echo "total $((SECONDS-T0)) s"
