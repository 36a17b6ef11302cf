#!/usr/bin/env bash
# Session 64, a short call for what is left of device time (about 400 s before the start): the
# parts of session 62's call2 that need no full build. tf-cuda-test alone, then
# `kernel-contract --backend cuda` into a folder whose name has a space, with --junit (receipts with
# cases.every_case and cases.default, read back by report, which holds a pass to both), and
# `bench attention --quick` on two rows with --script-dir in such a folder (the SDPA command's
# words quoted). Before the call: commit, KC_SNAP_BASE=0 tools/h200_snap.sh; carry .deps.tgz and
# .dev. Returns $OUT/c3.tgz.
set -uo pipefail
. tools/device_call.sh c3
cmake -S . -B /tmp/fc -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/configure.log 2>&1 && ninja -C /tmp/fc -j 16 tools/tf-cuda-test > $W/build.log 2>&1
echo "build rc=$? at $((SECONDS - T0)) s" | tee -a $W/head.txt
T=/tmp/fc/tools/tf-cuda-test
k="$W/kc out"
timeout $(( $(left) - 60 )) $T kernel-contract --backend cuda --quiet --out-dir "$k" --junit "$k/j.xml" > $W/kc.txt 2>&1
echo "kernel-contract rc=$? at $((SECONDS - T0)) s" | tee -a $W/kc.txt
grep -c '"every_case": true' "$k"/*.json | tr '\n' ' '; echo
grep -o '"default": [0-9]*' "$k"/*.json | tr '\n' ' '; echo
$T report "$k"/*.json > $W/report.txt 2>&1; echo "report rc=$?"
pack
mkdir -p "$W/scr ipts" && cp tools/bench_sdpa.py "$W/scr ipts/"
timeout $(( $(left) - 10 )) $T bench attention --quick --reps 3 --filter '^24q/4kv/d256/b1/ctx32768/bf16/window$|^32q/8kv/d128/b8/ctx32768/bf16/window$' \
  --script-dir "$W/scr ipts" --out "$W/bench-space.json" > $W/bench.txt 2>&1
echo "bench rc=$? (1: targets unmet, as usual)"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print([(x['config'], x.get('sdpa_flash_us'), x.get('sdpa_cudnn_us')) for x in r['rows']])" "$W/bench-space.json"
pack
tail -4 $W/report.txt
