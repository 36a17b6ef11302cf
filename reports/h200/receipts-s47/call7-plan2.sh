#!/usr/bin/env bash
# Prepared in session 47, not run (no device time left): the consumers' plan, second round
# (rope-plan-2-untested.patch: the q4 butterflies' signs in the plan; the q row's address once per
# row, q head g's elements at qrow + pl.a[u]). Static SASS (ptxas sm_90) of the q4 d128 ring
# kernel: 4568 -> 4544 (MODE 247), fp8 3912 -> 3896; 85 registers against 80, no spills.
# H = HEAD, G = HEAD with the patch applied. Any card; on an H200 it is the measurement that
# matters (the q4 64 MiB rows). bench rope-store, every row, 3 rounds interleaved (H G, G H, H G),
# out_hash equal on every row; G's qwen-pages on cuda, memcheck / synccheck over G's 16 MiB and
# 64 MiB p16 rows, racecheck over its 64 MiB fp8 / q4 p16 rows.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s47c7; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s47c7.tgz -C /tmp s47c7 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-g && mkdir /tmp/src-g && git ls-files -z | xargs -0 cp --parents -t /tmp/src-g && cp -r .deps /tmp/src-g/ \
  && (cd /tmp/src-g && patch -p1 -s < $R/receipts-s47/rope-plan-2-untested.patch) || { echo "G: patch failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-h $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-h.log 2>&1 || exit 2
cmake -S /tmp/src-g -B /tmp/b-g $CFG -DCMAKE_PREFIX_PATH=/tmp/src-g/.deps/usr > $W/cmake-g.log 2>&1 || exit 2
ninja -C /tmp/b-g -j 8 tf-cuda-test > $W/build-g.log 2>&1 & PG=$!
ninja -C /tmp/b-h -j 8 tf-cuda-test > $W/build-h.log 2>&1 || { tail -20 $W/build-h.log; exit 2; }
wait $PG || { tail -20 $W/build-g.log; exit 2; }
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="G H"; else ORD="H G"; fi
  for v in $ORD; do
    X=/tmp/b-$(echo $v | tr A-Z a-z)/tools/tf-cuda-test
    # sum.py takes A as the base: H is written as A
    n=$v; [ $v = H ] && n=A
    timeout 60 $X bench rope-store --out $W/rope/$n-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
pack
G=/tmp/b-g/tools/tf-cuda-test
timeout 90 $G qwen-pages --backend cuda --out $W/qp-g.json > $W/qp-g.log 2>&1
echo "qwen-pages G rc=$? $(grep -E '^qwen-pages' $W/qp-g.log | tail -1)"
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^16MiB/|^64MiB/.*/p16'; [ $t = racecheck ] && F='^64MiB/(fp8|q4)/p16'
  timeout 120 $SAN --tool $t $G bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
pack
grep -E "^(row|64MiB)" $W/rope-summary.txt; tail -10 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
