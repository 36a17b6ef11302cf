// mxfp4 row helpers (OCP Microscaling v1.0 MXFP4, round-up scale variant), shared by
// the CUDA kernels (codecs/rows.cu) and their host twins (codecs/rows_twin.cpp), so
// device bytes equal host bytes by construction.
//
// Row encoding (one row = head_dim values of one position, layer, K/V and KV head;
// head_dim a positive multiple of 32). Group g holds elements 32g .. 32g+31.
//   amax_g = max |x_i| over the group, NaN-propagating (amax_step: fmaxf would drop a
//            NaN; an Inf stays Inf);
//   e_g    = the smallest integer e with amax_g <= 6 * 2^e, clamped to [-127, 127]
//            (E8M0's range), taken from amax's bits (never floorf(log2f())): with
//            amax = m * 2^E, 1 <= m < 2, e = E - 2 if m <= 1.5, else E - 1. Every
//            |x_i| / 2^e is then <= 6: no value clips. Largest e a finite input
//            reaches is 126 (FLT_MAX); every subnormal amax gives -127.
//   scale byte (scale plane, kv_scale, one byte per group) = e + 127 (E8M0, bias 127);
//   code_i = E2M1(x_i * 2^-e), round to nearest, ties to the even code:
//            0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4; the sign is
//            kept (a negative value that rounds to zero gives -0, code 0x8).
//            x * 2^-e is exact whenever |x * 2^-e| >= 2^-126; below that the result
//            rounds to 0 either way. |y| > 6 (unreachable from encode) saturates to 6.
// Code plane (kv_row, head_dim / 2 bytes): element 2i in the low nibble of byte i,
// element 2i+1 in the high nibble; nibble = sign (bit 3) | exponent (bits 2..1, bias
// 1) | mantissa (bit 0); magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
// Defined edge rules:
//   - amax = 0 (a group of zeros, either sign): scale byte 0x00 (2^-127), codes are
//     signed zeros (0x0 / 0x8 following each zero's sign); the group decodes to the
//     same signed zeros, bit for bit.
//   - amax NaN or Inf (any non-finite input in the group): the group is poisoned on
//     purpose: scale byte 0xFF (E8M0 NaN), all 16 code bytes 0x00, and every decoded
//     value of the group is NaN. Other groups of the row are unaffected.
// Decoding: value_i = E2M1(code_i) * 2^e in fp32. The product is exact (at most two
//   significant bits, 2^-128 <= |value| or value = 0) except above FLT_MAX, which only
//   e = 126 with the value 4 (nibble 6, x >= 3.5 * 2^126) or hand-made bytes reach
//   (4 * 2^126 = 2^128): it saturates to
//   +-FLT_MAX (closer to x than 2^128 is, so the roundtrip bound still holds). Scale
//   byte 0xFF gives NaN (canonical 0x7FC00000) for every element of the group.
// Bound (derived in reference/mxfp4_ref.h): |decode(encode(x)) - x| <= half the E2M1
// gap at |x| / 2^e, times 2^e: 0.25 * 2^e below 2, 0.5 * 2^e up to 4, 2^e up to 6.
#pragma once
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/codecs/codec.h"
#include "kernels/layout/bits.h"
#include "kernels/layout/cache.h"
#include "kernels/layout/kc_hd.h"
#include "kernels/layout/status.h"

