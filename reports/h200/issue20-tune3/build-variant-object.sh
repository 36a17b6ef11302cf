#!/bin/bash
# usage: cc.sh mma|q4 NAME [extra nvcc flags...]  -> /tmp/tune3/objs/NAME.o, ptxas log NAME.ptxas
set -e
which=$1; name=$2; shift 2
src=partial_mma; [ $which = q4 ] && src=partial_mma_q4
cd /work/wt-tune3/build-cuda
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKC_HAVE_CUDA=1 -I/work/wt-tune3 -I/work/wt-tune3/build-cuda/generated -isystem=/usr/local/cuda/include -O2 -g -DNDEBUG --generate-code=arch=compute_90,code=[compute_90,sm_90] --expt-relaxed-constexpr -lineinfo -std=c++20 -Xptxas -v "$@" -x cu -c /work/wt-tune3/kernels/attention/$src.cu -o /tmp/tune3/objs/$name.o > /tmp/tune3/objs/$name.ptxas 2>&1
