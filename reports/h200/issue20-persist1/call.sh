#!/bin/bash
# persist1's device call (one, cold): build the head (ninja; P0 = the persistent partial as
# committed: contiguous walk, next K tile carried); compiled beside it: main 17be3b1's four
# objects that include partial.cuh (A), the head's partial_mma.cu with the strided walk (PS)
# and without the carried K tile (PN); each archived into libkc_kernels.a and linked like
# the head (control B0: the head's own objects the same way must give the built binary).
# 1. A/B interleaved (A P0 PS PN, round 1 also R = the head under KC_ATTN_PERSIST=0): bf16
#    and fp8 rows >= 32K and b1 / b8 x 4K. 2. Correctness of the head: qwen-pages as is and
#    with the persistent kernel forced on every launch (KC_ATTN_PERSIST=7 KC_ATTN_SHORT=0),
#    memcheck and racecheck forced. 3. ncu of the partial, A and P0, d128 b32 x 128K bf16.
#    4. One head run with SDPA (bf16 rows >= 32K). Results tarred to $OUT after each stage.
set -u
R=$PWD; RR=$(pwd -P); T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
K=.kcgit/persist1; W=/tmp/p1w; V=/tmp/p1v; rm -rf $W $V /tmp/p1b /tmp/p1base; mkdir -p $W $V; export PATH=/usr/local/cuda/bin:$PATH
pack(){ echo "[$1 at $(el) s]" >> $W/steps.txt; tar czf $OUT/persist1.tgz -C $W . 2>/dev/null; }
printf '/.deps/\n/.kcgit/\n' >> .git/info/exclude
git fetch -q $K/head.bundle persist1:persist1 && git checkout -q -f persist1 || { echo "fetch failed"; exit 3; }
git worktree prune; git worktree add -q -f /tmp/p1base 17be3b1 || { echo "worktree failed"; exit 3; }
{ git log --oneline -1; git -C /tmp/p1base log --oneline -1; git status --porcelain --untracked-files=no | wc -l; } > $W/head.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $W/gpu.txt 2>&1
cmake -S . -B /tmp/p1b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg.log 2>&1 || { tail -20 $W/cfg.log; exit 4; }
ninja -C /tmp/p1b -t commands tools/tf-cuda-test > $V/cmds.txt
AR=$(grep -E "ar qc libkc_kernels\.a" $V/cmds.txt | head -1); LINK=$(tail -1 $V/cmds.txt)
echo "$AR" > $W/ar.txt; echo "$LINK" > $W/link.txt
ccmd(){ grep -E -- "-c [^ ]*/kernels/attention/$1\.cu -o" $V/cmds.txt | head -1 | sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s@ -x cu -c [^ ]+ -o [^ ]+$@@'; }
bg(){ (cd /tmp/p1b && eval "$2" > $W/cc-$1.log 2>&1; echo "cc $1 rc=$? at $(el)" >> $W/steps.txt) & }
for f in partial_mma attention partial_fma partial_mma_q4; do
  CC=$(ccmd $f); CCA=$(echo "$CC" | sed "s@ -I$R @ -I/tmp/p1base @; s@ -I$RR @ -I/tmp/p1base @")
  [ -n "$CC" ] && [ "$CCA" != "$CC" ] || { echo "compile command for $f not found or no -I root"; exit 5; }
  echo "$CCA -x cu -c /tmp/p1base/kernels/attention/$f.cu" >> $W/cc.txt
  bg A-$f "$CCA -x cu -c /tmp/p1base/kernels/attention/$f.cu -o $V/A-$f.o"
done
CC=$(ccmd partial_mma)
bg PS "$CC -DKC_MMA_PERSIST_STRIDED=true -x cu -c $R/kernels/attention/partial_mma.cu -o $V/PS-partial_mma.o"
bg PN "$CC -DKC_MMA_PERSIST_CARRY_K=false -x cu -c $R/kernels/attention/partial_mma.cu -o $V/PN-partial_mma.o"
bg ptxas-head "$CC -Xptxas -v -x cu -c $R/kernels/attention/partial_mma.cu -o $V/H-ptxas.o"
ninja -C /tmp/p1b -j16 tf-cuda-test > $W/build.log 2>&1; echo "build head rc=$? at $(el)" >> $W/steps.txt
wait
cp /tmp/p1b/tools/tf-cuda-test $V/bin-P0 || { tail -30 $W/build.log; pack build; exit 4; }
relink(){ local v=$1 d=$V/$1 a="$AR" f; mkdir -p $d; shift
  for f in "$@"; do a=$(echo "$a" | sed "s@ CMakeFiles/kc_kernels_obj.dir/kernels/attention/$f\.cu\.o @ $V/$v-$f.o @"); done
  a=$(echo "$a" | sed -E "s@libkc_kernels\.a@$d/libkc_kernels.a@g"); echo "$a" > $d/ar.txt
  (cd /tmp/p1b && eval "$a" && eval "$(echo "$LINK" | sed -E "s@ -o tools/tf-cuda-test @ -o $d/tf @; s@ libkc_kernels\.a @ $d/libkc_kernels.a @")") && mv $d/tf $V/bin-$v
  echo "link $v rc=$? replaced $(grep -o "$V/$v-[a-z_0-9]*\.o" $d/ar.txt | wc -l) of $#" >> $W/steps.txt; }
relink A partial_mma attention partial_fma partial_mma_q4 & relink PS partial_mma & relink PN partial_mma & relink B0 & wait
cmp $V/bin-B0 $V/bin-P0 >> $W/steps.txt 2>&1 && echo "relink control: B0 == P0 byte for byte" >> $W/steps.txt
for v in A PS PN; do cmp -s $V/bin-$v $V/bin-P0 && echo "WARNING $v identical to P0" >> $W/steps.txt; done
grep -A2 "Compiling entry" $W/cc-ptxas-head.log | grep -o "Compiling entry function '[^']*partial_mma_[a-z]*kernel[^']*'\|[0-9]* bytes spill stores, [0-9]* bytes spill loads\|Used [0-9]* registers" | sed 's/_ZN2kc//; s/EEEvPKNS.*//' | paste - - - > $W/ptxas-head.txt
pack build
# 1. A/B
F='(b(1|8)/ctx4096|ctx(32768|131072))/(bf16|fp8)/'
run(){ local v=$1 r=$2 bin=$V/bin-$1 env=""; [ $v = R ] && bin=$V/bin-P0 env="KC_ATTN_PERSIST=0"
  env $env timeout 40 $bin bench attention --filter "$F" --script-dir /nonexistent --reps 20 --out $W/ab-$v-r$r.json > $W/ab-$v-r$r.log 2>&1
  echo "ab $v r$r rc=$? at $(el)" >> $W/steps.txt; }
for r in 1 2 3; do
  order="A P0 PS PN R"; [ $r = 2 ] && order="PN PS P0 A"; [ $r = 3 ] && order="A P0 PS PN"
  for v in $order; do [ $(el) -gt 150 ] && break 2; run $v $r; done
  pack ab-r$r
done
python3 $K/summ.py $W > $W/summary.txt 2>&1
# 2. correctness of the head (concurrently)
QF='d(128|256)(-r64|-r20)?,fmt=(fp8|bf16)'; S="compute-sanitizer --print-limit 20 --error-exitcode 9"; B=$V/bin-P0
(timeout 55 $B qwen-pages --backend cuda --cases 120 --filter "$QF" --quiet --out $W/qp.json > $W/qp.log 2>&1; echo "qwen-pages rc=$? at $(el)" >> $W/steps.txt) &
(KC_ATTN_PERSIST=7 KC_ATTN_SHORT=0 timeout 55 $B qwen-pages --backend cuda --cases 120 --filter "$QF" --quiet --out $W/qp-forced.json > $W/qp-forced.log 2>&1; echo "qwen-pages forced rc=$? at $(el)" >> $W/steps.txt) &
(KC_ATTN_PERSIST=3 KC_ATTN_SHORT=0 timeout 55 $S --tool memcheck $B qwen-pages --backend cuda --cases 16 --filter "$QF" --gates-only --out $W/mem-forced.json > $W/mem-forced.log 2>&1; echo "memcheck forced rc=$? at $(el)" >> $W/steps.txt) &
(KC_ATTN_PERSIST=2 KC_ATTN_SHORT=0 timeout 55 $S --tool racecheck $B qwen-pages --backend cuda --cases 5 --filter "d(128|256),fmt=(bf16|fp8)" --gates-only --out $W/race-forced.json > $W/race-forced.log 2>&1; echo "racecheck forced rc=$? at $(el)" >> $W/steps.txt) &
wait
for f in qp qp-forced mem-forced race-forced; do echo "$f: $(grep -E 'qwen-pages|controls|verdict|ERROR SUMMARY|RACECHECK SUMMARY|gates' $W/$f.log 2>/dev/null | tail -4 | tr '\n' ' ' | cut -c1-400)" >> $W/summary.txt; done
pack correctness
# 3. ncu of the partial (its second launch), A and P0
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats"
for v in A P0; do [ $(el) -gt 215 ] && break
  timeout 25 $NCU --clock-control none $SEC -k regex:attention_partial --launch-skip 1 --launch-count 1 $V/bin-$v bench attention --script-dir /nonexistent --reps 1 --filter "32q/8kv/d128/b32/ctx131072/bf16/window" > $W/ncu-$v.txt 2>&1; echo "ncu $v rc=$? at $(el)" >> $W/steps.txt
done
pack ncu
# 4. SDPA once
[ $(el) -lt 225 ] && { timeout 35 $B bench attention --filter '(ctx(32768|131072))/bf16/' --reps 20 --out $W/sdpa-P0.json > $W/sdpa-P0.log 2>&1; echo "sdpa run rc=$? at $(el)" >> $W/steps.txt; }
pack end
cat $W/steps.txt $W/ptxas-head.txt; tail -14 $W/summary.txt
for v in A P0; do echo "ncu $v: $(grep -E 'Duration|DRAM Throughput|L2 Hit Rate|Registers Per|Achieved Occupancy' $W/ncu-$v.txt 2>/dev/null | awk '{$1=$1};1' | tr '\n' ';' | cut -c1-300)"; done
