#!/bin/bash
# rope9, one device call: build main (6725561, /tmp/bb) and the rope9 experiment (/tmp/b) side by
# side; bench rope-store on the 1 / 64 / 256 / 1024 MiB rows, 3 rounds interleaved (A = main's
# binary; the others the rope9 binary with KC_ROPE9="x,x,x": 8 tail split, 16 q_out by
# st.global.cs, 32 evict-first bulk loads, 64 the part first); sum.py picks per format; then
# qwen-pages, memcheck (qwen-pages and two split bench rows) on the pick, and ncu on 64 MiB q4 / fp8
# p16 (main, pick).
T0=$(date +%s); DL=${DL:-200}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git rev-parse HEAD > $W/commit.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
cfgb() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg-$3.log 2>&1 && ninja -C $2 tf-cuda-test > $W/build-$3.log 2>&1; }
bb() { git worktree add --detach /tmp/base 6725561 > $W/wt.log 2>&1 && cfgb /tmp/base /tmp/bb base; }
tb=$(date +%s); bb & pb=$!; cfgb $R /tmp/b head; rh=$?; wait $pb; rb=$?
echo "builds head=$rh base=$rb $(( $(date +%s) - tb ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack
[ $rh = 0 ] && [ $rb = 0 ] || { tail -30 $W/build-*.log; pack; exit 4; }
TA=/tmp/bb/tools/tf-cuda-test; TB=/tmp/b/tools/tf-cuda-test
FB='^(1|64|256|1024)MiB/'
run() { local t=$TB; [ $1 = A ] && t=$TA; KC_ROPE9=$2 $t bench rope-store --filter "$FB" --out $W/$1-$3.json > $W/$1-$3.log 2>&1; echo "$1-$3 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
V="A:0,0,0 T:8,8,8 TP:72,72,72 C:16,16,16 E:32,32,32 TCE:56,56,56 TPCE:120,120,120"
RV=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="$RV"; else ORD="$V"; fi
  for vk in $ORD; do [ $(left) -gt 75 ] && run ${vk%%:*} ${vk#*:} $r; done; pack
done
python3 reports/h200/issue20-rope9/sum.py $W > $W/summary.txt 2>&1
K=$(sed -n 's/^knob: //p' $W/summary.txt); K=${K:-0,0,0}; echo "knob: $K" >> $W/steps.txt
F='fmt=(bf16|fp8|q4)'
[ $(left) -gt 40 ] && step qp bash -c "KC_ROPE9=$K timeout $(( $(left) - 25 )) $TB qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
[ $(left) -gt 20 ] && step memcheck bash -c "KC_ROPE9=$K timeout $(( ($(left) - 8) / 2 )) compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
[ $(left) -gt 10 ] && step memcheck-bench bash -c "KC_ROPE9=$K timeout $(( $(left) - 6 )) compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TB bench rope-store --reps 1 --filter '^64MiB/(bf16|q4)/p16' --out $W/memcheck-bench.json > $W/memcheck-bench.log 2>&1"
NCU="ncu --clock-control none --kernel-name regex:rope_store_ring --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum"
for row in q4/p16 fp8/p16; do
  for t in A B; do
    b=$TB; [ $t = A ] && b=$TA
    [ $(left) -gt 5 ] && step ncu-$t-${row%/*} bash -c "KC_ROPE9=$K timeout $(( $(left) - 2 )) $NCU $b bench rope-store --reps 1 --filter '^64MiB/$row\$' > $W/ncu-$t-${row%/*}.log 2>&1"
  done
done
pack
grep -v -- "-[0-9] rc=0 at" $W/steps.txt
grep -h -E "^qwen-pages|verdict|gates|controls" $W/qp.log 2>/dev/null | tail -3; grep -h -E "ERROR SUMMARY" $W/memcheck*.log | tail -3
sed -n '/^bf16 /,$p' $W/summary.txt | grep -v "^$"
