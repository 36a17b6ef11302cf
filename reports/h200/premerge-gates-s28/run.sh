#!/usr/bin/env bash
# session 28 call 1: H200 contract receipts from the head, then premerge's gate replays
set -u
t0=$SECONDS
export PATH=/usr/local/cuda/bin:$PATH
git fetch -q .dev/kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main
git log --oneline -1 > $OUT/head.txt; git status --short >> $OUT/head.txt
mkdir -p $OUT/r
KC_PREFIX=$PWD/.deps/usr KC_SKIP_BENCH=1 timeout 300 tools/h200_receipts.sh $OUT/r $OUT/r/logs > $OUT/r/receipts.log 2>&1
echo "receipts rc=$? at $((SECONDS-t0)) s" | tee -a $OUT/summary.txt
tail -12 $OUT/r/receipts.log >> $OUT/summary.txt
# premerge: one cheap contract, and every serve-gate / kv-gate receipt of reports/h200 replayed
mkdir -p /tmp/gbase
cp reports/h200/rows-invariant.json /tmp/gbase/
for f in reports/h200/serve-*.json reports/h200/kv-gate-*.json; do cp $f /tmp/gbase/; done
left=$((575 - (SECONDS - t0)))
timeout $left build/tools/tf-cuda-test premerge --base /tmp/gbase --backend cuda --contracts rows-invariant \
  --out-dir $OUT/pm > $OUT/pm.log 2>&1
echo "premerge rc=$? at $((SECONDS-t0)) s" | tee -a $OUT/summary.txt
tail -30 $OUT/pm.log >> $OUT/summary.txt
cd $OUT && tar czf r.tgz r && tar czf pm.tgz pm pm.log && rm -rf r pm
cat $OUT/summary.txt
