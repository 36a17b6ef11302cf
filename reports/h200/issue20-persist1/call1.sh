#!/bin/bash
# persist1 call 1 (cold): build the head (ninja); main 17be3b1's four objects that include
# partial.cuh (partial_mma, attention, partial_fma, partial_mma_q4) compiled beside it and
# archived into main's libkc_kernels.a (A; relink control B0 = the head's own objects through
# the same archive + link, must equal the built binary). A/B interleaved: A, the persistent
# kernel with its three walks (P0 contiguous + next K tile carried, P1 strided + carried, P2
# contiguous, not carried), R = the head with KC_ATTN_PERSIST=0 (round 1). Then qwen-pages with
# the persistent kernel forced on every launch (KC_ATTN_PERSIST=7 KC_ATTN_SHORT=0).
set -u
R=$PWD; RR=$(pwd -P); T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
K=.kcgit/persist1; W=/tmp/w; V=/tmp/v; mkdir -p $W $V; export PATH=/usr/local/cuda/bin:$PATH
pack(){ echo "[$1 at $(el) s]" >> $W/steps.txt; tar czf $OUT/persist1.tgz -C $W . 2>/dev/null; }
printf '/.deps/\n/.kcgit/\n' >> .git/info/exclude
git fetch -q $K/head.bundle persist1:persist1 && git checkout -q -f persist1 || { echo "fetch failed"; exit 3; }
git worktree add -q -f /tmp/base 17be3b1 || { echo "worktree failed"; exit 3; }
{ git log --oneline -1; git -C /tmp/base log --oneline -1; git status --porcelain --untracked-files=no | wc -l; } > $W/head.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $W/gpu.txt 2>&1
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg.log 2>&1 || { tail -20 $W/cfg.log; exit 4; }
ninja -C /tmp/b -t commands tools/tf-cuda-test > $V/cmds.txt
AR=$(grep -E "ar qc libkc_kernels\.a" $V/cmds.txt | head -1); LINK=$(tail -1 $V/cmds.txt)
echo "$AR" > $W/ar.txt; echo "$LINK" > $W/link.txt
for f in partial_mma attention partial_fma partial_mma_q4; do
  CC=$(grep -E -- "-c [^ ]*/kernels/attention/$f\.cu -o" $V/cmds.txt | head -1 | sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s@ -x cu -c [^ ]+ -o [^ ]+$@@')
  CCA=$(echo "$CC" | sed "s@ -I$R @ -I/tmp/base @; s@ -I$RR @ -I/tmp/base @"); echo "$CCA" >> $W/cc.txt
  [ -n "$CC" ] && [ "$CCA" != "$CC" ] || { echo "compile command for $f not found or no -I root"; exit 5; }
  (cd /tmp/b && eval "$CCA -x cu -c /tmp/base/kernels/attention/$f.cu -o $V/A-$f.o" > $W/cc-A-$f.log 2>&1; echo "cc A $f rc=$? at $(el)" >> $W/steps.txt) &
  [ $f = partial_mma ] && (cd /tmp/b && eval "$CC -Xptxas -v -x cu -c $R/kernels/attention/$f.cu -o $V/H-ptxas.o" > $W/ptxas-head.log 2>&1) &
done
ninja -C /tmp/b -j16 tf-cuda-test > $W/build.log 2>&1; echo "build head rc=$? at $(el)" >> $W/steps.txt
wait
cp /tmp/b/tools/tf-cuda-test $V/bin-H || { tail -30 $W/build.log; pack build; exit 4; }
relink(){ local v=$1 d=$V/$1 a; mkdir -p $d; a="$AR"
  if [ $v = A ]; then for f in partial_mma attention partial_fma partial_mma_q4; do a=$(echo "$a" | sed "s@ CMakeFiles/kc_kernels_obj.dir/kernels/attention/$f\.cu\.o @ $V/A-$f.o @"); done; fi
  a=$(echo "$a" | sed -E "s@libkc_kernels\.a@$d/libkc_kernels.a@g"); echo "$a" > $d/ar.txt
  (cd /tmp/b && eval "$a" && eval "$(echo "$LINK" | sed -E "s@ -o tools/tf-cuda-test @ -o $d/tf @; s@ libkc_kernels\.a @ $d/libkc_kernels.a @")") && mv $d/tf $V/bin-$v
  echo "link $v rc=$? at $(el)" >> $W/steps.txt; }
relink A & relink B0 & wait
cmp $V/bin-B0 $V/bin-H >> $W/steps.txt 2>&1 && echo "relink control: B0 == H byte for byte" >> $W/steps.txt
grep -c "kernels/attention/.*\.o" $V/A/ar.txt >> $W/steps.txt; grep -o "$V/A-[a-z_]*\.o" $V/A/ar.txt | tr '\n' ' ' >> $W/steps.txt; echo >> $W/steps.txt
cmp -s $V/bin-A $V/bin-H && echo "WARNING A identical to H" >> $W/steps.txt
pack checks
F='(ctx(32768|131072)/(bf16|fp8)/(window|p256)|b(1|8)/ctx4096/(bf16|fp8)/window)'
run(){ local v=$1 r=$2 bin=$V/bin-H env=""
  case $v in A) bin=$V/bin-A;; P0) env="KC_ATTN_PERSIST_MODE=0";; P1) env="KC_ATTN_PERSIST_MODE=1";; P2) env="KC_ATTN_PERSIST_MODE=2";; R) env="KC_ATTN_PERSIST=0";; esac
  env $env timeout 40 $bin bench attention --filter "$F" --script-dir /nonexistent --reps 20 --out $W/ab-$v-r$r.json > $W/ab-$v-r$r.log 2>&1
  echo "ab $v r$r rc=$? at $(el)" >> $W/steps.txt; }
