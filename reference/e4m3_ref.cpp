#include "reference/e4m3_ref.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace kc::ref {

double e4m3_value(uint8_t code) {
  const int sign = code >> 7;
  const int e = (code >> 3) & 15;
  const int m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  // E4M3: bias 7; subnormals (e = 0) are m/8 * 2^(1-7).
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -mag : mag;
}

namespace {
// The 127 non-negative finite codes 0x00..0x7E in increasing value order.
const std::array<double, 127>& magnitudes() {
  static const std::array<double, 127> t = [] {
    std::array<double, 127> a{};
    for (int c = 0; c < 127; ++c) a[c] = e4m3_value(uint8_t(c));
    return a;
  }();
  return t;
}
}  // namespace

uint8_t e4m3_from_double(double v) {
  if (std::isnan(v)) return 0x7F;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0x00;
  const double a = std::fabs(v);
  const auto& t = magnitudes();
  if (a >= t[126]) return sign | 126;
  // First code whose value is >= a; the answer is it or the one below.
  const int hi = int(std::lower_bound(t.begin(), t.end(), a) - t.begin());
  if (t[hi] == a) return sign | uint8_t(hi);
  const int lo = hi - 1;
  const double dlo = a - t[lo], dhi = t[hi] - a;
  int c;
  if (dlo < dhi) c = lo;
  else if (dhi < dlo) c = hi;
  else c = (lo % 2 == 0) ? lo : hi;  // tie: the even code (mantissa lsb 0)
  return sign | uint8_t(c);
}

double fp8_element_bound(double x, double s, double value) {
  const double u = std::ldexp(1.0, -24);
  const double ax = std::fabs(x);
  const double y = s > 0 ? ax / s : std::numeric_limits<double>::infinity();
  double b = 0;
  if (s > 0) b += std::max(std::ldexp(y, -4), std::ldexp(1.0, -10)) * s;
  b += u * ax;
  b += std::max(0.0, ax - 448.0 * s);
  b += u * std::fabs(value) + std::ldexp(1.0, -150);
  return b * (1.0 + std::ldexp(1.0, -20));
}

Fp8RowRef fp8_row(const float* x, int d) {
  Fp8RowRef r;
  r.codes.resize(d);
  r.values.resize(d);
  r.bound.resize(d);
  double amax = 0;
  bool finite = true;
  for (int i = 0; i < d; ++i) {
    if (!std::isfinite(x[i])) finite = false;
    else amax = std::max(amax, std::fabs(double(x[i])));
  }
  if (!finite) {
    r.poisoned = true;
    r.scale = std::numeric_limits<float>::quiet_NaN();
    std::fill(r.codes.begin(), r.codes.end(), uint8_t(0x7F));
    std::fill(r.values.begin(), r.values.end(), std::numeric_limits<float>::quiet_NaN());
    std::fill(r.bound.begin(), r.bound.end(), 0.0);
    return r;
  }
  r.scale = float(amax / 448.0);
  const double s = r.scale;
  for (int i = 0; i < d; ++i) {
    if (s == 0) {
      r.codes[i] = 0;
    } else {
      const float y = float(double(x[i]) / s);
      r.codes[i] = e4m3_from_double(y);
    }
    r.values[i] = float(e4m3_value(r.codes[i]) * s);
    r.bound[i] = fp8_element_bound(x[i], s, r.values[i]);
  }
  return r;
}

}  // namespace kc::ref
