#!/usr/bin/env bash
# Session 62, device call 1: every contract and bench receipt from HEAD with the README's own
# commands (tools/h200_receipts.sh), built on the device, on an H200 only: the receipts that
# reports/h200/ keeps (session 59's merge has not been timed on one). On any other card it stops
# at once (an H100's receipts of the same code are session 61's call 4). Before the call: commit,
# KC_SNAP_BASE=0 tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c1.tgz.
set -uo pipefail
. tools/device_call.sh c1
case "$GPU" in
  *H200*) ;;
  *) echo "card: $GPU, not an H200: no receipts from this call"; pack; exit 5 ;;
esac
KC_PREFIX=$PWD/.deps/usr timeout $(($(left) - 15)) bash tools/h200_receipts.sh $W/receipts $W/logs > $W/receipts.txt 2>&1
echo "receipts rc=$? at $((SECONDS - T0)) s" | tee -a $W/receipts.txt
pack
tail -16 $W/receipts.txt
