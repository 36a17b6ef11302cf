#!/bin/bash
# rope9: what call 1 did not run on the final kernels (the E kernels at d 128), for one device call
# from the repository root at this branch (about 60 s of build and 50 s of runs): build, qwen-pages
# on the rope formats with the controls, memcheck (qwen-pages d 128 / 256, and the 1 and 64 MiB
# bench rows where the E kernels run), synccheck; everything under $OUT/v (tar results.tgz).
W=$OUT/v; mkdir -p $W; B=/tmp/b-rope9v; TF=$B/tools/tf-cuda-test
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
pack() { tar -czf $OUT/results.tgz -C $W . 2>/dev/null; }
step() { local n=$1; shift; local t0=$(date +%s); "$@"; echo "$n rc=$? $(( $(date +%s) - t0 ))s" | tee -a $W/steps.txt; pack; }
git rev-parse HEAD > $W/commit.txt
step build bash -c "cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=OFF > $W/cfg.log 2>&1 && ninja -C $B tf-cuda-test > $W/build.log 2>&1"
F='fmt=(bf16|fp8|q4)'
step qp bash -c "$TF qwen-pages --backend cuda --cases 120 --filter 'd(128|256)(-r64|-r20)?,$F' --quiet --out $W/qp.json > $W/qp.log 2>&1"
step memcheck bash -c "compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --cases 16 --filter 'd(128|256)[^,]*,$F' --gates-only --quiet --out $W/memcheck.json > $W/memcheck.log 2>&1"
step memcheck-bench bash -c "compute-sanitizer --tool memcheck --error-exitcode 9 --kernel-name kns=rope_store $TF bench rope-store --reps 1 --filter '^(1|64)MiB/' --out $W/memcheck-bench.json > $W/memcheck-bench.log 2>&1"
step synccheck bash -c "compute-sanitizer --tool synccheck --error-exitcode 9 --kernel-name kns=rope_store $TF qwen-pages --backend cuda --cases 8 --filter 'd128[^,]*,$F' --gates-only --quiet --out $W/synccheck.json > $W/synccheck.log 2>&1"
cat $W/steps.txt; grep -h -E "^qwen-pages:" $W/qp.log; grep -h "ERROR SUMMARY" $W/memcheck*.log $W/synccheck.log
