#!/bin/bash
# q4c device run: bench of main's q4 kernel (base, 2130cf8) against q4c's A (1e3c24d,
# scores), B (d1d4500, + p.v) and C (fa63d15, + packed d128 at 4 blocks per SM);
# qwen-pages on cuda (B, C), device mutants and sanitizers on C.
set -u
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
W=.kcgit/q4c; X=/tmp/q4c; R=/tmp/q4c-r; mkdir -p $X $R
tar -xJf $W/bins.tar.xz -C $X || { echo "extract failed"; exit 3; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $R/gpu.txt 2>&1
F1='b(1|8)/ctx32768/(bf16|q4)/window'; F='b8/ctx32768/(bf16|q4)/window'
echo "start benches at $(el)s" >> $R/timeline.txt
for round in 1 2 3; do
  order="base A B C"; [ $round = 2 ] && order="C B A base"; flt=$F; [ $round = 1 ] && flt=$F1
  for v in $order; do
    [ $(el) -gt 64 ] && break 2
    timeout 30 $X/tf-cuda-test-$v bench attention --script-dir /nonexistent --reps 20 --filter "$flt" \
      --out $R/bench-$v-r$round.json > $R/bench-$v-r$round.log 2>&1
    echo "bench $v r$round rc=$? at $(el)s" >> $R/timeline.txt
  done
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
Q='d(128|256)(-r64)?,fmt=q4'
RC1='qwen-pages\(shape=(qwen3-32q8kv-d128,fmt=q4,ptok=5,|gqa8-16q2kv-d256,fmt=q4,ptok=256,)'
RC2='qwen-pages\(shape=gqa6-6q1kv-d128,fmt=q4,ptok=7,chunk=100,'
L=$(( 138 - $(el) )); [ $L -lt 30 ] && L=30
echo "checks start at $(el)s, limit $L s" >> $R/timeline.txt
for v in B C; do
  ( timeout $L $X/tf-cuda-test-$v qwen-pages --backend cuda --cases 160 --filter "$Q" --quiet --out $R/qwen-pages-$v.json > $R/qwen-pages-$v.log 2>&1; echo "qwen-pages $v rc=$? at $(el)s" >> $R/timeline.txt ) &
done
for m in q4-offset-drop q4-pv-offset-drop; do
  ( timeout $L $X/tf-cuda-test-mutant-$m qwen-pages --backend cuda --cases 160 --filter "$Q" --gates-only --quiet > $R/mutant-$m.log 2>&1; echo "mutant $m rc=$? (must be 1) at $(el)s" >> $R/timeline.txt ) &
done
( timeout $L $CS --tool memcheck --error-exitcode 9 $X/tf-cuda-test-C qwen-pages --backend cuda --cases 48 --filter "$Q" --gates-only --quiet > $R/memcheck-C.log 2>&1; echo "memcheck C rc=$? at $(el)s" >> $R/timeline.txt ) &
for k in 1 2; do
  eval "rc=\$RC$k"
  ( timeout $L $CS --tool racecheck --racecheck-report all --error-exitcode 9 $X/tf-cuda-test-C qwen-pages --backend cuda --cases 160 --filter "$rc" --gates-only --quiet > $R/racecheck$k-C.log 2>&1; echo "racecheck$k C rc=$? at $(el)s" >> $R/timeline.txt ) &
done
wait
echo "done at $(el)s" >> $R/timeline.txt
cd $R && tar -czf $OUT/q4c-results.tar.gz . && cd - > /dev/null
cat $R/timeline.txt
for f in $R/bench-*.json; do python3 - "$f" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
print(sys.argv[1].split('/')[-1], ' '.join(f"{'/'.join(r['config'].split('/')[2:4])}/{r['format']}={r['median_us']:.1f}" for r in d['rows']), {k:round(v,3) for k,v in d['ratios'].items() if 'q4 / bf16' in k and v})
PY
done
for f in qwen-pages-B qwen-pages-C; do echo "== $f"; grep -E "attention-bound|non-finite|verdict|^qwen-pages:" $R/$f.log | tail -4; done
for f in mutant-q4-offset-drop mutant-q4-pv-offset-drop; do echo "== $f"; grep -E "attention-bound|^qwen-pages:" $R/$f.log | tail -3; done
for f in memcheck-C racecheck1-C racecheck2-C; do echo "== $f"; grep -E "SUMMARY|attention-bound|^qwen-pages:|cases run" $R/$f.log | tail -4; done
