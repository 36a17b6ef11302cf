#!/usr/bin/env bash
# Session 58, call 2 (any card; an H100 came): ncu of our bf16 partial and merge beside PyTorch
# SDPA's cuDNN and flash kernels on the rows where ours / SDPA stays above 1.0 (issue 20, section
# 2's lead "the d256 cuDNN row and flash's kernel under ncu"): d128 b32 x 32K, d256 b8 x 128K and
# d128 b1 x 128K, bf16 window. Same sections for every kernel (speed of light, memory tables,
# occupancy, scheduler and warp state), one launch each. No kernel change: a diagnostic.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s58c2; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" | tee -a $W/head.txt
pack() { tar czf $OUT/s58c2.tgz -C /tmp s58c2 2>/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tools/tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "built $((SECONDS-T0)) s"
H=build/tools/tf-cuda-test
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section LaunchStats
     --section Occupancy --section SchedulerStats --section WarpStateStats
     --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum,gpu__time_duration.sum"
cat > $W/sdpa_one.py <<'PY'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
hq, hkv, d, b, ctx = map(int, sys.argv[1:6])
be = sys.argv[6]
q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
v = torch.randn(b, hkv, ctx, d, device="cuda", dtype=torch.bfloat16)
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION if be == "cudnn" else SDPBackend.FLASH_ATTENTION]):
    for _ in range(3):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("sdpa")
    torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
PY
for spec in "32 8 128 32 32768" "24 4 256 8 131072" "32 8 128 1 131072"; do
  set -- $spec; row="${1}q/${2}kv/d${3}/b${4}/ctx${5}/bf16/window"; n="d${3}-b${4}-${5}"
  for k in partial merge; do
    timeout 120 ncu --clock-control none -k regex:attention_${k} -c 1 $SEC --csv --page details \
      $H bench attention --sdpa none --reps 1 --filter "$row" > $W/ours-$k-$n.csv 2> $W/ours-$k-$n.err
    echo "ncu ours $k $n rc=$? at $((SECONDS-T0)) s"
  done
  for be in cudnn flash; do
    timeout 120 ncu --clock-control none --nvtx --nvtx-include "sdpa/" $SEC --csv --page details \
      python3 $W/sdpa_one.py $@ $be > $W/sdpa-$be-$n.csv 2> $W/sdpa-$be-$n.err
    echo "ncu sdpa $be $n rc=$? at $((SECONDS-T0)) s"
  done
  pack
done
python3 reports/h100/receipts-s58/ncu_table.py $W > $W/summary.txt 2>&1; pack
cat $W/summary.txt
echo "done $((SECONDS-T0)) s"
