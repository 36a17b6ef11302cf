// Bit-level helpers shared by every format's row math (codecs/, attention/): a float's
// bits and back, and the NaN-propagating max of magnitudes that every row scale starts
// from (exact in any order, so a warp's reduction equals the twin's loop).
#pragma once
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

}  // namespace kc
