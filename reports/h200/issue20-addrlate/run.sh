#!/bin/bash
# Issue 20, round 10c: the rope store's first rows wait for their K / V addresses only at their
# first K / V store (KC_ROPE_ADDR_LATE), one call. Two builds of the working tree: /tmp/b (the
# default: its rope_store.cu cubin is byte-identical to main's) and /tmp/bl (-DKC_ROPE_ADDR_LATE).
# Apply addrlate-experiment.patch (against d1f3f68) first: main does not carry the macro.
# bench rope-store, every row, 3 rounds interleaved (A, L); issue20-ropetail/sum.py; then on L: qwen-pages
# (bf16 / fp8 / q4) and synccheck, memcheck and racecheck on bench rows and qwen-pages cases.
T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
R=$PWD; W=/tmp/w; mkdir -p $W
pack(){ tar czf $OUT/results.tgz -C $W . 2>/dev/null; }
step(){ local n=$1; shift; local t0=$(date +%s); "$@"; echo "$n rc=$? $(( $(date +%s) - t0 ))s at $(el)s" >> $W/steps.txt; pack; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git status --short > $W/status.txt; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
cfgb(){ cmake -S $R -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF "${@:3}" > $W/cfg-$2.log 2>&1 && ninja -C $1 tf-cuda-test > $W/build-$2.log 2>&1; }
cfgb /tmp/b b & p1=$!
cfgb /tmp/bl bl -DCMAKE_CUDA_FLAGS=-DKC_ROPE_ADDR_LATE & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?; echo "builds b=$r1 bl=$r2 at $(el)s" >> $W/steps.txt
[ $r1 = 0 ] && [ $r2 = 0 ] || { tail -20 $W/build-*.log; pack; exit 4; }
run(){ local bin=/tmp/b; [ $1 = L ] && bin=/tmp/bl; $bin/tools/tf-cuda-test bench rope-store --out $W/$1-$2.json > $W/$1-$2.log 2>&1; echo "$1-$2 rc=$? at $(el)s" >> $W/steps.txt; }
for r in 1 2 3; do if [ $r = 2 ]; then O="L A"; else O="A L"; fi; for v in $O; do run $v $r; done; pack; done
python3 $R/reports/h200/issue20-ropetail/sum.py $W > $W/summary.txt 2>&1
TB=/tmp/bl/tools/tf-cuda-test; F='fmt=(bf16|fp8|q4)'; SAN="compute-sanitizer --error-exitcode 9"
step qp bash -c "timeout 60 $TB qwen-pages --backend cuda --cases 24 --filter '$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
step synccheck-bench bash -c "timeout 40 $SAN --tool synccheck $TB bench rope-store --reps 1 --filter '^(1|64)MiB/(bf16|fp8|q4)/(p16|window)' --out $W/synccheck-bench.json > $W/synccheck-bench.log 2>&1"
step memcheck-bench bash -c "timeout 40 $SAN --tool memcheck $TB bench rope-store --reps 1 --filter '^(1|64)MiB/(bf16|fp8|q4)/(p16|window)' --out $W/memcheck-bench.json > $W/memcheck-bench.log 2>&1"
step racecheck-bench bash -c "timeout 40 $SAN --tool racecheck $TB bench rope-store --reps 1 --filter '^64MiB/(bf16|q4)/p16' --out $W/racecheck-bench.json > $W/racecheck-bench.log 2>&1"
step synccheck bash -c "timeout 40 $SAN --tool synccheck --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 12 --filter 'd128[^,]*,$F' --gates-only --quiet --out $W/synccheck.json > $W/synccheck.log 2>&1"
step memcheck bash -c "timeout 40 $SAN --tool memcheck --kernel-name kns=rope_store $TB qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
pack
grep -v -E "^[AL]-[0-9] rc=[01] " $W/steps.txt; grep -h "^qwen-pages:" $W/qp.log | tail -1
for f in synccheck-bench memcheck-bench racecheck-bench synccheck memcheck; do echo "$f: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$f.log 2>/dev/null | tail -1)"; done
grep -E '^(64|256)MiB' $W/summary.txt; tail -7 $W/summary.txt
