#!/bin/bash
# usage: link.sh NAME OBJ -> /tmp/bf16k/bins/tf-cuda-test-NAME (stripped): main 54897d8's objects with partial_mma.cu.o replaced
set -e
name=$1; obj=$2
L=/tmp/bf16k/link; W=/tmp/bf16k/lk-$name; rm -rf $W; mkdir -p $W /tmp/bf16k/bins
cp $L/libkc_kernels.a $W/libkc_kernels.a; cp $obj $W/partial_mma.cu.o
(cd $W && ar r libkc_kernels.a partial_mma.cu.o && ranlib libkc_kernels.a)
cd $L && g++ tools/CMakeFiles/tf-cuda-test.dir/{main,bench_attention,bench_pack,bench_engine,bench_moves,export,premerge,junit,receipt_merge,html_report}.cpp.o -o $W/tf engine/libkc_engine_run.a libkc_contracts.a tools/libkc_receipt_views.a engine/libkc_engine.a $W/libkc_kernels.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a reference/libkc_reference.a /usr/lib/x86_64-linux-gnu/librapidcheck.a contracts/libkc_receipt.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl -L/usr/local/cuda/targets/x86_64-linux/lib/stubs -L/usr/local/cuda/targets/x86_64-linux/lib
strip -o /tmp/bf16k/bins/tf-cuda-test-$name $W/tf
rm -rf $W
