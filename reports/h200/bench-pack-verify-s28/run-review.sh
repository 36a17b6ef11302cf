#!/usr/bin/env bash
set -u
t0=$SECONDS
export PATH=/usr/local/cuda/bin:$PATH
git fetch -q .dev/kc-head.bundle main:refs/heads/kc-main && git reset -q --mixed kc-main
git log --oneline -1 > $OUT/head.txt; git status --short >> $OUT/head.txt
cfg() { cmake -S . -B $1 -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr "${@:2}" > $1.cfg.log 2>&1; }
(cfg /tmp/b && ninja -C /tmp/b -j8 tf-cuda-test > /tmp/b.log 2>&1; echo "build head rc=$?" >> $OUT/s.txt) &
(cfg /tmp/bp "-DCMAKE_CUDA_FLAGS=-DKC_PLANT_PACK_KERNEL_SKIPS_LAST_FIELD" && ninja -C /tmp/bp -j8 tf-cuda-test > /tmp/bp.log 2>&1; echo "build plant rc=$?" >> $OUT/s.txt) &
wait
echo "builds $((SECONDS-t0)) s" >> $OUT/s.txt
B=/tmp/b/tools/tf-cuda-test
run() { local n=$1; shift; "$@" > $OUT/$n.log 2>&1; echo "$n rc=$? $((SECONDS-t0)) s" | tee -a $OUT/s.txt; }
run pack-head $B bench pack --quick --reps 5 --out $OUT/pack-head.json
run pack-plant /tmp/bp/tools/tf-cuda-test bench pack --quick --reps 3 --out $OUT/pack-plant.json

grep -h "NOT verified\|target:" $OUT/pack-*.log >> $OUT/s.txt
python3 - >> $OUT/s.txt <<'PY'
import json,os
o=os.environ['OUT']
for n in ['pack-head','pack-plant']:
  d=json.load(open(o+'/%s.json'%n)); print(n, d['verdict'], d.get('quick'), sum(r['verified'] for r in d['rows']), 'of', len(d['rows']), 'verified'); print('  detail:', d['rows'][-1]['verification']['detail'])
PY
cd $OUT && tar czf logs.tgz *.log pack-*.json && rm -f *.log pack-*.json
cat $OUT/s.txt
