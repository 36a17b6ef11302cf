#!/usr/bin/env bash
# Session 47, call 2: the ring kernel's consumers with a per-block plan (kRopePlan), three builds.
#   D = HEAD: C plus rope_consume_planned (each lane's offsets, table index, sign and flags once
#       per block; the rotation's p -+ q as one fma); rope-plan.patch;
#   C = D with rope-plan.patch reversed (call 1's C: round 2 and q4_scale_quotient);
#   A = C with rope-q4-scale-quotient.patch and rope-q4-encode-2.patch reversed (d52f0af's kernels).
# bench rope-store on the fp8 and q4 rows, 3 rounds interleaved (A C D, D C A, C A D), out_hash
# equal on every row; D's ncu SourceCounters on the q4 / fp8 64 MiB p16 rows; D's qwen-pages on cuda
# and memcheck / synccheck / racecheck over D's q4 and fp8 ring rows.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s47c2; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s47c2.tgz -C /tmp s47c2 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
mk() {  # mk DIR PATCH...: a copy of the tree with the patches reversed in order
  rm -rf $1 && mkdir $1 && git ls-files -z | xargs -0 cp --parents -t $1 && cp -r .deps $1/ || return 1
  local d=$1; shift
  for p in "$@"; do (cd $d && patch -R -p1 -s < $p) || { echo "patch -R $p failed in $d"; return 1; }; done
}
mk /tmp/src-c $R/receipts-s47/rope-plan.patch || exit 4
mk /tmp/src-a $R/receipts-s47/rope-plan.patch $R/receipts-s47/rope-q4-scale-quotient.patch $R/receipts-s46/rope-q4-encode-2.patch || exit 4
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-d $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-d.log 2>&1 || exit 2
for v in a c; do cmake -S /tmp/src-$v -B /tmp/b-$v $CFG -DCMAKE_PREFIX_PATH=/tmp/src-$v/.deps/usr > $W/cmake-$v.log 2>&1 || exit 2; done
ninja -C /tmp/b-a -j 5 tf-cuda-test > $W/build-a.log 2>&1 & PA=$!
ninja -C /tmp/b-c -j 5 tf-cuda-test > $W/build-c.log 2>&1 & PB=$!
ninja -C /tmp/b-d -j 6 tf-cuda-test > $W/build-d.log 2>&1 || { tail -20 $W/build-d.log; exit 2; }
wait $PA || { tail -20 $W/build-a.log; exit 2; }
wait $PB || { tail -20 $W/build-c.log; exit 2; }
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  case $r in 1) ORD="A C D";; 2) ORD="D C A";; 3) ORD="C A D";; esac
  for v in $ORD; do
    X=/tmp/b-$(echo $v | tr A-Z a-z)/tools/tf-cuda-test
    timeout 60 $X bench rope-store --filter '/(fp8|q4)/' --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
pack
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
C=/tmp/b-d/tools/tf-cuda-test
for v in d; do
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
timeout 90 $C qwen-pages --backend cuda --out $W/qp-d.json > $W/qp-d.log 2>&1
echo "qwen-pages D rc=$? $(grep -E '^qwen-pages' $W/qp-d.log | tail -1)"
SAN="compute-sanitizer --error-exitcode 9"
for t in memcheck synccheck racecheck; do
  F='^(16|64)MiB/(q4|fp8)/'; [ $t = racecheck ] && F='^64MiB/(q4|fp8)/p16'
  timeout 60 $SAN --tool $t $C bench rope-store --reps 1 --filter "$F" --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
pack
grep -E "^(row|16MiB|64MiB|256MiB|1024MiB)" $W/rope-summary.txt; tail -7 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
