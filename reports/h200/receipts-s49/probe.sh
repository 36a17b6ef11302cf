#!/usr/bin/env bash
# Session 49: a probe for an H200. On an H200, HEAD's rope-store and qwen-pages receipts
# (session 48's call4.sh: build, bench rope-store, qwen-pages on cuda, two more 64 / 256 MiB
# runs); on any other card it stops at once (the draw costs only the machine's start).
set -uo pipefail
n=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $n"
case "$n" in *H200*) exec bash reports/h200/receipts-s48/call4.sh ;; esac
exit 0
