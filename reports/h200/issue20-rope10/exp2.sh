#!/bin/bash
# rope10, the table-warp experiment (not run by rope10: its device time was spent by call 1), one
# device call from the experiment commit: build main (17be3b1, /tmp/bb) and the experiment (/tmp/b)
# side by side; bench rope-store on the 27 rows from 64 MiB up and the 1 MiB p16 rows, 3 rounds
# interleaved (A = main's binary; the others the experiment binary with KC_ROPE10 bits at fp8 / q4
# d 128: 16 kRopeTabEarly, 32 kRopeTabIlp, 64 kRopeTwoTables; bf16 runs main's kernels in every
# variant: a noise control); sum.py picks per format; ncu (--clock-control none) on fp8 256 MiB p16
# of T1 and of the pick (call 1 has main's); then qwen-pages, memcheck and synccheck on the pick.
T0=$(date +%s); DL=${DL:-200}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=/tmp/w; mkdir -p $W  # only results.tgz goes to $OUT (call 1 left its files there too: 8 come back)
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git rev-parse HEAD > $W/commit.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,ecc.mode.current --format=csv > $W/gpu.txt 2>&1
cfgb() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg-$3.log 2>&1 && ninja -C $2 tf-cuda-test > $W/build-$3.log 2>&1; }
bb() { git worktree add --detach /tmp/base 17be3b1 > $W/wt.log 2>&1 && cfgb /tmp/base /tmp/bb base; }
tb=$(date +%s); bb & pb=$!; cfgb $R /tmp/b head; rh=$?; wait $pb; rb=$?
echo "builds head=$rh base=$rb $(( $(date +%s) - tb ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack
[ $rh = 0 ] && [ $rb = 0 ] || { tail -30 $W/build-*.log; pack; exit 4; }
TA=/tmp/bb/tools/tf-cuda-test; TB=/tmp/b/tools/tf-cuda-test
FB='^(64|256|1024)MiB/|^1MiB/.*/p16$'
run() { local t=$TB; [ $1 = A ] && t=$TA; KC_ROPE10=$2 $t bench rope-store --filter "$FB" --out $W/$1-$3.json > $W/$1-$3.log 2>&1; echo "$1-$3 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
V="A:0 T1:16 T12:48 T13:80 T123:112"
RV=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="$RV"; else ORD="$V"; fi
  for vk in $ORD; do [ $(left) -gt 75 ] && run ${vk%%:*} ${vk#*:} $r; done; pack
done
python3 reports/h200/issue20-rope10/sum.py $W $V > $W/summary.txt 2>&1
K=$(sed -n 's/^knob: //p' $W/summary.txt); K=${K:-0,0,0}; echo "knob: $K" >> $W/steps.txt
NCU="ncu --clock-control none --kernel-name regex:rope_store_ring --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section WarpStateStats --section SchedulerStats --section SourceCounters --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_requests_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum,lts__d_sectors_fill_device.sum,lts__t_sectors_srcunit_tex_op_write.max,lts__t_sectors_srcunit_tex_op_write.avg,lts__cycles_active.max,lts__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,smsp__inst_executed.sum"
prof() {  # name knob binary row
  KC_ROPE10=$2 timeout $(( $(left) - 3 )) $NCU -o $W/$1 $3 bench rope-store --reps 1 --filter "^$4\$" > $W/$1.log 2>&1
  ncu -i $W/$1.ncu-rep --page details > $W/$1.txt 2>&1; ncu -i $W/$1.ncu-rep --page raw --csv > $W/$1-raw.csv 2>&1
  ncu -i $W/$1.ncu-rep --page source --csv --print-source sass > $W/$1-src.csv 2>&1; rm -f $W/$1.ncu-rep; }
[ $(left) -gt 55 ] && step ncu-T1-p16 prof ncu-T1-p16 16 $TB 256MiB/fp8/p16
F='fmt=(bf16|fp8|q4)'
if [ "$K" != "0,0,0" ]; then
  [ $(left) -gt 30 ] && step qp bash -c "KC_ROPE10=$K timeout $(( $(left) - 10 )) $TB qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
  [ $(left) -gt 12 ] && step memcheck bash -c "KC_ROPE10=$K timeout $(( ($(left) - 4) / 2 )) compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
  [ $(left) -gt 16 ] && step synccheck bash -c "KC_ROPE10=$K timeout 12 compute-sanitizer --tool synccheck --error-exitcode 9 --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 8 --filter 'd128[^,]*,fmt=(fp8|q4)' --gates-only --quiet --out $W/synccheck.json > $W/synccheck.log 2>&1"
  [ $(left) -gt 6 ] && step memcheck-bench bash -c "KC_ROPE10=$K timeout $(( $(left) - 2 )) compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TB bench rope-store --reps 1 --filter '^(1|64)MiB/(bf16|fp8|q4)/p16' --out $W/memcheck-bench.json > $W/memcheck-bench.log 2>&1"
fi
[ $(left) -gt 15 ] && step ncu-K-p16 prof ncu-K-p16 $K $TB 256MiB/fp8/p16
ncu --query-metrics --chip gh100 2>&1 | grep -i -E "tlb|gmmu|ltcfabric|fill" > $W/ncu-metrics-tlb.txt; pack
grep -v -- "-[0-9] rc=0 at" $W/steps.txt
grep -h -E "^qwen-pages" $W/qp.log 2>/dev/null | tail -2; grep -h -E "ERROR SUMMARY" $W/memcheck*.log 2>/dev/null | tail -3
grep -h -E "^ *(Duration|DRAM Throughput|L2 Hit Rate) " $W/ncu-*.txt 2>/dev/null | head -12
sed -n '/^bf16 /,$p' $W/summary.txt | grep -v "^$"
