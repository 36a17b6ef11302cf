#!/usr/bin/env bash
# Session 59, device call 3: the merge's elements over several blocks. Call 1 cut the merge kernel's
# instructions 5.5x (d128 b1 x 128K: 879K -> 161K warp instructions, 12.7 -> 8.6 us alone, ncu); its
# 24-32 blocks at b1 still read 134-180 KB each. HEAD (S, fa5848e): a (row, head)'s elements over
# 2-4 blocks while the grid has an SM a block (b1: 96-128 blocks), each thread's sums unchanged, the
# first tile's m and l loaded before any is used. S1: S's binary with KC_MERGE_SPLIT=1 (one block a
# head). N: 0d1dd92's merge.cu (.dev/n/, call 1's N) built in the same tree.
#  1. builds S and N; 2. bench attention --timing gated, the 36 window rows, N / S / S1 interleaved,
#  3 rounds (out_fnv1a must agree); 3. ncu of the merge alone, N / S / S1, three rows;
#  4. S: qwen-pages --backend cuda, default and KC_MERGE_SPLIT=1, with the coverage's paths.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c3.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c3; L=${KC_CALL_S:-560}; mkdir -p $W /tmp/bin
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c3.tgz -C /tmp c3 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1 | tee -a $W/head.txt
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C /tmp/build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp /tmp/build/tools/tf-cuda-test /tmp/bin/s; echo "build S $((SECONDS-T0)) s"
O=/tmp/build/CMakeFiles/kc_kernels_obj.dir/kernels/attention/merge.cu.o
cp kernels/attention/merge.cu /tmp/merge-s.cu
cp .dev/n/merge.cu kernels/attention/merge.cu
ninja -C /tmp/build tf-cuda-test > $W/build-n.log 2>&1 && cp /tmp/build/tools/tf-cuda-test /tmp/bin/n \
  || { echo "build N failed"; tail -20 $W/build-n.log; }
cp /tmp/merge-s.cu kernels/attention/merge.cu
echo "builds $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='(b1/ctx131072|b1/ctx32768|b1/ctx4096|b8/ctx32768|b8/ctx131072|b32/ctx32768)/(bf16|fp8|q4)/window'
run() {  # run VARIANT ROUND
  local bin=/tmp/bin/$1; [ $1 = t ] && bin=/tmp/bin/s
  [ -x $bin ] || return
  if [ $1 = t ]; then pre="env KC_MERGE_SPLIT=1"; else pre=""; fi
  timeout 120 $pre $bin bench attention --script-dir /tmp/nosdpa --filter "$F" --timing gated --out $W/ab-$1-$2.json > $W/ab-$1-$2.log 2>&1
  echo "bench $1 $2 rc=$? ($((SECONDS-T0)) s)"
}
for r in 1 2 3; do
  [ $(left) -gt 200 ] || { echo "round $r: not run (time)"; break; }
  order="n s t"; [ $r = 2 ] && order="s t n"; [ $r = 3 ] && order="t n s"
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
        t.setdefault(k, {}).setdefault(v, []).append((x["median_us"], x.get("out_fnv1a"), ",".join(x.get("kernel_paths", []))))
print(f"{'row (gated us, best of runs)':44s} {'N':>8s} {'S':>8s} {'S1':>8s} {'S/N':>6s} {'S1/N':>6s} bytes  S's merge")
groups = {}
for k in sorted(t):
    x = t[k]
    if not all(v in x for v in "nst"):
        print(k, "missing", list(x)); continue
    a, n, p = min(x["n"]), min(x["s"]), min(x["t"])
    same = len({y for v in x.values() for _, y, _ in v}) == 1
    g = "/".join(k.split("/")[3:5])
    groups.setdefault(g, []).append((n[0] / a[0], p[0] / a[0]))
    merge = [s for s in n[2].split(",") if s.startswith("merge")]
    print(f"{k:44s} {a[0]:8.2f} {n[0]:8.2f} {p[0]:8.2f} {n[0] / a[0]:6.3f} {p[0] / a[0]:6.3f} {'same' if same else 'DIFF'}  {';'.join(merge)}")
for g, v in groups.items():
    n = sorted(x for x, _ in v); p = sorted(y for _, y in v)
    print(f"{g}: S/N median {n[len(n) // 2]:.3f} ({n[0]:.3f}-{n[-1]:.3f}), S1/N median {p[len(p) // 2]:.3f} ({p[0]:.3f}-{p[-1]:.3f}), {len(v)} rows")
PY
pack
ncu_row() {  # ncu_row VARIANT ROW
  local bin=/tmp/bin/$1 pre=""; [ $1 = t ] && { bin=/tmp/bin/s; pre="env KC_MERGE_SPLIT=1"; }
  [ $(left) -gt 60 ] || { echo "ncu $1 $2: not run (time)"; return; }
  timeout 60 $pre ncu --clock-control none -k regex:attention_merge -c 3 --csv \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size \
    $bin bench attention --script-dir /tmp/nosdpa --filter "$2" --timing gated --out /tmp/ncu-junk.json > $W/ncu-$1-$(echo $2 | tr '/' '_').csv 2>&1
  echo "ncu $1 $2 rc=$? ($((SECONDS-T0)) s)"
}
for row in '32q/8kv/d128/b1/ctx131072/bf16/window' '24q/4kv/d256/b8/ctx32768/bf16/window' '24q/4kv/d256/b1/ctx131072/fp8/window'; do
  for v in n s t; do ncu_row $v "$row"; done
done
python3 - $W > $W/ncu-summary.txt <<'PY'
import csv, glob, sys, io
w = sys.argv[1]
for f in sorted(glob.glob(w + "/ncu-*.csv")):
    txt = open(f).read(); i = txt.find('"ID"')
    if i < 0: print(f.rsplit("/", 1)[1], "no csv"); continue
    m = {}
    for r in csv.DictReader(io.StringIO(txt[i:])):
        m.setdefault(r["Metric Name"], []).append(r["Metric Value"])
    print(f.rsplit("/", 1)[1][4:-4], {k: v for k, v in m.items()})
PY
pack
for mode in default split1; do
  [ $(left) -gt 45 ] || { echo "qwen-pages $mode: not run (time)"; continue; }
  pre=""; [ $mode = split1 ] && pre="env KC_MERGE_SPLIT=1"
  timeout $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) $pre /tmp/bin/s qwen-pages --backend cuda --out $W/qwen-pages-$mode.json > $W/qwen-pages-$mode.log 2>&1
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
echo "total $((SECONDS-T0)) s"
cat $W/ab-summary.txt | tail -8
