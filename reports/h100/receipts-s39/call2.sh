#!/usr/bin/env bash
# Session 38, device call 2 (prepared, not run: the session's device time ran out): the q4
# partial's prologue (call 1's ncu: the V scale load's first use holds 6.3 % (d256) / 4.4 % (d128)
# of all stall samples, the prologue 29 % of d256's samples).
#  A (prologue-A.patch): the first 2 x 256 keys' page-table loads, then their V scale loads, go out
#    together before q's rotation and fragments, and reach shared memory after them;
#  B (prologue-B.patch, with KC_S38_B=1 only): the same loads together, stored at once, before q;
#  C (HEAD: prologue-C.patch applied): as A, but the positions are stored as soon as the scale
#    loads are out, so only the scale rows stay live across q (ptxas: spills near main's).
# Same arithmetic: the bench's out_fnv1a must equal main's on every row. bench attention, q4 and
# bf16 rows of both shapes, main / A / (B) / C interleaved, 3 rounds; then qwen-pages --backend cuda
# (default cases, controls) on the faster variant, and memcheck / synccheck / racecheck over its q4
# cases while time lasts. Returns $OUT/s38-call2.tgz.
# Before the call: git apply reports/h200/receipts-s38/prologue-C.patch, commit (HEAD = C: its
# receipts then carry a clean commit), tools/h200_snap.sh. Main is HEAD without the patch.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w2; mkdir -p $W /tmp/bin
S=reports/h200/receipts-s38
pack() { tar czf $OUT/s38-call2.tgz -C /tmp w2 2>/dev/null; }
H=$(cat .dev/snap/head)
rm -rf .git && git init -q && cp .dev/snap/pack-*.pack .dev/snap/pack-*.idx .git/objects/pack/ && echo $H > .git/shallow \
  && git update-ref refs/heads/main $H && git symbolic-ref HEAD refs/heads/main && git read-tree HEAD \
  && { git update-index -q --refresh > /dev/null; true; } || { echo "git snapshot failed"; exit 4; }
