// Pieces of the tensor-core partials (partial_mma.cu: bf16 and fp8; partial_mma_q4.cu: q4):
// the split of fp32 values into bf16 or fp16 parts and a warp's max magnitude. nvcc only.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/codecs/bf16.h"

namespace kc {

// (x, y) = the sum of NPT parts from hi down, each a bf16x2 or fp16x2 (x in the low half)
// rounded to nearest from what the parts before left; the differences are exact. bf16
// (3 parts): exact for normal numbers; fp16 (2 parts, inputs scaled below 2^15): at most
// 2^-22 of the value, and 2^-25 for a part below fp16's normal range.
template <bool kF16, int NPT>
__device__ __forceinline__ void split_parts(float x, float y, uint32_t (&part)[NPT]) {
#pragma unroll
  for (int s = 0; s < NPT; ++s) {
    if constexpr (kF16) {
      const __half2 h = __floats2half2_rn(x, y);
      memcpy(&part[s], &h, 4);
      const float2 f = __half22float2(h);
      x -= f.x, y -= f.y;
    } else {
      part[s] = uint32_t(bf16_from_float(x)) | (uint32_t(bf16_from_float(y)) << 16);
      x -= __uint_as_float(part[s] << 16);
      y -= __uint_as_float(part[s] & 0xFFFF0000u);
    }
  }
}
// Warp-wide max of |x| over x[lane], x[lane + 32], .. x[n - 1].
__device__ __forceinline__ float warp_amax(const float* x, int n, int lane) {
  float a = 0.0f;
  for (int i = lane; i < n; i += 32) a = fmaxf(a, fabsf(x[i]));
  for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, off));
  return a;
}

}  // namespace kc
