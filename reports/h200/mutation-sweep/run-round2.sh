#!/bin/bash
# Round 2 of the mutation sweep on the H200 (session 29): the device-code mutants of
# reports/mutation-sweep/mutants-device-2.json against the contracts on cuda (DEV shards, each a
# tree copy and a cuda build of its own), and the host mutants of mutants-host-2.json against the
# cpu backend and the whole test suite (HOST shards, cpu-only builds: the GPU machine's 16 cores
# stand in for this project's 2-core machine). A host survivor has passed its own checks, the
# listed gtests, the serve gate, every contract and then all of CTest (`ctest:.`).
#   DEV="0 1 2" HOST="" TOTAL=560 bash reports/h200/mutation-sweep/run-round2.sh
#   DEV="" HOST="0 1 2 3" TOTAL=560 bash reports/h200/mutation-sweep/run-round2.sh
# DEV_MUTANTS / HOST_MUTANTS name other mutant files (round 3, session 33:
#   DEV_MUTANTS=reports/mutation-sweep/mutants-device-3.json DEV="0 1 2 3" NDEV=4 HOST="" TOTAL=480 bash ...).
# ONLY=regex limits the mutant ids (ONLY_DEV / ONLY_HOST for one kind); NDEV / NHOST the shard counts (default 3 / 4); HOST_THEN the host
# shards' checks after each mutant's own (default: the gtests, the serve gate, every contract, then
# all of CTest); BASELINE_CTEST=0 skips the unmutated CTest run; everything
# comes back in sweep2.tgz, packed every minute so that a call cut short returns what it did.
T0=$(date +%s)
if [ -e .mutation-sweep-active ]; then echo "refused: .mutation-sweep-active: $(cat .mutation-sweep-active)"; exit 2; fi
W=/tmp/sweep2; rm -rf $W; mkdir -p $W ${OUT:-/tmp/out}
pack(){ (cd /tmp && for f in sweep2/*.json.part; do [ -f "$f" ] && cp "$f" "${f%.part}.partial"; done; tar czf ${OUT:-/tmp/out}/sweep2.tgz.tmp sweep2 && mv ${OUT:-/tmp/out}/sweep2.tgz.tmp ${OUT:-/tmp/out}/sweep2.tgz); }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
HOST_THEN=${HOST_THEN:-gtest:kc_engine_tests,gtest:kc_contract_tests,gtest:kc_receipt_view_tests,gtest:kc_review_tools_tests,gtest:kc_unit_tests,serve-gate,contracts,ctest:.}
DEV_MUTANTS=${DEV_MUTANTS:-reports/mutation-sweep/mutants-device-2.json}; HOST_MUTANTS=${HOST_MUTANTS:-reports/mutation-sweep/mutants-host-2.json}
ROOT=$PWD; ONLY=${ONLY:-.}; DEV=${DEV-0 1 2}; HOST=${HOST-}; NDEV=${NDEV:-3}; NHOST=${NHOST:-4}
{ git rev-parse HEAD; git status --short; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $W/commit.txt
copy(){ rm -rf /tmp/$1; mkdir -p /tmp/$1; tar cf - --exclude=./.git --exclude=./.deps --exclude=./.dev --exclude='./build*' . | tar xf - -C /tmp/$1; }
for i in $DEV; do copy sd$i
  cmake -S /tmp/sd$i -B /tmp/bd$i -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0 > $W/cfg-d$i.log 2>&1
  ninja -C /tmp/bd$i tools/tf-cuda-test tests/kc_device_tests tests/kc_engine_tests > $W/build-d$i.log 2>&1 &
done
for i in $HOST; do copy sh$i
  cmake -S /tmp/sh$i -B /tmp/bh$i -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr \
    -DKC_CUDA=OFF -DKC_DEBUG_INFO=0 > $W/cfg-h$i.log 2>&1
  ninja -C /tmp/bh$i > $W/build-h$i.log 2>&1 &
done
wait
echo "builds done at $(( $(date +%s) - T0 ))s" | tee $W/steps.txt
LIMIT=$(( ${TOTAL:-560} - ($(date +%s) - T0) ))
( while sleep 60; do pack; done ) & PACKER=$!
PIDS=""
for i in $DEV; do
  (cd /tmp/sd$i && timeout -k 20 $LIMIT python3 tools/mutation_sweep.py $DEV_MUTANTS --shard $i/$NDEV \
     --build /tmp/bd$i --backends cuda --then contracts,gtest:kc_device_tests --only "${ONLY_DEV:-$ONLY}" --timeout 150 --no-final-build \
     --work /tmp/wd$i --out $W/sweep-dev-$i.json > $W/sweep-dev-$i.log 2>&1) & PIDS="$PIDS $!"
done
# The unmutated suite in the first host shard's tree (no .git there), before its sweep: a test red
# here would read every host survivor as caught by `ctest:.`.
H0=${HOST%% *}
for i in $HOST; do
  (cd /tmp/sh$i && { [ $i = "$H0" ] && [ "${BASELINE_CTEST:-1}" = 1 ] && (cd /tmp/bh$i && ctest -j6 > $W/baseline-ctest.log 2>&1; echo "baseline ctest exit $? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt); true; } && timeout -k 20 $LIMIT python3 tools/mutation_sweep.py $HOST_MUTANTS --shard $i/$NHOST \
     --build /tmp/bh$i --backends cpu --jobs 3 \
     --then "$HOST_THEN" \
     --only "${ONLY_HOST:-$ONLY}" --timeout 240 --no-final-build --work /tmp/wh$i --out $W/sweep-host-$i.json > $W/sweep-host-$i.log 2>&1) & PIDS="$PIDS $!"
done
wait $PIDS
kill $PACKER 2>/dev/null
echo "sweeps done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
grep -h -E "^\[|summary|survived" $W/sweep-*.log > $W/summary.txt
pack; tail -80 $W/summary.txt
