#!/bin/bash
# usage: cc.sh SRCROOT NAME [extra nvcc flags] -> /tmp/bf16k/objs/NAME.o (+ .ptxas)
set -e
root=$1; name=$2; shift 2
cd /tmp/bf16k
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKC_HAVE_CUDA=1 -I$root -I/work/main/build-cuda/generated -isystem=/usr/local/cuda/include -O3 -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -Xptxas -v "$@" -x cu -c $root/kernels/attention/partial_mma.cu -o objs/$name.o > objs/$name.ptxas 2>&1
