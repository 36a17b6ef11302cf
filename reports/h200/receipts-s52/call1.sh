#!/usr/bin/env bash
# Session 52, call 1: one device call that uses whichever card comes.
# - On an H200: the rope store's H200 receipts still owed (receipts-s51/call1.sh, ROPE_EXTRA=0 unless set).
# - On any other card (an H100): the cuda side of "unusual valid inputs, round 3"
#   (reports/unusual-inputs-3/cuda/run.sh), which needs no particular card (verdicts, not timings).
# Carry .deps.tgz and .dev (tools/h200_snap.sh first).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $NAME"
if grep -q H200 <<< "$NAME"; then
  ROPE_EXTRA=${ROPE_EXTRA:-0} bash reports/h200/receipts-s51/call1.sh
else
  TOTAL=${TOTAL:-540} bash reports/unusual-inputs-3/cuda/run.sh
fi
