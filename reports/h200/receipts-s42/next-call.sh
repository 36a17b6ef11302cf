#!/usr/bin/env bash
# Prepared in session 42 for the next device call (not run: no machine was lent after call 3).
#  1. What session 42 owes: tools/sanitize.py over the qwen-pages probes (chunks and far-max reach
#     the merge's batches) with the merge's four controls, on main's merge (59d72e4's kernels), the
#     plants built with the device mutants on.
#  2. Diagnostic for bench engine's missed target (qwen35-27b-attn-4l p8, ours / transformers 1.75):
#     bench engine --profile (event time per kernel kind), then ncu on the staged product
#     (matmul_xs_kernel) of the 27B preset at parallel 8: SOL, occupancy, warp states, source
#     counters, for the q/k/v, o_proj, gate/up and down shapes.
# Before the call: commit, tools/h200_snap.sh; carry .deps.tgz (tar czf .deps.tgz .deps: the tracked
# tree plus .deps is over the 64 MiB a call carries) and .dev. Returns $OUT/next.tgz.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/next; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee -a $W/head.txt
pack() { tar czf $OUT/next.tgz -C /tmp next 2>/dev/null; }
cmake -S . -B build -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH=$PWD/.deps/usr \
  -DKC_DEVICE_MUTANTS=ON > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build tf-cuda-test tf-cuda-test-plant-merge-no-barrier tf-cuda-test-plant-merge-read-past-end \
  tf-cuda-test-plant-merge-barrier-two-sites tf-cuda-test-plant-merge-read-unwritten > $W/build.log 2>&1 \
  || { tail -30 $W/build.log; pack; exit 2; }
echo "built $((SECONDS-T0)) s"
timeout ${KC_SAN_S:-300} python3 tools/sanitize.py --bin build/tools/tf-cuda-test --plant-bin build \
  --runs qwen-pages-probes --jobs 8 --out $W/sanitize-probes.json --logs $W/san-logs > $W/sanitize.log 2>&1
echo "sanitize rc=$? ($((SECONDS-T0)) s)"; tail -10 $W/sanitize.log
pack
timeout 150 build/tools/tf-cuda-test bench engine --profile $W/engine-profile.json --transformers none > $W/engine-profile.log 2>&1
echo "profile rc=$? ($((SECONDS-T0)) s)"; tail -25 $W/engine-profile.log
pack
# Every product of the bench on the 27B shapes: the trained fixture replaced by a 4-layer 27B preset
# checkpoint, so the first 24 launches of matmul_xs_kernel<8, 2> (parallel 8) are q/k/v, o_proj,
# gate/up and down of that preset.
build/tools/tf-cuda-test make-model --preset qwen35-27b-attn --layers 4 --out $W/m27 > $W/make-model.log 2>&1
timeout 200 ncu --clock-control none --kernel-name-base mangled --kernel-name regex:matmul_xs_kernelILi8ELi2E --launch-count 24 \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SourceCounters \
  build/tools/tf-cuda-test bench engine --quick --transformers none --tokens 8 --engine-model $W/m27 > $W/ncu-matmul.txt 2>&1
echo "ncu rc=$? ($((SECONDS-T0)) s)"; grep -E "matmul_xs|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per" $W/ncu-matmul.txt | head -40
pack
