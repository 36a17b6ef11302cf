#!/bin/bash
# usage: link.sh NAME MMAOBJ Q4OBJ -> /tmp/tune3/bins/tf-cuda-test-NAME (stripped)
set -e
name=$1; mma=$2; q4=$3
W=/tmp/tune3/link-$name; rm -rf $W; mkdir -p $W /tmp/tune3/bins
cp /tmp/tune3/libkc_kernels-base.a $W/libkc_kernels.a
cp /tmp/tune3/objs/$mma.o $W/partial_mma.cu.o; cp /tmp/tune3/objs/$q4.o $W/partial_mma_q4.cu.o
(cd $W && ar r libkc_kernels.a partial_mma.cu.o partial_mma_q4.cu.o && ranlib libkc_kernels.a)
cmd=$(cat /tmp/tune3/link.txt | sed -E "s@ -o tools/tf-cuda-test @ -o $W/tf @; s@ libkc_kernels.a @ $W/libkc_kernels.a @")
cd /work/wt-tune3/build-cuda && eval "$cmd"
strip -o /tmp/tune3/bins/tf-cuda-test-$name $W/tf
rm -rf $W
