#!/usr/bin/env bash
# Session 48, call 2: the d 128 ring kernels' data stages, 2 (A, main) / 3 (B) / 4 (C), chosen by
# KC_ROPE_STAGES in one binary; bench rope-store rows from 16 MiB up, 3 rounds interleaved
# (A B C, C B A, B A C), out_hash compared. Any card.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s48c2; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s48c2.tgz -C /tmp s48c2 2>/dev/null; }
R=$PWD/reports/h200
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tf-cuda-test kc_device_tests > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
H=build/tools/tf-cuda-test
echo "built $((SECONDS-T0)) s"
for st in 3 4; do
  KC_ROPE_STAGES=$st timeout 120 build/tests/kc_device_tests --gtest_filter='RopeStore.*' > $W/gtest-rope-$st.log 2>&1
  echo "RopeStore.* stages $st rc=$?"
done
F='^(16|64|256|1024)MiB/'
for r in 1 2 3; do
  case $r in 1) ORD="A B C";; 2) ORD="C B A";; 3) ORD="B A C";; esac
  for v in $ORD; do
    case $v in A) E=2;; B) E=3;; C) E=4;; esac
    KC_ROPE_STAGES=$E timeout 60 $H bench rope-store --filter "$F" --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$? at $((SECONDS-T0)) s"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
pack
grep -E "^(row|64MiB)" $W/rope-summary.txt; tail -10 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
