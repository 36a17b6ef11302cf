#!/bin/bash
# grid9: the rope store's persistent grid as the fewest blocks that take the n rows in
# ceil(n / SMs) rounds (was min(n, SMs)); host code only, every kernel's device code unchanged.
# One device call: tools/h200_premerge.sh on the branch head against reports/h200 (bd907ab's
# receipts and build), mutants and sanitizers skipped (no device code changed), then a same-call
# A/B of bench rope-store against that base build, 3 rounds interleaved (A = bd907ab, H = head).
T0=$(date +%s)
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
KC_PREFIX=$PWD/.deps/usr KC_SKIP_MUTANTS=1 KC_SKIP_SANITIZERS=1 timeout ${PM_LIMIT:-300} tools/h200_premerge.sh /tmp/v > /tmp/v.out 2>&1
echo "premerge rc=$? at $(( $(date +%s) - T0 ))s" >> /tmp/v.out; cp /tmp/v.out /tmp/v/
A=/tmp/kc-base-build/tools/tf-cuda-test H=build/tools/tf-cuda-test W=/tmp/v/ab; mkdir -p $W
FB='^(64|256|1024)MiB/|^(1|4|16)MiB/'
run() { local t=$H; [ $1 = A ] && t=$A; $t bench rope-store --filter "$FB" --out $W/$1-$2.json > $W/$1-$2.log 2>&1; echo "$1-$2 rc=$? at $(( $(date +%s) - T0 ))s" >> $W/steps.txt; }
for r in 1 2 3; do if [ $r = 2 ]; then O="H A"; else O="A H"; fi; for v in $O; do run $v $r; done; done
python3 reports/h200/issue20-rope10/sum.py $W A:0 H:1 > $W/summary.txt 2>&1
tar czf $OUT/v.tgz -C /tmp v
tail -14 /tmp/v.out; cat $W/steps.txt | tr '\n' ' '; echo; sed -n '/^bf16 /,$p' $W/summary.txt | grep -v "^$"