echo "head $H, changed tracked files: $(git status --short --untracked-files=no | wc -l)" | tee $W/head.txt
git apply --check -R $S/prologue-C.patch 2> /dev/null \
  || { echo "HEAD does not hold prologue-C.patch: apply and commit it first (git apply $S/prologue-C.patch)"; exit 2; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
cp build/tools/tf-cuda-test /tmp/bin/C; echo "build C (HEAD) $((SECONDS-T0)) s"
# main = HEAD without C; A and B = main with their patches; then the tree and build/ back to HEAD.
git apply -R $S/prologue-C.patch && ninja -C build tf-cuda-test > $W/build-main.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/main \
  || { echo "build main failed"; tail -20 $W/build-main.log; }
echo "build main $((SECONDS-T0)) s"
git apply $S/prologue-A.patch && ninja -C build tf-cuda-test > $W/build-A.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/A \
  || { echo "build A failed"; tail -20 $W/build-A.log; }
git apply -R $S/prologue-A.patch
echo "build A $((SECONDS-T0)) s"
if [ "${KC_S38_B:-0}" = 1 ]; then  # B only on request (device time was short: the last call ran without it)
  git apply $S/prologue-B.patch && ninja -C build tf-cuda-test > $W/build-B.log 2>&1 && cp build/tools/tf-cuda-test /tmp/bin/B \
    || { echo "build B failed"; tail -20 $W/build-B.log; }
  git apply -R $S/prologue-B.patch
fi
git apply $S/prologue-C.patch && ninja -C build tf-cuda-test > $W/build-head.log 2>&1 \
  && cmp -s build/tools/tf-cuda-test /tmp/bin/C && echo "build/ is HEAD's again ($((SECONDS-T0)) s), git: $(git status --short --untracked-files=no | wc -l) changed" \
  || echo "build/ rebuilt from HEAD's tree (not byte-identical to the first build, or a step failed)"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='(24q/4kv/d256|32q/8kv/d128)/(b8/ctx32768|b32/ctx32768|b1/ctx131072|b8/ctx4096|b1/ctx4096)/(bf16|q4)/window'
for r in 1 2 3; do
  order="main A B C"; [ $r = 2 ] && order="C B A main"; [ $r = 3 ] && order="A C main B"
  for v in $order; do
    [ -x /tmp/bin/$v ] || continue
    timeout 120 /tmp/bin/$v bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$F" --out $W/ab-$v-$r.json > $W/ab-$v-$r.log 2>&1
    echo "bench $v $r rc=$? ($((SECONDS-T0)) s)"
  done
  pack
done
python3 - $W > $W/ab-summary.txt <<'PY'
import json, sys, glob
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/ab-*.json")):
    v = f.rsplit("/", 1)[1].split("-")[1]
    for r in json.load(open(f))["rows"]:
        k = r["config"] + "/" + r["format"]
        t.setdefault(k, {}).setdefault(v, []).append((r["median_us"], r.get("out_fnv1a")))
best = {}
for k, x in t.items():
    m = min(x["main"])
    line = f"{k:44s} main {m[0]:8.2f}"
    for v in ("A", "B", "C"):
        if v in x:
            b = min(x[v]); same = all(h == m[1] for _, h in x[v])
            line += f" | {v} {b[0]:8.2f} {b[0] / m[0]:.3f} {'same' if same else 'DIFF'}"
            if k.endswith("q4"): best.setdefault(v, []).append(b[0] / m[0])
    print(line)
for k in ("24q/4kv/d256/b8/ctx32768", "32q/8kv/d128/b8/ctx32768"):
    for v in ("main", "A", "B", "C"):
        if v in t.get(k + "/q4", {}):
            print(f"q4/bf16 {k} {v}: {min(t[k + '/q4'][v])[0] / min(t[k + '/bf16'][v])[0]:.3f}")
g = {v: sorted(r)[len(r) // 2] for v, r in best.items()}
print("median q4 ratio to main:", g)
print("pick", min(g, key=g.get) if g else "none")
PY
cat $W/ab-summary.txt; pack
P=$(tail -1 $W/ab-summary.txt | awk '{print $2}')
Q=/tmp/bin/$P; [ "$P" = C ] && Q=build/tools/tf-cuda-test  # HEAD's binary: a receipt at HEAD's commit
if [ -x /tmp/bin/$P ]; then
  timeout 200 $Q qwen-pages --backend cuda --quiet --out $W/qp-$P.json > $W/qp-$P.log 2>&1
  echo "qwen-pages $P rc=$? ($((SECONDS-T0)) s)"
  python3 -c "
import json; d=json.load(open('$W/qp-$P.json')); print(d['verdict'], d['cases'])
print(' gates:', ' '.join(f\"{g['name']} {g['passed']}/{g['failed']}\" for g in d['gates']))
print(' controls red:', sum(1 for c in d['controls'] if c.get('red') or c.get('status') in ('red','caught')), 'of', len(d['controls']))" 2>&1 | head -8
fi
pack
# The sanitizers on the picked variant's q4 cases, while the call's time lasts (racecheck and
# synccheck: the change moves loads across q's shuffles and the block barrier's neighbours).
if [ -x /tmp/bin/$P ]; then
  for tool in memcheck synccheck racecheck; do
    [ $((SECONDS-T0)) -lt 420 ] || { echo "$tool: not run (time)"; continue; }
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $Q qwen-pages --backend cuda --cases 30 \
      --filter 'fmt=q4' --gates-only --quiet --out $W/san-$tool.json > $W/san-$tool.log 2>&1
    echo "$tool $P rc=$? ($((SECONDS-T0)) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' $W/san-$tool.log | tail -1)"
  done
fi
pack
echo "total $((SECONDS-T0)) s"
