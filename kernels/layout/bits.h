// Bit-level helpers shared by every format's row math (codecs/, attention/): a float's
// bits and back, and the NaN-propagating max of magnitudes that every row scale starts
// from (exact in any order, so a warp's reduction equals the twin's loop).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/layout/kc_hd.h"

namespace kc {

KC_HD uint32_t float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
KC_HD float bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

// NaN-propagating max of magnitudes (fmaxf would drop a NaN).
KC_HD float amax_step(float acc, float x) {
  const float a = x < 0 ? -x : x;
  if (acc != acc || a != a) return bits_float(0x7FC00000u);
  return a > acc ? a : acc;
}

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) over n bytes, from h: the
// one byte hash of the project (pack blobs' checksum, case and shard selection, the names of
// a model's seeded tensors, bench outputs). Host only.
inline uint64_t fnv1a(const void* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace kc
