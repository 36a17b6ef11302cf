#!/bin/bash
# Mutation sweep on the H200 (tools/mutation_sweep.py): four sweeps at once, each in its own
# copy of the working tree (no .git: its receipts read commit unknown) and its own build folder. Shards 0-2: the device-code mutants
# (reports/mutation-sweep/dev-{0,1,2}.json) against the contracts on cuda; shard 3: the
# host-header mutants (dev-3.json) on cpu, then cuda. ONLY=regex limits every shard (a second
# call takes what the first left); LIMIT bounds each sweep in seconds; SHARDS picks the shards.
T0=$(date +%s)
W=${OUT:-/tmp/out}/sweep; mkdir -p $W
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
ROOT=$PWD; LIMIT=${LIMIT:-500}; ONLY=${ONLY:-.}; SHARDS=${SHARDS:-0 1 2 3}
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
for i in $SHARDS; do [ $i = 3 ] && continue
  (cd /tmp/s$i && timeout $LIMIT python3 tools/mutation_sweep.py reports/mutation-sweep/dev-$i.json --build /tmp/b$i \
     --backends cuda --then contracts,gtest:kc_device_tests --only "$ONLY" --timeout 150 --work /tmp/w$i \
     --out $W/sweep-dev-$i.json > $W/sweep-dev-$i.log 2>&1) &
done
[[ " $SHARDS " == *" 3 "* ]] && (cd /tmp/s3 && timeout $LIMIT python3 tools/mutation_sweep.py reports/mutation-sweep/dev-3.json --build /tmp/b3 \
   --backends cpu,cuda --then gtest:kc_unit_tests,gtest:kc_q4_tests,gtest:kc_mxfp4_tests,gtest:kc_pack_tests,contracts \
   --only "$ONLY" --timeout 150 --work /tmp/w3 --out $W/sweep-dev-3.json > $W/sweep-dev-3.log 2>&1) &
wait
echo "sweeps done at $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt
cd $W && for f in sweep-dev-*.json.part; do [ -f "$f" ] && cp "$f" "${f%.part}.partial"; done
grep -h -E "^\[|summary|survived" sweep-dev-*.log > summary.txt
cd $(dirname $W) && tar czf sweep.tgz sweep && rm -rf sweep
cat $(dirname $W)/sweep.tgz > /dev/null; tar xzf sweep.tgz -O sweep/summary.txt | tail -70
