#!/usr/bin/env bash
# Session 60, device call 1: what session 59 left owed, from HEAD.
#  - On an H200: tools/h200_receipts.sh (every contract and bench receipt, README's commands) first;
#    session 59's merge has not been timed on an H200.
#  - On any card: the GPU CTest subset (reports/h100/receipts-s55/full-ctest.sh, SUBSET=gpu), which
#    runs contract.qwen-pages.cuda-merge-one-batch and the device mutants merge-pipe-stale-dev
#    (must come out red, i.e. its test passes) and merge-skip-nonfinite-dev.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c1.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c1; L=${KC_CALL_S:-570}; mkdir -p $W
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c1.tgz -C /tmp c1 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
if [[ $gpu == *H200* ]] && [ $(left) -gt 500 ]; then  # the receipts need about 220 s, the subset 250
  KC_PREFIX=$PWD/.deps/usr timeout $(( $(left) - 280 )) bash tools/h200_receipts.sh $W/h200 $W/h200-logs \
    > $W/receipts.txt 2>&1; echo "receipts rc=$? at $((SECONDS - T0)) s" | tee -a $W/receipts.txt
  tail -16 $W/receipts.txt; pack
fi
SUBSET=gpu LIMIT=$(( $(left) - 10 )) OUT=$W bash reports/h100/receipts-s55/full-ctest.sh > $W/full-ctest.txt 2>&1
grep -E "merge-pipe-stale|merge-skip-nonfinite|merge-one-batch" $W/full-ctest/ctest.log | tail -6
cat $W/full-ctest/summary.txt | head -20
pack
