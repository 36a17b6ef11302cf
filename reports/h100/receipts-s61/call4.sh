#!/usr/bin/env bash
# Session 61, device call 4: every contract and bench receipt from HEAD with the README's own
# commands (tools/h200_receipts.sh), built on the device. On an H200 these are the receipts that
# reports/h200/ keeps (session 59's merge has not been timed on one); on an H100 they are the same
# receipts from that card, for the record beside the A/B of calls 1-3. Before the call: commit,
# KC_SNAP_BASE=0 tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c4.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c4; L=${KC_CALL_S:-540}; mkdir -p $W
pack() { tar czf $OUT/c4.tgz -C /tmp c4 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1 | tee -a $W/head.txt
KC_PREFIX=$PWD/.deps/usr timeout $((L - 15)) bash tools/h200_receipts.sh $W/receipts $W/logs > $W/receipts.txt 2>&1
echo "receipts rc=$? at $((SECONDS - T0)) s" | tee -a $W/receipts.txt
pack
tail -16 $W/receipts.txt
