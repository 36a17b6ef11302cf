#!/usr/bin/env bash
# session 28 call 2: the bench fixes of 0ce1d36 on the H200, with pack's control
set -u
t0=$SECONDS
export PATH=/usr/local/cuda/bin:$PATH
git fetch -q .dev/kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main
git log --oneline -1 > $OUT/head.txt; git status --short >> $OUT/head.txt
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr "${@:2}" > $1.cfg.log 2>&1; }
cfg /tmp/b && ninja -C /tmp/b tf-cuda-test > /tmp/b.log 2>&1; echo "build head rc=$? $((SECONDS-t0)) s" | tee -a $OUT/s.txt
cfg /tmp/bp "-DCMAKE_CUDA_FLAGS=-DKC_PLANT_PACK_KERNEL_SKIPS_LAST_FIELD" && ninja -C /tmp/bp tf-cuda-test > /tmp/bp.log 2>&1; echo "build plant rc=$? $((SECONDS-t0)) s" | tee -a $OUT/s.txt
B=/tmp/b/tools/tf-cuda-test
run() { local n=$1; shift; "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0)) s" | tee -a $OUT/s.txt; }
run pack-head $B bench pack --quick --reps 5 --out $OUT/pack-head.json
run pack-plant /tmp/bp/tools/tf-cuda-test bench pack --quick --reps 3 --out $OUT/pack-plant.json
run compact-small $B bench compact --quick --reps 3 --filter '^4MiB/bf16/window$' --out $OUT/compact-small.json
run rope-small $B bench rope-store --quick --reps 3 --filter '^4MiB/q4/p16$'
run att-b1 $B bench attention --quick --reps 5 --filter 'b1/ctx4096' --out $OUT/att-b1.json
run cli-moves-device sh tests/cli/cli_cases.sh bench-moves-device $B $PWD
(cd /tmp && $B bench attention --quick --reps 1 > $OUT/att-noscript.log 2>&1; echo "att-noscript rc=$?" | tee -a $OUT/s.txt)
run report-pack $B report $OUT/pack-plant.json
grep -h "NOT verified\|target:" $OUT/pack-*.log $OUT/compact-small.log $OUT/rope-small.log >> $OUT/s.txt
python3 - >> $OUT/s.txt <<'PY'
import json,os
o=os.environ['OUT']
a=json.load(open(o+'/att-b1.json')); print('att sdpa:', json.dumps(a.get('sdpa'))[:200], 'quick', a.get('quick'))
for n in ['pack-head','pack-plant']:
  d=json.load(open(o+'/%s.json'%n)); print(n, d['verdict'], d.get('quick'), [ (r['config'], r['verified']) for r in d['rows']][:3], d['verdict_reasons'][:2]); print('  detail:', d['rows'][0]['verification']['detail'])
PY
cd $OUT && tar czf logs.tgz *.log *.json && rm -f *.log pack-*.json compact-small.json att-b1.json
cat $OUT/s.txt
