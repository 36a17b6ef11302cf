#!/bin/bash
# tail1's first device call: where 32K x b8 bf16's time goes (main 6725561's kernels, relinked
# here from main's build-cuda objects; tl = the same with the KC_ATTN_TIMELINE hook), and ncu of
# SDPA's cuDNN / flash kernels against ours. No build on the device.
K=.kcgit/tail1; W=$OUT/w; mkdir -p $W /tmp/t1; T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
pack(){ tar czf $OUT/call1.tgz -C $W . 2>/dev/null; echo "[stage $1 at $(el) s]" | tee -a $W/stages.txt; }
for n in base tl; do python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open('$K/$n.xz'), open('/tmp/t1/$n','wb'))"; chmod +x /tmp/t1/$n; done
B=/tmp/t1/base; TL=/tmp/t1/tl; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $W/gpu.txt 2>&1
BO="--script-dir /nonexistent --reps 30"
F='(24q/4kv/d256|32q/8kv/d128)/b(8/ctx(32768|131072)|32/ctx32768)/bf16/window'
for t in events gated partial; do timeout 40 $B bench attention $BO --filter "$F" --timing $t --out $W/t-$t.json > $W/t-$t.log 2>&1; echo "bench $t rc=$?" >> $W/rc.txt; done
pack timing
for r in 24q/4kv/d256/b8/ctx32768 32q/8kv/d128/b8/ctx32768 24q/4kv/d256/b8/ctx131072 32q/8kv/d128/b8/ctx131072; do
  tag=$(echo $r | tr '/' '_'); KC_TL_OUT=$W/tl-$tag.bin timeout 30 $TL bench attention --script-dir /nonexistent --reps 8 --filter "$r/bf16/window" --out $W/tlb-$tag.json > $W/tlb-$tag.log 2>&1; echo "tl $r rc=$?" >> $W/rc.txt
done
pack timeline
export PATH=/usr/local/cuda/bin:$PATH; NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --print-details all"
nc_ours(){ timeout 40 $NCU --clock-control none $SEC -k regex:attention_ --launch-skip 2 --launch-count 2 $B bench attention --script-dir /nonexistent --reps 1 --filter "$1/bf16/window" > $W/ncu-ours-$2.txt 2>&1; echo "ncu ours $2 rc=$?" >> $W/rc.txt; }
nc_ours 32q/8kv/d128/b32/ctx131072 d128-b32-128k
pack ncu1
timeout 60 $NCU --clock-control none $SEC --profile-from-start off python3 $K/sdpa_ncu.py cudnn 32 8 128 32 131072 > $W/ncu-cudnn-d128-b32-128k.txt 2>&1; echo "ncu cudnn rc=$?" >> $W/rc.txt
pack ncu2
nc_ours 24q/4kv/d256/b8/ctx32768 d256-b8-32k
nc_ours 32q/8kv/d128/b8/ctx32768 d128-b8-32k
pack ncu3
[ $(el) -lt 130 ] && { timeout 45 $NCU --clock-control none $SEC --profile-from-start off python3 $K/sdpa_ncu.py flash 24 4 256 8 131072 > $W/ncu-flash-d256-b8-128k.txt 2>&1; echo "ncu flash rc=$?" >> $W/rc.txt; }
[ $(el) -lt 150 ] && { timeout 30 $NCU --clock-control none $SEC --profile-from-start off python3 $K/sdpa_ncu.py cudnn 24 4 256 8 32768 > $W/ncu-cudnn-d256-b8-32k.txt 2>&1; echo "ncu cudnn d256 rc=$?" >> $W/rc.txt; }
pack end
cat $W/rc.txt
python3 - $W <<'PY'
import json,sys,glob,os
W=sys.argv[1]
for t in ['events','gated','partial']:
    try: r=json.load(open(f'{W}/t-{t}.json'))
    except Exception as e: print(t,'no receipt',e); continue
    print(t,'floor',round(r.get('launch_floor_us',0),2),'ceil',round(r['ceiling_bytes_per_s']/1e12,3))
    for x in r['rows']: print(' ',x['config'],round(x['median_us'],1),round(x['of_ceiling'],3),round(x.get('host_enqueue_us',0),1))
PY
grep -h -E "^  [a-z_].*\(|Duration|Elapsed Cycles|SM Active Cycles|DRAM Throughput|Registers Per|Grid Size|Block Size|Achieved Occupancy|Dynamic Shared" $W/ncu-*.txt | head -80
