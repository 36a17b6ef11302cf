#!/bin/bash
# Session 58, call 1: the owed runs from HEAD. qwen-pages on cuda (the rescaled chunks probes of
# 7ce4b63 have run on cpu only), then racecheck over qwen-pages-mma (san3.sh, PART m).
T0=$(date +%s); ROOT=$PWD; W=${OUT:=/tmp/out}; mkdir -p $W/qp
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -d .deps ] || tar xzf .deps.tgz
mkdir -p $W/san; bash tools/h200_git_from_snap.sh > $W/san/head.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> $W/san/head.txt; cat $W/san/head.txt
B=$ROOT/build-san; rm -rf $B; mkdir -p $B; t=$(date +%s)
{ cmake -S . -B $B -G Ninja -DKC_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DKC_DEVICE_MUTANTS=ON \
    -DCMAKE_PREFIX_PATH=$ROOT/.deps/usr && ninja -C $B -j 16 tools/tf-cuda-test tf-cuda-test-plant-merge-no-barrier; } > $W/san/build.log 2>&1
rc=$?; echo "build rc=$rc $(( $(date +%s) - t ))s" | tee -a $W/san/steps.txt; [ $rc = 0 ] || { tail -30 $W/san/build.log; exit 1; }
cp $W/san/head.txt $B/head.txt
t=$(date +%s)
$B/tools/tf-cuda-test qwen-pages --backend cuda --quiet --out $W/qp/qwen-pages-cuda.json > $W/qp/qwen-pages-cuda.out 2>&1
echo "qwen-pages cuda rc=$? $(( $(date +%s) - t ))s" | tee -a $W/san/steps.txt
tail -5 $W/qp/qwen-pages-cuda.out
LIMIT=$(( ${LIMIT:-580} - ($(date +%s) - T0) )) PART=m SKIP=1 RUNS=qwen-pages-mma bash .dev/san3.sh
