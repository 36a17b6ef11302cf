#!/usr/bin/env bash
# Session 50, call 2 (any card): the short path's V slice in VQ cp.async commit groups, the p.v
# taking each group's tiles once that group is in (HEAD: VQ = 4, short-vgroups.patch), against main
# (HEAD without the patch) and VQ = 2 (HEAD built with -DKC_SHORT_VGROUPS=2). Only the bf16 / fp8
# short kernels change; the sums run in the same order, so out_fnv1a must equal main's on every row.
#  1. builds: head, main (git apply -R), vq2 (its own build dir, in the background);
#  2. bench attention, b1 x 4K bf16 / fp8 rows, gated and events timing, 3 rounds interleaved;
#  3. head: qwen-pages --backend cuda (every short kernel), then racecheck and synccheck over
#     qwen-pages --cases 4 --gates-only, while KC_CALL_S (default 500) seconds last.
# Before the call: commit (HEAD holds the patch), tools/h200_snap.sh, carry .deps.tgz and .dev.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s50c2; L=${KC_CALL_S:-500}; rm -rf $W; mkdir -p $W /tmp/bin
S=reports/h200/receipts-s50
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/s50c2.tgz -C /tmp s50c2 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1 | tee -a $W/head.txt
git apply --check -R $S/short-vgroups.patch 2> /dev/null || { echo "HEAD does not hold short-vgroups.patch"; exit 2; }
conf() {  # conf DIR [extra cmake args]
  local d=$1; shift
  cmake -S . -B $d -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF "$@" > $W/cmake-$(basename $d).log 2>&1
}
(conf /tmp/bvq2 -DKC_DEBUG_INFO=0 "-DCMAKE_CUDA_FLAGS=-DKC_SHORT_VGROUPS=2" && nice ninja -C /tmp/bvq2 -j 6 tf-cuda-test > $W/build-vq2.log 2>&1 \
  && cp /tmp/bvq2/tools/tf-cuda-test /tmp/bin/vq2) & bg=$!
conf build && ninja -C build -j 10 tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp build/tools/tf-cuda-test /tmp/bin/head; echo "build head $((SECONDS-T0)) s"
git apply -R $S/short-vgroups.patch && ninja -C build tf-cuda-test > $W/build-main.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/main \
  || { echo "build main failed"; tail -20 $W/build-main.log; }
git apply $S/short-vgroups.patch
echo "build main $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
wait $bg; echo "build vq2 rc=$? $((SECONDS-T0)) s"
V="main head"; [ -x /tmp/bin/vq2 ] && V="main head vq2"
for r in 1 2 3; do
  order="$V"; [ $r = 2 ] && order=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
  for v in $order; do
    for t in gated events; do
      timeout 60 /tmp/bin/$v bench attention --reps 40 --sdpa none --filter 'b1/ctx4096/(bf16|fp8)/' --timing $t \
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
vs = [v for v in ("head", "vq2") if any(v in x for x in t.values())]
ratios = {(v, tm): [] for v in vs for tm in ("gated", "events")}
slow = {}
print(f"{'row (b1 x 4K)':30s} {'timing':6s} {'main us':>8s} " + " ".join(f"{v + ' us':>8s} {v + '/main':>9s}" for v in vs) + " bytes")
for (k, tm) in sorted(t):
    x = t[(k, tm)]
    if "main" not in x:
        print(k, tm, "missing main"); continue
    m = min(x["main"])
    same = len({y for l in x.values() for _, y in l}) == 1
    cells = []
    for v in vs:
        if v in x:
            h = min(x[v]); ratios[(v, tm)].append(h[0] / m[0]); cells.append(f"{h[0]:8.2f} {h[0] / m[0]:9.3f}")
            slow.setdefault((k.split("/")[2], tm, v), []).append(h[0])
        else:
            cells.append(f"{'-':>8s} {'-':>9s}")
    slow.setdefault((k.split("/")[2], tm, "main"), []).append(m[0])
    print(f"{k:30s} {tm:6s} {m[0]:8.2f} " + " ".join(cells) + (" same" if same else " DIFF"))
for (v, tm), r in ratios.items():
    if r:
        r.sort(); print(f"{v}/main {tm}: median {r[len(r) // 2]:.3f}, min {r[0]:.3f}, max {r[-1]:.3f} over {len(r)} rows")
for k in sorted(slow):
    print("slowest row (best of 3 rounds) %s %s %s: %.2f us" % (k + (max(slow[k]),)))
PY
cat $W/ab-summary.txt; pack
timeout 150 /tmp/bin/head qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
echo "qwen-pages head rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"
pack
san() {  # san TOOL LIMIT_S
  local t=$(( $2 < $(left) - 20 ? $2 : $(left) - 20 ))
  [ "$t" -ge 20 ] || { echo "$1: not run (time)"; return; }
  timeout $t compute-sanitizer --tool $1 --error-exitcode 9 /tmp/bin/head qwen-pages --backend cuda --cases 4 \
    --gates-only --out $W/san-$1.json > $W/san-$1.log 2>&1
  echo "$1 (limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1.log | tail -1)"
  pack
}
san racecheck 150
san synccheck 90
pack
echo "total $((SECONDS-T0)) s"
