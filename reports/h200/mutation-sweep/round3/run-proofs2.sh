#!/bin/bash
# Session 35's follow-up to run-proofs.sh, in one H200 call:
#  A. an unmutated build of the tree (/tmp/rc):
#     - qwen-pages in full on cuda: its 37 probes, five new ones (fp8 d64 and d32, q4 d32 and d64,
#       mxfp4 d32), among them the bulk-copy rope store that run-proofs.sh's kernel-path test found
#       unreached ("rope-bulk");
#     - QwenPagesContract.CudaDefaultRunReachesEveryKernelPath;
#     - kc_device_tests DeviceArena.* (RowCodecsIndexRowsPast2To31Floats among them);
#     - racecheck over the three wide probes, and memcheck + racecheck over the five new probes:
#       a check must be clean on the unmutated tree before a mutant it turns red counts.
#  B. beside it, run-round2.sh over rope-kernel-stage-barrier (its new check,
#     sanitize:racecheck:qwen-pages:probe=wide), fp8-encode-row-index-32bit (the new device
#     test) and two new mutants of that class (q4 encode, mxfp4 decode).
#     TOTAL=480 bash reports/h200/mutation-sweep/round3/run-proofs2.sh
# Everything comes back in $OUT/proofs2.tgz (and run-round2.sh's sweep2.tgz).
T0=$(date +%s); W=/tmp/proofs2; rm -rf $W; mkdir -p $W ${OUT:-/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
ROOT=$PWD
pack(){ tar czf ${OUT:-/tmp/out}/proofs2.tgz -C /tmp proofs2 2>/dev/null; }
step(){ local n=$1; shift; local t0=$(date +%s); "$@" > $W/$n.log 2>&1; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(tail -n 1 $W/$n.log | cut -c1-150)" | tee -a $W/steps.txt; pack; return $rc; }
{ git rev-parse HEAD; git status --short; } > $W/commit.txt
ONLY='^(rope-kernel-stage-barrier|fp8-encode-row-index-32bit|q4-encode-row-index-32bit|mxfp4-decode-row-index-32bit)$' \
  DEV_MUTANTS=reports/mutation-sweep/mutants-device-3.json DEV="0 1" NDEV=2 HOST="" TOTAL=$(( ${TOTAL:-480} - 10 )) \
  bash reports/h200/mutation-sweep/run-round2.sh > $W/sweep.log 2>&1 & SWEEP=$!
rm -rf /tmp/rc; mkdir -p /tmp/rc
tar cf - --exclude=./.git --exclude=./.deps --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/rc
step cfg cmake -S /tmp/rc -B /tmp/rcb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0
step build ninja -C /tmp/rcb tools/tf-cuda-test tests/kc_device_tests tests/kc_contract_tests
B=/tmp/rcb/tools/tf-cuda-test
step base-qwen-pages timeout 200 $B qwen-pages --backend cuda --quiet --out $W/base-qwen-pages-cuda.json
step kernel-path-test timeout 150 /tmp/rcb/tests/kc_contract_tests --gtest_filter='QwenPagesContract.CudaDefaultRunReachesEveryKernelPath'
step base-device-arena timeout 150 /tmp/rcb/tests/kc_device_tests --gtest_filter='DeviceArena.*'
SAN="compute-sanitizer --error-exitcode 99"
step racecheck-wide timeout 200 $SAN --tool racecheck $B qwen-pages --backend cuda --gates-only --quiet --filter 'probe=wide' --out $W/racecheck-wide.json
step memcheck-new-probes timeout 100 $SAN --tool memcheck $B qwen-pages --backend cuda --gates-only --quiet --filter 'probe=.*,seed=13[3-7]\)' --out $W/memcheck-new-probes.json
step racecheck-new-probes timeout 100 $SAN --tool racecheck $B qwen-pages --backend cuda --gates-only --quiet --filter 'probe=.*,seed=13[3-7]\)' --out $W/racecheck-new-probes.json
wait $SWEEP
cp ${OUT:-/tmp/out}/sweep2.tgz $W/ 2>/dev/null; tail -30 $W/sweep.log >> $W/steps.txt; pack
cat $W/steps.txt
for f in racecheck-wide memcheck-new-probes racecheck-new-probes; do echo "$f: $(grep -h -E 'ERROR SUMMARY|RACECHECK SUMMARY|cases;' $W/$f.log | tail -2 | tr '\n' ' ')"; done
python3 -c "import json; c = json.load(open('$W/base-qwen-pages-cuda.json'))['numbers']['coverage']; print({k: v for k, v in c['kernel_path'].items() if 'bulk' in k}); print(sum(c['probe'].values()), 'probes')"
