#!/bin/bash
# bf16k device call: A = main 54897d8 (its built binary), B = d9e25a7 (bf16 K staged through shared memory, no L2
# hint), C = B with the K loads' .L2::256B hint, D = B with .L1::no_allocate (C, D: -D builds of the same source;
# D also changes fp8 / short-path K loads: read its bf16 rows only). All relinked from main's objects, stripped.
set -u
T0=$SECONDS; el() { echo $((SECONDS - T0)); }
W=.kcgit/bf16k; X=/tmp/x; R=$OUT/r; mkdir -p $X $R
tar -xJf $W/bins.tar.xz -C $X || { echo "extract failed"; exit 3; }
echo "extracted at $(el)s" > $R/timeline.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $R/gpu.txt 2>&1
F='/(ctx32768|ctx131072)/bf16/|/b1/ctx4096/bf16/window|/b8/ctx32768/(fp8|q4)/window|/b1/ctx131072/(fp8|q4)/window'
b() { # variant round sdpa
  local sd=/nonexistent; [ $3 = 1 ] && sd=tools
  timeout 60 $X/tf-cuda-test-$1 bench attention --script-dir $sd --filter "$F" --out $R/bench-$1-r$2.json > $R/bench-$1-r$2.log 2>&1
  echo "bench $1 r$2 rc=$? at $(el)s" >> $R/timeline.txt
}
b A 1 1; b B 1 1; b C 1 0; b D 1 0
b D 2 0; b C 2 0; b B 2 0; b A 2 0
if [ $(el) -lt 80 ]; then b A 3 0; b B 3 0; b C 3 0; b D 3 0; fi
python3 $W/sum.py $R > $R/summary.txt 2>&1; (cd $OUT && tar -czf bench.tgz r); cat $R/summary.txt
export PATH=/usr/local/cuda/bin:$PATH
Q=(--backend cuda --cases 48 --filter 'd(128|256)(-r64)?,fmt=(bf16|fp8)' --quiet)
KC_ATTN_SHORT=0 timeout 40 $X/tf-cuda-test-B qwen-pages "${Q[@]}" --out $R/qwen-pages-B-noshort.json > $R/qwen-pages-B-noshort.log 2>&1
echo "qwen-pages B KC_ATTN_SHORT=0 rc=$? at $(el)s" >> $R/timeline.txt
S=(--backend cuda --cases 48 --filter 'shape=qwen3-32q8kv-d128,fmt=bf16|shape=qwen35-24q4kv-d256-r64,fmt=bf16' --quiet --gates-only)
KC_ATTN_SHORT=0 timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $X/tf-cuda-test-B qwen-pages "${S[@]}" > $R/memcheck-B.log 2>&1
echo "memcheck B rc=$? at $(el)s" >> $R/timeline.txt
KC_ATTN_SHORT=0 timeout 45 compute-sanitizer --tool racecheck --racecheck-report hazard $X/tf-cuda-test-B qwen-pages "${S[@]}" > $R/racecheck-B.log 2>&1
echo "racecheck B rc=$? at $(el)s" >> $R/timeline.txt
if [ $(el) -lt 185 ]; then
  timeout 30 $X/tf-cuda-test-B qwen-pages "${Q[@]}" --out $R/qwen-pages-B.json > $R/qwen-pages-B.log 2>&1
  echo "qwen-pages B default rc=$? at $(el)s" >> $R/timeline.txt
fi
(cd $OUT && tar -czf checks.tgz r/timeline.txt r/qwen-pages* r/memcheck* r/racecheck*)
cat $R/timeline.txt; tail -3 $R/qwen-pages-B-noshort.log $R/qwen-pages-B.log; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|verdict" $R/memcheck-B.log $R/racecheck-B.log
