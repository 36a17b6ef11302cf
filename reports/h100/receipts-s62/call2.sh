#!/usr/bin/env bash
# Session 62, device call 2 (any card): the session's host-side changes where they meet a device.
#  1. The GPU CTest subset (reports/h100/receipts-s55/full-ctest.sh, SUBSET=gpu, no device mutants: no kernel changed): the cuda contract
#     tests now quote --out (cmake/kc_helpers.cmake), the engine's cuda tests, the device mutants.
#  2. kernel-contract --backend cuda into a folder whose name has a space, with --junit: every
#     receipt now carries cases.every_case and is read back by report (which holds a pass to it).
#  3. bench attention --quick on two rows with --script-dir in a folder whose name has a space: the
#     SDPA command's words are quoted now (the SDPA columns were "failed (rc ..)" there before).
# Before the call: commit, KC_SNAP_BASE=0 tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c2.tgz.
set -uo pipefail
. tools/device_call.sh c2
SUBSET=gpu DEVMUT=OFF LIMIT=$(( $(left) - 300 )) OUT=$W bash reports/h100/receipts-s55/full-ctest.sh > $W/full-ctest.txt 2>&1
tail -12 $W/full-ctest/summary.txt
T=/tmp/fc/tools/tf-cuda-test
k="$W/kc out"
timeout 150 $T kernel-contract --backend cuda --quiet --out-dir "$k" --junit "$k/j.xml" > $W/kc.txt 2>&1
echo "kernel-contract rc=$?" | tee -a $W/kc.txt
grep -c '"every_case": true' "$k"/*.json | tr '\n' ' '; echo
$T report "$k"/*.json > $W/report.txt 2>&1; echo "report rc=$?"
mkdir -p "$W/scr ipts" && cp tools/bench_sdpa.py "$W/scr ipts/"
timeout 120 $T bench attention --quick --reps 3 --filter '^24q/4kv/d256/b1/ctx32768/bf16/window$|^32q/8kv/d128/b8/ctx32768/bf16/window$' \
  --script-dir "$W/scr ipts" --out "$W/bench-space.json" > $W/bench.txt 2>&1
echo "bench rc=$? (1: targets unmet, as usual)"
grep -E "ctx32768 *bf16" $W/bench.txt | head -4
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print([(x['config'], x.get('sdpa_flash_us'), x.get('sdpa_cudnn_us')) for x in r['rows']])" "$W/bench-space.json"
pack
