// q4 rows: Hadamard-rotated 4-bit rows. Row math shared (KC_HD) by the CUDA kernels
// (codecs/rows.cu), their host twins (codecs/rows_twin.cpp) and q4 attention (attention/).
//
// A row of head_dim d (d % 32 == 0) is split into G = d / 32 groups of 32 elements.
// Group g occupies 16 code bytes at codes + 16 g and one fp16 scale (2 bytes, little
// endian) at scales + 2 g, where codes = kv_row(...) and scales = kv_scale(...).
//
// Rotation (per group, in place, fp32):
//   butterflies: five stages in the fixed order h = 1, 2, 4, 8, 16; stage h replaces,
//     for every i with (i & h) == 0, the pair (v[i], v[i+h]) by (v[i] + v[i+h],
//     v[i] - v[i+h]). The result is H32 v, H(i,j) = (-1)^popcount(i & j) (Sylvester).
//     Adds and subtracts only: nothing a compiler may contract into an FMA.
//   hadamard32_fwd: butterflies, then every element times 2^-3 (exact unless the
//     result is an fp32 subnormal): y = 2^-3 H x.
//   hadamard32_inv: butterflies, then times 2^-2: x = 2^-2 H y.
//   H H = 32 I, so inv(fwd(x)) = x up to the butterflies' fp32 rounding; the 2^-3 / 2^-2
//   split is exact where 1/sqrt(32) is not.
// For attention: K and V are stored fwd-rotated; the query is rotated with inv
// (q4_rotate_query), since (2^-2 H q) . (2^-3 H k) = 2^-5 q^T H H k = q . k exactly in real
// arithmetic (H is symmetric); the attention output, a combination of fwd-rotated V
// rows, is rotated back with inv (q4_unrotate_out).
//
// Group encoding (y = the group's 32 fwd-rotated fp32 values):
//   amax  = max |y_i|, NaN-propagating (amax_step; fmaxf would drop a NaN);
//   scale = fp16 RNE of min(fl32(amax / 7), 65504)  (fp32 IEEE division by 7, then the
//           software conversion fp16_from_float below, identical on host and device);
//           amax / 7 > 65504 saturates the scale to 65504 (codes then clamp);
//   codes: symmetric range -7..7, code_i = clamp(RNE_int(fl32(y_i / s)), -7, 7) with s
//          the fp16 scale as fp32 (a division, not a multiply by 1/s, on both sides);
//          stored offset-binary, nibble = code + 8 (so 1..15; nibble 0, code -8, is never
//          written for a finite group); element 2i in the low nibble of byte i of the
//          group's 16 bytes, element 2i+1 in the high nibble.
// Defined edge rules:
//   - s == 0 (amax = 0, or amax / 7 at or below 2^-25, the fp16 rounding to zero): every code
//     0 (bytes 0x88), scale 0; decodes to +0.
//   - fp16-subnormal scales (amax / 7 < 2^-14) are kept; their coarse rounding can make
//     |y| / s exceed 7.5, and those codes clamp to +-7 (the bound has a clip term).
//   - a group whose rotated values are not all finite (a NaN or Inf among its inputs,
//     or a rotation that overflows fp32) is poisoned on purpose: scale 0x7E00 (fp16
//     NaN), every code byte 0x00 (nibble 0, never written otherwise), and it decodes to
//     32 NaNs. Other groups of the row are unaffected.
// Decoding: value_i = float(nibble_i - 8) * s (exact: 4 x 11 significant bits), then the
// inverse rotation. Every partial sum of the butterflies is an integer multiple of s of
// magnitude <= 256 s, so the decoded row is exact in fp32 too (no rounding at all); a
// scale that is not finite (only from poisoned or foreign bytes) decodes to canonical
// NaNs (0x7FC00000).
// The float64 reference (reference/q4_ref.h) predicts codes, scales and decoded values
// exactly and derives the roundtrip and q.k bounds.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/codecs/codec.h"
#include "kernels/layout/bits.h"
#include "kernels/layout/cache.h"
#include "kernels/layout/kc_hd.h"
#include "kernels/layout/status.h"

#if defined(__CUDACC__)
#define KC_Q4_UNROLL _Pragma("unroll")
#else
#define KC_Q4_UNROLL
#endif

