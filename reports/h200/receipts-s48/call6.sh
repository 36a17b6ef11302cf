#!/usr/bin/env bash
# Session 48, call 6 (experiment build: KC_ROPE_DEEP picks the deep kernels' stages): A = the
# default (bf16 3, fp8 / q4 4), B = 5, C = 6, D = 4 (bf16 too), E = 3 (fp8 / q4 too); bench
# rope-store's 16 and 64 MiB rows (the deep kernels' rows), 3 rounds in rotated orders, out_hash
# compared. Any card.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s48c6; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s48c6.tgz -C /tmp s48c6 2>/dev/null; }
R=$PWD/reports/h200
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
for r in 1 2 3; do
  case $r in 1) ORD="A B C D E";; 2) ORD="E D C B A";; 3) ORD="C E A D B";; esac
  for v in $ORD; do
    case $v in A) E=0;; B) E=5;; C) E=6;; D) E=4;; E) E=3;; esac
    KC_ROPE_DEEP=$E timeout 60 $H bench rope-store --filter '^(16|64)MiB/' --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$?"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
pack
cat $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
