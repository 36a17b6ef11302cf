#!/usr/bin/env bash
# Session 49, call 2: the short path's d256 clusters of 4 at two blocks an SM (HEAD = P,
# short-cl4-2sm.patch; A = the same tree with the patch reversed). On an H200 first HEAD's rope
# store and qwen-pages receipts (the rope store is unchanged by the patch). Then on any card:
# the fits (KC_ATTN_SHORT=v), bench attention's b1 x 4K rows (both shapes, every format and
# addressing), events and gated, 3 rounds of A, P (spread) and P0 (P with the default cluster
# policy), out_fnv1a compared; P's qwen-pages on cuda, QwenPagesContract.Cuda*, and
# racecheck / memcheck / synccheck over the probes that reach the short kernels.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s49c2; rm -rf $W; mkdir -p $W/ev $W/ga
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s49c2.tgz -C /tmp s49c2 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-a && mkdir /tmp/src-a && git ls-files -z | xargs -0 cp --parents -t /tmp/src-a && cp -r .deps /tmp/src-a/ \
  && (cd /tmp/src-a && patch -R -p1 -s < $R/receipts-s49/short-cl4-2sm.patch) || { echo "A: patch -R failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF"
cmake -S . -B build $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
cmake -S /tmp/src-a -B /tmp/b-a $CFG -DKC_DEBUG_INFO=0 -DCMAKE_PREFIX_PATH=/tmp/src-a/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
ninja -C /tmp/b-a -j 6 tf-cuda-test > $W/build-a.log 2>&1 & PA=$!
ninja -C build -j 10 tf-cuda-test kc_contract_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=$SRC/build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
if grep -q H200 $W/head.txt; then
  timeout 60 $H bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
  echo "H200 bench rope-store rc=$? $(grep -E '^target' $W/bench-rope-store.log | tail -1)"
  timeout 90 $H qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
  echo "H200 qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"; pack
fi
wait $PA || { tail -20 $W/build-a.log; exit 2; }
echo "A built $((SECONDS-T0)) s"
A=/tmp/b-a/tools/tf-cuda-test
F='/b1/ctx4096/'
for v in A P; do X=$H; [ $v = A ] && X=$A
  KC_ATTN_SHORT=v timeout 60 $X bench attention --sdpa none --reps 3 --filter '(24q/4kv/d256|32q/8kv/d128)/b1/ctx4096/(bf16|fp8|q4)/window' --out $W/fit-$v.json > $W/fit-$v.log 2>&1
  echo "fits $v: $(grep 'short path' $W/fit-$v.log | sort | uniq -c | tr '\n' ';')"
done
run() {  # run VARIANT ROUND TIMING DIR
  local X=$H E=1; [ $1 = A ] && X=$A; [ $1 = P0 ] && E=0
  KC_CLUSTER_POLICY=$E timeout 90 $X bench attention --sdpa none --reps 20 --timing $3 --filter "$F" --out $W/$4/$1-$2.json > $W/$4/$1-$2.log 2>&1
  echo "$3 $1-$2 rc=$? at $((SECONDS-T0)) s"
}
for r in 1 2 3; do
  case $r in 1) ORD="A P P0";; 2) ORD="P0 P A";; 3) ORD="P A P0";; esac
  for v in $ORD; do run $v $r events ev; run $v $r gated ga; done
done
pack
python3 - $W <<'PY'
import json, sys, os, glob, statistics as st
W = sys.argv[1]
for d in ('ev', 'ga'):
    rows = {}
    for f in sorted(glob.glob(os.path.join(W, d, '*.json'))):
        v = os.path.basename(f).split('-')[0]
        for r in json.load(open(f))['rows']:
            k = r['config'] + '/' + r['format'] + '/' + r['addressing']
            rows.setdefault(k, {}).setdefault(v, []).append((r['median_us'], r.get('out_fnv1a')))
    print(d, '%-44s %8s %8s %8s %7s %7s %s' % ('row', 'A us', 'P us', 'P0 us', 'P/A', 'P0/A', 'bytes'))
    rat = []
    for k in sorted(rows):
        x = rows[k]
        m = {v: min(t for t, _ in x.get(v, [(float('nan'), None)])) for v in ('A', 'P', 'P0')}
        hs = {h for v in x for _, h in x[v]}
        rat.append(m['P'] / m['A'])
        print('  %-44s %8.2f %8.2f %8.2f %7.3f %7.3f %s' % (k, m['A'], m['P'], m['P0'], m['P'] / m['A'], m['P0'] / m['A'], 'same' if len(hs) == 1 else 'DIFF'))
    print('  P/A median %.3f min %.3f max %.3f' % (st.median(rat), min(rat), max(rat)))
PY
timeout 120 $H qwen-pages --backend cuda --out $W/qp-p.json > $W/qp-p.log 2>&1
echo "qwen-pages P rc=$? $(grep -E '^qwen-pages' $W/qp-p.log | tail -1)"
timeout 150 build/tests/kc_contract_tests --gtest_filter='QwenPagesContract.Cuda*' > $W/gtest-cuda.log 2>&1
echo "QwenPagesContract.Cuda* rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gtest-cuda.log | tr '\n' ' ')"
pack
for t in racecheck memcheck synccheck; do
  timeout 100 compute-sanitizer --tool $t --error-exitcode 9 $H qwen-pages --backend cuda --cases 1 \
    --filter 'probe=(chunks|far-max|peaked|tiny|q4-ties)' --gates-only --out $W/san-$t.json > $W/san-$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/san-$t.log | tail -1)"
done
for t in racecheck memcheck; do  # P's d256 clusters of 4 at b1 x 4K (the bench rows), every format
  timeout 90 compute-sanitizer --tool $t --error-exitcode 9 $H bench attention --sdpa none --reps 1 \
    --filter '24q/4kv/d256/b1/ctx4096/(bf16|fp8|q4)/window' --out $W/sanb-$t.json > $W/sanb-$t.log 2>&1
  echo "bench b1 x 4K d256 $t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/sanb-$t.log | tail -1)"
done
pack
echo "done $((SECONDS-T0)) s"