namespace kc {

constexpr int kQ4Group = 32;
constexpr int kQ4CodeMax = 7;
constexpr float kQ4ScaleMax = 65504.0f;     // largest finite fp16
constexpr uint16_t kQ4ScaleNaN = 0x7E00;    // scale of a poisoned group
constexpr uint8_t kQ4PoisonCodes = 0x00;    // code bytes of a poisoned group
constexpr uint8_t kQ4ZeroCodes = 0x88;      // two codes 0

// ---- rotation ----

// H32 v in place (unscaled), five butterfly stages h = 1, 2, 4, 8, 16.
KC_HD void hadamard32_butterflies(float v[32]) {
KC_Q4_UNROLL
  for (int h = 1; h < 32; h <<= 1) {
KC_Q4_UNROLL
    for (int i = 0; i < 32; ++i) {
      if (i & h) continue;
      const float a = v[i], b = v[i + h];
      v[i] = a + b;
#ifdef KC_PLANT_Q4_BUTTERFLY_SIGN
      v[i + h] = h == 8 ? b - a : a - b;  // planted bug (test builds only): one stage's sign
#else
      v[i + h] = a - b;
#endif
    }
  }
}

// y = 2^-3 H32 x in place.
KC_HD void hadamard32_fwd(float v[32]) {
  hadamard32_butterflies(v);
KC_Q4_UNROLL
  for (int i = 0; i < 32; ++i) v[i] = v[i] * 0.125f;
}

// x = 2^-2 H32 y in place (the inverse of hadamard32_fwd).
KC_HD void hadamard32_inv(float v[32]) {
  hadamard32_butterflies(v);
KC_Q4_UNROLL
  for (int i = 0; i < 32; ++i) v[i] = v[i] * 0.25f;
}

// The query of q4 attention: inv rotation of each group of 32 (d % 32 == 0).
KC_HD void q4_rotate_query(float* q, int d) {
  for (int g = 0; g < d; g += kQ4Group) hadamard32_inv(q + g);
}

// The attention output back to original space: inv rotation of each group.
KC_HD void q4_unrotate_out(float* o, int d) {
  for (int g = 0; g < d; g += kQ4Group) hadamard32_inv(o + g);
}

// ---- fp16 scale ----

// fp32 -> fp16 bits, round to nearest even (IEEE: overflow gives Inf, NaN gives 0x7E00 with the sign kept: 0xFE00 for a negative NaN).
// Software on both sides so host and device bits cannot differ.
KC_HD uint16_t fp16_from_float(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520: rounds past 65504
  if (a >= 0x38800000u) {                        // >= 2^-14: fp16 normal
    const uint32_t r = (a + 0xFFFu + ((a >> 13) & 1u)) >> 13;  // RNE on the dropped 13 bits
    return sign | uint16_t(r - (112u << 10));                   // rebias 127 -> 15
  }
  // fp16 subnormal: k * 2^-24 with k = RNE(|x| * 2^24). For |x| >= 2^-25 the product is
  // exact in fp32 (a power-of-two scaling of a normal into [0.5, 1024)); below, k = 0.
  if (a <= 0x33000000u) return sign;  // |x| <= 2^-25: 2^-25 itself ties to 0 (even)
  return sign | uint16_t(rintf(bits_float(a) * 16777216.0f));
}

// fp16 bits -> fp32 (exact).
KC_HD float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1Fu) return bits_float(sign | 0x7F800000u | (m << 13));
  if (e == 0) return bits_float(sign | float_bits(float(m) * 5.9604644775390625e-8f));  // m * 2^-24
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

KC_HD bool q4_finite(float v) { return (float_bits(v) & 0x7F800000u) != 0x7F800000u; }

// fp16 bits of a group's scale from the amax of its rotated values (finite amax only).
KC_HD uint16_t q4_group_scale(float amax) {
  float q = amax / 7.0f;
  if (q > kQ4ScaleMax) q = kQ4ScaleMax;
  return fp16_from_float(q);
}

// The code of one rotated value as its stored nibble (code + 8), given s > 0.
KC_HD uint8_t q4_nibble_of(float y, float s) {
  float t = y / s;
  t = t < -7.0f ? -7.0f : (t > 7.0f ? 7.0f : t);  // clamp first: |t| may be Inf
#ifdef KC_PLANT_Q4_ROUND_HALF_UP
  const float k = floorf(t + 0.5f);  // planted bug (test builds only): round half up
#else
  const float k = rintf(t);  // round to nearest even (default rounding mode, cvt.rni on the device)
#endif
  return uint8_t(int(k) + 8);
}

