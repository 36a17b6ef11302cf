#!/usr/bin/env bash
# Session 38, device call 1: issue 20 experiment and diagnostics (nothing here is a receipt).
#  1. build tf-cuda-test (main) and, in a copy of the tree with intpv.patch applied, the int8
#     p.v experiment (d256 q4 regular kernel only; timing and bound check, not a contract path);
#  2. bench attention, main against intpv, interleaved, 2 rounds: q4 and bf16 at d256 (32K x b8,
#     32K x b32, 128K x b1, 4K x b8), out_fnv1a kept;
#  3. qwen-pages --backend cuda on the d256 q4 cases with the intpv binary (gates only): does the
#     integer p.v stay inside today's float64 bound (non-finite: expected red, no NaN path);
#  4. imma_probe.cu (the score and p.v steps' issue cost, fp16 against int8) and floor.cu (events
#     around one or two launches, graphs);
#  5. ncu of main's q4 partial at 32K x b8 (d256, d128) with the SASS mix (sass_mix.py);
#  6. bench attention b1 x 4K under events, graph and gated timing; ncu of the b1 x 4K d256 bf16 row.
# Returns $OUT/s38-call1.tgz (packed after every step).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/w1; mkdir -p $W
S=reports/h200/receipts-s38
pack() { tar czf $OUT/s38-call1.tgz -C /tmp w1 --exclude='*.ncu-rep' 2>/dev/null; }
H=$(cat .dev/snap/head)
rm -rf .git && git init -q && cp .dev/snap/pack-*.pack .dev/snap/pack-*.idx .git/objects/pack/ && echo $H > .git/shallow \
  && git update-ref refs/heads/main $H && git symbolic-ref HEAD refs/heads/main && git read-tree HEAD \
  && { git update-index -q --refresh > /dev/null; true; } || { echo "git snapshot failed"; exit 4; }
echo "head $H, changed tracked files: $(git status --short --untracked-files=no | wc -l)" | tee $W/head.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1; cat $W/gpu.txt
CF="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B build $CF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "build main $((SECONDS-T0)) s"
B=build/tools/tf-cuda-test
X=/tmp/intpv; rm -rf $X && mkdir -p $X && tar cf - --exclude=./build --exclude=./.git . | tar xf - -C $X
(cd $X && git apply $S/intpv.patch && cmake -S . -B build $CF > $W/cmake-int.log 2>&1 && ninja -C build tf-cuda-test > $W/build-int.log 2>&1) \
  || { echo "intpv build failed"; tail -30 $W/build-int.log; }
BI=$X/build/tools/tf-cuda-test
echo "build intpv $((SECONDS-T0)) s"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='24q/4kv/d256/(b8/ctx32768|b32/ctx32768|b1/ctx131072|b8/ctx4096)/(bf16|q4)/window'
for r in 1 2; do for v in main int; do
  bin=$B; [ $v = int ] && bin=$BI
  timeout 120 $bin bench attention --reps 20 --script-dir /tmp/nosdpa --filter "$F" --out $W/ab-$v-$r.json > $W/ab-$v-$r.log 2>&1
  echo "bench $v $r rc=$? ($((SECONDS-T0)) s)"
done; done
python3 - $W <<'PY'
import json, sys, glob
t = {}
for f in sorted(glob.glob(sys.argv[1] + "/ab-*.json")):
    v = f.rsplit("/", 1)[1].split("-")[1]
    for r in json.load(open(f))["rows"]:
        k = r["config"] + "/" + r["format"]
        t.setdefault(k, {}).setdefault(v, []).append((r["median_us"], r.get("out_fnv1a")))
for k, x in t.items():
    m, i = min(x.get("main", [(0, 0)])), min(x.get("int", [(0, 0)]))
    same = "same bytes" if m[1] == i[1] else "bytes differ"
    print(f"{k:44s} main {m[0]:8.2f} int {i[0]:8.2f} int/main {i[0] / m[0] if m[0] else 0:.3f} {same}")
PY
pack
timeout 150 $BI qwen-pages --backend cuda --cases 300 --gates-only --filter 'd256[^,]*,fmt=q4' --quiet --out $W/qp-int.json > $W/qp-int.log 2>&1
echo "qwen-pages intpv rc=$? ($((SECONDS-T0)) s)"
python3 -c "
import json; d=json.load(open('$W/qp-int.json')); print(d['cases'])
for g in d['gates']: print('  ', g['name'], g['passed'], g['failed'], (g.get('worst') or {}).get('ratio', ''))" 2>&1 | head -20
pack
nvcc -arch=sm_90 -O3 -o $W/imma $S/imma_probe.cu > $W/imma-build.log 2>&1 && timeout 60 $W/imma > $W/imma.txt 2>&1; cat $W/imma.txt
nvcc -arch=sm_90 -O2 -o $W/floor $S/floor.cu > $W/floor-build.log 2>&1 && timeout 60 $W/floor > $W/floor.txt 2>&1; cat $W/floor.txt
pack
for s in "d256 24q/4kv/d256" "d128 32q/8kv/d128"; do set -- $s
  timeout 120 ncu --clock-control none -k regex:attention_partial_mma_q4_kernel -c 1 --set full --import-source no \
    -o $W/q4-$1 $B bench attention --reps 1 --script-dir /tmp/nosdpa --filter "$2/b8/ctx32768/q4/window" \
    > $W/ncu-q4-$1.log 2>&1
  echo "ncu q4 $1 rc=$? ($((SECONDS-T0)) s)"
  ncu -i $W/q4-$1.ncu-rep --page details > $W/details-q4-$1.txt 2>&1
  ncu -i $W/q4-$1.ncu-rep --page source --csv --print-source sass > $W/sass-q4-$1.csv 2>&1
  grep -E "Duration|Registers Per|Executed Instructions  |Issued Warp Per|No Eligible|Achieved Occupancy|DRAM Throughput" $W/details-q4-$1.txt | head -9
  python3 $S/sass_mix.py $W/sass-q4-$1.csv 22 > $W/mix-q4-$1.txt 2>&1; head -16 $W/mix-q4-$1.txt
  pack
done
for tm in events graph gated; do
  timeout 60 $B bench attention --reps 40 --timing $tm --script-dir /tmp/nosdpa --filter 'b1/ctx4096/(bf16|fp8|q4)/window' \
    --out $W/b1-$tm.json > $W/b1-$tm.log 2>&1; echo "b1 $tm rc=$?"
  python3 -c "
import json; d=json.load(open('$W/b1-$tm.json'))
print('  $tm', ' '.join(f\"{r['config'].split('/')[2]}/{r['format']} {r['median_us']:.1f}\" for r in d['rows']), '| floor', d.get('launch_floor_us'))"
done
pack
timeout 100 ncu --clock-control none -c 12 --set full -o $W/b1-d256 $B bench attention --reps 1 --script-dir /tmp/nosdpa \
  --filter "24q/4kv/d256/b1/ctx4096/bf16/window" > $W/ncu-b1.log 2>&1
echo "ncu b1 rc=$? ($((SECONDS-T0)) s)"
ncu -i $W/b1-d256.ncu-rep --page details > $W/details-b1-d256.txt 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|Grid Size|Cluster Size" $W/details-b1-d256.txt | head -40
pack
echo "total $((SECONDS-T0)) s"