namespace kc {

constexpr int kMxGroup = 32;               // values per E8M0 exponent
constexpr uint8_t kE8M0NaN = 0xFF;
constexpr uint8_t kE8M0Bias = 127;
constexpr float kE2M1Max = 6.0f;

KC_HD bool mx_finite(float v) { return (float_bits(v) & 0x7F800000u) != 0x7F800000u; }

// The group's biased E8M0 exponent from its amax (see the file comment).
KC_HD uint8_t mx_group_exponent(float amax) {
  if (!mx_finite(amax)) return kE8M0NaN;
  const uint32_t a = float_bits(amax) & 0x7FFFFFFFu;
  const int field = int(a >> 23);
  if (field == 0) return 0;  // zero or subnormal amax: e <= -127, clamped to -127
  const uint32_t mant = a & 0x7FFFFFu;
#ifdef KC_PLANT_MX_FLOOR_SCALE
  int e = field - 127 - 2;  // planted bug (test builds only): the spec's floor scale, clips
  (void)mant;
#else
  int e = field - 127 - 2 + (mant > 0x400000u ? 1 : 0);  // m > 1.5 needs the next binade
#endif
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return uint8_t(e + kE8M0Bias);
}

// 2^-e as an fp32 multiplier for a finite exponent byte: e in [-127, 126] gives
// 2^-e in [2^-126, 2^127], a normal float; e = 127 gives the subnormal 2^-127.
KC_HD float mx_inv_scale(uint8_t ebyte) {
  const int neg_e = int(kE8M0Bias) - int(ebyte);
  return neg_e >= -126 ? bits_float(uint32_t(neg_e + 127) << 23) : bits_float(0x00400000u);
}

// 2^e as an fp32 (0xFF: NaN): e = -127 is the subnormal 2^-127.
KC_HD float mx_scale_value(uint8_t ebyte) {
  if (ebyte == kE8M0NaN) return bits_float(0x7FC00000u);
  return ebyte == 0 ? bits_float(0x00400000u) : bits_float(uint32_t(ebyte) << 23);
}

// E2M1 round to nearest even of y (already divided by the scale). The ladder spells
// every tie: `<=` where the tie goes down (to the even code below), `<` where it goes
// up. NaN gives 0 (unreachable: a NaN poisons its group before this is called).
KC_HD uint8_t e2m1_encode(float y) {
  const uint8_t sign = uint8_t((float_bits(y) >> 28) & 0x8u);
  const float a = y < 0 ? -y : y;
  if (a != a) return 0;
  uint8_t m;
#ifdef KC_PLANT_E2M1_TIES_AWAY
  // planted bug (test builds only): ties rounded away from zero
  if (a < 0.25f) m = 0;
  else if (a < 0.75f) m = 1;
  else if (a < 1.25f) m = 2;
  else if (a < 1.75f) m = 3;
  else if (a < 2.5f) m = 4;
  else if (a < 3.5f) m = 5;
  else if (a < 5.0f) m = 6;
  else m = 7;
#else
  if (a <= 0.25f) m = 0;       // tie 0.25 -> 0 (code 0)
  else if (a < 0.75f) m = 1;   // tie 0.75 -> 1 (code 2)
  else if (a <= 1.25f) m = 2;  // tie 1.25 -> 1 (code 2)
  else if (a < 1.75f) m = 3;   // tie 1.75 -> 2 (code 4)
  else if (a <= 2.5f) m = 4;   // tie 2.5 -> 2 (code 4)
  else if (a < 3.5f) m = 5;    // tie 3.5 -> 4 (code 6)
  else if (a <= 5.0f) m = 6;   // tie 5 -> 4 (code 6)
  else m = 7;                  // (5, 6], and anything larger saturates to 6
#endif
  return sign | m;
}

// Exact value of an E2M1 nibble (bit 3 sign, bits 2..1 exponent bias 1, bit 0 mantissa).
KC_HD float e2m1_decode(uint8_t nibble) {
  const uint32_t s = uint32_t(nibble & 0x8u) << 28;
  const uint32_t e = (nibble >> 1) & 3u;
  const uint32_t m = nibble & 1u;
  if (e == 0) return bits_float(s | (m ? 0x3F000000u : 0u));  // 0 or 0.5
  return bits_float(s | ((e + 126u) << 23) | (m << 22));     // (1 + m/2) * 2^(e-1)
}

// One element's code under its group's exponent byte (poisoned group: 0).
KC_HD uint8_t mx_code(float x, uint8_t ebyte) {
  if (ebyte == kE8M0NaN) return 0;
  return e2m1_encode(x * mx_inv_scale(ebyte));
}

// One element's decoded value: exact product, saturated to +-FLT_MAX; NaN canonical.
KC_HD float mx_value(uint8_t nibble, uint8_t ebyte) {
  if (ebyte == kE8M0NaN) return bits_float(0x7FC00000u);
  const float v = e2m1_decode(nibble) * mx_scale_value(ebyte);
  const uint32_t b = float_bits(v);
  if ((b & 0x7FFFFFFFu) == 0x7F800000u) return bits_float((b & 0x80000000u) | 0x7F7FFFFFu);
  return v;
}

// Attention's reading of an element (the fma partial's conv4, codec below): half the
// group's scale, 2^(e-1) (exact: 2^-128 at e = -127 is an fp32 subnormal; NaN for 0xFF),
// times 2 |E2M1| (an integer 0..12, exact in fp32), with the nibble's sign: the exact
// E2M1 * 2^e of mx_value; an overflow (only e = 126) saturates to +-FLT_MAX as mx_value
// does. A NaN group gives NaNs (not necessarily the canonical one). Equal to mx_value for
// all 16 x 256 (nibble, exponent byte) pairs (tests/kernels/codecs/mxfp4_test.cpp).
KC_HD float mx_half_scale(uint8_t ebyte) {
  if (ebyte == kE8M0NaN) return bits_float(0x7FC00000u);
  return ebyte >= 2 ? bits_float(uint32_t(ebyte - 1) << 23) : bits_float(0x00200000u << ebyte);
}
KC_HD float mx_attn_value(uint32_t nibble, float half_scale) {
  const uint32_t mag2 = (0xC8643210u >> (4 * (nibble & 7u))) & 15u;  // 2 |E2M1|: 0 1 2 3 4 6 8 12
  float v = (bits_float(0x4B000000u | mag2) - 8388608.0f) * half_scale;
  v = (float_bits(v) & 0x7FFFFFFFu) == 0x7F800000u ? FLT_MAX : v;
  return bits_float(float_bits(v) | ((nibble & 8u) << 28));
}

// A whole group (the host twin's unit): 32 values -> 16 code bytes and one exponent.
KC_HD void mx_encode_group(const float* x, uint8_t* codes, uint8_t* ebyte) {
  float amax = 0.0f;
  for (int i = 0; i < kMxGroup; ++i) amax = amax_step(amax, x[i]);
  const uint8_t e = mx_group_exponent(amax);
  for (int i = 0; i < kMxGroup / 2; ++i)
    codes[i] = uint8_t(mx_code(x[2 * i], e) | (mx_code(x[2 * i + 1], e) << 4));
  *ebyte = e;
}

KC_HD void mx_decode_group(const uint8_t* codes, uint8_t ebyte, float* out) {
  for (int i = 0; i < kMxGroup / 2; ++i) {
    out[2 * i] = mx_value(uint8_t(codes[i] & 0xFu), ebyte);
    out[2 * i + 1] = mx_value(uint8_t(codes[i] >> 4), ebyte);
  }
}

// The mxfp4 row codec (codec.h). check(): the cache format is mxfp4, head_dim is a
// positive multiple of 32, and every row addresses inside its lane (validate_rows).
template <>
struct Codec<Format::mxfp4> : WarpPerRowCodec, OriginalSpace, Raw4Access<2> {
  static constexpr const char* kName = "mxfp4";
  static constexpr Format kFormat = Format::mxfp4;
  static constexpr bool kRowCodec = true;
  static constexpr bool kScales = true;
  // As a KV-cache format mxfp4 is not rotated: the rope store encodes the RoPE-rotated
  // fp32 K row (the values bf16 and fp8 store) and the plain V row with encode_row's rule,
  // and attention reads the decoded values (mx_value, exact) in original space
  // (OriginalSpace: kRotated false).
  static constexpr bool kAttnMma = false;
  static Status check(const Cache& c, const RowRef* rows, int n, const char* op) {
    const std::string who = std::string(op) + ": ";
    if (c.lay.format != Format::mxfp4)
      return Status::Error(who + "cache format is " + format_name(c.lay.format) + ", expected mxfp4");
    if (c.lay.head_dim <= 0 || c.lay.head_dim % kMxGroup != 0)
      return Status::Error(who + "head_dim " + std::to_string(c.lay.head_dim) +
                           " is not a positive multiple of 32 (one E8M0 exponent per 32 values)");
    if (n < 0) return Status::Error(who + "negative row count");
    if (n > 0 && (rows == nullptr)) return Status::Error(who + "null row list");
    const Status st = validate_rows(c, rows, n);
    if (!st.ok) return Status::Error(who + st.message);
    return Status::Ok();
  }
  static void encode_row(const KvView& v, const float* x, const RowRef& r) {
    uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    for (int g = 0; g < v.lay.head_dim / kMxGroup; ++g)
      mx_encode_group(x + g * kMxGroup, codes + g * (kMxGroup / 2), exps + g);
  }
  static void decode_row(const KvView& v, const RowRef& r, float* out) {
    const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    const uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    for (int g = 0; g < v.lay.head_dim / kMxGroup; ++g)
      mx_decode_group(codes + g * (kMxGroup / 2), exps[g], out + g * kMxGroup);
  }
  // A row as attention reads it, the device's conv4 values (mx_value's, NaN payloads aside).
  static void attn_row(const KvView& v, const RowRef& r, float* out) {
    const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    const uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    for (int g = 0; g < v.lay.head_dim / kMxGroup; ++g) {
      const float half = mx_half_scale(exps[g]);
      for (int i = 0; i < kMxGroup / 2; ++i) {
        const uint8_t b = codes[g * (kMxGroup / 2) + i];
        out[g * kMxGroup + 2 * i] = mx_attn_value(b & 0xFu, half);
        out[g * kMxGroup + 2 * i + 1] = mx_attn_value(b >> 4, half);
      }
    }
  }
  // One warp per row. Each lane owns one code byte (an element pair) per step; the 16 lanes
  // of a half-warp hold one group of 32, whose amax is reduced with amax_step over xor
  // distances 8, 4, 2, 1 (exact and order-free: equal to the twin's loop bit for bit).
  // Lane 16k writes the group's exponent byte.
#if defined(__CUDACC__)
  __device__ static void encode_thread(const KvView* views, const float* x, const RowRef* rows, int n, int, int64_t t) {
    WarpRow w;
    if (!warp_row(views, rows, n, t, &w)) return;
    const int pairs = w.v.lay.head_dim / 2;  // a multiple of 16: a group never straddles two half-warps
    const float* xr = x + size_t(w.row) * w.v.lay.head_dim;
    uint8_t* codes = w.codes();
    uint8_t* exps = w.scales();
    for (int base = 0; base < pairs; base += 32) {
      const int j = base + w.lane;
      const bool active = j < pairs;
      const float x0 = active ? xr[2 * j] : 0.0f;
      const float x1 = active ? xr[2 * j + 1] : 0.0f;
      float amax = amax_step(amax_step(0.0f, x0), x1);
      for (int o = 8; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
      if (!active) continue;  // an idle half-warp reduced only its own zeros
      const uint8_t e = mx_group_exponent(amax);
      codes[j] = uint8_t(mx_code(x0, e) | (mx_code(x1, e) << 4));
      if ((j & 15) == 0) exps[j >> 4] = e;
    }
  }
  __device__ static void decode_thread(const KvView* views, const RowRef* rows, int n, int, float* out, int64_t t) {
    WarpRow w;
    if (!warp_row(views, rows, n, t, &w)) return;
    const int d = w.v.lay.head_dim;
    const uint8_t* codes = w.codes();
    const uint8_t* exps = w.scales();
    float* o = out + size_t(w.row) * d;
    for (int j = w.lane; j < d / 2; j += 32) {
      const uint8_t b = codes[j];
      const uint8_t e = exps[j >> 4];
      o[2 * j] = mx_value(uint8_t(b & 0xFu), e);
      o[2 * j + 1] = mx_value(uint8_t(b >> 4), e);
    }
  }
  // Rope store: the warp's row, element lane + 32 t in y[t], so group t is the whole warp
  // at step t: amax over the warp (amax_step, exact and order-free), the exponent and each
  // lane's code as mx_encode_group computes them; even lanes write the byte of their pair
  // (own code low, the odd neighbour's high), lane 0 the exponent: encode_row's bytes.
  __device__ static void store_warp(const KvView& v, const RowRef& r, const float* y, int nt, int lane) {
    uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    for (int t = 0; t < nt; ++t) {
      float amax = amax_step(0.0f, y[t]);
      for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
      const uint8_t e = mx_group_exponent(amax);
      const uint32_t code = mx_code(y[t], e);
      const uint32_t odd = __shfl_xor_sync(0xFFFFFFFFu, code, 1);
      if ((lane & 1) == 0) codes[16 * t + lane / 2] = uint8_t(code | (odd << 4));
      if (lane == 0) exps[t] = e;
    }
  }
  // Attention's element access (partial_fma.cu; the tensor-core partial does not take
  // mxfp4): four nibbles are 16 bits (Raw4Access<2>); elem_scale is mx_half_scale of the
  // group's exponent byte and conv4 mx_attn_value of each nibble (mx_value's values).
  static constexpr int kAttnMinBlocks = 3;
  static constexpr int kAttnRawWords = 1;
  __device__ __forceinline__ static void conv4(const Raw4& r, float half_scale, float* out) {
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = mx_attn_value((r.w[0] >> (4 * e)) & 15u, half_scale);
  }
  __device__ __forceinline__ static float elem_scale(const uint8_t* srow, int e0) {
    return mx_half_scale(__ldg(srow + e0 / 32));
  }
#endif
};

}  // namespace kc
