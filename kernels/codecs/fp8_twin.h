// Host twins of the fp8 row kernels: the same per-row helpers, run row by row.
#pragma once
#include "kernels/layout/cache.h"
#include "kernels/codecs/fp8.h"

namespace kc {

inline void fp8_encode_row(const KvView& v, const float* x, const RowRef& r) {
  const int d = v.lay.head_dim;
  float amax = 0.0f;
  for (int i = 0; i < d; ++i) amax = amax_step(amax, x[i]);
  const float scale = fp8_row_scale(amax);
  uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
  for (int i = 0; i < d; ++i) codes[i] = fp8_code(x[i], scale);
  memcpy(kv_scale(v, r.layer, r.kv, r.head, r.pos), &scale, sizeof(float));
}

inline void fp8_decode_row(const KvView& v, const RowRef& r, float* out) {
  const int d = v.lay.head_dim;
  float scale;
  memcpy(&scale, kv_scale(v, r.layer, r.kv, r.head, r.pos), sizeof(float));
  const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
  for (int i = 0; i < d; ++i) out[i] = fp8_value(codes[i], scale);
}

}  // namespace kc
