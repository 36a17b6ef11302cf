#!/bin/bash
# keep7 device call 2: keep7 head (a9dbda0: the lane's check after the moves' loads) built first,
# correctness on it while main (6725561) is rebuilt in the same tree, then bench compact
# interleaved (main, keep7) x 3, out_hash compared row by row.
export OUT; W=$OUT/w; mkdir -p $W; T0=$(date +%s)
st() { echo "$1 rc=$2 $(( $(date +%s) - T0 ))s" | tee -a $W/steps.txt; }
pack() { tar czf $OUT/keep7-2.tgz -C $W . 2>/dev/null; }
git checkout -q -f keep7 && git rev-parse HEAD > $W/commit.txt
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/build.log 2>&1 && ninja -C /tmp/b tf-cuda-test >> $W/build.log 2>&1; st build-keep7 $?
cp /tmp/b/tools/tf-cuda-test /tmp/tf-k7 || { pack; exit 1; }
X=/tmp/tf-k7; QF='d(128|256)(-r64|-r20)?,fmt=(q4|fp8|bf16)'
( timeout 45 $X qwen-pages --backend cuda --cases 30 --filter "$QF" --quiet --out $W/qp.json > $W/qp.log 2>&1; st qp $? ) &
( timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $X bench compact --reps 1 --filter '^1MiB/' --out $W/mcb.json > $W/mcb.log 2>&1; st memcheck-bench $? ) &
( timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 --kernel-name kns=keep_kernel $X bench compact --reps 1 --filter '^1MiB/' --out $W/rcb.json > $W/rcb.log 2>&1; st racecheck-bench $? ) &
( timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $X qwen-pages --backend cuda --cases 8 --gates-only --out $W/mcq.json > $W/mcq.log 2>&1; st memcheck-qp $? ) &
git checkout -q -f 6725561 && git rev-parse HEAD > $W/commit-main.txt
ninja -C /tmp/b tf-cuda-test > $W/build-main.log 2>&1; st build-main $?
M=/tmp/b/tools/tf-cuda-test
cuobjdump -sass -fun _ZN2kc11keep_kernelILi128ELi8ELi4ELi8EEEvPKNS_6KvViewEPKNS_8KeepMoveEPKi $X 2>&1 | grep -nE "LDG|BAR|EXIT|ISETP.NE" | head -40 > $W/sass-q4-keep7.txt
wait; pack
for r in a b c; do
  timeout 30 $M bench compact --out $W/compact-main-$r.json > $W/compact-main-$r.log 2>&1; st compact-main-$r $?
  timeout 30 $X bench compact --out $W/compact-keep7-$r.json > $W/compact-keep7-$r.log 2>&1; st compact-keep7-$r $?
done; pack
python3 - <<'PY'
import json,os
W=os.environ['OUT']+'/w'; R={}
for v in ('main','keep7'):
  for r in 'abc':
    try: d=json.load(open(f'{W}/compact-{v}-{r}.json'))
    except Exception: continue
    for x in d['rows']:
      if 'of_ceiling' in x: R.setdefault(x['config'],{})[v+r]=x
ks=[v+r for r in 'abc' for v in ('main','keep7')]
ne=0; nv=0; cnt={k:0 for k in ks}
print('config'.ljust(18),' '.join(k.rjust(7) for k in ks),' us main/k7  hash')
for c,d in R.items():
  hs={d[k]['out_hash'] for k in ks if k in d}; ne+=len(hs)!=1; nv+=sum(not d[k]['verified'] for k in ks if k in d)
  for k in ks:
    if k in d and d[k]['size_mib']>=64 and d[k]['of_ceiling']>=0.85: cnt[k]+=1
  um=sorted(d[k]['median_us'] for k in ks if k in d and k.startswith('main')); uk=sorted(d[k]['median_us'] for k in ks if k in d and k.startswith('keep7'))
  print(c.ljust(18),' '.join(('%.3f'%d[k]['of_ceiling']).rjust(7) if k in d else '      -' for k in ks),' %.2f/%.2f'%(um[len(um)//2],uk[len(uk)//2]) if um and uk else '', 'same' if len(hs)==1 else 'DIFF')
print('rows>=0.85 from 64MiB:',cnt,' hash-mismatch rows:',ne,' unverified:',nv)
PY
cat $W/steps.txt; grep -h "^qwen-pages:" $W/qp.log $W/mcq.log; grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $W/mcb.log $W/rcb.log $W/mcq.log
