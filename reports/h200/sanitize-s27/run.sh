#!/bin/bash
# Session 27, one device call: a complete sanitize receipt (tools/sanitize.py, every default run
# under the four tools and both controls; with --jobs racecheck's runs go one at a time after
# the others) and the scale-planes and rows-invariant receipts, from main's commit in
# kc-head.bundle, built in build/ so the receipts' argv reads build/tools/tf-cuda-test.
# Outputs: $OUT/receipts/*.json, $OUT/logs.tgz (refreshed after each step), a table last.
T0=$(date +%s); DL=${DL:-575}
left() { echo $(( DL - ($(date +%s) - T0) )); }
W=/tmp/w; mkdir -p $W/logs $OUT/receipts
pack() { tar -czf $OUT/logs.tgz -C $W logs 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@" > $W/logs/$n.log 2>&1; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(tail -n 1 $W/logs/$n.log | cut -c1-160)" | tee -a $W/logs/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git fetch -q kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main || { echo "bundle fetch failed"; exit 4; }
git rev-parse HEAD > $W/logs/commit.txt; git status --short --untracked-files=no > $W/logs/status.txt
build() { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=ON -DCMAKE_PREFIX_PATH=$PWD/.deps/usr && ninja -C build tf-cuda-test tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end; }
step build build || { tail -30 $W/logs/build.log; exit 4; }
bin=build/tools/tf-cuda-test
step sanitize timeout $(( $(left) - 50 )) python3 tools/sanitize.py --bin $bin --plant-bin build --jobs 6 \
  --out $OUT/receipts/sanitize.json --logs $W/logs/sanitize
for c in scale-planes rows-invariant; do
  [ $(left) -gt 15 ] && step $c timeout $(( $(left) - 5 )) $bin $c --backend cuda --out $OUT/receipts/$c.json
done
pack
echo "--- commit $(cat $W/logs/commit.txt), changed tracked files $(wc -l < $W/logs/status.txt)"
cat $W/logs/steps.txt
grep -E "^(memcheck|racecheck|synccheck|initcheck|control)" $W/logs/sanitize.log | awk '{printf "%s %s %s | ", $1, $2, $NF} END {print ""}'
