#!/bin/bash
# Session 27, the second call: finish sanitize-partial.json (f4f42e9's receipt, cut by the first
# call's time limit after 30 runs and one control) with tools/sanitize.py --resume, from a build
# of f4f42e9 itself (a worktree, so the binary names that commit, clean) and main's sanitize.py.
# Outputs: $OUT/sanitize.json, $OUT/logs.tgz; a table last.
T0=$(date +%s); DL=${DL:-560}
left() { echo $(( DL - ($(date +%s) - T0) )); }
W=/tmp/w; mkdir -p $W/logs
pack() { tar -czf $OUT/logs.tgz -C $W logs 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@" > $W/logs/$n.log 2>&1; local rc=$?; echo "$n rc=$rc $(( $(date +%s) - t0 ))s at $(( $(date +%s) - T0 ))s: $(tail -n 1 $W/logs/$n.log | cut -c1-160)" | tee -a $W/logs/steps.txt; pack; return $rc; }
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
git fetch -q kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main || { echo "bundle fetch failed"; exit 4; }
B=/tmp/src-f4f42e9
build() { git worktree add --detach $B f4f42e9 && cmake -S $B -B $B/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=ON -DCMAKE_PREFIX_PATH=$PWD/.deps/usr && ninja -C $B/build tf-cuda-test tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end; }
step build build || { tail -30 $W/logs/build.log; exit 4; }
step sanitize timeout $(( $(left) - 10 )) python3 tools/sanitize.py --bin $B/build/tools/tf-cuda-test --plant-bin $B/build --jobs 6 \
  --resume reports/h200/sanitize-s27/sanitize-partial.json --out $OUT/sanitize.json --logs $W/logs/sanitize
pack
cat $W/logs/steps.txt
grep -E "^(sanitize|memcheck|racecheck|synccheck|initcheck|control)" $W/logs/sanitize.log
