#!/usr/bin/env bash
# Session 49, call 1 (session 48's call7.sh). On an H200: HEAD's bench rope-store and qwen-pages receipts (call4.sh). On any
# other card: the bf16 keys-as-B experiment (bf16-keys-as-b-untested.patch, G) against HEAD (A):
# bench attention's bf16 window rows at b8 x 32K, b32 x 32K, b1 x 128K and b8 x 128K on both shapes,
# 3 rounds (A G, G A, A G), --sdpa none, out_fnv1a compared (whether the transposed mma gives the
# same bytes); G's qwen-pages on cuda (its float64 bounds).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash reports/h200/receipts-s48/call4.sh; fi
T0=$SECONDS; W=/tmp/s49c1; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s49c1.tgz -C /tmp s49c1 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-g && mkdir /tmp/src-g && git ls-files -z | xargs -0 cp --parents -t /tmp/src-g && cp -r .deps /tmp/src-g/ \
  && (cd /tmp/src-g && patch -p1 -s < $R/receipts-s48/bf16-keys-as-b-untested.patch) || { echo "G: patch failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-a $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
cmake -S /tmp/src-g -B /tmp/b-g $CFG -DCMAKE_PREFIX_PATH=/tmp/src-g/.deps/usr > $W/cmake-g.log 2>&1 || exit 2
ninja -C /tmp/b-g -j 8 tf-cuda-test > $W/build-g.log 2>&1 & PG=$!
ninja -C /tmp/b-a -j 8 tf-cuda-test > $W/build-a.log 2>&1 || { tail -20 $W/build-a.log; exit 2; }
wait $PG || { tail -20 $W/build-g.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
F='(24q/4kv/d256|32q/8kv/d128)/(b8/ctx32768|b32/ctx32768|b1/ctx131072|b8/ctx131072)/bf16/window'
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="G A"; else ORD="A G"; fi
  for v in $ORD; do
    X=/tmp/b-a/tools/tf-cuda-test; n=base; [ $v = G ] && X=/tmp/b-g/tools/tf-cuda-test && n=head
    timeout 60 $X bench attention --sdpa none --reps 10 --filter "$F" --out $W/bench-$n-$r.json > $W/bench-$v-$r.log 2>&1
    echo "attention $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
python3 $R/issue20-stream/ksmem-180a5a7/summ.py $W > $W/summary.txt 2>&1; pack
timeout 60 /tmp/b-g/tools/tf-cuda-test qwen-pages --backend cuda --out $W/qp-g.json > $W/qp-g.log 2>&1
echo "qwen-pages G rc=$? $(grep -E '^qwen-pages' $W/qp-g.log | tail -1)"
pack
cat $W/summary.txt
echo "done $((SECONDS-T0)) s"
