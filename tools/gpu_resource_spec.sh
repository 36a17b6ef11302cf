#!/bin/sh
# Writes a CTest resource specification (JSON, on stdout) with every GPU nvidia-smi lists,
# SLOTS slots each (default 1: one cuda test per GPU at a time). Use it with
#   tools/gpu_resource_spec.sh > gpus.json
#   ctest --test-dir build -L cuda -j "$(nvidia-smi -L | wc -l)" --resource-spec-file gpus.json
# so that the cuda contract tests (RESOURCE_GROUPS gpus:1, run through tools/ctest_gpu.sh)
# spread over the GPUs, one GPU a test. SLOTS 2 on one GPU lets two tests share it (a way to
# try the allocation on a machine with one GPU).
#   gpu_resource_spec.sh [SLOTS]
slots=${1:-1}
case "$slots" in ''|*[!0-9]*) echo "gpu_resource_spec.sh: SLOTS must be a whole number from 1, got '$slots'" >&2; exit 2;; esac
# 00 is 0 slots and 08 is not a JSON number: the value as a decimal number, then the rule.
slots=$(printf '%s' "$slots" | sed 's/^0*//')
case "$slots" in ''|?????????*) echo "gpu_resource_spec.sh: SLOTS must be a whole number from 1 (at most 8 digits), got '$1'" >&2; exit 2;; esac
ids=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null)
[ -n "$ids" ] || echo "gpu_resource_spec.sh: nvidia-smi lists no GPU; the spec declares none (cuda tests will not start)" >&2
printf '{\n  "version": {"major": 1, "minor": 0},\n  "local": [\n    {\n      "gpus": ['
sep=""
for id in $ids; do
  printf '%s\n        {"id": "%s", "slots": %s}' "$sep" "$id" "$slots"
  sep=","
done
printf '\n      ]\n    }\n  ]\n}\n'
