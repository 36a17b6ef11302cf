#!/usr/bin/env bash
# For the next session's first device call (not run in session 43: no device time left), at HEAD:
#  1. build tf-cuda-test;
#  2. bench engine (the receipt: on an H200 it replaces reports/h200/bench-engine.json, 98afef3's,
#     whose 27B p8 target read 1.75; an H100 at da36279 read 2.02, receipts-s43/call5-da36279/);
#  3. ncu on the staged product (matmul_xs_kernel<8>) of the 27B preset at parallel 8: SOL,
#     occupancy, warp states, source counters, for q/k/v, o_proj, gate/up and down. The question:
#     is it held by shared-memory bandwidth and FMA issue (per octet step a thread does 16
#     LDS.128 and 256 FMA at batch 8), by latency (one step in flight), or by the tree?
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz and .dev. Returns $OUT/c6.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/c6; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/c6.tgz -C /tmp c6 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr \
  > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
timeout 240 build/tools/tf-cuda-test bench engine --out $W/bench-engine.json > $W/bench-engine.log 2>&1
echo "bench engine rc=$? ($((SECONDS-T0)) s)"; sed -n '/^targets:/,$p' $W/bench-engine.log | head -14
pack
# The trained fixture replaced by a 4-layer 27B preset checkpoint, so the first 24 launches of
# matmul_xs_kernel<8> (parallel 8) are q/k/v, o_proj, gate/up and down of that preset.
build/tools/tf-cuda-test make-model --preset qwen35-27b-attn --layers 4 --out $W/m27 > $W/make-model.log 2>&1
timeout 200 ncu --clock-control none --kernel-name-base mangled --kernel-name regex:matmul_xs_kernelILi8EE --launch-count 24 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SourceCounters \
  build/tools/tf-cuda-test bench engine --quick --transformers none --tokens 8 --engine-model $W/m27 > $W/ncu-matmul.txt 2>&1
echo "ncu rc=$? ($((SECONDS-T0)) s)"; grep -E "matmul_xs|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per" $W/ncu-matmul.txt | head -40
rm -rf $W/m27
pack
