#!/bin/bash
# Issue 20: the q4 rope store's nibbles by one reciprocal per lane's four values (q4recip.patch:
# rope_kv_store's fast-encode q4 branch calls q4_nibble_by_recip, kernels/codecs/q4.h, whose bytes
# equal q4_nibble_of's: Q4Group.ReciprocalNibbleIsTheDivisionsForEveryScale). Written in session
# 34 (no device that session), not yet run. One call:
#   TOTAL=420 bash reports/h200/issue20-q4recip/run.sh
# Two builds of tf-cuda-test, A = the tree as committed, B = with the patch; bench rope-store on
# the fp8 and q4 rows (fp8 is not changed by the patch: its ratio is the run's noise), 3 rounds
# interleaved; sum.py (issue20-ropetail's) prints time B / A per row and whether B's out_hash is
# A's (the bytes must be equal). Then B's qwen-pages on q4 (the q4-ties probes check
# store == reference byte for byte), and memcheck / synccheck / racecheck on B's q4 ring rows.
# Everything under $OUT/results.tgz.
T0=$(date +%s); DL=${TOTAL:-420}
left() { echo $(( DL - ($(date +%s) - T0) )); }
R=$PWD; W=/tmp/q4recip; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git rev-parse HEAD > $W/commit.txt; git status --short > $W/status.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $W/gpu.txt 2>&1
for v in a b; do
  rm -rf /tmp/src-$v; mkdir -p /tmp/src-$v
  tar cf - --exclude=./.git --exclude=./.deps --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/src-$v
done
(cd /tmp/src-b && git apply $R/reports/h200/issue20-q4recip/q4recip.patch) > $W/patch.log 2>&1 || { cat $W/patch.log; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_PREFIX_PATH=$R/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
step build bash -c "cmake -S /tmp/src-a -B /tmp/ba $CFG > $W/cfg-a.log 2>&1 && cmake -S /tmp/src-b -B /tmp/bb $CFG > $W/cfg-b.log 2>&1 && ninja -C /tmp/ba tools/tf-cuda-test > $W/build-a.log 2>&1 && ninja -C /tmp/bb tools/tf-cuda-test > $W/build-b.log 2>&1" || { tail -30 $W/build-*.log; pack; exit 4; }
BIN_A=/tmp/ba/tools/tf-cuda-test; BIN_B=/tmp/bb/tools/tf-cuda-test
run() { local bin=BIN_$1; ${!bin} bench rope-store --filter '/(fp8|q4)/' --out $W/$1-$2.json > $W/$1-$2.log 2>&1; echo "$1-$2 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="B A"; else ORD="A B"; fi
  for v in $ORD; do [ $(left) -gt 200 ] && run $v $r; done; pack
done
python3 $R/reports/h200/issue20-ropetail/sum.py $W > $W/summary.txt 2>&1
step qp bash -c "timeout 90 $BIN_B qwen-pages --backend cuda --filter 'fmt=q4' --quiet --out $W/qp-b-q4.json > $W/qp-b-q4.log 2>&1"
SAN="compute-sanitizer --error-exitcode 9"
step memcheck bash -c "timeout 40 $SAN --tool memcheck $BIN_B bench rope-store --reps 1 --filter '^(16|64)MiB/q4/' --out $W/memcheck.json > $W/memcheck.log 2>&1"
step synccheck bash -c "timeout 40 $SAN --tool synccheck $BIN_B bench rope-store --reps 1 --filter '^64MiB/q4/' --out $W/synccheck.json > $W/synccheck.log 2>&1"
[ $(left) -gt 30 ] && step racecheck bash -c "timeout $(( $(left) - 10 )) $SAN --tool racecheck $BIN_B bench rope-store --reps 1 --filter '^64MiB/q4/p16' --out $W/racecheck.json > $W/racecheck.log 2>&1"
pack
grep -v -E "^[AB]-[0-9] rc=[01] " $W/steps.txt
grep -h -E "^qwen-pages|verdict" $W/qp-b-q4.log | tail -2
for f in memcheck synccheck racecheck; do echo "$f: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$f.log 2>/dev/null | tail -1)"; done
grep -E '/q4/' $W/summary.txt; tail -6 $W/summary.txt
