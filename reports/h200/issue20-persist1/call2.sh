#!/bin/bash
# persist1's second device call: no build. The binaries were linked on the helper's machine
# from main 17be3b1's build-cuda objects (A = main's own tf-cuda-test; relinking its objects
# gave it byte for byte), with the persist1 head's (b3d98b5) partial_mma.cu, attention.cu,
# partial_fma.cu, partial_mma_q4.cu objects replaced: P0 = the head, PN = its partial_mma.cu
# with -DKC_MMA_PERSIST_CARRY_K=false. Every receipt's git reads main's commit; the variant
# is in the file name. 1. A/B interleaved on the bf16 / fp8 rows >= 32K and b1 / b8 x 4K.
# 2. ncu of the partial, A and P0, d128 b32 x 128K bf16. 3. P0 with the persistent kernel
# forced on every launch: qwen-pages and memcheck. 4. A third A/B round if time is left.
set -u
T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
K=.kcgit/persist1; W=/tmp/p2w; V=/tmp/p2v; rm -rf $W $V; mkdir -p $W $V; export PATH=/usr/local/cuda/bin:$PATH
pack(){ echo "[$1 at $(el) s]" >> $W/steps.txt; tar czf $OUT/persist1-2.tgz -C $W . 2>/dev/null; }
for n in A P0 PN; do (xz -dc $K/$n.bin.xz > $V/bin-$n && chmod +x $V/bin-$n) & done; wait
md5sum $V/bin-* > $W/md5.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv > $W/gpu.txt 2>&1
F='(b(1|8)/ctx4096|ctx(32768|131072))/(bf16|fp8)/'
run(){ timeout 30 $V/bin-$1 bench attention --filter "$F" --script-dir /nonexistent --reps 20 --out $W/ab-$1-r$2.json > $W/ab-$1-r$2.log 2>&1; echo "ab $1 r$2 rc=$? at $(el)" >> $W/steps.txt; }
for v in A P0 PN; do run $v 1; done; for v in PN P0 A; do run $v 2; done
python3 $K/summ.py $W > $W/summary.txt 2>&1; pack ab
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
for v in A P0; do timeout 15 $NCU --clock-control none $SEC -k regex:attention_partial --launch-skip 1 --launch-count 1 $V/bin-$v bench attention --script-dir /nonexistent --reps 1 --filter "32q/8kv/d128/b32/ctx131072/bf16/window" > $W/ncu-$v.txt 2>&1; echo "ncu $v rc=$? at $(el)" >> $W/steps.txt; done
pack ncu
QF='d(128|256)(-r64|-r20)?,fmt=(fp8|bf16)'
(KC_ATTN_PERSIST=7 KC_ATTN_SHORT=0 timeout 45 $V/bin-P0 qwen-pages --backend cuda --cases 120 --filter "$QF" --out $W/qp-forced.json > $W/qp-forced.log 2>&1; echo "qwen-pages forced rc=$? at $(el)" >> $W/steps.txt) &
(KC_ATTN_PERSIST=3 KC_ATTN_SHORT=0 timeout 45 compute-sanitizer --print-limit 20 --error-exitcode 9 --tool memcheck $V/bin-P0 qwen-pages --backend cuda --cases 16 --filter "$QF" --gates-only --out $W/mem-forced.json > $W/mem-forced.log 2>&1; echo "memcheck forced rc=$? at $(el)" >> $W/steps.txt) &
wait; pack correctness
[ $(el) -lt 70 ] && { for v in A P0 PN; do run $v 3; done; python3 $K/summ.py $W > $W/summary.txt 2>&1; }
pack end
cat $W/steps.txt; grep -E "/A (all|>=32K|4K)|different" $W/summary.txt
for f in qp-forced mem-forced; do echo "$f: $(grep -E '^qwen-pages:|ERROR SUMMARY' $W/$f.log | tail -2 | tr '\n' ' ')"; done
for v in A P0; do echo "ncu $v: $(grep -E 'Duration|DRAM Throughput|L2 Hit Rate|Local Memory Spilling|Achieved Occupancy' $W/ncu-$v.txt 2>/dev/null | awk '{$1=$1};1' | tr '\n' ';' | cut -c1-300)"; done
