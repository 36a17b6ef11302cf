// The engine kernels' arithmetic, shared by the host twins (twin.cpp) and the CUDA kernels
// (kernels.cu) so both sides perform the same IEEE operations in the same order:
//
//   matrix product (and the logits' product): the dot of a weight row w (bf16) and an
//     activation row x (fp32) over K elements. The elements are cut into octets
//     b = 0 .. ceil(K/8)-1 (elements 8b .. min(8b+8, K)-1; only the last may be short).
//     kDotParts = 128 fp32 partials s_0..s_127 start at 0; partial p takes the octets
//     b = p (mod 128) in ascending b, and within an octet its elements in ascending k, each
//     with one fused multiply-add (fmaf / __fmaf_rn). Then the fixed halving tree: for
//     h = 64, 32, 16, 8, 4, 2, 1: s_p = s_p + s_{p+h} for p < h; the result is s_0.
//     Rounding depth: min(K, 8 ceil(K / 1024)) fused multiply-adds plus 7 additions
//     (matmul_dot_depth; reference/engine_ref.h derives the bound from it).
//     On the device one block of 4 warps reads a weight row: warp w holds the partials
//     32w .. 32w+31 (lane l: partial 32w + l), so a warp reads 512 contiguous bytes of the
//     row per step; levels h = 64 and 32 are added across warps, h = 16 .. 1 by the
//     butterfly xor 16 .. 1 within a warp (IEEE addition is commutative, so the lane that
//     adds s_{p+h} + s_p gets the same bytes).
//   dot over K elements of RMSNorm's sum of squares: 8 fp32 accumulators a_0..a_7; a_j
//     takes the products of the elements k = j (mod 8) in ascending k, each with one fused
//     multiply-add; then the fixed tree ((a_0 + a_4) + (a_2 + a_6)) + ((a_1 + a_5) + (a_3 + a_7)).
//   RMSNorm: r = 1 / sqrt(ss / dim + eps), y_j = (x_j * r) * w_j, every operation rounded
//     once (no contraction: the device spells them __fdiv_rn, __fsqrt_rn, __fmul_rn).
//   SwiGLU: silu(g) * u = (g / (1 + exp(-g))) * u. The host twin calls the C library's
//     expf, the device CUDA's expf (2 ulp): the one kernel whose device bytes may differ
//     from the twin's; it is gated by its float64 bound instead (contracts: rows-invariant).
//   argmax: the largest non-NaN value, the lowest index on a tie; all NaN: 0.
//
// Nothing here depends on the batch: the order is fixed by the reduction length alone,
// so a row's bytes never depend on the rows launched beside it (batch invariance).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/layout/kc_hd.h"

namespace kc::eng {

KC_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}
KC_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KC_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KC_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
KC_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

KC_HD float bf16_to_f32(uint16_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(uint32_t(b) << 16);
#else
  const uint32_t u = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
#endif
}

// The matrix product's order (see above).
constexpr int kDotParts = 128;    // partials of a product's dot
constexpr int kDotOctet = 8;      // elements per octet
// Fused multiply-adds of the longest partial (at most min(K, 8 ceil(K / 1024))) plus the
// 7 levels of the tree.
KC_HD constexpr int64_t matmul_dot_depth(int64_t k) {
  const int64_t per = int64_t(kDotOctet) * ((k + int64_t(kDotOctet) * kDotParts - 1) / (int64_t(kDotOctet) * kDotParts));
  return (k < per ? k : per) + 7;
}

// The fixed tree over the 8 accumulators.
KC_HD float tree8(const float* a) {
  return add_rn(add_rn(add_rn(a[0], a[4]), add_rn(a[2], a[6])), add_rn(add_rn(a[1], a[5]), add_rn(a[3], a[7])));
}

// The RMSNorm factor from the sum of squares.
KC_HD float rms_factor(float ss, int dim, float eps) {
  return div_rn(1.0f, sqrt_rn(add_rn(div_rn(ss, float(dim)), eps)));
}

// One normalised element.
KC_HD float rms_apply(float x, float r, float w) { return mul_rn(mul_rn(x, r), w); }

// Whether (v, i) beats the current best (b, bi) in argmax order: NaN never wins; a larger
// value wins; an equal value wins when its index is lower. `has` says whether b is a value.
KC_HD bool argmax_beats(float v, int64_t i, bool has, float b, int64_t bi) {
  if (v != v) return false;
  if (!has) return true;
  return v > b || (v == b && i < bi);
}

}  // namespace kc::eng
