#!/usr/bin/env bash
# Session 64: one device call that runs what the card it draws can run, so that a start is not
# spent on a card the owed work cannot use: on an H200, session 62's call1 (the owed H200
# receipts from HEAD, tools/h200_receipts.sh); on any other card, session 62's call2 (the GPU CTest
# subset, cuda receipts with cases.every_case / cases.default read back by report, the quoted SDPA
# command). A later warm call runs the other one where the card allows. Before the call: commit,
# KC_SNAP_BASE=0 tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c1.tgz or $OUT/c2.tgz.
set -uo pipefail
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
echo "session 64 call: card ${gpu:-none}"
case "$gpu" in
  *H200*) exec bash reports/h100/receipts-s62/call1.sh ;;
  *) exec bash reports/h100/receipts-s62/call2.sh ;;
esac
