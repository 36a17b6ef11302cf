#!/usr/bin/env bash
# Session 58, call 3 (any card): where our bf16 partial's L2 hits come from (14 % against SDPA's
# 1 % in call 2, with the same DRAM bytes): ncu's raw metrics of the memory tables (L1 and L2
# sectors, requests and hits by source unit and operation) for our partial and cuDNN's kernel at
# d128 b32 x 32K bf16 window, and ncu's source counters (per SASS instruction: executed, L2
# sectors and the excessive ones) of our partial. A diagnostic; no kernel change.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
T0=$SECONDS; W=/tmp/s58c3; rm -rf $W; mkdir -p $W
[ -d .deps ] || tar xzf .deps.tgz
bash tools/h200_git_from_snap.sh | tee $W/head.txt || exit 4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $W/head.txt
pack() { tar czf $OUT/s58c3.tgz -C /tmp s58c3 2>/dev/null; }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF \
  -DCMAKE_PREFIX_PATH=$PWD/.deps/usr > $W/cmake.log 2>&1 || { tail -20 $W/cmake.log; exit 2; }
ninja -C build -j 16 tools/tf-cuda-test > $W/build.log 2>&1 || { tail -30 $W/build.log; exit 2; }
echo "built $((SECONDS-T0)) s"
H=build/tools/tf-cuda-test; ROW=32q/8kv/d128/b32/ctx32768/bf16/window
sed -n '/^cat > \$W\/sdpa_one.py/,/^PY$/p' reports/h100/receipts-s58/call2.sh | sed '1d;$d' > $W/sdpa_one.py
timeout 150 ncu --clock-control none -k regex:attention_partial -c 1 --section MemoryWorkloadAnalysis_Tables \
  --page raw --csv $H bench attention --sdpa none --reps 1 --filter "$ROW" > $W/raw-ours.csv 2> $W/raw-ours.err
echo "raw ours rc=$? at $((SECONDS-T0)) s"
timeout 150 ncu --clock-control none --nvtx --nvtx-include "sdpa/" --section MemoryWorkloadAnalysis_Tables \
  --page raw --csv python3 $W/sdpa_one.py 32 8 128 32 32768 cudnn > $W/raw-cudnn.csv 2> $W/raw-cudnn.err
echo "raw cudnn rc=$? at $((SECONDS-T0)) s"
pack
timeout 200 ncu --clock-control none -k regex:attention_partial -c 1 --section SourceCounters --import-source no \
  -o $W/src-ours $H bench attention --sdpa none --reps 1 --filter "$ROW" > $W/src-ours.log 2>&1
echo "source ours rc=$? at $((SECONDS-T0)) s"
ncu -i $W/src-ours.ncu-rep --page source --csv --print-source sass > $W/src-ours.csv 2> $W/src-ours.err
rm -f $W/src-ours.ncu-rep
python3 reports/h100/receipts-s58/l2_sources.py $W > $W/summary.txt 2>&1
gzip -f $W/src-ours.csv; pack
cat $W/summary.txt
echo "done $((SECONDS-T0)) s"
