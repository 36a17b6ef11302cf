#!/usr/bin/env bash
# Session 36, device call 2 (call 1's receipts did not come back: a call returns at most 8 files,
# and call 1 wrote 12; this one packs them into two): from HEAD (.dev/snap: tools/h200_snap.sh here, tools/h200_git_from_snap.sh there),
#  1. tools/h200_receipts.sh (KC_PREBUILT=1 KC_SKIP_BENCH=1): the seven contracts' receipts with
#     the README's commands (the benches' receipts stay bd907ab's: no kernel changed since);
#  2. tools/sanitize.py over the qwen-pages-probes run (the 37 probes) and rows-invariant (the two
#     runs call 1 had not reached under racecheck) under the four tools, with
#     the four controls: a receipt of its own (the full sanitize receipt, ~700 s of tool time,
#     does not fit one call; call 1's logs hold every other run at bf3f179, all ok).
# Returns $OUT/receipts.tgz and $OUT/logs.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS
W=/tmp/w2; L=$W/logs; R=$W/receipts; mkdir -p $L $R
pack() { tar czf $OUT/logs.tgz -C $W logs 2>/dev/null; tar czf $OUT/receipts.tgz -C $W receipts 2>/dev/null; }
tools/h200_git_from_snap.sh | tee $L/head.txt || exit 4
git status --short --untracked-files=no > $L/status.txt
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=ON > $L/cmake.log 2>&1 || { tail -20 $L/cmake.log; exit 2; }
P="tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten"
ninja -C build tf-cuda-test $P > $L/build.log 2>&1 || { tail -30 $L/build.log; exit 2; }
echo "build $((SECONDS-T0)) s"
B=build/tools/tf-cuda-test
mkdir -p $L/receipts
KC_PREBUILT=1 KC_SKIP_BENCH=1 timeout 200 tools/h200_receipts.sh $R $L/receipts > $L/h200_receipts.log 2>&1
echo "h200_receipts rc=$? ($((SECONDS-T0)) s)"; cat $L/h200_receipts.log | cut -c1-150
pack
timeout $((570 - (SECONDS-T0))) python3 tools/sanitize.py --bin $B --plant-bin build --jobs 4 --runs qwen-pages-probes,rows-invariant \
  --out $R/sanitize-probes.json --logs $L/sanitize > $L/sanitize.out 2>&1
echo "sanitize (qwen-pages-probes, rows-invariant) rc=$? ($((SECONDS-T0)) s)"
pack
grep -E "^(memcheck|racecheck|synccheck|initcheck|control)" $L/sanitize.out | awk '{printf "%s %s %s | ", $1, $2, $NF} END {print ""}'
tail -3 $L/sanitize.out
ls $R; echo "total $((SECONDS-T0)) s"
