#!/bin/bash
# The proofs that round 3's README leaves pending, in one H200 call (written in session 33, not yet run):
#  A. a tree copy built unmutated (/tmp/rc): qwen-pages in full on cuda (its probes), rows-invariant
#     on cuda, kc_device_tests DeviceArena.* -- the new probes and tests must pass before a mutant counts;
#     and (session 34) QwenPagesContract.CudaDefaultRunReachesEveryKernelPath;
#  B. beside it, run-round2.sh over the seven survivors (merge-reload-barrier by its racecheck check,
#     sanitize:racecheck:qwen-pages:len=9000) and the three mutants the call did not reach.
#     TOTAL=560 bash reports/h200/mutation-sweep/round3/run-proofs.sh
# Everything comes back in $OUT/proofs.tgz (and run-round2.sh's sweep2.tgz).
T0=$(date +%s); W=/tmp/proofs; rm -rf $W; mkdir -p $W ${OUT:-/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
ROOT=$PWD
pack(){ tar czf ${OUT:-/tmp/out}/proofs.tgz -C /tmp proofs 2>/dev/null; }
step(){ local n=$1; shift; local t0=$(date +%s); "$@" > $W/$n.log 2>&1; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(tail -n 1 $W/$n.log | cut -c1-150)" | tee -a $W/steps.txt; pack; return $rc; }
ONLY='^(merge-reload-barrier|rope-q4-scale-recip|merge-kept-batch-chunk|rope-kernel-stage-barrier|eng-rms-chunk-barrier|arena-refresh-pts-size|cuda-fill-legacy-stream|rope-block-table-last-pair|fp8-encode-row-index-32bit|q4-encode-bound-le)$' \
  DEV_MUTANTS=reports/mutation-sweep/mutants-device-3.json DEV="0 1 2" NDEV=3 HOST="" TOTAL=$(( ${TOTAL:-560} - 10 )) \
  bash reports/h200/mutation-sweep/run-round2.sh > $W/sweep.log 2>&1 & SWEEP=$!
rm -rf /tmp/rc; mkdir -p /tmp/rc
tar cf - --exclude=./.git --exclude=./.deps --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/rc
step cfg cmake -S /tmp/rc -B /tmp/rcb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0
step build ninja -C /tmp/rcb tools/tf-cuda-test tests/kc_device_tests tests/kc_contract_tests
B=/tmp/rcb/tools/tf-cuda-test
step base-qwen-pages timeout 200 $B qwen-pages --backend cuda --quiet --out $W/base-qwen-pages-cuda.json
step base-rows-invariant timeout 100 $B rows-invariant --backend cuda --quiet --out $W/base-rows-invariant-cuda.json
step base-device-arena timeout 100 /tmp/rcb/tests/kc_device_tests --gtest_filter='DeviceArena.*'
# Session 34: every registered kernel path (kKernelPathNames) reached by the default run's cases.
step kernel-path-test timeout 150 /tmp/rcb/tests/kc_contract_tests --gtest_filter='QwenPagesContract.CudaDefaultRunReachesEveryKernelPath'
wait $SWEEP
cp ${OUT:-/tmp/out}/sweep2.tgz $W/ 2>/dev/null; tail -30 $W/sweep.log >> $W/steps.txt; pack
cat $W/steps.txt
# The kernel variants the default qwen-pages run reached on cuda (numbers.coverage.kernel_path).
python3 -c "import json; c = json.load(open('$W/base-qwen-pages-cuda.json'))['numbers']['coverage']; print(json.dumps(c.get('kernel_path'), indent=0, sort_keys=True))" | tee $W/kernel-paths.txt
