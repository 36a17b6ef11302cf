#!/bin/bash
# keep5 device call 1: build the experiment commit, A/B the keep variants (KC_KEEP5_VARIANT 0 = main's
# kernel, 1 = keep5 kernel, 2 = keep5 + load hints) interleaved, qwen-pages + memcheck, probe, ncu.
export OUT; W=$OUT/w; mkdir -p $W; T0=$(date +%s)
st() { echo "$1 rc=$2 $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; }
pack() { tar czf $OUT/keep5.tgz -C $W . 2>/dev/null; }
git rev-parse HEAD > $W/commit.txt
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/build.log 2>&1 && ninja -C /tmp/b tf-cuda-test >> $W/build.log 2>&1; st build $?
X=/tmp/b/tools/tf-cuda-test
[ -x $X ] || { pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $W/gpu.txt 2>&1
for r in a b; do for v in 0 1 2; do
  KC_KEEP5_VARIANT=$v $X bench compact --out $W/compact-v$v-$r.json > $W/compact-v$v-$r.log 2>&1; st compact-v$v-$r $?
done; done; pack
# correctness: keep5 kernel (variant 1, the default) and the hint variant, in parallel
( KC_KEEP5_VARIANT=1 timeout 90 $X qwen-pages --backend cuda --out $W/qp-v1.json > $W/qp-v1.log 2>&1; st qp-v1 $? ) &
( KC_KEEP5_VARIANT=1 timeout 90 $X qwen-pages --backend cuda --cases 40 --filter 'fmt=(q4|fp8|bf16)' --quiet --out $W/qpf-v1.json > $W/qpf-v1.log 2>&1; st qpf-v1 $? ) &
( KC_KEEP5_VARIANT=2 timeout 90 $X qwen-pages --backend cuda --out $W/qp-v2.json > $W/qp-v2.log 2>&1; st qp-v2 $? ) &
( KC_KEEP5_VARIANT=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $X qwen-pages --backend cuda --cases 8 --gates-only --out $W/mc-v1.json > $W/mc-v1.log 2>&1; st memcheck-v1 $? ) &
wait; pack
KC_KEEP5_PROBE=1 KC_KEEP5_VARIANT=1 $X bench compact --filter '^(64|256|1024)MiB/.*/(p16|window)' --out $W/probe.json > $W/probe.log 2>&1; st probe $?; pack
NM="dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active"
ncu --query-metrics --chip gh100 2>/dev/null | grep -iE '^(dram|fbpa|fbp)__' > $W/ncu-dram-metrics.txt
for c in "0 256MiB/q4/p16" "0 256MiB/fp8/p16" "0 256MiB/bf16/p16" "1 256MiB/q4/p16" "0 64MiB/q4/p16" "1 64MiB/q4/p16"; do set -- $c; n=$(echo v$1-$2 | tr / _)
  KC_KEEP5_VARIANT=$1 timeout 40 ncu --clock-control none -k regex:'keep_kernel|keep5_kernel' -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --metrics $NM $X bench compact --reps 1 --filter "^$2\$" --out /tmp/n.json > $W/ncu-$n.txt 2>&1; st ncu-$n $?; done
timeout 40 ncu --clock-control none -k regex:bench_copy16 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics $NM $X bench compact --reps 1 --filter '^256MiB/q4/p16$' --out /tmp/n.json > $W/ncu-copy16-256MiB.txt 2>&1; st ncu-copy16 $?
pack
python3 - <<'PY'
import json,os
W=os.environ['OUT']+'/w'
rows={}
for v in '012':
  for r in 'ab':
    try: d=json.load(open(f'{W}/compact-v{v}-{r}.json'))
    except Exception as e: continue
    for x in d['rows']:
      if 'of_ceiling' in x and x['size_mib']>=64: rows.setdefault(x['config'],{})[v+r]=(x['of_ceiling'],x['verified'])
print('config'.ljust(20),' '.join(k.rjust(6) for k in ['0a','1a','2a','0b','1b','2b']))
for c,d in rows.items(): print(c.ljust(20),' '.join((('%.3f'%d[k][0])+('' if d[k][1] else '!')).rjust(6) if k in d else '     -' for k in ['0a','1a','2a','0b','1b','2b']))
PY
grep -h "^probe" $W/probe.log; cat $W/steps.txt; grep -h "qwen-pages:" $W/qp*.log $W/mc*.log; tail -3 $W/mc-v1.log
