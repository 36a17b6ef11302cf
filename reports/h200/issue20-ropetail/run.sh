#!/bin/bash
# Issue 20, round 10: the rope store's tail rows (rope_store_tail_kernel), one call. One build of
# the working tree (its tf-cuda-test and the planted rope-tail-pos-dev mutant); bench rope-store,
# every row, 3 rounds interleaved: A = KC_ROPE_TAIL=0 (the ring kernel takes every row, as main),
# T = the default (the n % grid rows after the full rounds to the tail kernel); sum.py
# summarises (of_ceiling per run, time / A, out_hash against A's). Then qwen-pages on bf16 / fp8 /
# q4, the mutant (must be red), and synccheck, memcheck and racecheck on bench rows where the
# tail kernel runs (16 and 64 MiB) and on qwen-pages cases.
T0=$(date +%s); DL=${DL:-400}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=/tmp/w; mkdir -p $W
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git rev-parse HEAD > $W/commit.txt; git status --short > $W/status.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,ecc.mode.current --format=csv > $W/gpu.txt 2>&1
step build bash -c "cmake -S $R -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=ON > $W/cfg.log 2>&1 && ninja -C /tmp/b tf-cuda-test tf-cuda-test-mutant-rope-tail-pos-dev > $W/build.log 2>&1" || { tail -30 $W/build.log; pack; exit 4; }
TB=/tmp/b/tools/tf-cuda-test
# Variants by KC_ROPE_TAIL: A "0" (main's launch), C "c" (the ring kernel's carveout the most
# shared memory, no tail kernel), D "d" (the tail kernel, default carveouts: call 1's T),
# T unset (the tail kernel, both carveouts the most shared memory).
run() { local e=; case $1 in A) e=0;; C) e=c;; D) e=d;; esac
  if [ -n "$e" ]; then KC_ROPE_TAIL=$e $TB bench rope-store --out $W/$1-$2.json > $W/$1-$2.log 2>&1; else $TB bench rope-store --out $W/$1-$2.json > $W/$1-$2.log 2>&1; fi; echo "$1-$2 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="D T C A"; else ORD="A C T D"; fi
  for v in $ORD; do [ $(left) -gt 200 ] && run $v $r; done; pack
done
python3 $R/reports/h200/issue20-ropetail/sum.py $W > $W/summary.txt 2>&1
F='fmt=(bf16|fp8|q4)'
step qp bash -c "timeout 60 $TB qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
step mutant bash -c "cd /tmp/b && timeout 60 ctest -L cuda -R '^mutant[.]rope-tail-pos-dev\$' --output-on-failure > $W/mutant.log 2>&1"
MB=$(find /tmp/b -type f -name "tf-cuda-test-mutant-rope-tail-pos-dev*" | head -1)
step mutant-qp bash -c "timeout 40 $MB qwen-pages --backend cuda --quiet --out $W/mutant-qp.json > $W/mutant-qp.log 2>&1"
SAN="compute-sanitizer --error-exitcode 9"
step synccheck-bench bash -c "timeout 40 $SAN --tool synccheck $TB bench rope-store --reps 1 --filter '^(16|64)MiB/(bf16|fp8|q4)/p16' --out $W/synccheck-bench.json > $W/synccheck-bench.log 2>&1"
step memcheck-bench bash -c "timeout 40 $SAN --tool memcheck $TB bench rope-store --reps 1 --filter '^(16|64)MiB/(bf16|fp8|q4)/(p16|window)' --out $W/memcheck-bench.json > $W/memcheck-bench.log 2>&1"
step memcheck bash -c "timeout 40 $SAN --tool memcheck --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
[ $(left) -gt 40 ] && step racecheck-bench bash -c "timeout 40 $SAN --tool racecheck $TB bench rope-store --reps 1 --filter '^64MiB/q4/p16' --out $W/racecheck-bench.json > $W/racecheck-bench.log 2>&1"
[ $(left) -gt 20 ] && step synccheck bash -c "timeout $(( $(left) - 8 )) $SAN --tool synccheck --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 12 --filter 'd128[^,]*,fmt=(fp8|q4)' --gates-only --quiet --out $W/synccheck.json > $W/synccheck.log 2>&1"
pack
cat $W/steps.txt | grep -v -E "^[ACDT]-[0-9] rc=[01] "
grep -h -E "^qwen-pages|verdict" $W/qp.log | tail -2; echo "mutant: $(grep -h -E 'tests passed|Passed|Failed' $W/mutant.log | tail -2 | tr '\n' ' ')"
for f in synccheck-bench memcheck-bench memcheck racecheck-bench synccheck; do echo "$f: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$f.log 2>/dev/null | tail -1)"; done
grep -E '^(16|64)MiB' $W/summary.txt; tail -13 $W/summary.txt
