#!/bin/bash
# rope6, one device call: build the experiment (KC_ROPE6 / KC_ROPE6_BF16 pick the variant at
# run time; unset = main's kernels, PTX-identical to 7e41563's), bench rope-store A/B over the
# variants interleaved (L2 flushed, the default), then on the best fp8 / q4 and bf16 variants:
# fp16 exhaustive check, qwen-pages, memcheck; ncu of main and the best; a third bench round.
T0=$(date +%s); DL=${DL:-205}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W --exclude='*.ncu-rep' . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
git rev-parse HEAD > $W/commit.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
B=/tmp/b-rope6; TF=$B/tools/tf-cuda-test
( nvcc -std=c++20 -arch=sm_90 --expt-relaxed-constexpr -DKC_HAVE_CUDA=1 -I. -I$B/generated reports/h200/issue20-rope6/fp16_check.cu -o /tmp/fp16_check > $W/fp16_build.log 2>&1 ) &
step build bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF >$W/cfg.log 2>&1 && ninja -C $B tf-cuda-test >$W/build.log 2>&1" || { tail -40 $W/build.log; exit 4; }
wait
Q=(t,16,0 t,16,1 t,16,2 t,16,3 t,24,0 t,24,3 r,16,0 r,16,3 r,24,0 r,24,3)
BF=(16,0 16,2 24,0 24,2)
bench() {  # round, configs of fp8/q4 then of bf16
  local r=$1
  for c in "${Q[@]}"; do n=q-${c//,/_}-$r
    KC_ROPE6=$c $TF bench rope-store --filter '^(64|256|1024)MiB/(fp8|q4)/' --out $W/$n.json > $W/$n.log 2>&1; echo "$n rc=$?" >> $W/steps.txt; done
  for c in "${BF[@]}"; do n=b-${c//,/_}-$r
    KC_ROPE6_BF16=$c $TF bench rope-store --filter '^(64|256|1024)MiB/bf16/' --out $W/$n.json > $W/$n.log 2>&1; echo "$n rc=$?" >> $W/steps.txt; done
  pack
}
step bench-1 bench 1
step bench-2 bench 2
python3 reports/h200/issue20-rope6/sum.py $W > $W/summary.txt; cat $W/summary.txt
WQ=$(sed -n 's/^best fp8q4: //p' $W/summary.txt); WB=$(sed -n 's/^best bf16: //p' $W/summary.txt)
echo "winners: KC_ROPE6=$WQ KC_ROPE6_BF16=$WB" | tee -a $W/steps.txt
[ -x /tmp/fp16_check ] && step fp16 bash -c "/tmp/fp16_check > $W/fp16_check.log 2>&1"; cat $W/fp16_check.log
F='fmt=(bf16|fp8|q4)'
[ $(left) -gt 60 ] && step qp bash -c "KC_ROPE6=$WQ KC_ROPE6_BF16=$WB $TF qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
[ $(left) -gt 45 ] && step memcheck bash -c "KC_ROPE6=$WQ KC_ROPE6_BF16=$WB timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --cases 8 --filter '$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
prof() {  # name env fmt
  KC_ROPE6=$2 timeout 40 ncu --clock-control none -k regex:rope_store --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section SourceCounters --import-source yes -f -o $W/ncu-$1 $TF bench rope-store --filter "^256MiB/$3/window\$" --reps 1 > $W/ncu-$1.log 2>&1
  ncu -i $W/ncu-$1.ncu-rep --page details > $W/ncu-$1.txt 2>&1
  ncu -i $W/ncu-$1.ncu-rep --page source --csv --print-source sass > $W/ncu-$1-sass.csv 2>&1
}
for x in "main-fp8 t,16,0 fp8" "main-q4 t,16,0 q4" "best-fp8 $WQ fp8" "best-q4 $WQ q4"; do
  set -- $x; [ $(left) -gt 25 ] && step ncu-$1 prof $1 $2 $3
done
[ $(left) -gt 20 ] && { Q=(t,16,0 $WQ); BF=(16,0 $WB); step bench-3 bench 3; }
python3 reports/h200/issue20-rope6/sum.py $W > $W/summary.txt
pack; ls -la $W | head -80 > $OUT/ls.txt
cat $W/steps.txt | tail -12; grep -h -E "verdict|gates|controls" $W/qp.log 2>/dev/null | tail -5; tail -3 $W/memcheck.log 2>/dev/null
cat $W/summary.txt