// RN(y / s) by Markstein's correction instead of a division, given r = RN(1 / s): q0 = RN(y r),
// the remainder y - s q0 by one fma (exact), then RN(q0 + (y - s q0) r) (Markstein's theorem: r
// within half an ulp of 1 / s and q0 within an ulp of y / s), wherever nothing underflows.
// Three instructions against a division's sequence and its slow-path test.
KC_HD float q4_markstein_quotient(float y, float s, float r) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(y, r);
  return __fmaf_rn(__fmaf_rn(-s, q0, y), r, q0);
#else
  const float q0 = y * r;
  return std::fma(std::fma(-s, q0, y), r, q0);
#endif
}

// amax / 7 rounded to nearest even (q4_group_scale's quotient) by q4_markstein_quotient with
// r = RN(1 / 7): the same bits as the division for every finite amax >= 0, subnormals included
// (an exhaustive host sweep of all 2^31 found none that differ; q0 alone differs on about half);
// Q4Group.ScaleQuotientIsTheDivision sweeps every mantissa of the edge binades.
KC_HD float q4_scale_quotient(float amax) { return q4_markstein_quotient(amax, 7.0f, 0.142857149f); }

// The nibble of a quotient t = y / s by the magic add (the ring kernel's fast encode,
// rope_store.cu): t clamped to [-7, 7], plus 12582920 = 1.5 2^23 + 8, an even integer in the
// binade where floats are the integers: the sum rounds to 12582920 + rint(t) (ties to even, as
// rint, since 12582920 is even) and its low 4 bits are rint(t) + 8, 1 .. 15. One add and a mask
// instead of a rint, a conversion and an add. The sum's bits are returned: their low byte is the
// nibble (0x01 .. 0x0F), for a packer that moves bytes (rope_store.cu's four nibbles by byte
// permutes).
KC_HD uint32_t q4_magic_add(float t) {
#if defined(__CUDA_ARCH__)
  t = fmaxf(fminf(t, 7.0f), -7.0f);
#else
  t = t < -7.0f ? -7.0f : (t > 7.0f ? 7.0f : t);
#endif
#ifdef KC_PLANT_Q4_ROUND_HALF_UP  // planted bug (test builds only), as in q4_nibble_of
  return uint32_t(int(floorf(t + 0.5f)) + 8);
#elif defined(__CUDA_ARCH__)
  return __float_as_uint(__fadd_rn(t, 12582920.0f));
#else
  return float_bits(t + 12582920.0f);
#endif
}
// q4_nibble_of's nibble by the magic add of the division's quotient, the same for every y and
// s > 0 (Q4Group.MagicAddNibbleIsTheDivisionsForEveryScale).
KC_HD uint8_t q4_nibble_magic(float y, float s) {
#if defined(__CUDA_ARCH__)
  return uint8_t(q4_magic_add(__fdiv_rn(y, s)) & 15u);
#else
  return uint8_t(q4_magic_add(y / s) & 15u);
#endif
}
// The magic add's bits of q4_markstein_quotient(y, s, r), r = RN(1 / s) (q4_recip; the device's
// __frcp_rn): q4_nibble_of's nibble in the low byte. Its domain is the encode's: |y| <= amax and s
// = the group scale of that amax (2^-24 .. 65504, a normal fp32), so |y / s| <= 7 (1 + 2^-10), or
// s = 65504 and y r at most 2^128 / 65504: nothing overflows (far outside it, y r = Inf would give
// a NaN). Only |y / s| < 2^-100 or so could underflow, and every t below 0.5 gives the nibble 8,
// whatever its last bits. Q4Group.MarksteinQuotientNibbleIsTheDivisionsForEveryScale sweeps it
// as the magic add.
KC_HD uint32_t q4_magic_bits_recip(float y, float s, float r) { return q4_magic_add(q4_markstein_quotient(y, s, r)); }

