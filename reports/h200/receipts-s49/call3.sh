#!/usr/bin/env bash
# Session 49, call 3 (session 48's call8.sh; on an H200 first HEAD's rope-store and qwen-pages receipts from build A): two rows a stage for the rope store's deep
# rows (rope-two-rows-untested.patch, build X; KC_ROPE_PAIR=1: 2 stages of two rows, =2: fp8 / q4
# 3 stages of two rows; unset: the deep kernels of main, with the consumer loop restructured).
# A = HEAD's build. bench rope-store rows from 16 MiB up, 3 rounds in rotated orders:
# A (HEAD), B (X unset), C (X, PAIR=1), D (X, PAIR=2); out_hash compared. X's RopeStore.* and
# qwen-pages on cuda with PAIR=1 and =2; synccheck and racecheck over the 64 MiB p16 rows with
# PAIR=1. Any card.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s49c3; rm -rf $W; mkdir -p $W/rope
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s49c3.tgz -C /tmp s49c3 2>/dev/null; }
SRC=$PWD; R=$SRC/reports/h200
rm -rf /tmp/src-x && mkdir /tmp/src-x && git ls-files -z | xargs -0 cp --parents -t /tmp/src-x && cp -r .deps /tmp/src-x/ \
  && (cd /tmp/src-x && patch -p1 -s < $R/receipts-s48/rope-two-rows-untested.patch) || { echo "X: patch failed"; exit 4; }
CFG="-G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF -DKC_DEBUG_INFO=0"
cmake -S . -B /tmp/b-a $CFG -DCMAKE_PREFIX_PATH=$SRC/.deps/usr > $W/cmake-a.log 2>&1 || exit 2
cmake -S /tmp/src-x -B /tmp/b-x $CFG -DCMAKE_PREFIX_PATH=/tmp/src-x/.deps/usr > $W/cmake-x.log 2>&1 || exit 2
ninja -C /tmp/b-x -j 8 tf-cuda-test kc_device_tests > $W/build-x.log 2>&1 & PX=$!
ninja -C /tmp/b-a -j 8 tf-cuda-test > $W/build-a.log 2>&1 || { tail -20 $W/build-a.log; exit 2; }
wait $PX || { tail -20 $W/build-x.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
if grep -q H200 $W/head.txt; then  # A is HEAD (source: the working tree, its git from the snap)
  timeout 60 /tmp/b-a/tools/tf-cuda-test bench rope-store --out $W/bench-rope-store.json > $W/bench-rope-store.log 2>&1
  echo "H200 bench rope-store rc=$? $(grep -E '^target' $W/bench-rope-store.log | tail -1)"
  timeout 90 /tmp/b-a/tools/tf-cuda-test qwen-pages --backend cuda --out $W/qwen-pages.json > $W/qwen-pages.log 2>&1
  echo "H200 qwen-pages rc=$? $(grep -E '^qwen-pages' $W/qwen-pages.log | tail -1)"; pack
fi
X=/tmp/b-x/tools/tf-cuda-test
for pr in 1 2; do
  KC_ROPE_PAIR=$pr timeout 100 /tmp/b-x/tests/kc_device_tests --gtest_filter='RopeStore.*' > $W/gtest-rope-$pr.log 2>&1
  echo "RopeStore.* PAIR=$pr rc=$? $(grep -E '^\[  (PASSED|FAILED)' $W/gtest-rope-$pr.log | tr '\n' ' ')"
done
F='^(16|64|256|1024)MiB/'
for r in 1 2 3; do
  case $r in 1) ORD="A B C D";; 2) ORD="D C B A";; 3) ORD="C A D B";; esac
  for v in $ORD; do
    case $v in A) B=/tmp/b-a/tools/tf-cuda-test; E=0;; B) B=$X; E=0;; C) B=$X; E=1;; D) B=$X; E=2;; esac
    KC_ROPE_PAIR=$E timeout 60 $B bench rope-store --filter "$F" --out $W/rope/$v-$r.json > $W/rope-$v-$r.log 2>&1; echo "rope $v-$r rc=$?"
  done
done
python3 $R/issue20-ropetail/sum.py $W/rope > $W/rope-summary.txt 2>&1
pack
for pr in 1 2; do
  KC_ROPE_PAIR=$pr timeout 90 $X qwen-pages --backend cuda --out $W/qp-$pr.json > $W/qp-$pr.log 2>&1
  echo "qwen-pages PAIR=$pr rc=$? $(grep -E '^qwen-pages' $W/qp-$pr.log | tail -1)"
done
SAN="compute-sanitizer --error-exitcode 9"
for t in synccheck racecheck; do
  KC_ROPE_PAIR=1 timeout 120 $SAN --tool $t $X bench rope-store --reps 1 --filter '^64MiB/.*/p16' --out $W/$t.json > $W/$t.log 2>&1
  echo "$t rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $W/$t.log | tail -1)"
done
pack
grep -E "^(row|16MiB|64MiB)" $W/rope-summary.txt; tail -12 $W/rope-summary.txt
echo "done $((SECONDS-T0)) s"
