#!/usr/bin/env bash
# Session 47, call 3: the ring kernel's start, four builds.
#   F = HEAD: E plus kRopeTabFirst (fp8 / q4 d128: the consumers' start computes the first batch's
#       cos / sin only; the second table warp its own first batch, after theta); rope-tab-first.patch;
#   E = F with that reversed: D plus theta_i once per pair at the start (rope-theta-once.patch; every
#       ring kernel, bf16 too);
#   D = E with that reversed (call 2's D: the consumers' plan);
#   A = D with rope-plan.patch, rope-q4-scale-quotient.patch, rope-q4-encode-2.patch reversed (d52f0af's kernels).
# bench rope-store, every row, 3 rounds interleaved (A D E F, F E D A, E F A D), out_hash equal on
# every row; F's ncu SourceCounters on the q4 64 MiB p16 row; F's qwen-pages on cuda and memcheck /
# synccheck / racecheck over F's ring rows (bf16, fp8, q4).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s47c3; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s47c3.tgz -C /tmp s47c3 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
mk() {  # mk DIR PATCH...: a copy of the tree with the patches reversed in order
  rm -rf $1 && mkdir $1 && git ls-files -z | xargs -0 cp --parents -t $1 && cp -r .deps $1/ || return 1
  local d=$1; shift
  for p in "$@"; do (cd $d && patch -R -p1 -s < $p) || { echo "patch -R $p failed in $d"; return 1; }; done
}
P=$R/receipts-s47
mk /tmp/src-e $P/rope-tab-first.patch || exit 4
mk /tmp/src-d $P/rope-tab-first.patch $P/rope-theta-once.patch || exit 4
mk /tmp/src-a $P/rope-tab-first.patch $P/rope-theta-once.patch $P/rope-plan.patch $P/rope-q4-scale-quotient.patch $R/receipts-s46/rope-q4-encode-2.patch || exit 4
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-f $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-f.log 2>&1 || exit 2
for v in a d e; do cmake -S /tmp/src-$v -B /tmp/b-$v $CFG -DCMAKE_PREFIX_PATH=/tmp/src-$v/.deps/usr > $W/cmake-$v.log 2>&1 || exit 2; done
for v in a d e; do ninja -C /tmp/b-$v -j 4 tf-cuda-test > $W/build-$v.log 2>&1 & done
ninja -C /tmp/b-f -j 4 tf-cuda-test > $W/build-f.log 2>&1 || { tail -20 $W/build-f.log; exit 2; }
wait
for v in a d e; do [ -x /tmp/b-$v/tools/tf-cuda-test ] || { tail -20 $W/build-$v.log; exit 2; }; done
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  case $r in 1) ORD="A D E F";; 2) ORD="F E D A";; 3) ORD="E F A D";; esac
  for v in $ORD; do
    X=/tmp/b-$(echo $v | tr A-Z a-z)/tools/tf-cuda-test
    timeout 60 $X bench rope-store --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
pack
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
C=/tmp/b-f/tools/tf-cuda-test
for v in f; do
  o=$(find /tmp/b-$v -name 'rope_store.cu.o' | head -1)
  cuobjdump -sass $o > $W/sass-$v.txt 2>&1; echo "sass $v rc=$? lines $(wc -l < $W/sass-$v.txt)"
done
for row in q4; do
  timeout 120 ncu --clock-control none -k regex:rope_store_ring -c 1 --section SourceCounters --import-source no \
    -o $W/src-$row $C bench rope-store --reps 1 --filter "^64MiB/$row/p16" --out $W/ncu-$row.json > $W/ncu-$row.log 2>&1
  echo "ncu $row rc=$?"
  ncu -i $W/src-$row.ncu-rep --page source --csv --print-source sass > $W/src-$row-sass.csv 2> $W/src-$row-sass.err \
    || ncu -i $W/src-$row.ncu-rep --page source --csv > $W/src-$row-sass.csv 2>> $W/src-$row-sass.err
  echo "ncu source $row lines $(wc -l < $W/src-$row-sass.csv)"
done
pack
timeout 90 $C qwen-pages --backend cuda --out $W/qp-f.json > $W/qp-f.log 2>&1
echo "qwen-pages F rc=$? $(grep -E '^qwen-pages' $W/qp-f.log | tail -1)"
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^16MiB/|^64MiB/.*/p16'; [ $t = racecheck ] && F='^64MiB/.*/p16'
  timeout 120 $SAN --tool $t $C bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
pack
grep -E "^(row|64MiB)" $W/rope-summary.txt; tail -13 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