// q4_nibble_of's nibble by a reciprocal: y times r = fl(1 / s) (one division per group instead
// of one per value), with q4_nibble_of itself where the product could round to another code.
// For t = y / s exact, u = 2^-24 and |e_i| <= u (round to nearest, no subnormal result: r and s
// are fp16 values' fp32 reciprocals, and a product below 2^-126 is far from any code boundary):
//   q = fl(y / s) = t (1 + e1),   p = fl(y r) = t (1 + e2)(1 + e3),
//   |p - q| <= (3u + u^2) |t| <= 3.0001 u |p|   (|t| <= |p| / (1 - u)^2).
// The nibble is rint(clamp(x, -7, 7)) + 8 of x = q: non-decreasing in x, and constant except at
// the half-integers +-0.5 .. +-6.5. So p gives q's nibble unless one of them lies within
// |p - q| of p: never where |p| >= 7 (that needs |p - q| > 0.5), and where |p| < 7,
// |p - q| < 21.1 u < 2^-19. The fallback takes every clamped product c within 2^-18 of a
// half-integer: twice the bound. Its test, with k = rint(c): c - k is exact (|c - k| <= 0.5 and
// Sterbenz, or k = 0), and so is |c - k| - 0.5 from |c - k| >= 0.25 up; below, the difference
// is near -0.5, far outside the window either way. A clamped product (|p| > 7) is 0.5 from
// 6.5 and 7.5 and never falls back.
// r must be fl(1 / s) for this s > 0 (q4_recip); y finite. Only a product, a rint and
// compares: nothing a compiler may contract (the device spells the product __fmul_rn).
// No kernel calls it: measured on the H200 in the ring kernel's fast encode, it was 1-2 % slower
// than the division at 64 MiB (reports/h200/issue20-q4recip/q4recip.md); kept with its proof for
// a kernel where the division is the bottleneck.
KC_HD float q4_recip(float s) { return 1.0f / s; }
// The clamped product's code as a float (*k) and whether it lies within 2^-18 of a tie.
KC_HD bool q4_recip_near_tie(float p, float* k) {
  const float c = p < -7.0f ? -7.0f : (p > 7.0f ? 7.0f : p);
  *k = rintf(c);
  return fabsf(fabsf(c - *k) - 0.5f) <= 0x1p-18f;
}
KC_HD uint8_t q4_nibble_by_recip(float y, float s, float r) {
#if defined(__CUDA_ARCH__)
  const float p = __fmul_rn(y, r);
#else
  const float p = y * r;
#endif
  float k;
  if (q4_recip_near_tie(p, &k)) return q4_nibble_of(y, s);
  return uint8_t(int(k) + 8);
}

// Dequantized rotated value of a nibble (exact in fp32); NaN canonical.
KC_HD float q4_value(uint8_t nibble, float scale) {
  const float v = float(int(nibble & 15u) - 8) * scale;
  return v != v ? bits_float(0x7FC00000u) : v;
}

KC_HD uint8_t q4_nibble(const uint8_t* group_codes, int i) {
  const uint8_t b = group_codes[i >> 1];
  return (i & 1) ? uint8_t(b >> 4) : uint8_t(b & 15u);
}

KC_HD float q4_load_scale(const uint8_t* scales, int group) {
  uint16_t h;
  memcpy(&h, scales + 2 * group, 2);
  return fp16_to_float(h);
}

// ---- groups and rows ----

// Encodes 32 already-rotated values: 16 code bytes and 2 scale bytes.
KC_HD void q4_encode_group_rotated(const float y[32], uint8_t* codes16, uint8_t* scale2) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = amax_step(amax, y[i]);
  uint16_t h;
  if (!q4_finite(amax)) {
    h = kQ4ScaleNaN;
    for (int i = 0; i < 16; ++i) codes16[i] = kQ4PoisonCodes;
  } else {
    h = q4_group_scale(amax);
    const float s = fp16_to_float(h);
    if (s == 0.0f) {
      for (int i = 0; i < 16; ++i) codes16[i] = kQ4ZeroCodes;
    } else {
      for (int i = 0; i < 16; ++i)
        codes16[i] = uint8_t(q4_nibble_of(y[2 * i], s) | (q4_nibble_of(y[2 * i + 1], s) << 4));
    }
  }
  memcpy(scale2, &h, 2);
}

// The 32 dequantized rotated values of a group (no inverse rotation).
KC_HD void q4_decode_group_rotated(const uint8_t* codes16, const uint8_t* scale2, float z[32]) {
  uint16_t h;
  memcpy(&h, scale2, 2);
  const float s = fp16_to_float(h);
  const bool ok = q4_finite(s);
  for (int i = 0; i < 32; ++i) z[i] = ok ? q4_value(q4_nibble(codes16, i), s) : bits_float(0x7FC00000u);
}

