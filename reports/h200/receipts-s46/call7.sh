#!/usr/bin/env bash
# Session 46: the rope store's q4 encode, second round (rope-q4-encode-2.patch, committed: HEAD = B): the group amax by max.NaN of |v|, the four nibbles packed by byte permutes,
# and each quotient by one reciprocal per group and Markstein's fma correction
# (q4_magic_bits_recip; Q4Group.MarksteinQuotientNibbleIsTheDivisionsForEveryScale). A = B with
# the patch reversed (HEAD's encode). bench rope-store on the fp8 and q4 rows, 3 rounds
# interleaved (A B, B A, A B), out_hash equal on every row; then B's qwen-pages on cuda and
# memcheck / synccheck / racecheck over B's q4 ring rows.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s46c7; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s46c7.tgz -C /tmp s46c7 2>/dev/null; }
SRC=$PWD
rm -rf /tmp/src-a && mkdir /tmp/src-a && git ls-files -z | xargs -0 cp --parents -t /tmp/src-a && cp -r .deps /tmp/src-a/ \
  && (cd /tmp/src-a && patch -R -p1 -s < $SRC/reports/h200/receipts-s46/rope-q4-encode-2.patch) || { echo "A: patch -R failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-b $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-b.log 2>&1 || exit 2
cmake -S /tmp/src-a -B /tmp/b-a $CFG -DCMAKE_PREFIX_PATH=/tmp/src-a/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
ninja -C /tmp/b-a -j 8 tf-cuda-test > $W/build-a.log 2>&1 & PA=$!
ninja -C /tmp/b-b -j 8 tf-cuda-test > $W/build-b.log 2>&1 || { tail -20 $W/build-b.log; exit 2; }
wait $PA || { tail -20 $W/build-a.log; exit 2; }
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  if [ $r = 2 ]; then ORD="B A"; else ORD="A B"; fi
  for v in $ORD; do
    X=/tmp/b-$(echo $v | tr A-Z a-z)/tools/tf-cuda-test
    timeout 60 $X bench rope-store --filter '/(fp8|q4)/' --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
pack
python3 reports/h200/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
B=/tmp/b-b/tools/tf-cuda-test
timeout 90 $B qwen-pages --backend cuda --out $W/qp-b.json > $W/qp-b.log 2>&1
echo "qwen-pages B rc=$? $(grep -E '^qwen-pages' $W/qp-b.log | tail -1)"
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^(16|64)MiB/q4/'; [ $t = racecheck ] && F='^64MiB/q4/p16'
  timeout 60 $SAN --tool $t $B bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
timeout 60 $B bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
echo "B's bench rope-store receipt rc=$? $(grep -E '^target' $W/bench-rope-store.log | tail -1)"
pack
grep -E "^(row|4MiB|16MiB|64MiB|256MiB)" $W/rope-summary.txt; tail -4 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
