#!/bin/bash
# rope8, one device call: build the experiment (KC_ROPE8="S,M,S16": fp8 / q4 d 128 data stages S,
# extra MODE bits M: 4 q_out by st.global.cs, 8 evict-first bulk loads, 16 the stage freed after
# the warp's last stage load; S16 the stages where the cache's smallest page is 1..16), bench
# rope-store interleaved on the 1 / 64 / 256 / 1024 MiB rows (3 rounds), out_hash against A, then
# qwen-pages, memcheck and synccheck on the winner.
T0=$(date +%s); DL=${DL:-128}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=$OUT/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
git rev-parse HEAD > $W/commit.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
B=/tmp/b-rope8; TF=$B/tools/tf-cuda-test
step build bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF >$W/cfg.log 2>&1 && ninja -C $B tf-cuda-test >$W/build.log 2>&1" || { tail -40 $W/build.log; pack; exit 4; }
FB='^(1|64|256|1024)MiB/(bf16|fp8|q4)/'
run() { KC_ROPE8=$2 $TF bench rope-store --filter "$FB" --out $W/$1.json > $W/$1.log 2>&1; echo "$1 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
V="A:3,0,3 S2:2,0,2 S4:4,0,4 E3:3,16,3 E2:2,16,2 E4:4,16,4"
RV=$(echo $V | tr ' ' '\n' | tac | tr '\n' ' ')
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="$RV"; else ORD="$V"; fi
  for vk in $ORD; do [ $(left) -gt 42 ] && run ${vk%%:*}-$r ${vk#*:}; done; pack
done
python3 reports/h200/issue20-rope8/sum.py $W > $W/summary.txt 2>&1
WK=$(sed -n 's/^winner: [A-Za-z0-9]* //p' $W/summary.txt); WK=${WK:-3,0,3}; echo "winner knob: $WK" >> $W/steps.txt
F='fmt=(bf16|fp8|q4)'
[ $(left) -gt 30 ] && step qp bash -c "KC_ROPE8=$WK timeout $(( $(left) - 12 )) $TF qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
[ $(left) -gt 10 ] && step memcheck bash -c "KC_ROPE8=$WK timeout $(( ($(left) - 2) / 2 )) compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
[ $(left) -gt 5 ] && step synccheck bash -c "KC_ROPE8=$WK timeout $(( $(left) - 1 )) compute-sanitizer --tool synccheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --cases 8 --filter 'd128[^,]*,fmt=(fp8|q4)' --gates-only --quiet --out $W/synccheck.json > $W/synccheck.log 2>&1"
pack
cat $W/steps.txt | grep -v " rc=1 at" ; grep -h -E "^qwen-pages|^verdict|gates|controls" $W/qp.log 2>/dev/null | tail -4; grep -h -E "ERROR SUMMARY|^qwen-pages|verdict" $W/memcheck.log $W/synccheck.log | tail -6
cat $W/summary.txt