// One group of original-space values: copy, fwd rotation, encode.
KC_HD void q4_encode_group(const float* x, uint8_t* codes16, uint8_t* scale2) {
  float y[32];
  for (int i = 0; i < 32; ++i) y[i] = x[i];
  hadamard32_fwd(y);
  q4_encode_group_rotated(y, codes16, scale2);
}

// One group back to original space: dequantize, inv rotation (exact; see above).
KC_HD void q4_decode_group(const uint8_t* codes16, const uint8_t* scale2, float* out) {
  float z[32];
  q4_decode_group_rotated(codes16, scale2, z);
  hadamard32_inv(z);
  for (int i = 0; i < 32; ++i) out[i] = z[i] != z[i] ? bits_float(0x7FC00000u) : z[i];
}

KC_HD void q4_encode_row(const float* x, int d, uint8_t* codes, uint8_t* scales) {
  for (int g = 0; g < d / kQ4Group; ++g) q4_encode_group(x + kQ4Group * g, codes + 16 * g, scales + 2 * g);
}

KC_HD void q4_decode_row(const uint8_t* codes, const uint8_t* scales, int d, float* out) {
  for (int g = 0; g < d / kQ4Group; ++g) q4_decode_group(codes + 16 * g, scales + 2 * g, out + kQ4Group * g);
}

// Dequantized row in rotated space (what q4 attention reads).
KC_HD void q4_decode_row_rotated(const uint8_t* codes, const uint8_t* scales, int d, float* z) {
  for (int g = 0; g < d / kQ4Group; ++g) q4_decode_group_rotated(codes + 16 * g, scales + 2 * g, z + kQ4Group * g);
}

