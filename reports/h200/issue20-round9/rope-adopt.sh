#!/bin/bash
# Round 9: the adopted rope store (fp8 / q4 at d 128 on MODE 119: rope10's table-warp bits, no
# knob, each table warp reconverged before named barrier 1) against main at 17be3b1, one call:
# build both side by side; bench rope-store on the rows from 64 MiB up and the 1 MiB p16 rows,
# 3 rounds interleaved (A = 17be3b1, H = head); sum.py (rope10's) summarises; then qwen-pages on
# bf16 / fp8 / q4 and the sanitizers on the rope store kernels: synccheck (rope10's experiment
# had 2208 divergent-barrier errors), memcheck and racecheck, on qwen-pages cases and on bench
# rows of 64 MiB (about 12 rows a block: both table warps take several batches). The first run
# (d84cafc) had synccheck errors at the table warps' two bar.sync sites; the second run is of the
# fix (one bar.sync site, the consumers computing the first two batches' cos / sin).
T0=$(date +%s); DL=${DL:-200}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=/tmp/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git rev-parse HEAD > $W/commit.txt; git status --short > $W/status.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,ecc.mode.current --format=csv > $W/gpu.txt 2>&1
cfgb() { cmake -S $1 -B $2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg-$3.log 2>&1 && ninja -C $2 tf-cuda-test > $W/build-$3.log 2>&1; }
bb() { git worktree add --detach /tmp/base 17be3b1 > $W/wt.log 2>&1 && cfgb /tmp/base /tmp/bb base; }
tb=$(date +%s); bb & pb=$!; cfgb $R /tmp/b head; rh=$?; wait $pb; rb=$?
echo "builds head=$rh base=$rb $(( $(date +%s) - tb ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack
[ $rh = 0 ] && [ $rb = 0 ] || { tail -30 $W/build-*.log; pack; exit 4; }
TA=/tmp/bb/tools/tf-cuda-test; TB=/tmp/b/tools/tf-cuda-test
FB='^(64|256|1024)MiB/|^1MiB/.*/p16$'
run() { local t=$TB; [ $1 = A ] && t=$TA; $t bench rope-store --filter "$FB" --out $W/$1-$2.json > $W/$1-$2.log 2>&1; echo "$1-$2 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="H A"; else ORD="A H"; fi
  for v in $ORD; do [ $(left) -gt 110 ] && run $v $r; done; pack
done
python3 reports/h200/issue20-rope10/sum.py $W A:0 H:112 > $W/summary.txt 2>&1
F='fmt=(bf16|fp8|q4)'
SAN="compute-sanitizer --error-exitcode 9 --kernel-name kns=rope_store"
step qp bash -c "timeout 40 $TB qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
step synccheck bash -c "timeout 20 $SAN --tool synccheck $TB qwen-pages --backend cuda --cases 12 --filter 'd128[^,]*,fmt=(fp8|q4)' --gates-only --quiet --out $W/synccheck.json > $W/synccheck.log 2>&1"
step synccheck-bench bash -c "timeout 20 $SAN --tool synccheck $TB bench rope-store --reps 1 --filter '^64MiB/(fp8|q4)/(p16|window)' --out $W/synccheck-bench.json > $W/synccheck-bench.log 2>&1"
step memcheck bash -c "timeout 25 $SAN --tool memcheck $TB qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
step memcheck-bench bash -c "timeout 20 $SAN --tool memcheck $TB bench rope-store --reps 1 --filter '^(1|64)MiB/(fp8|q4)/p16' --out $W/memcheck-bench.json > $W/memcheck-bench.log 2>&1"
[ $(left) -gt 30 ] && step racecheck-bench bash -c "timeout 25 $SAN --tool racecheck $TB bench rope-store --reps 1 --filter '^64MiB/q4/p16' --out $W/racecheck-bench.json > $W/racecheck-bench.log 2>&1"
[ $(left) -gt 10 ] && step racecheck bash -c "timeout $(( $(left) - 4 )) $SAN --tool racecheck $TB qwen-pages --backend cuda --cases 4 --filter 'd128[^,]*,fmt=(fp8|q4)' --gates-only --quiet --out $W/racecheck.json > $W/racecheck.log 2>&1"
cat $W/steps.txt | grep -v -E "^[AH]-[0-9] rc=[01] "
grep -h -E "^qwen-pages" $W/qp.log | tail -2; for f in synccheck synccheck-bench memcheck memcheck-bench racecheck-bench racecheck; do echo "$f: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$f.log | tail -1)"; done
sed -n '/^bf16 /,$p' $W/summary.txt | grep -v "^$"
