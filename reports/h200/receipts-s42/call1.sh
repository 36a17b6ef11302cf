#!/usr/bin/env bash
# Session 42, device call 1: receipts-s41/call7.sh at HEAD (merge-c.patch applied: bc6d7c4), then
# tools/sanitize.py's four merge controls (each must be red) and its arena-offsets run, on the HEAD
# build (the merge kernel changed; the controls last ran at 997e5e8). Returns $OUT/c7.tgz and $OUT/s42c1.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS
KC_CALL_S=${KC_CALL_S:-380} bash reports/h100/receipts-s41/call7.sh
W=/tmp/s42c1; mkdir -p $W
echo "call7 done $((SECONDS-T0)) s"
ninja -C build tf-cuda-test tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end \
  tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten > $W/plants.log 2>&1 \
  || { tail -20 $W/plants.log; }
echo "plants built $((SECONDS-T0)) s"
timeout $(( ${KC_TOTAL_S:-570} - SECONDS + T0 )) python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build \
  --runs arena-offsets --jobs 6 --out $W/sanitize-controls.json --logs $W/logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -12 $W/sanitize.log
python3 -c "
import json; r=json.load(open('$W/sanitize-controls.json'))
print(r['verdict'], [(c['name'], c['red'], c.get('findings')) for c in r.get('controls', [])])" 2>&1 | tail -3
tar czf $OUT/s42c1.tgz -C /tmp s42c1
