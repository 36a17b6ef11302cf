#!/bin/bash
# tune3 final call: receipts of tune3's commit (binary built from the clean commit, stripped),
# an A/B against main 3269773's binary, qwen-pages on cuda, memcheck.
set -u
T0=$SECONDS; el() { echo $((SECONDS - T0)); }
git fetch -q .kcgit/tune3.bundle tune3 && git reset -q --hard FETCH_HEAD || { echo "bundle fetch failed"; exit 3; }
W=.kcgit/tune3; X=/tmp/t3; R=/tmp/t3r; mkdir -p $X $R
echo "commit $(git rev-parse HEAD) dirty=$(git status --porcelain --untracked-files=no | wc -l)" | tee $R/commit.txt
tar -xJf $W/bins2.tar.xz -C $X || { echo "extract failed"; exit 3; }
strings $X/tf-fin | grep -qx "$(git rev-parse HEAD)" || { echo "binary is not from HEAD"; exit 3; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $R/gpu.txt 2>&1
export PATH=/usr/local/cuda/bin:$PATH
( timeout 40 $X/tf-fin qwen-pages --backend cuda --out $R/qwen-pages.json > $R/qwen-pages.log 2>&1; echo "qwen-pages rc=$? at $(el)s" >> $R/timeline.txt ) &
( timeout 40 compute-sanitizer --tool memcheck --error-exitcode 99 $X/tf-fin qwen-pages --backend cuda --cases 8 --filter 'd(128|256),fmt=(bf16|fp8|q4)' --gates-only --out $R/qwen-pages.memcheck.json > $R/memcheck.log 2>&1; echo "memcheck rc=$? at $(el)s" >> $R/timeline.txt ) &
( timeout 40 $X/tf-fin qwen-pages --backend cuda --cases 160 --filter 'd(128|256)(-r64)?,fmt=(q4|fp8|bf16)' --quiet --out $R/qwen-pages.mma-cases.json > $R/qwen-pages.mma-cases.log 2>&1; echo "qwen-pages mma cases rc=$? at $(el)s" >> $R/timeline.txt ) &
wait
F='(b1|b8)/ctx(4096|32768|131072)/(bf16|fp8|q4)/window'
for round in 1 2; do
  order="main fin"; [ $round = 2 ] && order="fin main"
  for v in $order; do
    [ $(el) -gt 60 ] && break 2
    timeout 15 $X/tf-$v bench attention --script-dir /nonexistent --filter "$F" --out $R/ab-$v-r$round.json > $R/ab-$v-r$round.log 2>&1
    echo "ab $v r$round rc=$? at $(el)s" >> $R/timeline.txt
  done
done
timeout 50 $X/tf-fin bench attention --out $R/bench-attention.json > $R/bench-attention.log 2>&1
echo "bench attention rc=$? at $(el)s" >> $R/timeline.txt
cd $R && tar -czf $OUT/tune3-final.tar.gz . && cd - > /dev/null
cat $R/timeline.txt
python3 - $R <<'PY'
import json,sys,glob,statistics as st,collections
R=sys.argv[1]; t=collections.defaultdict(list)
for f in sorted(glob.glob(R+'/ab-*.json')):
  v=f.split('ab-')[1].split('-r')[0]
  try: d=json.load(open(f))
  except Exception as e: print(f,e); continue
  for r in d['rows']: t[('/'.join(r['config'].split('/')[2:5])+' '+r['format'],v)].append(r['median_us'])
for k in sorted({k[0] for k in t}):
  a,b=t[(k,'main')],t[(k,'fin')]
  if a and b: print(f"{k:22s} main {'/'.join(f'{x:.1f}' for x in a):14s} fin {'/'.join(f'{x:.1f}' for x in b):14s} {st.median(b)/st.median(a):.3f}")
PY
grep -E "^read ceiling|^targets|^  |^reported" $R/bench-attention.log | cut -c1-150
for f in qwen-pages qwen-pages.mma-cases; do grep -E "^qwen-pages:|^attention-bound" $R/$f.log | tail -2 | cut -c1-150; done
grep -E "ERROR SUMMARY|cases" $R/memcheck.log | tail -2 | cut -c1-200
