// fp8 row helpers: E4M3 ("E4M3FN") conversion and per-row dynamic scaling, shared by
// every kernel that stores, reads or packs fp8 rows, and by their host twins.
//
// Row encoding (one row = head_dim values of one position, layer, K/V and KV head):
//   amax  = max |x_i| over the row, NaN-propagating (a NaN anywhere makes amax NaN);
//   scale = amax / 448 in fp32 (IEEE division, round to nearest even);
//   code_i = E4M3(x_i / scale), satfinite, round to nearest even (division, not a
//            multiply by 1/scale: the two give different codes and the reference
//            knows this one).
// Defined edge rules:
//   - amax = 0 (all zeros, either sign): scale 0, every code 0x00; decodes to +0.
//   - scale underflows to 0 for amax <= 448 * 2^-150 (~6e-43; at equality RN ties to 0): same as amax = 0; the
//     decoded row is 0 (error |x_i|, inside the bound's saturation term).
//   - amax NaN or Inf (any non-finite input): the row is poisoned on purpose: scale NaN
//     and every code 0x7F (E4M3 NaN), so every decoded value is NaN. A non-finite
//     input never leaves a plausible-looking row behind.
// Decoding: value_i = float(code_i) * scale in fp32 (E4M3 -> fp32 is exact; the product
// rounds once); a NaN result is the canonical 0x7FC00000 on host and device alike.
// The conversion itself: on the device the sm_89+ instruction cvt.rn.satfinite.e4m3x2;
// on the host a software RNE from the float's bits with the same thresholds:
// |x| >= 448 gives 448 (464 ties to 448; Inf saturates), |x| <= 2^-10 gives signed
// zero, NaN gives 0x7F. The fp8-rows contract checks the two on all 2^32 inputs.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/codecs/codec.h"
#include "kernels/layout/bits.h"
#include "kernels/layout/cache.h"
#include "kernels/layout/kc_hd.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace kc {

constexpr float kE4M3Max = 448.0f;
constexpr uint8_t kE4M3NaN = 0x7F;

// Software E4M3 satfinite RNE encoder (the host path; also compiled for the device so
// the contract can compare the two paths on one side).
KC_HD uint8_t e4m3_encode_soft(float x) {
  const uint32_t u = float_bits(x);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return kE4M3NaN;
  if (a >= 0x43E00000u) return sign | 0x7Eu;  // |x| >= 448, Inf included
  const int fexp = int(a >> 23) - 127;
  if (fexp >= -6) {
    // E4M3 normal: keep 3 of the 23 mantissa bits, round to nearest even on the bits;
    // a mantissa carry moves into the exponent by itself.
#ifdef KC_PLANT_E4M3_TRUNCATE
    const uint32_t r = a >> 20;  // planted bug (test builds only): truncation
#else
    const uint32_t r = (a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20;
#endif
    return sign | uint8_t(r - (120u << 3));
  }
  // E4M3 subnormal: k * 2^-9, k = RNE(|x| * 2^9) in 0..8 (8 is the normal 2^-6, code 8).
  if (a < 0x00800000u) return sign;  // float subnormals are far below 2^-10
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  const int shift = 14 - fexp;  // >= 21
  if (shift >= 25) return sign;  // m < 2^24, so |x| * 2^9 < 0.5 rounds to zero
  uint32_t k = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (k & 1u))) ++k;
  return sign | uint8_t(k);
}

KC_HD uint8_t e4m3_encode(float x) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890)
  return uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#else
  return e4m3_encode_soft(x);
#endif
}

KC_HD float e4m3_decode(uint8_t c) {
  const uint32_t s = uint32_t(c & 0x80u) << 24;
  const uint32_t e = (c >> 3) & 0xFu;
  const uint32_t m = c & 7u;
  if (e == 0xFu && m == 7u) return bits_float(s | 0x7FC00000u);
  if (e == 0) return bits_float(s | float_bits(float(m) * 0.001953125f));  // m * 2^-9
  return bits_float(s | ((e + 120u) << 23) | (m << 20));
}

KC_HD bool fp8_finite(float v) { return (float_bits(v) & 0x7F800000u) != 0x7F800000u; }

KC_HD float fp8_row_scale(float amax) {
  if (!fp8_finite(amax)) return bits_float(0x7FC00000u);
  return amax / kE4M3Max;
}

KC_HD uint8_t fp8_code(float x, float scale) {
  if (!fp8_finite(scale)) return kE4M3NaN;
  if (scale == 0.0f) return 0;
  return e4m3_encode(x / scale);
}

// NaN results are canonicalised (0x7FC00000) so host and device bytes agree: a NaN
// product's payload differs between x86 and the GPU.
KC_HD float fp8_value(uint8_t code, float scale) {
  const float v = e4m3_decode(code) * scale;
  return v != v ? bits_float(0x7FC00000u) : v;
}

