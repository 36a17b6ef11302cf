#!/bin/bash
# fp8x's second device call: main 7e41563 built on the device (base); B and C are the same tree
# relinked with partial_mma.cu.o compiled on the helper's machine with the build's own flags
# (B: fp8x 0cd4c89, the ldexpf products only; C: fp8x-c 7c6b8dd, B + the p.v's two tiles
# together and the V ring's unsigned index arithmetic). Interleaved A/B at 32K x b8 window,
# every fp8 row's out_fnv1a, then qwen-pages and memcheck on the faster of B and C.
set -u
R=$PWD; T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
W=/tmp/w2; mkdir -p $W; export PATH=/usr/local/cuda/bin:$PATH
pack(){ echo "[$1 at $(el) s]" >> $W/steps.txt; tar czf $OUT/fp8x2.tgz -C $W . 2>/dev/null; }
printf '/.deps/\n/.kcgit/\n' >> .git/info/exclude
git worktree add -q -f /tmp/base 7e41563 || { echo "worktree failed"; exit 3; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $W/gpu.txt 2>&1
B=/tmp/base/build
cmake -S /tmp/base -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg.log 2>&1
ninja -C $B -j16 tf-cuda-test > $W/build-base.log 2>&1; echo "build base rc=$? at $(el)" >> $W/steps.txt
X=/tmp/bins; mkdir -p $X; cp $B/tools/tf-cuda-test $X/base || { tail -30 $W/build-base.log; pack build; exit 4; }
O=$B/CMakeFiles/kc_kernels_obj.dir/kernels/attention/partial_mma.cu.o
sha256sum $O .kcgit/fp8x/obj/*.o > $W/objects.sha256
for v in B C; do
  cp .kcgit/fp8x/obj/partial_mma-$v.o $O && touch $O
  ninja -C $B -j16 tf-cuda-test > $W/link-$v.log 2>&1; echo "link $v rc=$? at $(el)" >> $W/steps.txt
  grep -q "Building CUDA object CMakeFiles/kc_kernels_obj.dir/kernels/attention/partial_mma.cu.o" $W/link-$v.log && echo "WARNING: $v recompiled partial_mma.cu" >> $W/steps.txt
  cp $B/tools/tf-cuda-test $X/$v
done
sha256sum $X/* >> $W/objects.sha256
pack build
F='(32q/8kv/d128|24q/4kv/d256)/b8/ctx32768/(bf16|fp8)/window'
for r in 1 2 3; do
  order="base B C"; [ $r = 2 ] && order="C B base"
  for v in $order; do
    timeout 30 $X/$v bench attention --filter "$F" --script-dir /nonexistent --reps 20 --out $W/ab-$v-r$r.json > $W/ab-$v-r$r.log 2>&1
    echo "ab $v r$r rc=$? at $(el)" >> $W/steps.txt
  done
done
for v in base B C; do
  timeout 25 $X/$v bench attention --filter '/fp8/' --script-dir /nonexistent --reps 3 --out $W/fp8rows-$v.json > $W/fp8rows-$v.log 2>&1
  echo "fp8rows $v rc=$? at $(el)" >> $W/steps.txt
done
pack ab
BEST=$(python3 - $W <<'PY'
import json, glob, statistics as st, sys, collections
W = sys.argv[1]; t = collections.defaultdict(list)
for f in glob.glob(W + '/ab-*.json'):
    v = f.split('/ab-')[1].rsplit('-r', 1)[0]
    for r in json.load(open(f))['rows']:
        if r['format'] == 'fp8': t[(v, r['config'])].append(r['median_us'])
score = {v: sum(st.median(t[(v, c)]) / st.median(t[('base', c)]) for (vv, c) in t if vv == 'base') for v in ('B', 'C')}
print(min(score, key=score.get))
PY
)
echo "best $BEST at $(el)" >> $W/steps.txt
QF='d(128|256)(-r64|-r20)?,fmt=fp8'
(timeout 50 $X/$BEST qwen-pages --backend cuda --cases 120 --filter "$QF" --out $W/qp-$BEST.json > $W/qp-$BEST.log 2>&1; echo "qwen-pages $BEST rc=$? at $(el)" >> $W/steps.txt) &
(timeout 50 compute-sanitizer --tool memcheck --error-exitcode 9 $X/$BEST qwen-pages --backend cuda --cases 90 --filter "$QF" --quiet --out $W/san-mem-$BEST.json > $W/san-mem-$BEST.log 2>&1; echo "memcheck $BEST rc=$? at $(el)" >> $W/steps.txt) &
wait
pack checks
cat $W/steps.txt
python3 .kcgit/fp8x/summ2.py $W 2>&1 | tee $W/summary.txt
pack final
