#!/bin/bash
# Session 53, the last call: AttentionRows.* from a clean build of HEAD (rows.sh's run of
# kc_device_tests after its sweep used a stale mutated object: the sweep's --no-final-build leaves
# the build folder mutated), then the mutant attn-batch-one-chunk-count (mutants-device-6.json,
# survived in rows.sh's run) against the test's new rows (a second batch of 5 chunks).
T0=$(date +%s); W=/tmp/rowsb; rm -rf $W; mkdir -p $W ${OUT:=/tmp/out}
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh > $W/head.txt 2>&1; cat $W/head.txt
B=/tmp/bb; rm -rf $B
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cfg.log 2>&1 && ninja -C $B -j 16 tests/kc_device_tests > $W/build.log 2>&1
echo "build rc=$? at $(( $(date +%s) - T0 ))s"
timeout 60 $B/tests/kc_device_tests --gtest_filter='AttentionRows.*:EngineKernels.EmbedTakes*' > $W/head-tests.log 2>&1
echo "head tests rc=$?"; grep -E "^\[ +(OK|FAILED) +\]" $W/head-tests.log
tar czf $OUT/rowsb.tgz -C /tmp rowsb
timeout 150 python3 tools/mutation_sweep.py reports/mutation-sweep/mutants-device-6.json --only '^attn-batch-one-chunk-count$' \
  --build $B --backends cuda --timeout 60 --no-final-build --work $W/work --out $W/sweep.json > $W/sweep.log 2>&1
echo "sweep rc=$?"; grep -E "^\[" $W/sweep.log
tar czf $OUT/rowsb.tgz -C /tmp rowsb
echo "done $(( $(date +%s) - T0 ))s"
