#!/bin/bash
# ncu (--clock-control none) of the rope store's fp8 / q4 d 128 ring kernel (MODE 119) at 64 MiB
# q4 (0.80 of the copy ceiling) against 256 MiB q4 (0.90), pages of 16: where a 64 MiB block's
# time goes, for the next try at the last three rope rows. Build from the working tree.
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
W=/tmp/n; mkdir -p $W
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg.log 2>&1 && ninja -C /tmp/b tf-cuda-test > $W/build.log 2>&1 || { tail $W/build.log; exit 4; }
M="gpu__time_duration.sum,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,sm__cycles_elapsed.avg,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
for row in 64MiB/q4/p16 256MiB/q4/p16 64MiB/fp8/p16; do
  n=$(echo $row | tr '/' '-')
  timeout 40 ncu --clock-control none --kernel-name regex:rope_store_ring --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis --metrics $M -o $W/$n /tmp/b/tools/tf-cuda-test bench rope-store --reps 3 --filter "^$row\$" > $W/$n.log 2>&1
  ncu -i $W/$n.ncu-rep --page details > $W/$n.txt 2>&1; ncu -i $W/$n.ncu-rep --page raw --csv > $W/$n-raw.csv 2>&1; rm -f $W/$n.ncu-rep
  echo "== $row"; grep -E "^ *(Duration|DRAM Throughput|Memory Throughput|Grid Size|Block Size|Issued Ipc Active|No Eligible|Warp Cycles Per Issued|Achieved Occupancy)" $W/$n.txt | head -12
done
tar czf $OUT/n.tgz -C /tmp n
