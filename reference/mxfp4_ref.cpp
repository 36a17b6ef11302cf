#include "reference/mxfp4_ref.h"

#include <array>
#include <cfloat>
#include <cmath>
#include <limits>

namespace kc::ref {

namespace {
// E2M1 magnitudes by code 0..7, from the format definition (bias 1, one mantissa bit).
const std::array<double, 8>& grid() {
  static const std::array<double, 8> g = [] {
    std::array<double, 8> a{};
    for (int c = 0; c < 8; ++c) a[c] = e2m1_value(uint8_t(c));
    return a;
  }();
  return g;
}
}  // namespace

double e2m1_value(uint8_t nibble) {
  const int sign = (nibble >> 3) & 1;
  const int e = (nibble >> 1) & 3;
  const int m = nibble & 1;
  const double mag = e == 0 ? m * 0.5 : std::ldexp(1.0 + m / 2.0, e - 1);
  return sign ? -mag : mag;
}

uint8_t e2m1_from_double(double v) {
  if (std::isnan(v)) return 0;
  const uint8_t sign = std::signbit(v) ? 0x8 : 0x0;
  const double a = std::fabs(v);
  const auto& g = grid();
  if (a >= g[7]) return sign | 7;  // saturate (also keeps a - g[c] from rounding to a tie for huge a)
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const double dc = std::fabs(g[c] - a), db = std::fabs(g[best] - a);
    if (dc < db || (dc == db && c % 2 == 0 && best % 2 == 1)) best = c;
  }
  return sign | uint8_t(best);
}

double e8m0_value(uint8_t b) {
  if (b == 0xFF) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, int(b) - 127);
}

int mx_exponent_unclamped(double amax) {
  int e = 0;
  while (amax > 6.0 * std::ldexp(1.0, e)) ++e;
  while (amax <= 6.0 * std::ldexp(1.0, e - 1)) --e;
  return e;
}

double mxfp4_element_bound(double x, int e) {
  const double s = std::ldexp(1.0, e);
  const double y = std::fabs(x) / s;
  const double h = y <= 2 ? 0.25 : y <= 4 ? 0.5 : 1.0;
  return h * s;
}

Mxfp4RowRef mxfp4_row(const float* x, int d) {
  Mxfp4RowRef r;
  const int groups = d / 32;
  r.codes.assign(d / 2, 0);
  r.exponents.assign(groups, 0);
  r.poisoned.assign(groups, 0);
  r.values.assign(d, 0.0f);
  r.bound.assign(d, 0.0);
  for (int g = 0; g < groups; ++g) {
    const float* xg = x + 32 * g;
    double amax = 0;
    bool finite = true;
    for (int i = 0; i < 32; ++i) {
      if (!std::isfinite(xg[i])) finite = false;
      else amax = std::max(amax, std::fabs(double(xg[i])));
    }
    if (!finite) {
      r.poisoned[g] = 1;
      r.exponents[g] = 0xFF;
      for (int i = 0; i < 32; ++i) r.values[32 * g + i] = std::numeric_limits<float>::quiet_NaN();
      continue;  // codes stay 0x00
    }
    int e = amax == 0 ? -127 : mx_exponent_unclamped(amax);
    e = std::min(127, std::max(-127, e));
    r.exponents[g] = uint8_t(e + 127);
    const double s = e8m0_value(r.exponents[g]);
    for (int i = 0; i < 32; ++i) {
      const double xi = xg[i];
      const uint8_t c = e2m1_from_double(xi / s);  // exact quotient: s is a power of two
      const int k = 32 * g + i;
      r.codes[k / 2] |= uint8_t(k % 2 == 0 ? c : c << 4);
      const double exact = e2m1_value(c) * s;
      r.values[k] = std::fabs(exact) > double(FLT_MAX) ? std::copysign(FLT_MAX, exact) : float(exact);
      r.bound[k] = mxfp4_element_bound(xi, e);
    }
  }
  return r;
}

}  // namespace kc::ref
