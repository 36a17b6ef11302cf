#!/usr/bin/env bash
# Session 42, device call 2 (an H200 came): tools/h200_receipts.sh at HEAD (contracts and the five
# benches) into /tmp/s42c2/h200, returned as $OUT/s42c2.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/s42c2; mkdir -p $W/h200
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
( sleep ${KC_PACK_AT:-540}; tar czf $OUT/s42c2.tgz -C /tmp s42c2 ) > /dev/null 2>&1 &
pk=$!
KC_PREFIX=$PWD/.deps/usr timeout ${KC_RECEIPTS_S:-550} bash tools/h200_receipts.sh $W/h200 $W/h200/logs
echo "receipts rc=$?"
kill $pk 2> /dev/null
tar czf $OUT/s42c2.tgz -C /tmp s42c2
