#!/bin/bash
# tail1's device call (one): binaries relinked here from main 6725561's build-cuda objects
# (base = main's kernels; v2 = branch tail1 3a3a44b's attention.cu, merge.cu, partial_mma.cu;
# tl / v2tl = the same with the KC_ATTN_TIMELINE hook, timeline-hook.patch). No build here.
K=.kcgit/tail1; W=$OUT/w; mkdir -p $W /tmp/t1; T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
pack(){ tar czf $OUT/tail1.tgz -C $W . 2>/dev/null; echo "[stage $1 at $(el) s]" | tee -a $W/stages.txt; }
for n in base v2 tl v2tl; do python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('$K/$n.xz'), open('/tmp/t1/$n','wb'))" & done; wait
chmod +x /tmp/t1/*; A=/tmp/t1/base; B=/tmp/t1/v2; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $W/gpu.txt 2>&1
pack unpack
# 1. A/B, interleaved A B B A: every bf16 row >= 32K, fp8 / q4 spot rows, b1 x 4K (short path)
BO="--script-dir /nonexistent --reps 30"
F='(ctx(32768|131072)/bf16/|b8/ctx32768/(fp8|q4)/window|b1/ctx4096/(bf16|fp8)/window)'
i=0; for x in A B B A; do i=$((i+1)); X=${!x}; timeout 30 $X bench attention $BO --filter "$F" --out $W/ab-$i-$x.json > $W/ab-$i-$x.log 2>&1; echo "ab $i $x rc=$? at $(el)" >> $W/rc.txt; done
pack ab
# 2. where 32K x b8 bf16's time goes: events / gated / partial (base; v2 gated)
F2='(24q/4kv/d256|32q/8kv/d128)/b(8/ctx(32768|131072)|32/ctx32768)/bf16/window'
for t in events gated partial; do timeout 20 $A bench attention $BO --filter "$F2" --timing $t --out $W/t-$t-A.json > $W/t-$t-A.log 2>&1; echo "t $t A rc=$?" >> $W/rc.txt; done
timeout 20 $B bench attention $BO --filter "$F2" --timing gated --out $W/t-gated-B.json > $W/t-gated-B.log 2>&1; echo "t gated B rc=$?" >> $W/rc.txt
pack timing
for v in tl v2tl; do for r in 24q/4kv/d256/b8/ctx32768 32q/8kv/d128/b8/ctx32768; do
  tag=$v-$(echo $r | cut -d/ -f3); KC_TL_OUT=$W/tl-$tag.bin timeout 15 /tmp/t1/$v bench attention --script-dir /nonexistent --reps 6 --filter "$r/bf16/window" --out $W/tlb-$tag.json > $W/tlb-$tag.log 2>&1; echo "tl $tag rc=$?" >> $W/rc.txt
done; done
pack timeline
# 3. correctness of v2 (concurrently: qwen-pages, memcheck, racecheck)
QF='d(128|256)(-r64|-r20)?,fmt=(q4|fp8|bf16)'; S="compute-sanitizer --print-limit 20 --error-exitcode 9"
(timeout 45 $B qwen-pages --backend cuda --cases 120 --filter "$QF" --quiet --out $W/qp-v2.json > $W/qp-v2.log 2>&1; echo "qwen-pages v2 rc=$?" >> $W/rc.txt) &
(timeout 45 $S --tool memcheck $B qwen-pages --backend cuda --cases 10 --filter "$QF" --gates-only --out $W/san-mem.json > $W/san-mem.log 2>&1; echo "memcheck v2 rc=$?" >> $W/rc.txt) &
(timeout 45 $S --tool racecheck $B qwen-pages --backend cuda --cases 5 --filter "d(128|256),fmt=(bf16|fp8)" --gates-only --out $W/san-race.json > $W/san-race.log 2>&1; echo "racecheck v2 rc=$?" >> $W/rc.txt) &
wait
pack correctness
# 4. ncu: ours against SDPA's cuDNN kernel on 32q/8kv/d128/b32/ctx131072
export PATH=/usr/local/cuda/bin:$PATH; NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --print-details all"
if [ $(el) -lt 120 ]; then
  timeout 25 $NCU --clock-control none $SEC -k regex:attention_ --launch-skip 2 --launch-count 2 $A bench attention --script-dir /nonexistent --reps 1 --filter "32q/8kv/d128/b32/ctx131072/bf16/window" > $W/ncu-ours.txt 2>&1; echo "ncu ours rc=$?" >> $W/rc.txt
  timeout 40 $NCU --clock-control none $SEC --profile-from-start off python3 $K/sdpa_ncu.py cudnn 32 8 128 32 131072 > $W/ncu-cudnn.txt 2>&1; echo "ncu cudnn rc=$?" >> $W/rc.txt
fi
pack ncu
cat $W/rc.txt; python3 $K/summ.py $W 2>&1 | tee $W/summary.txt; pack end
