#include "reference/bf16_ref.h"

#include <cmath>

namespace kc::ref {

double bf16_value(uint16_t b) {
  const int sign = b >> 15, exp = (b >> 7) & 0xFF, frac = b & 0x7F;
  double mag;
  if (exp == 0xFF) mag = frac ? std::nan("") : INFINITY;
  else if (exp == 0) mag = std::ldexp(double(frac), -126 - 7);  // subnormal: 0.frac * 2^-126
  else mag = std::ldexp(double(128 + frac), exp - 127 - 7);     // 1.frac * 2^(exp - 127)
  return sign ? -mag : mag;
}

uint16_t bf16_from_double(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | 0x7FC0;
  const double a = std::fabs(v);
  // The largest finite pattern c with value(c) <= a (finite magnitudes rise with the
  // pattern from 0x0000 to 0x7F7F).
  uint16_t lo = 0, hi = 0x7F7F;
  if (a >= bf16_value(hi)) {
    lo = hi;
  } else {
    while (hi - lo > 1) {  // value(lo) <= a < value(hi)
      const uint16_t mid = uint16_t((lo + hi) / 2);
      (bf16_value(mid) <= a ? lo : hi) = mid;
    }
  }
  if (bf16_value(lo) == a) return sign | lo;
  // Between lo and lo + 1; past the largest finite value the upper neighbour is 0x7F80,
  // weighed as 2^128 (IEEE 754 rounds to infinity from 2^128 - 2^119 on). The distances
  // are exact: both neighbours and a lie within one ulp of a's binade.
  const uint16_t up = uint16_t(lo + 1);
  const double vup = up == 0x7F80 ? std::ldexp(1.0, 128) : bf16_value(up);
  const double dlo = a - bf16_value(lo), dup = vup - a;
  if (dlo < dup) return sign | lo;
  if (dup < dlo) return sign | up;
  return sign | ((lo & 1) ? up : lo);
}

}  // namespace kc::ref