// The q4 row codec (codec.h). check(): the cache format is q4, head_dim a positive
// multiple of 32, and every row addresses inside its lane (validate_rows).
template <>
struct Codec<Format::q4> : Raw4Access<2> {
  static constexpr const char* kName = "q4";
  static constexpr Format kFormat = Format::q4;
  static constexpr bool kRowCodec = true;
  static constexpr bool kScales = true;
  // Attention runs in rotated space: the query rotated once by 2^-2 H32, K and V read as
  // their dequantised rotated values, the output rotated back once (see the file comment).
  static constexpr bool kRotated = true;
  // The cuda backend's tensor-core partial takes q4 at head_dim 128 / 256
  // (attention/partial_mma_q4.cu): codes exact in fp16, each group's scale on the products.
  static constexpr bool kAttnMma = true;
  static Status check(const Cache& c, const RowRef* rows, int n, const char* op) {
    const std::string w = std::string(op) + ": ";
    if (c.lay.format != Format::q4)
      return Status::Error(w + "cache format is " + format_name(c.lay.format) + ", not q4");
    if (c.lay.head_dim <= 0 || c.lay.head_dim % kQ4Group != 0)
      return Status::Error(w + "head_dim " + std::to_string(c.lay.head_dim) + " is not a positive multiple of 32");
    if (n < 0) return Status::Error(w + "negative row count");
    return validate_rows(c, rows, n);
  }
  static void encode_row(const KvView& v, const float* x, const RowRef& r) {
    q4_encode_row(x, v.lay.head_dim, kv_row(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos));
  }
  static void decode_row(const KvView& v, const RowRef& r, float* out) {
    q4_decode_row(kv_row(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos), v.lay.head_dim,
                  out);
  }
  // A row as attention reads it: dequantised, in rotated space (no inverse rotation).
  static void attn_row(const KvView& v, const RowRef& r, float* out) {
    q4_decode_row_rotated(kv_row(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos),
                          v.lay.head_dim, out);
  }
  KC_HD static void rotate_query(float* q, int d) { q4_rotate_query(q, d); }
  KC_HD static void unrotate_out(float* o, int d) { q4_unrotate_out(o, d); }
  // One thread per (row, group): thread t handles row t / G, group t % G (G = d / 32); the
  // group's helpers are the twin's (adds, subtracts, one power-of-two scaling, IEEE
  // division, rintf and a software fp16 conversion), so device bytes == twin bytes.
  static constexpr int kThreads = 128;
  static int64_t threads(int n, int d) { return int64_t(n) * (d / kQ4Group); }
#if defined(__CUDACC__)
  __device__ static void encode_thread(const KvView* views, const float* x, const RowRef* rows, int n, int d,
                                       int64_t t) {
    const int groups = d / kQ4Group;
    if (t >= int64_t(n) * groups) return;
    const int row = int(t / groups), g = int(t % groups);
    const RowRef r = rows[row];
    const KvView v = views[r.lane];
    q4_encode_group(x + size_t(row) * d + kQ4Group * g, kv_row(v, r.layer, r.kv, r.head, r.pos) + 16 * g,
                    kv_scale(v, r.layer, r.kv, r.head, r.pos) + 2 * g);
  }
  __device__ static void decode_thread(const KvView* views, const RowRef* rows, int n, int d, float* out, int64_t t) {
    const int groups = d / kQ4Group;
    if (t >= int64_t(n) * groups) return;
    const int row = int(t / groups), g = int(t % groups);
    const RowRef r = rows[row];
    const KvView v = views[r.lane];
    q4_decode_group(kv_row(v, r.layer, r.kv, r.head, r.pos) + 16 * g, kv_scale(v, r.layer, r.kv, r.head, r.pos) + 2 * g,
                    out + size_t(row) * d + kQ4Group * g);
  }
  // Rope store: the warp's row, element lane + 32 t in y[t]: group t is the warp's 32 lanes
  // at step t (lane i holds element i of the group). Each step is q4_encode_group's
  // arithmetic spread over the lanes: the butterflies' stages h = 1 .. 16 by shuffles (lane
  // i with i & h == 0 adds its partner, i + h takes partner minus itself: the same fp32 adds
  // and subtracts as hadamard32_butterflies), times 2^-3, the NaN-propagating amax by a
  // shuffle reduction (a max: its value does not depend on the order), the scale and each
  // lane's nibble by q4_group_scale / q4_nibble_of; even lanes write the byte of their pair
  // (own nibble low, the odd neighbour's high), lane 0 the scale: encode_row's bytes.
  // (Before: lane g encoded group g alone through a shared buffer, 4 of 32 lanes busy at d 128.)
  __device__ static void store_warp(const KvView& v, const RowRef& r, const float* y, int nt, int lane) {
    uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    uint8_t* scales = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    for (int t = 0; t < nt; ++t) {
      float x = y[t];
#pragma unroll
      for (int h = 1; h < 32; h <<= 1) {
        const float o = __shfl_xor_sync(0xFFFFFFFFu, x, h);
#ifdef KC_PLANT_Q4_BUTTERFLY_SIGN
        x = (lane & h) ? (h == 8 ? x - o : o - x) : x + o;  // planted bug (test builds only): one stage's sign
#else
        x = (lane & h) ? o - x : x + o;
#endif
      }
      x = x * 0.125f;
      float amax = amax_step(0.0f, x);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
      uint16_t h = kQ4ScaleNaN;
      uint32_t nib = kQ4PoisonCodes;  // poisoned group: nibble 0 everywhere
      if (q4_finite(amax)) {
        h = q4_group_scale(amax);
        const float s = fp16_to_float(h);
        nib = s == 0.0f ? 8u : q4_nibble_of(x, s);  // s == 0: every code 0 (bytes 0x88)
      }
      const uint32_t odd = __shfl_xor_sync(0xFFFFFFFFu, nib, 1);
      if ((lane & 1) == 0) codes[16 * t + lane / 2] = uint8_t(nib | (odd << 4));
      if (lane == 0) memcpy(scales + 2 * t, &h, 2);
    }
  }
  // Attention's element access (partial_fma.cu): four nibbles are 16 bits (Raw4Access<2>),
  // converted as (2^23 + nibble) - (2^23 + 8), exact, times the group scale; a scale that is
  // not finite makes every element NaN (q4_decode_group_rotated's values).
  static constexpr int kAttnMinBlocks = 3;
  static constexpr int kAttnRawWords = 1;  // 16-byte words in flight per K row (more spilled on the H200)
  __device__ __forceinline__ static void conv4(const Raw4& r, float scale, float* out) {
    const float s = q4_finite(scale) ? scale : __uint_as_float(0x7FC00000u);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = (__uint_as_float(0x4B000000u | ((r.w[0] >> (4 * e)) & 15u)) - 8388616.0f) * s;
  }
  __device__ __forceinline__ static float elem_scale(const uint8_t* srow, int e0) { return q4_load_scale(srow, e0 / 32); }
#endif
};

}  // namespace kc
