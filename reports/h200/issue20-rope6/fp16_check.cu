// Exhaustive device check (branch rope6): the hardware fp16 conversions that rope_kv_store's
// fast q4 encode uses give q4_group_scale's / fp16_to_float's bits.
// - every finite non-negative float q <= 65504 (the clamped q4 scale: amax / 7, min 65504):
//   __float2half_rn(q) == fp16_from_float(q);
// - every fp16 bit pattern h that is not Inf / NaN: __half2float(h) == fp16_to_float(h) (bits);
// - q4_group_scale(a) == cvt(fminf(a / 7, 65504)) for every finite non-negative float a.
// Build: nvcc -std=c++20 -arch=sm_90 --expt-relaxed-constexpr -DKC_HAVE_CUDA=1 -I. -I<build>/generated FILE
#include <cuda_fp16.h>
#include <cstdio>

#include "kernels/codecs/q4.h"

using namespace kc;

__global__ void check_scale(unsigned long long* bad, uint32_t lo, uint32_t hi, int mode) {
  for (uint64_t u = lo + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; u <= hi; u += uint64_t(gridDim.x) * blockDim.x) {
    const float x = bits_float(uint32_t(u));
    uint16_t a, b;
    if (mode == 0) {
      a = fp16_from_float(x);
      b = __half_as_ushort(__float2half_rn(x));
    } else {
      a = q4_group_scale(x);
      b = __half_as_ushort(__float2half_rn(fminf(x / 7.0f, kQ4ScaleMax)));
    }
    if (a != b) atomicAdd(bad, 1ull);
  }
}
__global__ void check_back(unsigned long long* bad) {
  const uint32_t h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= 65536u || ((h >> 10) & 0x1Fu) == 0x1Fu) return;
  if (float_bits(fp16_to_float(uint16_t(h))) != float_bits(__half2float(__ushort_as_half(uint16_t(h))))) atomicAdd(bad, 1ull);
}
int main() {
  unsigned long long* d;
  cudaMalloc(&d, 3 * sizeof(unsigned long long));
  cudaMemset(d, 0, 3 * sizeof(unsigned long long));
  check_scale<<<4096, 256>>>(d, 0u, 0x477FE000u, 0);   // 0 .. 65504
  check_scale<<<4096, 256>>>(d + 1, 0u, 0x7F7FFFFFu, 1);  // every finite non-negative amax
  check_back<<<256, 256>>>(d + 2);
  unsigned long long h[3];
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaGetLastError();
  std::printf("fp16_check: cvt.rn.f16.f32 vs fp16_from_float on [0, 65504]: %llu differ; q4_group_scale vs hardware on "
              "every finite amax >= 0: %llu differ; cvt.f32.f16 vs fp16_to_float on finite fp16: %llu differ; %s\n",
              h[0], h[1], h[2], cudaGetErrorString(e));
  return (h[0] || h[1] || h[2] || e != cudaSuccess) ? 1 : 0;
}