for r in 1 2; do
  order="A P0 P1 P2 R"; [ $r = 2 ] && order="P2 P1 P0 A"
  for v in $order; do [ $(el) -gt 150 ] && break 2; run $v $r; done
  pack ab-r$r
done
python3 $K/summ.py $W > $W/summary.txt 2>&1
QF='d(128|256)(-r64|-r20)?,fmt=(fp8|bf16)'
if [ $(el) -lt 170 ]; then
  (KC_ATTN_PERSIST=7 KC_ATTN_SHORT=0 timeout 30 $V/bin-H qwen-pages --backend cuda --cases 60 --filter "$QF" --quiet --out $W/qp-P0-forced.json > $W/qp-P0-forced.log 2>&1; echo "qwen-pages P0 forced rc=$? at $(el)" >> $W/steps.txt) &
  (KC_ATTN_PERSIST=5 KC_ATTN_SHORT=0 KC_ATTN_PERSIST_MODE=1 timeout 30 $V/bin-H qwen-pages --backend cuda --cases 30 --filter "$QF" --gates-only --quiet --out $W/qp-P1-forced.json > $W/qp-P1-forced.log 2>&1; echo "qwen-pages P1 forced (gates only) rc=$? at $(el)" >> $W/steps.txt) &
  wait
fi
for f in qp-P0-forced.log qp-P1-forced.log; do echo "$f: $(grep -E 'qwen-pages|controls|verdict|FAIL|fail' $W/$f 2>/dev/null | tail -4 | tr '\n' ' ' | cut -c1-400)" >> $W/summary.txt; done
pack final
cat $W/steps.txt; grep -A2 "persistent\|attention_partial_mma_kernel" $W/ptxas-head.log | grep -o "Compiling entry function '[^']*'\|[0-9]* bytes spill stores, [0-9]* bytes spill loads\|Used [0-9]* registers" | sed 's/_ZN2kc//; s/EEEvPKNS.*//' | paste - - - | cut -c1-160
tail -12 $W/summary.txt; grep -E "^(24q|32q)" $W/summary.txt | awk '{printf "%s %s %s %s", $1,$2,$3,$4; for(i=5;i<=9;i++) printf " %s",$i; print ""}' | head -70
