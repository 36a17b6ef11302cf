#!/bin/bash
# rope7, one device call: build the experiment (KC_ROPE7 knob: 0 main's kernels, 4 fast start,
# 12 fast start + late K / V wait, +16 balanced grid), bench rope-store interleaved on the
# >= 64 MiB and 1 MiB rows (3 rounds), the stored bytes' hashes against A, then qwen-pages and
# memcheck on the winner.
T0=$(date +%s); DL=${DL:-175}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
git rev-parse HEAD > $W/commit.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
B=/tmp/b-rope7; TF=$B/tools/tf-cuda-test
step build bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF >$W/cfg.log 2>&1 && ninja -C $B tf-cuda-test >$W/build.log 2>&1" || { tail -40 $W/build.log; pack; exit 4; }
FB='^(1|64|256|1024)MiB/(bf16|fp8|q4)/'
run() { KC_ROPE7=$2 $TF bench rope-store --filter "$FB" --out $W/$1.json > $W/$1.log 2>&1; echo "$1 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="G:16 FLG:28 FL:12 F:4 A:0"; else ORD="A:0 F:4 FL:12 FLG:28 G:16"; fi
  for vk in $ORD; do [ $(left) -gt 75 ] && run ${vk%%:*}-$r ${vk##*:}; done; pack
done
python3 reports/h200/issue20-rope7/sum.py $W > $W/summary.txt 2>&1
WK=$(sed -n 's/^winner: [A-Z]* //p' $W/summary.txt); WK=${WK:-0}; echo "winner knob: $WK" >> $W/steps.txt
F='fmt=(bf16|fp8|q4)'
[ $(left) -gt 45 ] && step qp bash -c "KC_ROPE7=$WK $TF qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
[ $(left) -gt 12 ] && step memcheck bash -c "KC_ROPE7=$WK timeout $(( $(left) - 6 )) compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
pack
cat $W/steps.txt | grep -v " rc=1 at" ; grep -h -E "^qwen-pages|^verdict|gates|controls" $W/qp.log 2>/dev/null | tail -4; grep -E "ERROR SUMMARY|^qwen-pages|verdict" $W/memcheck.log | tail -3
cat $W/summary.txt
