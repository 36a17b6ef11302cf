#!/bin/bash
# Issue 20, round 10b: the merge discards the L2 lines of the split-K partials it has read
# (discard.global.L2: dead scratch is never written back), one call. Two builds of the working
# tree: /tmp/b (main's kernels; KC_MERGE_DISCARD picks the merge) and /tmp/bk (-DKC_EXP_KEEP_D128:
# bf16 d 128's partial also stores evict_last). Variants, interleaved over 3 rounds:
#   A main; D discard (kept merges read evict_first, as main); N discard, kept merges read
#   without a policy; K = D with d 128 kept; M = N with d 128 kept.
# Then qwen-pages (bf16 / fp8 / q4) and memcheck / racecheck on the discard variants.
T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
R=$PWD; W=/tmp/w; mkdir -p $W
pack(){ tar czf $OUT/results.tgz -C $W . 2>/dev/null; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git rev-parse HEAD > $W/commit.txt; git status --short > $W/status.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
cfgb(){ cmake -S $R -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF "${@:3}" > $W/cfg-$2.log 2>&1 && ninja -C $1 tf-cuda-test > $W/build-$2.log 2>&1; }
cfgb /tmp/b b & p1=$!
cfgb /tmp/bk bk -DCMAKE_CUDA_FLAGS=-DKC_EXP_KEEP_D128 -DCMAKE_CXX_FLAGS=-DKC_EXP_KEEP_D128 & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?; echo "builds b=$r1 bk=$r2 at $(el)s" | tee -a $W/rc.txt
[ $r1 = 0 ] && [ $r2 = 0 ] || { tail -20 $W/build-*.log; pack; exit 4; }
BO="--script-dir /nonexistent --reps 30"
F='(ctx(32768|131072)/bf16/|b8/ctx32768/(fp8|q4)/window|b1/ctx4096/(bf16|fp8|q4)/window)'
run(){ local bin=/tmp/b e=; case $1 in D) e=1;; N) e=2;; K) bin=/tmp/bk; e=1;; M) bin=/tmp/bk; e=2;; esac
  KC_MERGE_DISCARD=$e timeout 40 $bin/tools/tf-cuda-test bench attention $BO --filter "$F" --out $W/ab-$2-$1.json > $W/ab-$2-$1.log 2>&1; echo "ab $2 $1 rc=$? at $(el)" >> $W/rc.txt; }
for r in 1 2 3; do if [ $r = 2 ]; then O="M K N D A"; else O="A D N K M"; fi; for v in $O; do run $v $r; done; pack; done
python3 $R/reports/h200/issue20-discard/summ.py $W > $W/summary.txt 2>&1
QF='d(128|256)(-r64|-r20)?,fmt=(q4|fp8|bf16)'; S="compute-sanitizer --print-limit 20 --error-exitcode 9"
(KC_MERGE_DISCARD=1 timeout 60 /tmp/b/tools/tf-cuda-test qwen-pages --backend cuda --cases 40 --filter "$QF" --out $W/qp-D.json > $W/qp-D.log 2>&1; echo "qp D rc=$?" >> $W/rc.txt) &
(KC_MERGE_DISCARD=2 timeout 60 /tmp/bk/tools/tf-cuda-test qwen-pages --backend cuda --cases 40 --filter "$QF" --out $W/qp-M.json > $W/qp-M.log 2>&1; echo "qp M rc=$?" >> $W/rc.txt) &
wait; pack
(KC_MERGE_DISCARD=2 timeout 60 $S --tool memcheck /tmp/bk/tools/tf-cuda-test qwen-pages --backend cuda --cases 10 --filter "$QF" --gates-only --out $W/san-mem.json > $W/san-mem.log 2>&1; echo "memcheck M rc=$?" >> $W/rc.txt) &
(KC_MERGE_DISCARD=1 timeout 60 $S --tool racecheck /tmp/b/tools/tf-cuda-test qwen-pages --backend cuda --cases 3 --filter "d(128|256),fmt=(bf16|fp8)" --gates-only --out $W/san-race.json > $W/san-race.log 2>&1; echo "racecheck D rc=$?" >> $W/rc.txt) &
wait; pack
cat $W/rc.txt | grep -v "^ab .* rc=[01] "; grep -h "^qwen-pages:\|ERROR SUMMARY\|RACECHECK SUMMARY" $W/qp-*.log $W/san-*.log; tail -45 $W/summary.txt
