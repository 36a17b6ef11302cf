#!/bin/bash
# fp8s device call (one cold call): build the fp8s head (B) with ninja; main 65d4dec's
# partial_mma.cu (A) and the head's with the fp8 d128 ring at 5 x 3 (C) compiled beside it and
# relinked into copies of libkc_kernels.a (relink control: the head's own object relinked must
# give the built binary byte for byte); qwen-pages, memcheck, racecheck on B; then A/B/C
# interleaved on every fp8 d128 row and the bf16 d128 32K x b8 row. Everything under /tmp/w,
# tarred to $OUT/fp8s.tgz after each stage.
set -u
R=$PWD; RR=$(pwd -P); T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
W=/tmp/w; V=/tmp/v; mkdir -p $W $V; export PATH=/usr/local/cuda/bin:$PATH
pack(){ echo "[$1 at $(el) s]" >> $W/steps.txt; tar czf $OUT/fp8s.tgz -C $W . 2>/dev/null; }
printf '/.deps/\n/.kcgit/\n' >> .git/info/exclude
git fetch -q .kcgit/fp8s/head.bundle fp8s:fp8s && git checkout -q -f fp8s || { echo "fetch failed"; exit 3; }
git worktree add -q -f /tmp/base 65d4decbf7768599cd9d672cd77e1882d93e60af || { echo "worktree failed"; exit 3; }
{ git log --oneline -1; git -C /tmp/base log --oneline -1; git status --porcelain --untracked-files=no | wc -l; } > $W/head.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $W/gpu.txt 2>&1
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg.log 2>&1 || { tail -20 $W/cfg.log; exit 4; }
ninja -C /tmp/b -t commands tools/tf-cuda-test > $V/cmds.txt
CC=$(grep -E -- "-c [^ ]*/kernels/attention/partial_mma\.cu -o" $V/cmds.txt | head -1 | sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s@ -x cu -c [^ ]+ -o [^ ]+$@@')
LINK=$(tail -1 $V/cmds.txt); echo "$CC" > $W/cc.txt; echo "$LINK" > $W/link.txt
CCA=$(echo "$CC" | sed "s@ -I$R @ -I/tmp/base @; s@ -I$RR @ -I/tmp/base @"); echo "$CCA" >> $W/cc.txt
[ -n "$CC" ] && [ "$CCA" != "$CC" ] || { echo "compile command not found or no -I root"; cat $W/cc.txt; exit 5; }
CD='-DKC_MMA_VRING_STAGES=10 -DKC_MMA_VRING_TILES=1 -DKC_MMA_VRING_PRE=4 -DKC_MMA_VRING_STAGES128=5 -DKC_MMA_VRING_TILES128=3 -DKC_MMA_VRING_PRE128=1'
(cd /tmp/b && eval "$CCA -Xptxas -v -x cu -c /tmp/base/kernels/attention/partial_mma.cu -o $V/A.o" > $W/ptxas-A.log 2>&1; echo "cc A rc=$? at $(el)" >> $W/steps.txt) &
(cd /tmp/b && eval "$CC $CD -Xptxas -v -x cu -c $R/kernels/attention/partial_mma.cu -o $V/C.o" > $W/ptxas-C.log 2>&1; echo "cc C rc=$? at $(el)" >> $W/steps.txt) &
ninja -C /tmp/b -j16 tf-cuda-test > $W/build.log 2>&1; echo "build B rc=$? at $(el)" >> $W/steps.txt
cp /tmp/b/tools/tf-cuda-test $V/bin-B || { tail -30 $W/build.log; pack build; exit 4; }
QF='d128(-r64|-r20)?,fmt=fp8'
(timeout 38 $V/bin-B qwen-pages --backend cuda --cases 120 --filter "$QF" --quiet --out $W/qp-B.json > $W/qp-B.log 2>&1; echo "qwen-pages B rc=$? at $(el)" >> $W/steps.txt) &
(timeout 38 compute-sanitizer --tool memcheck --error-exitcode 9 $V/bin-B qwen-pages --backend cuda --cases 120 --filter "$QF" --quiet --out $W/mem-B.json > $W/mem-B.log 2>&1; echo "memcheck B rc=$? at $(el)" >> $W/steps.txt) &
(timeout 38 compute-sanitizer --tool racecheck --error-exitcode 9 $V/bin-B qwen-pages --backend cuda --cases 120 --filter 'd128-r20,fmt=fp8,ptok=(1|48),chunk=1024' --gates-only --quiet --out $W/race-B.json > $W/race-B.log 2>&1; echo "racecheck B rc=$? at $(el)" >> $W/steps.txt) &
wait  # (A and C objects too)
relink(){ local v=$1 o=$2 d=$V/$1; mkdir -p $d && cp /tmp/b/libkc_kernels.a $d/ && cp $o $d/partial_mma.cu.o && (cd $d && ar r libkc_kernels.a partial_mma.cu.o) &&
  (cd /tmp/b && eval "$(echo "$LINK" | sed -E "s@ -o tools/tf-cuda-test @ -o $d/tf @; s@ libkc_kernels\.a @ $d/libkc_kernels.a @")") && mv $d/tf $V/bin-$v; echo "link $v rc=$? at $(el)" >> $W/steps.txt; }
relink A $V/A.o & relink C $V/C.o & relink B0 /tmp/b/CMakeFiles/kc_kernels_obj.dir/kernels/attention/partial_mma.cu.o & wait
cmp $V/bin-B0 $V/bin-B >> $W/steps.txt 2>&1 && echo "relink control: B0 == B byte for byte" >> $W/steps.txt
for v in A B C; do cmp -s $V/bin-$v $V/bin-B0 && [ $v != B ] && echo "WARNING $v identical to B" >> $W/steps.txt
  echo "== $v" >> $W/res-usage.txt; cuobjdump -res-usage $V/bin-$v 2>/dev/null | grep -A1 -E "attention_partial_mma_kernelILi(128|256)ELNS_6FormatE" >> $W/res-usage.txt; done
pack checks
F='32q/8kv/d128/(b(1|8|32)/ctx[0-9]+/fp8/|b8/ctx32768/bf16/window)'
for r in 1 2 3; do
  order="A B C"; [ $r = 2 ] && order="C B A"
  for v in $order; do
    [ $v = C ] && [ $r = 3 ] && [ $(el) -gt 120 ] && continue
    [ $(el) -gt 135 ] && break 2
    timeout 25 $V/bin-$v bench attention --filter "$F" --script-dir /nonexistent --reps 20 --out $W/ab-$v-r$r.json > $W/ab-$v-r$r.log 2>&1
    echo "ab $v r$r rc=$? at $(el)" >> $W/steps.txt
  done
done
pack ab
python3 .kcgit/fp8s/summ.py $W > $W/summary.txt 2>&1
for f in qp-B.log mem-B.log race-B.log; do echo "$f: $(grep -E 'qwen-pages:|ERROR SUMMARY|RACECHECK SUMMARY|controls|verdict' $W/$f | tail -3 | tr '\n' ' ' | cut -c1-300)" >> $W/summary.txt; done
pack final
cat $W/steps.txt; grep -E "partial_mma_kernelILi128ELNS_6FormatE1" -A1 $W/res-usage.txt | grep -o "REG:[0-9]* STACK:[0-9]*" | paste -sd' '; cat $W/summary.txt
