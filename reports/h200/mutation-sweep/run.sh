#!/bin/bash
# Mutation sweep on the H200 (tools/mutation_sweep.py): four sweeps at once, each in its own
# copy of the working tree (no .git: its receipts read commit unknown) and its own build folder. Shards 0-2: the device-code mutants
# (reports/mutation-sweep/mutants-device.json, --shard i/3) against the contracts on cuda;
# shard 3: the host-header mutants (mutants-host.json, --files '\.h$') on cpu, then cuda. ONLY=regex limits every shard (a second
# call takes what the first left); TOTAL bounds the call in seconds; SHARDS picks the shards.
# On the H200 (session 24) the three builds side by side took 185 s.
T0=$(date +%s)
# A tree copied while a local sweep had a file mutated carries the sweep's marker: refuse it
# (every check would run against that mutant too).
if [ -e .mutation-sweep-active ]; then echo "refused: .mutation-sweep-active: $(cat .mutation-sweep-active)"; exit 2; fi
W=/tmp/sweep; rm -rf $W; mkdir -p $W; mkdir -p ${OUT:-/tmp/out}
# Everything goes back as one archive (the device returns a few files only), written at the
# end and every minute while the sweeps run, so a run cut short still returns what it did.
pack(){ (cd /tmp && for f in sweep/sweep-dev-*.json.part; do [ -f "$f" ] && cp "$f" "${f%.part}.partial"; done; tar czf ${OUT:-/tmp/out}/sweep.tgz.tmp sweep && mv ${OUT:-/tmp/out}/sweep.tgz.tmp ${OUT:-/tmp/out}/sweep.tgz); }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
ROOT=$PWD; ONLY=${ONLY:-.}; SHARDS=${SHARDS:-0 1 2 3}
{ git rev-parse HEAD; git status --short; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $W/commit.txt
for i in $SHARDS; do
  rm -rf /tmp/s$i; mkdir -p /tmp/s$i
  tar cf - --exclude=./.git --exclude=./.deps --exclude='./build*' . | tar xf - -C /tmp/s$i
  cmake -S /tmp/s$i -B /tmp/b$i -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0 > $W/cfg$i.log 2>&1
done
T=tools/tf-cuda-test
for i in $SHARDS; do [ $i = 3 ] || ninja -C /tmp/b$i $T tests/kc_device_tests tests/kc_engine_tests > $W/build$i.log 2>&1 & done
[[ " $SHARDS " == *" 3 "* ]] && ninja -C /tmp/b3 $T tests/kc_unit_tests tests/kc_q4_tests tests/kc_mxfp4_tests tests/kc_pack_tests > $W/build3.log 2>&1 &
wait
echo "builds done at $(( $(date +%s) - T0 ))s" | tee $W/steps.txt
# The unmutated build, beside the sweeps: qwen-pages in full on cuda (probes and controls
# included; BASELINE=0 skips it), so that a survivor is never a baseline that fails anyway.
if [ "${BASELINE:-1}" = 1 ] && [ -x /tmp/b${SHARDS%% *}/tools/tf-cuda-test ]; then
  cp /tmp/b${SHARDS%% *}/tools/tf-cuda-test /tmp/tf-base
  (cd /tmp && timeout 300 /tmp/tf-base qwen-pages --backend cuda --out $W/baseline-qwen-pages-cuda.json > $W/baseline.log 2>&1;
   echo "baseline qwen-pages/cuda exit $? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt) &
fi
# The sweeps end by TOTAL seconds after the start (the device's call limit less a margin).
LIMIT=$(( ${TOTAL:-560} - ($(date +%s) - T0) )); [ $LIMIT -gt ${MAXLIMIT:-500} ] && LIMIT=${MAXLIMIT:-500}
( while sleep 60; do pack; done ) & PACKER=$!
for i in $SHARDS; do [ $i = 3 ] && continue
  (cd /tmp/s$i && timeout -k 20 $LIMIT python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-device.json --shard $i/3 --build /tmp/b$i \
     --backends cuda --then contracts,gtest:kc_device_tests --only "$ONLY" --timeout 150 --no-final-build --work /tmp/w$i \
     --out $W/sweep-dev-$i.json > $W/sweep-dev-$i.log 2>&1) & PIDS="$PIDS $!"
done
[[ " $SHARDS " == *" 3 "* ]] && (cd /tmp/s3 && timeout -k 20 $LIMIT python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-host.json --files '\.h$' --build /tmp/b3 \
   --backends cpu,cuda --then gtest:kc_unit_tests,gtest:kc_q4_tests,gtest:kc_mxfp4_tests,gtest:kc_pack_tests,contracts \
   --only "$ONLY" --timeout 150 --no-final-build --work /tmp/w3 --out $W/sweep-dev-3.json > $W/sweep-dev-3.log 2>&1) & PIDS="$PIDS $!"
wait $PIDS  # not the packer
kill $PACKER 2>/dev/null
echo "sweeps done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
grep -h -E "^\[|summary|survived" $W/sweep-dev-*.log > $W/summary.txt
pack; tail -70 $W/summary.txt
