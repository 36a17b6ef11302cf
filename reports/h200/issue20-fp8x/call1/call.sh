#!/bin/bash
# fp8x's device call (one cold call): main 7e41563 (base), fp8x (A) and fp8x-b3 (B3: A with
# main's K row addressing, attribution only) built on the device; interleaved A/B at 32K x b8
# window; qwen-pages and memcheck on A; ncu of the fp8 d128 partial (base, A); every fp8 row's
# out_fnv1a (base vs A). Everything under /tmp/w, tarred to $OUT/fp8x.tgz after each stage.
set -u
R=$PWD; T0=$(date +%s); el(){ echo $(( $(date +%s) - T0 )); }
W=/tmp/w; mkdir -p $W; export PATH=/usr/local/cuda/bin:$PATH
pack(){ echo "[$1 at $(el) s]" >> $W/steps.txt; tar czf $OUT/fp8x.tgz -C $W . 2>/dev/null; }
printf '/.deps/\n/.kcgit/\n' >> .git/info/exclude
git fetch -q .kcgit/fp8x/head.bundle fp8x:fp8x fp8x-b3:fp8x-b3 || { echo "fetch failed"; exit 3; }
git worktree add -q -f /tmp/a fp8x && git worktree add -q -f /tmp/base 7e41563 || { echo "worktree failed"; exit 3; }
git -C /tmp/a log --oneline -3 > $W/head.txt; git rev-parse fp8x-b3 >> $W/head.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $W/gpu.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S /tmp/a -B /tmp/a/build $CM > $W/cfg-a.log 2>&1 &
cmake -S /tmp/base -B /tmp/base/build $CM > $W/cfg-base.log 2>&1 &
wait
(ninja -C /tmp/a/build -j9 tf-cuda-test > $W/build-a.log 2>&1; echo "build a rc=$? at $(el)" >> $W/steps.txt) &
(ninja -C /tmp/base/build -j7 tf-cuda-test > $W/build-base.log 2>&1; echo "build base rc=$? at $(el)" >> $W/steps.txt) &
wait
X=/tmp/bins; mkdir -p $X
cp /tmp/a/build/tools/tf-cuda-test $X/A && cp /tmp/base/build/tools/tf-cuda-test $X/base || { tail -30 $W/build-a.log $W/build-base.log; pack build; exit 4; }
pack build
# B3 (one-file rebuild) beside qwen-pages and memcheck on A (no timing in this stage)
(git -C /tmp/a checkout -q fp8x-b3 && ninja -C /tmp/a/build -j14 tf-cuda-test > $W/build-b3.log 2>&1 && cp /tmp/a/build/tools/tf-cuda-test $X/B3; echo "build b3 rc=$? at $(el)" >> $W/steps.txt) &
QF='d(128|256)(-r64|-r20)?,fmt=fp8'
(timeout 70 $X/A qwen-pages --backend cuda --cases 120 --filter "$QF" --out $W/qp-A.json > $W/qp-A.log 2>&1; echo "qwen-pages A rc=$? at $(el)" >> $W/steps.txt) &
(timeout 70 compute-sanitizer --tool memcheck --error-exitcode 9 $X/A qwen-pages --backend cuda --cases 90 --filter "$QF" --quiet --out $W/san-mem-A.json > $W/san-mem-A.log 2>&1; echo "memcheck A rc=$? at $(el)" >> $W/steps.txt) &
wait
pack checks
F='(32q/8kv/d128|24q/4kv/d256)/b8/ctx32768/(bf16|fp8)/window'
BO="--script-dir /nonexistent --reps 20"
for r in 1 2 3; do
  order="base A B3"; [ $r = 2 ] && order="B3 A base"
  for v in $order; do
    [ -x $X/$v ] || continue
    [ $v = B3 ] && [ $(el) -gt 135 ] && continue
    timeout 30 $X/$v bench attention --filter "$F" $BO --out $W/ab-$v-r$r.json > $W/ab-$v-r$r.log 2>&1
    echo "ab $v r$r rc=$? at $(el)" >> $W/steps.txt
  done
done
pack ab
# ncu of the fp8 d128 partial (the 2nd launch of the row), base then A
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in base A; do
  [ $(el) -gt 190 ] && break
  timeout 35 $NCU --clock-control none -k regex:attention_partial_mma_kernel --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section InstructionStats \
    --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --import-source yes -f -o $W/ncu-$v \
    $X/$v bench attention --filter '32q/8kv/d128/b8/ctx32768/fp8/window' --script-dir /nonexistent --reps 1 > $W/ncu-$v.log 2>&1
  echo "ncu $v rc=$? at $(el)" >> $W/steps.txt
  $NCU -i $W/ncu-$v.ncu-rep --page details --csv > $W/ncu-$v-details.csv 2>&1
  $NCU -i $W/ncu-$v.ncu-rep --page source --csv --print-source sass > $W/ncu-$v-sass.csv 2>&1 || \
    $NCU -i $W/ncu-$v.ncu-rep --page source --csv > $W/ncu-$v-sass.csv 2>&1
done
pack ncu
# every fp8 row's output bytes, base vs A (and their times, reps 5)
for v in base A; do
  [ $(el) -gt 215 ] && break
  timeout 25 $X/$v bench attention --filter '/fp8/' --script-dir /nonexistent --reps 5 --out $W/fp8rows-$v.json > $W/fp8rows-$v.log 2>&1
  echo "fp8rows $v rc=$? at $(el)" >> $W/steps.txt
done
pack end
cat $W/steps.txt
python3 .kcgit/fp8x/summ.py $W 2>&1 | tee $W/summary.txt
pack final
