#!/usr/bin/env bash
# Session 47, call 1: the rope store's q4 fast encode on the H200, three builds in one call.
#   C = HEAD (5b5cde7): B plus the group scale's amax / 7 by Markstein's correction
#       (q4_scale_quotient; rope-q4-scale-quotient.patch);
#   B = C with that patch reversed: session 46's round 2 (rope-q4-encode-2.patch: amax by
#       max.NaN, nibbles by byte permutes, quotients by one reciprocal and Markstein);
#   A = B with round 2 reversed: d52f0af's kernels (the receipts' 25c26fa encode).
# bench rope-store on the fp8 and q4 rows, 3 rounds interleaved (A B C, C B A, B A C), out_hash
# equal on every row; C's SASS of rope_store.cu and ncu SourceCounters (per-instruction executed
# counts) of the q4 and fp8 64 MiB p16 rows; C's qwen-pages on cuda and memcheck / synccheck /
# racecheck over C's q4 ring rows.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s47c1; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s47c1.tgz -C /tmp s47c1 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
mk() {  # mk DIR PATCH...: a copy of the tree with the patches reversed in order
  rm -rf $1 && mkdir $1 && git ls-files -z | xargs -0 cp --parents -t $1 && cp -r .deps $1/ || return 1
  local d=$1; shift
  for p in "$@"; do (cd $d && patch -R -p1 -s < $p) || { echo "patch -R $p failed in $d"; return 1; }; done
}
mk /tmp/src-b $R/receipts-s47/rope-q4-scale-quotient.patch || exit 4
mk /tmp/src-a $R/receipts-s47/rope-q4-scale-quotient.patch $R/receipts-s46/rope-q4-encode-2.patch || exit 4
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-c $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-c.log 2>&1 || exit 2
for v in a b; do cmake -S /tmp/src-$v -B /tmp/b-$v $CFG -DCMAKE_PREFIX_PATH=/tmp/src-$v/.deps/usr > $W/cmake-$v.log 2>&1 || exit 2; done
ninja -C /tmp/b-a -j 5 tf-cuda-test > $W/build-a.log 2>&1 & PA=$!
ninja -C /tmp/b-b -j 5 tf-cuda-test > $W/build-b.log 2>&1 & PB=$!
ninja -C /tmp/b-c -j 6 tf-cuda-test > $W/build-c.log 2>&1 || { tail -20 $W/build-c.log; exit 2; }
wait $PA || { tail -20 $W/build-a.log; exit 2; }
wait $PB || { tail -20 $W/build-b.log; exit 2; }
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  case $r in 1) ORD="A B C";; 2) ORD="C B A";; 3) ORD="B A C";; esac
  for v in $ORD; do
    X=/tmp/b-$(echo $v | tr A-Z a-z)/tools/tf-cuda-test
    timeout 60 $X bench rope-store --filter '/(fp8|q4)/' --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
pack
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
C=/tmp/b-c/tools/tf-cuda-test
O=$(find /tmp/b-c -name 'rope_store.cu.o' | head -1)
for v in a b c; do
  o=$(find /tmp/b-$v -name 'rope_store.cu.o' | head -1)
  cuobjdump -sass $o > $W/sass-$v.txt 2>&1; echo "sass $v rc=$? lines $(wc -l < $W/sass-$v.txt)"
done
for row in q4 fp8; do
  timeout 120 ncu --clock-control none -k regex:rope_store_ring -c 1 --section SourceCounters --import-source no \
    -o $W/src-$row $C bench rope-store --reps 1 --filter "^64MiB/$row/p16" --out $W/ncu-$row.json > $W/ncu-$row.log 2>&1
  echo "ncu $row rc=$?"
  ncu -i $W/src-$row.ncu-rep --page source --csv --print-source sass > $W/src-$row-sass.csv 2> $W/src-$row-sass.err \
    || ncu -i $W/src-$row.ncu-rep --page source --csv > $W/src-$row-sass.csv 2>> $W/src-$row-sass.err
  echo "ncu source $row lines $(wc -l < $W/src-$row-sass.csv)"
done
pack
timeout 90 $C qwen-pages --backend cuda --out $W/qp-c.json > $W/qp-c.log 2>&1
echo "qwen-pages C rc=$? $(grep -E '^qwen-pages' $W/qp-c.log | tail -1)"
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^(16|64)MiB/q4/'; [ $t = racecheck ] && F='^64MiB/q4/p16'
  timeout 60 $SAN --tool $t $C bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
pack
grep -E "^(row|16MiB|64MiB|256MiB|1024MiB)" $W/rope-summary.txt; tail -7 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
