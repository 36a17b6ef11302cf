#!/usr/bin/env bash
# Session 59, device call 1: the merge's serial path. ncu at d128 b1 x 128K (receipts-s58) counted
# 6,870 warp instructions a warp for 256 chunks (27 a chunk), one warp a scheduler: the merge was
# bound by each thread's instructions. HEAD (N): head_dim a template parameter (immediate load
# offsets), a chunk's l and weight one 8-byte shared load, full batches without guards, the same
# fmas in the same order; two batches in registers where a row has more than one batch (kept: always,
# others: where every block has an SM of its own). P: N's binary with KC_MERGE_PIPE=0 (one batch in
# registers). A: 14a4759's merge.cu and attention.cu (.dev/a/) built in the same tree.
#  1. builds N and A (a two-file rebuild); SASS counts of the merge kernels (cuobjdump);
#  2. bench attention --timing gated, 36 window rows, A / N / P interleaved, 3 rounds: out_fnv1a
#     must be A's on every row;
#  3. ncu: the merge kernel alone (duration, warp instructions, registers), A / N / P, two rows;
#  4. N: qwen-pages --backend cuda, default run and with KC_MERGE_PIPE=0; the coverage's paths.
# Before the call: commit, tools/h200_snap.sh, .dev/a/ holds the base files; carry .deps.tgz and .dev.
# Returns $OUT/c1.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c1; L=${KC_CALL_S:-560}; mkdir -p $W /tmp/bin
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c1.tgz -C /tmp c1 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | head -1 | tee -a $W/head.txt
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C /tmp/build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp /tmp/build/tools/tf-cuda-test /tmp/bin/n; echo "build N $((SECONDS-T0)) s"
O=/tmp/build/CMakeFiles/kc_kernels_obj.dir/kernels/attention/merge.cu.o
cuobjdump -sass $O > $W/sass-n.txt 2>&1
cp kernels/attention/merge.cu /tmp/merge-n.cu; cp kernels/attention/attention.cu /tmp/attention-n.cu
cp .dev/a/merge.cu kernels/attention/merge.cu; cp .dev/a/attention.cu kernels/attention/attention.cu
ninja -C /tmp/build tf-cuda-test > $W/build-a.log 2>&1 && cp /tmp/build/tools/tf-cuda-test /tmp/bin/a \
  || { echo "build A failed"; tail -20 $W/build-a.log; }
cuobjdump -sass $O > $W/sass-a.txt 2>&1
cp /tmp/merge-n.cu kernels/attention/merge.cu; cp /tmp/attention-n.cu kernels/attention/attention.cu
echo "builds $((SECONDS-T0)) s, git: $(git status --short --untracked-files=no | wc -l) changed"
python3 - $W > $W/sass-summary.txt <<'PY'
import re, sys
w = sys.argv[1]
for v in "an":
    name, n, ldg, lds = None, 0, 0, 0
    for line in open(f"{w}/sass-{v}.txt"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name: print(v, name, n, "instructions,", ldg, "LDG,", lds, "LDS")
            name, n, ldg, lds = m.group(1), 0, 0, 0
        elif re.match(r"\s+/\*[0-9a-f]{4}\*/", line):
            n += 1; ldg += "LDG" in line; lds += " LDS" in line
    if name: print(v, name, n, "instructions,", ldg, "LDG,", lds, "LDS")
PY
cat $W/sass-summary.txt | sed -E 's/_ZN2kc22attention_merge_kernel//; s/EEEvNS_10AttnParams.*(Pf|PfE)//' 
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='(b1/ctx131072|b1/ctx32768|b1/ctx4096|b8/ctx32768|b8/ctx131072|b32/ctx32768)/(bf16|fp8|q4)/window'
run() {  # run VARIANT ROUND
  local bin=/tmp/bin/$1; [ $1 = p ] && bin=/tmp/bin/n
  [ -x $bin ] || return
  if [ $1 = p ]; then pre="env KC_MERGE_PIPE=0"; else pre=""; fi
  timeout 120 $pre $bin bench attention --script-dir /tmp/nosdpa --filter "$F" --timing gated --out $W/ab-$1-$2.json > $W/ab-$1-$2.log 2>&1
  echo "bench $1 $2 rc=$? ($((SECONDS-T0)) s)"
}
for r in 1 2 3; do
  [ $(left) -gt 200 ] || { echo "round $r: not run (time)"; break; }
  order="a n p"; [ $r = 2 ] && order="n p a"; [ $r = 3 ] && order="p a n"
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
print(f"{'row (gated us, best of runs)':44s} {'A':>8s} {'N':>8s} {'P':>8s} {'N/A':>6s} {'P/A':>6s} bytes  N's merge")
groups = {}
for k in sorted(t):
    x = t[k]
    if not all(v in x for v in "anp"):
        print(k, "missing", list(x)); continue
    a, n, p = min(x["a"]), min(x["n"]), min(x["p"])
    same = len({y for v in x.values() for _, y, _ in v}) == 1
    g = "/".join(k.split("/")[3:5])
    groups.setdefault(g, []).append((n[0] / a[0], p[0] / a[0]))
    merge = [s for s in n[2].split(",") if s.startswith("merge")]
    print(f"{k:44s} {a[0]:8.2f} {n[0]:8.2f} {p[0]:8.2f} {n[0] / a[0]:6.3f} {p[0] / a[0]:6.3f} {'same' if same else 'DIFF'}  {';'.join(merge)}")
for g, v in groups.items():
    n = sorted(x for x, _ in v); p = sorted(y for _, y in v)
    print(f"{g}: N/A median {n[len(n) // 2]:.3f} ({n[0]:.3f}-{n[-1]:.3f}), P/A median {p[len(p) // 2]:.3f} ({p[0]:.3f}-{p[-1]:.3f}), {len(v)} rows")
PY
pack
ncu_row() {  # ncu_row VARIANT ROW
  local bin=/tmp/bin/$1 pre=""; [ $1 = p ] && { bin=/tmp/bin/n; pre="env KC_MERGE_PIPE=0"; }
  [ $(left) -gt 60 ] || { echo "ncu $1 $2: not run (time)"; return; }
  timeout 60 $pre ncu --clock-control none -k regex:attention_merge -c 3 --csv \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,launch__grid_size \
    $bin bench attention --script-dir /tmp/nosdpa --filter "$2" --timing gated --out /tmp/ncu-junk.json > $W/ncu-$1-$(echo $2 | tr '/' '_').csv 2>&1
  echo "ncu $1 $2 rc=$? ($((SECONDS-T0)) s)"
}
for row in '32q/8kv/d128/b1/ctx131072/bf16/window' '24q/4kv/d256/b8/ctx32768/bf16/window' '24q/4kv/d256/b1/ctx131072/fp8/window'; do
  for v in a n p; do ncu_row $v "$row"; done
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
for mode in default pipe0; do
  [ $(left) -gt 45 ] || { echo "qwen-pages $mode: not run (time)"; continue; }
  pre=""; [ $mode = pipe0 ] && pre="env KC_MERGE_PIPE=0"
  timeout $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) $pre /tmp/bin/n qwen-pages --backend cuda --out $W/qwen-pages-$mode.json > $W/qwen-pages-$mode.log 2>&1
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
