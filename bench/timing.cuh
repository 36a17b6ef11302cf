// What the device benches share (nvcc only): the median of event-timed launches, a
// grid-stride byte fill, a byte-difference count, and the copy ceiling of a byte count (a
// device-to-device cudaMemcpyAsync and a 16-byte load/store copy kernel over the same bytes,
// both timed; a bench takes the faster as its ceiling).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "bench/copy_ceiling.h"
#include "bench/hash.cuh"
#include "kernels/backend/cuda_check.h"

namespace kc {
namespace {  // each bench file its own copy (no relocatable device code)

__global__ void bench_fill_words_kernel(uint32_t* p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = bench_hash32(seed * 0x9E3779B97F4A7C15ull + i);
}

// The ceiling's kernel: read n16 int4 from src, write them to dst; four in flight per thread.
__global__ void bench_copy16_kernel(const int4* __restrict__ src, int4* __restrict__ dst, size_t n16) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n16; i += stride) dst[i] = src[i];
}

__global__ void bench_count_diff_kernel(const uint8_t* a, const uint8_t* b, size_t n, unsigned long long* diff) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  if (local) atomicAdd(diff, local);
}

// Fills n bytes (a multiple of 4) with reproducible random bytes.
Status bench_fill(uint8_t* p, size_t n, uint64_t seed) {
  bench_fill_words_kernel<<<4096, 256>>>(reinterpret_cast<uint32_t*>(p), n / 4, seed);
  KC_LAUNCH_CHECK("bench_fill_words_kernel");
  return Status::Ok();
}

// Bytes of a and b (n of them) that differ.
Status bench_count_diff(const uint8_t* a, const uint8_t* b, size_t n, unsigned long long* diff) {
  DevBuf<unsigned long long> d;
  KC_RETURN_IF_ERROR(d.alloc(1));
  KC_CUDA_TRY(cudaMemset(d.get(), 0, sizeof(unsigned long long)));
  bench_count_diff_kernel<<<2048, 256>>>(a, b, n, d.get());
  KC_LAUNCH_CHECK("bench_count_diff_kernel");
  return d.download(diff, 1);
}

// Times `launch` (which enqueues work on stream 0) with events: warmup untimed, then reps;
// the median in microseconds.
template <class F>
Status bench_time(int warmup, int reps, F launch, double* median_us) {
  cudaEvent_t a, b;
  KC_CUDA_TRY(cudaEventCreate(&a));
  KC_CUDA_TRY(cudaEventCreate(&b));
  std::vector<float> t;
  Status st = Status::Ok();
  for (int i = 0; i < warmup + reps && st.ok; ++i) {
    cudaEventRecord(a);
    st = launch();
    cudaEventRecord(b);
    const cudaError_t e = cudaEventSynchronize(b);
    if (st.ok && e != cudaSuccess) st = cuda_error("cudaEventSynchronize(b)", __FILE__, __LINE__, e);
    float ms = 0;
    if (st.ok) {
      const cudaError_t e2 = cudaEventElapsedTime(&ms, a, b);
      if (e2 != cudaSuccess) st = cuda_error("cudaEventElapsedTime", __FILE__, __LINE__, e2);
    }
    if (i >= warmup) t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  KC_RETURN_IF_ERROR(st);
  std::sort(t.begin(), t.end());
  *median_us = t[t.size() / 2] * 1e3;
  return Status::Ok();
}

}  // namespace
}  // namespace kc
