// bf16 cache rows: the conversion and the Codec<Format::bf16> traits (codec.h). bf16 has
// no row codec behind Backend::encode_rows (kRowCodec false: a bf16 cache is written by
// the rope store only); its traits give the rope store, attention and their twins the
// same members as every other format.
//
// Row: head_dim bf16 values (2 bytes each, little endian), no scale plane. Store: bf16 RNE
// of each fp32 value (NaN -> 0x7FC0 with its sign, Inf stays Inf); read: exact.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/codecs/codec.h"
#include "kernels/layout/bits.h"
#include "kernels/layout/kc_hd.h"

namespace kc {

// fp32 -> bf16, round to nearest even; NaN -> 0x7FC0 (sign kept), Inf stays Inf.
KC_HD uint16_t bf16_from_float(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7FC0u);
#ifdef KC_PLANT_BF16_TRUNCATE
  return uint16_t(u >> 16);  // planted bug (test builds only): truncates instead of RNE
#else
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
#endif
}
KC_HD float bf16_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

template <>
struct Codec<Format::bf16> : OriginalSpace, Raw4Access<8> {
  static constexpr const char* kName = "bf16";
  static constexpr Format kFormat = Format::bf16;
  static constexpr bool kRowCodec = false;
  static constexpr bool kScales = false;
  static constexpr bool kAttnMma = true;
  static void encode_row(const KvView& v, const float* x, const RowRef& r) {
    uint8_t* row = kv_row(v, r.layer, r.kv, r.head, r.pos);
    for (int j = 0; j < v.lay.head_dim; ++j) {
      const uint16_t b = bf16_from_float(x[j]);
      memcpy(row + 2 * j, &b, 2);
    }
  }
  static void decode_row(const KvView& v, const RowRef& r, float* out) {
    const uint8_t* row = kv_row(v, r.layer, r.kv, r.head, r.pos);
    for (int j = 0; j < v.lay.head_dim; ++j) {
      uint16_t b;
      memcpy(&b, row + 2 * j, 2);
      out[j] = bf16_to_float(b);
    }
  }
  static void attn_row(const KvView& v, const RowRef& r, float* out) { decode_row(v, r, out); }
#if defined(__CUDACC__)
  // Rope store: the warp's row, element lane + 32 t in y[t].
  __device__ static void store_warp(const KvView& v, const RowRef& r, const float* y, int nt, int lane) {
    uint8_t* row = kv_row(v, r.layer, r.kv, r.head, r.pos);
    for (int t = 0; t < nt; ++t) {
      const uint16_t b = bf16_from_float(y[t]);
      memcpy(row + 2 * (lane + 32 * t), &b, 2);
    }
  }
  // Attention's element access (partial_fma.cu): four elements are 8 bytes (Raw4Access<8>),
  // converted exactly (a shift); no scale.
  static constexpr int kAttnMinBlocks = 4;
  static constexpr int kAttnRawWords = 4;
  __device__ __forceinline__ static void conv4(const Raw4& r, float, float* out) {
    out[0] = __uint_as_float(r.w[0] << 16), out[1] = __uint_as_float(r.w[0] & 0xFFFF0000u);
    out[2] = __uint_as_float(r.w[1] << 16), out[3] = __uint_as_float(r.w[1] & 0xFFFF0000u);
  }
  __device__ __forceinline__ static float elem_scale(const uint8_t*, int) { return 1.0f; }
#endif
};

}  // namespace kc
