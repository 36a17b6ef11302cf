#!/usr/bin/env bash
# Session 60, device call 2: three leads from issue20-index.md, each keeping every byte (same
# sums, same order), timed against main (M) in one call:
#  Q  the regular bf16 / fp8 partial loads q as float4 (mma_q_load + mma_q_fragments_regs, as
#     the short path does) instead of four 4-byte loads a lane (receipts-s58: 3.15 M excessive
#     L2 sectors at d128 b32 x 32K);
#  S  the short path's p.v warps take two m-tiles each where that leaves >= 4 warps at work, so
#     p's fragments are read from shared memory once for two m-tiles (b1 x 4K);
#  E  the merge reads kept partials without the evict_first policy (tail1's untried lead).
# Variants: {q,s,e}-unmeasured.patch beside this script. Steps: build M, Q, S, E (one build
# dir, each patch applied and reverted); bench attention --timing gated over window rows and b1 x 4K's
# rows, variants interleaved, 3 rounds (out_fnv1a must agree: tools/ab_summary.py); qwen-pages
# --backend cuda with Q and S. Before the call: commit, KC_SNAP_BASE=0 tools/h200_snap.sh;
# carry .deps.tgz and .dev. Returns $OUT/c2.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c2; L=${KC_CALL_S:-570}; mkdir -p $W /tmp/bin
left() { echo $((L - SECONDS + T0)); }
pack() { tar czf $OUT/c2.tgz -C /tmp c2 2>/dev/null; }
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | head -1 | tee -a $W/head.txt
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DKC_DEVICE_MUTANTS=OFF > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C /tmp/build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
cp /tmp/build/tools/tf-cuda-test /tmp/bin/m; echo "build M $((SECONDS-T0)) s"
variant() {  # variant NAME: reports/h100/receipts-s60/NAME-unmeasured.patch applied, built, reverted
  local pt=reports/h100/receipts-s60/$1-unmeasured.patch
  git apply $pt || { echo "variant $1: the patch does not apply"; return; }
  ninja -C /tmp/build tf-cuda-test > $W/build-$1.log 2>&1 && cp /tmp/build/tools/tf-cuda-test /tmp/bin/$1 \
    || { echo "build $1 failed"; tail -20 $W/build-$1.log; }
  git apply -R $pt
  echo "build $1 $((SECONDS-T0)) s"
}
variant q; variant s; variant e
ninja -C /tmp/build tf-cuda-test > /dev/null 2>&1  # back to main's objects
echo "git: $(git status --short --untracked-files=no | wc -l) changed"
mkdir -p /tmp/nosdpa && echo 'import sys; sys.exit(3)' > /tmp/nosdpa/bench_sdpa.py
F='((b1/ctx131072|b1/ctx32768|b8/ctx32768|b32/ctx32768)/(bf16|fp8)/window|b1/ctx4096/(bf16|fp8|q4)/(window|p16|p256))'
run() {  # run VARIANT ROUND
  local bin=/tmp/bin/$1
  [ -x $bin ] || return
  timeout 100 $bin bench attention --script-dir /tmp/nosdpa --filter "$F" --timing gated --out $W/ab-$1-$2.json > $W/ab-$1-$2.log 2>&1
  echo "bench $1 $2 rc=$? ($((SECONDS-T0)) s)"
}
for r in 1 2 3; do
  [ $(left) -gt 130 ] || { echo "round $r: not run (time)"; break; }
  order="m q s e"; [ $((r % 2)) = 0 ] && order="e s q m"
  for v in $order; do run $v $r; done
  pack
done
python3 tools/ab_summary.py $W --base m --out $W/ab-summary.txt > /dev/null; echo "ab_summary rc=$?"
pack
for v in q s; do
  [ $(left) -gt 45 ] || { echo "qwen-pages $v: not run (time)"; continue; }
  timeout $(( $(left) - 10 < 100 ? $(left) - 10 : 100 )) /tmp/bin/$v qwen-pages --backend cuda --out $W/qwen-pages-$v.json > $W/qwen-pages-$v.log 2>&1
  echo "qwen-pages $v rc=$? ($((SECONDS-T0)) s): $(grep -E '^qwen-pages:' $W/qwen-pages-$v.log | tail -1)"
  pack
done
echo "total $((SECONDS-T0)) s"
tail -14 $W/ab-summary.txt
