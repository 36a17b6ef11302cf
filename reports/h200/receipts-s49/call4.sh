#!/usr/bin/env bash
# Session 49, call 4. On an H200: session 48's call4.sh (the rope-store and qwen-pages receipts).
# Elsewhere: ncu of the d256 bf16 short kernel at b1 x 4K (window), A = HEAD (clusters of 2,
# one block an SM) against P = short-cl4-2sm.patch applied (clusters of 4, two blocks an SM):
# duration, DRAM throughput, CTAs per SM (max / sum), SM activity, to separate call 2's causes.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash reports/h200/receipts-s48/call4.sh; fi
T0=$SECONDS; W=/tmp/s49c4; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s49c4.tgz -C /tmp s49c4 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-p && mkdir /tmp/src-p && git ls-files -z | xargs -0 cp --parents -t /tmp/src-p && cp -r .deps /tmp/src-p/ \
  && (cd /tmp/src-p && patch -p1 -s < $R/receipts-s49/short-cl4-2sm.patch) || { echo "P: patch failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-a $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
cmake -S /tmp/src-p -B /tmp/b-p $CFG -DCMAKE_PREFIX_PATH=/tmp/src-p/.deps/usr > $W/cmake-p.log 2>&1 || exit 2
ninja -C /tmp/b-p -j 8 tf-cuda-test > $W/build-p.log 2>&1 & PP=$!
ninja -C /tmp/b-a -j 8 tf-cuda-test > $W/build-a.log 2>&1 || { tail -20 $W/build-a.log; exit 2; }
wait $PP || { tail -20 $W/build-p.log; exit 2; }
echo "built $((SECONDS-T0)) s"
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,sm__ctas_launched.max,sm__ctas_launched.sum,sm__cycles_active.avg,sm__cycles_active.max,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
for v in a p; do
  for f in bf16 q4; do
    timeout 60 ncu --clock-control none -k regex:partial_mma --launch-skip 2 --launch-count 1 --metrics $M --csv \
      /tmp/b-$v/tools/tf-cuda-test bench attention --sdpa none --reps 1 --filter "24q/4kv/d256/b1/ctx4096/$f/window" \
      --out $W/b-$v-$f.json > $W/ncu-$v-$f.csv 2> $W/ncu-$v-$f.err
    echo "ncu $v $f rc=$? at $((SECONDS-T0)) s"
  done
done
pack
python3 - $W <<'PY'
import csv, sys, os, io
W = sys.argv[1]
for v in 'ap':
    for f in ('bf16', 'q4'):
        t = open(os.path.join(W, 'ncu-%s-%s.csv' % (v, f))).read()
        i = t.find('"ID"')
        if i < 0: print(v, f, 'no csv'); continue
        rows = list(csv.DictReader(io.StringIO(t[i:])))
        print('%s %s %s' % ({'a': 'A cl2', 'p': 'P cl4'}[v], f, rows[0]['Kernel Name'][:60] if rows else ''))
        for r in rows: print('   %-60s %s %s' % (r['Metric Name'], r['Metric Unit'], r['Metric Value']))
PY
echo "done $((SECONDS-T0)) s"
