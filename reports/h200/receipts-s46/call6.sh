#!/usr/bin/env bash
# Session 46, the H200 at last: same-call A/B of the rope store's lean q4 encode. A = HEAD with
# rope-q4-encode-kernels-20498d2.patch (20498d2's kernel change) reversed (the encode before 20498d2), Q = HEAD; bench rope-store on
# the fp8 and q4 rows (fp8 unchanged: the noise), 3 rounds interleaved (A Q, Q A, A Q).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s46c6; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s46c6.tgz -C /tmp s46c6 2>/dev/null; }
SRC=$PWD
rm -rf /tmp/src-a && mkdir /tmp/src-a && git ls-files -z | xargs -0 cp --parents -t /tmp/src-a && cp -r .deps /tmp/src-a/ \
  && (cd /tmp/src-a && patch -R -p1 -s < $SRC/reports/h200/receipts-s46/rope-q4-encode-kernels-20498d2.patch) || { echo "A: patch -R failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
[ -x build/tools/tf-cuda-test ] || { cmake -S . -B build $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-q.log 2>&1 && ninja -C build tf-cuda-test > $W/build-q.log 2>&1; } || { echo "Q build failed"; exit 2; }
cmake -S /tmp/src-a -B /tmp/b-a $CFG -DCMAKE_PREFIX_PATH=/tmp/src-a/.deps/usr > $W/cmake-a.log 2>&1 && ninja -C /tmp/b-a tf-cuda-test > $W/build-a.log 2>&1 || { tail -20 $W/build-a.log; exit 2; }
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="Q A"; else ORD="A Q"; fi
  for v in $ORD; do
    if [ $v = A ]; then X=/tmp/b-a/tools/tf-cuda-test; else X=build/tools/tf-cuda-test; fi
    timeout 60 $X bench rope-store --filter '/(fp8|q4)/' --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
pack
python3 reports/h200/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
grep -E "^(row|16MiB|64MiB|256MiB)" $W/rope-summary.txt; tail -4 $W/rope-summary.txt
pack; echo "done $((SECONDS-T0)) s"
