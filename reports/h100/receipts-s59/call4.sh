#!/usr/bin/env bash
# Session 59, device call 4: the merge's row read before its wait for the partials. Call 3's split
# lost (reverted, merge-split-fa5848e.patch): the merge kernel alone read as long on 4x the blocks,
# so a thread's chain of round trips sets it. HEAD (R, 16ec58a): 0d1dd92's merge (call 1's N) with
# rows[r] read before cudaGridDependencySynchronize (the rows were in place before the partial
# began), one dependent round trip fewer. N: 0d1dd92's merge.cu (.dev/n/) in the same tree.
#  1. builds R and N; 2. bench attention --timing gated, the
#  window rows and b1 x 4K's paged ones, N / R interleaved, 4 rounds (out_fnv1a must agree);
#  3. R: qwen-pages --backend cuda; memcheck, racecheck and initcheck over the many-chunk cases.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c4.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c4; L=${KC_CALL_S:-560}; mkdir -p $W /tmp/bin
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c4.tgz -C /tmp c4 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1 | tee -a $W/head.txt
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C /tmp/build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp /tmp/build/tools/tf-cuda-test /tmp/bin/r; echo "build R $((SECONDS-T0)) s"
O=/tmp/build/CMakeFiles/kc_kernels_obj.dir/kernels/attention/merge.cu.o
cp kernels/attention/merge.cu /tmp/merge-r.cu
cp .dev/n/merge.cu kernels/attention/merge.cu
ninja -C /tmp/build tf-cuda-test > $W/build-n.log 2>&1 && cp /tmp/build/tools/tf-cuda-test /tmp/bin/n \
  || { echo "build N failed"; tail -20 $W/build-n.log; }
cp /tmp/merge-r.cu kernels/attention/merge.cu
echo "builds $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='((b1/ctx131072|b1/ctx32768|b8/ctx32768|b8/ctx131072|b32/ctx32768)/(bf16|fp8|q4)/window|b1/ctx4096/(bf16|fp8|q4)/(window|p16|p256))'
run() {  # run VARIANT ROUND
  local bin=/tmp/bin/$1 pre=""
  [ -x $bin ] || return
  timeout 120 $pre $bin bench attention --script-dir /tmp/nosdpa --filter "$F" --timing gated --out $W/ab-$1-$2.json > $W/ab-$1-$2.log 2>&1
  echo "bench $1 $2 rc=$? ($((SECONDS-T0)) s)"
}
for r in 1 2 3 4; do
  [ $(left) -gt 200 ] || { echo "round $r: not run (time)"; break; }
  order="n r"; [ $((r % 2)) = 0 ] && order="r n"
  for v in $order; do run $v $r; done
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
print(f"{'row (gated us, best of runs)':44s} {'N':>8s} {'R':>8s} {'R/N':>6s} bytes")
groups = {}
for k in sorted(t):
    x = t[k]
    if not all(v in x for v in "nr"):
        print(k, "missing", list(x)); continue
    a, n = min(x["n"]), min(x["r"])
    same = len({y for v in x.values() for _, y in v}) == 1
    g = "/".join(k.split("/")[3:5])
    groups.setdefault(g, []).append(n[0] / a[0])
    print(f"{k:44s} {a[0]:8.2f} {n[0]:8.2f} {n[0] / a[0]:6.3f} {'same' if same else 'DIFF'}")
for g, v in groups.items():
    v = sorted(v)
    print(f"{g}: R/N median {v[len(v) // 2]:.3f} ({v[0]:.3f}-{v[-1]:.3f}), {len(v)} rows")
PY
pack
for mode in default; do
  [ $(left) -gt 45 ] || { echo "qwen-pages $mode: not run (time)"; continue; }
  pre=""
  timeout $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) $pre /tmp/bin/r qwen-pages --backend cuda --out $W/qwen-pages-$mode.json > $W/qwen-pages-$mode.log 2>&1
  echo "qwen-pages $mode rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages-$mode.log | tail -1)"
  python3 -c "
import json,re,sys
r=json.load(open('$W/qwen-pages-$mode.json'))
kp=r['numbers']['coverage']['kernel_path']
names=re.findall(r'\"([^\"]+)\"', open('kernels/backend/kernel_paths.h').read().split('kKernelPathNames[] = {')[1].split('};')[0])
seen={k.split('/',2)[2] for k in kp}
print('  merge paths:', sorted((k, v) for k, v in kp.items() if '/merge' in k))
print('  not reached:', [n for n in names if not any(s.startswith(n) for s in seen)])
" 2>&1 | tee -a $W/qwen-pages-$mode.log
  pack
done
san() {  # san TOOL LIMIT_S
  local t=$(( $2 < $(left) - 5 ? $2 : $(left) - 5 ))
  [ "$t" -ge 20 ] || { echo "$1: not run (time)"; return; }
  timeout $t compute-sanitizer --tool $1 --error-exitcode 9 /tmp/bin/r qwen-pages --backend cuda \
    --cases 3 --filter 'probe=(chunks|far-max)|chunk=32,' --gates-only --out $W/san-$1.json > $W/san-$1.log 2>&1
  echo "$1 (limit $t s) rc=$? ($((SECONDS-T0)) s): $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $W/san-$1.log | tail -1)"
  grep -E '^qwen-pages:' $W/san-$1.log | tail -1
  pack
}
san memcheck 60; san initcheck 60; san racecheck 120
echo "total $((SECONDS-T0)) s"
cat $W/ab-summary.txt | tail -8