// The fp8 row codec (codec.h): one fp32 scale per row, codes in E4M3.
template <>
struct Codec<Format::fp8> : WarpPerRowCodec, OriginalSpace, Raw4Access<4> {
  static constexpr const char* kName = "fp8";
  static constexpr Format kFormat = Format::fp8;
  static constexpr bool kRowCodec = true;
  static constexpr bool kScales = true;
  static constexpr bool kAttnMma = true;
  static Status check(const Cache& c, const RowRef* rows, int n, const char* op) {
    if (c.lay.format != Format::fp8) return Status::Error(std::string(op) + ": cache format is not fp8");
    return validate_rows(c, rows, n);
  }
  static void encode_row(const KvView& v, const float* x, const RowRef& r) {
    const int d = v.lay.head_dim;
    float amax = 0.0f;
#ifdef KC_PLANT_FP8_STORE_AMAX_OFF_BY_ONE  // planted bug (test builds only): the last element missed
    for (int i = 0; i < d - 1; ++i) amax = amax_step(amax, x[i]);
#else
    for (int i = 0; i < d; ++i) amax = amax_step(amax, x[i]);
#endif
    const float scale = fp8_row_scale(amax);
    uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    for (int i = 0; i < d; ++i) codes[i] = fp8_code(x[i], scale);
    memcpy(kv_scale(v, r.layer, r.kv, r.head, r.pos), &scale, sizeof(float));
#ifdef KC_PLANT_FP8_STORE_ZEROS  // planted bug (test builds only): zero codes and scale
    memset(codes, 0, size_t(d));
    memset(kv_scale(v, r.layer, r.kv, r.head, r.pos), 0, sizeof(float));
#endif
  }
  static void decode_row(const KvView& v, const RowRef& r, float* out) {
    const int d = v.lay.head_dim;
    float scale;
    memcpy(&scale, kv_scale(v, r.layer, r.kv, r.head, r.pos), sizeof(float));
    const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    for (int i = 0; i < d; ++i) out[i] = fp8_value(codes[i], scale);
  }
  static void attn_row(const KvView& v, const RowRef& r, float* out) { decode_row(v, r, out); }
  // One warp per row: the row's amax reduced over the warp (exact in any order).
#if defined(__CUDACC__)
  // Rope store: the warp's row, element lane + 32 t in y[t]; encode_row's bytes.
  __device__ static void store_warp(const KvView& v, const RowRef& r, const float* y, int nt, int lane) {
    uint8_t* row = kv_row(v, r.layer, r.kv, r.head, r.pos);
    float amax = 0.0f;
#ifdef KC_PLANT_FP8_STORE_AMAX_OFF_BY_ONE  // planted bug (test builds only): element d - 1 missed
    for (int t = 0; t < nt; ++t)
      if (lane + 32 * t != v.lay.head_dim - 1) amax = amax_step(amax, y[t]);
#else
    for (int t = 0; t < nt; ++t) amax = amax_step(amax, y[t]);
#endif
    for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    const float scale = fp8_row_scale(amax);
    for (int t = 0; t < nt; ++t) row[lane + 32 * t] = fp8_code(y[t], scale);
    if (lane == 0) memcpy(kv_scale(v, r.layer, r.kv, r.head, r.pos), &scale, 4);
#ifdef KC_PLANT_FP8_STORE_ZEROS  // planted bug (test builds only): zero codes and scale
    for (int t = 0; t < nt; ++t) row[lane + 32 * t] = 0;
    if (lane == 0) memset(kv_scale(v, r.layer, r.kv, r.head, r.pos), 0, 4);
#endif
  }
  // Attention's element access (partial_fma.cu): four codes are one 32-bit word
  // (Raw4Access<4>), converted by the hardware E4M3 -> fp16 conversion (exact) and one fp32
  // product with the row scale: fp8_value's value for every code (a NaN code gives a NaN).
  static constexpr int kAttnMinBlocks = 3;
  static constexpr int kAttnRawWords = 4;
  __device__ __forceinline__ static void conv4(const Raw4& r, float scale, float* out) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(r.w[0] >> (16 * hh)), __NV_E4M3);
      __half2 h2;
      memcpy(&h2, &hr, sizeof(h2));
      const float2 f = __half22float2(h2);
      out[2 * hh] = f.x * scale;
      out[2 * hh + 1] = f.y * scale;
    }
  }
  __device__ __forceinline__ static float elem_scale(const uint8_t* srow, int) {
    return __ldg(reinterpret_cast<const float*>(srow));
  }
  __device__ static void encode_thread(const KvView* views, const float* x, const RowRef* rows, int n, int, int64_t t) {
    WarpRow w;
    if (!warp_row(views, rows, n, t, &w)) return;
    const int d = w.v.lay.head_dim;
    const float* xr = x + size_t(w.row) * d;
    float amax = 0.0f;
    for (int i = w.lane; i < d; i += 32) amax = amax_step(amax, xr[i]);
    for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    const float scale = fp8_row_scale(amax);
    uint8_t* codes = w.codes();
    for (int i = w.lane; i < d; i += 32) codes[i] = fp8_code(xr[i], scale);
    if (w.lane == 0) memcpy(w.scales(), &scale, sizeof(float));
  }
  __device__ static void decode_thread(const KvView* views, const RowRef* rows, int n, int, float* out, int64_t t) {
    WarpRow w;
    if (!warp_row(views, rows, n, t, &w)) return;
    const int d = w.v.lay.head_dim;
    float scale;
    memcpy(&scale, w.scales(), sizeof(float));
    const uint8_t* codes = w.codes();
    for (int i = w.lane; i < d; i += 32) out[size_t(w.row) * d + i] = fp8_value(codes[i], scale);
  }
#endif
};

}  // namespace kc
