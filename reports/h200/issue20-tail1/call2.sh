#!/bin/bash
# tail1's second device call: base (main 6725561's kernels) against v4 (branch tail1 6a27794:
# merge.cu and partial_mma.cu relinked into main's objects), same process conditions,
# interleaved; v4's correctness (qwen-pages with its controls, memcheck, racecheck).
K=.kcgit/tail1; W=$OUT/w; mkdir -p $W /tmp/t1; T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
pack(){ tar czf $OUT/tail1c2.tgz -C $W . 2>/dev/null; echo "[stage $1 at $(el) s]" | tee -a $W/stages.txt; }
for n in base v4 tl v4tl; do python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$K/$n.xz'), open('/tmp/t1/$n','wb'))" & done; wait
chmod +x /tmp/t1/*; A=/tmp/t1/base; B=/tmp/t1/v4
BO="--script-dir /nonexistent --reps 30"
F='(ctx(32768|131072)/bf16/|b8/ctx32768/(fp8|q4)/window|b1/ctx4096/(bf16|fp8)/window)'
i=0; for x in A B B A A B; do i=$((i+1)); X=${!x}; timeout 25 $X bench attention $BO --filter "$F" --out $W/ab-$i-$x.json > $W/ab-$i-$x.log 2>&1; echo "ab $i $x rc=$? at $(el)" >> $W/rc.txt; done
pack ab
F2='(24q/4kv/d256|32q/8kv/d128)/b(8/ctx(32768|131072)|32/ctx32768)/bf16/window'
for x in A B; do X=${!x}; timeout 15 $X bench attention $BO --filter "$F2" --timing gated --out $W/t-gated-$x.json > $W/t-gated-$x.log 2>&1; echo "t gated $x rc=$?" >> $W/rc.txt; done
for v in tl v4tl; do KC_TL_OUT=$W/tl-$v-d256.bin timeout 10 /tmp/t1/$v bench attention --script-dir /nonexistent --reps 6 --filter "24q/4kv/d256/b8/ctx32768/bf16/window" --out $W/tlb-$v.json > $W/tlb-$v.log 2>&1; echo "tl $v rc=$?" >> $W/rc.txt; done
pack timing
QF='d(128|256)(-r64|-r20)?,fmt=(q4|fp8|bf16)'; S="compute-sanitizer --print-limit 20 --error-exitcode 9"
(timeout 55 $B qwen-pages --backend cuda --cases 80 --filter "$QF" --out $W/qp-v4.json > $W/qp-v4.log 2>&1; echo "qwen-pages v4 rc=$?" >> $W/rc.txt) &
(timeout 55 $S --tool memcheck $B qwen-pages --backend cuda --cases 10 --filter "$QF" --gates-only --out $W/san-mem.json > $W/san-mem.log 2>&1; echo "memcheck v4 rc=$?" >> $W/rc.txt) &
(timeout 55 $S --tool racecheck $B qwen-pages --backend cuda --cases 3 --filter "d(128|256),fmt=(bf16|fp8)" --gates-only --out $W/san-race.json > $W/san-race.log 2>&1; echo "racecheck v4 rc=$?" >> $W/rc.txt) &
wait
pack correctness
cat $W/rc.txt; grep -h "qwen-pages:\|ERROR SUMMARY\|RACECHECK SUMMARY" $W/qp-v4.log $W/san-*.log; python3 $K/summ.py $W 2>&1 | tee $W/summary.txt; pack end
