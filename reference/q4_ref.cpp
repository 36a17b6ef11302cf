#include "reference/q4_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kc::ref {
namespace {

constexpr double kU = 5.9604644775390625e-08;  // fp32 unit roundoff 2^-24
constexpr double kU64 = 1.1102230246251565e-16;  // float64 unit roundoff 2^-53
// Every bound below is multiplied by this, for the rounding of the bound's own float64
// arithmetic (a handful of operations per term); it is not a safety factor.
constexpr double kBoundSlack = 1.0 + 9.5367431640625e-07;  // 1 + 2^-20

double nan() { return std::numeric_limits<double>::quiet_NaN(); }

// A double rounded once to fp32, with IEEE overflow (no UB conversion of out-of-range
// values): |v| >= FLT_MAX + half an ulp (2^128 - 2^103) rounds to Inf.
float to_f32(double v) {
  if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
  const double lim = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  if (v >= lim) return std::numeric_limits<float>::infinity();
  if (v <= -lim) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(v);
}

// Sylvester recursion on n = 2^k elements, fp32 adds emulated: H_n on both halves,
// then (a + b, a - b) across them. The innermost level pairs neighbours, the outermost
// pairs i with i + n/2: the same operations on the same operands as the documented
// stages h = 1, 2, 4, 8, 16.
void fwht_rec(float* v, int n) {
  if (n == 1) return;
  const int h = n / 2;
  fwht_rec(v, h);
  fwht_rec(v + h, h);
  for (int i = 0; i < h; ++i) {
    const double a = v[i], b = v[i + h];
    v[i] = to_f32(a + b);
    v[i + h] = to_f32(a - b);
  }
}

// The same recursion on exact values (float64) with the first-order-free error bound of
// each node. A node c = fl(a' +- b') of computed children a', b' with |a' - a| <= ea,
// |b' - b| <= eb: |c - (a +- b)| <= u |a' +- b'| + ea + eb <= u |a +- b| + (1 + u)(ea + eb)
// (fp32 addition is exact when the result is subnormal, so no underflow term). The exact
// node values are float64 sums of <= 32 floats; their own rounding is covered by
// kBoundSlack at the end.
void fwht_err_rec(double* v, double* e, int n) {
  if (n == 1) return;
  const int h = n / 2;
  fwht_err_rec(v, e, h);
  fwht_err_rec(v + h, e + h, h);
  for (int i = 0; i < h; ++i) {
    const double a = v[i], b = v[i + h], ea = e[i], eb = e[i + h];
    v[i] = a + b;
    v[i + h] = a - b;
    e[i] = kU * std::fabs(a + b) + (1 + kU) * (ea + eb);
    e[i + h] = kU * std::fabs(a - b) + (1 + kU) * (ea + eb);
  }
}

// Round to the nearest integer, ties to even, from the definition.
double rne_int(double t) {
  const double f = std::floor(t);
  const double frac = t - f;  // exact for |t| < 2^52
  if (frac > 0.5) return f + 1;
  if (frac < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1;
}

}  // namespace

int h32(int i, int j) { return (__builtin_popcount(unsigned(i & j)) & 1) ? -1 : 1; }

void h32_apply(const double* x, double* y) {
  for (int i = 0; i < 32; ++i) {
    double s = 0;
    for (int j = 0; j < 32; ++j) s += h32(i, j) * x[j];
    y[i] = s;
  }
}

void h32_fp32(const float* x, double pow2, float* y) {
  std::copy(x, x + 32, y);
  fwht_rec(y, 32);
  for (int i = 0; i < 32; ++i) y[i] = to_f32(double(y[i]) * pow2);  // exact product, one rounding
}

// |computed - pow2 (H x)_i| <= pow2 * tree bound + 2^-150: the power-of-two scaling is
// exact except when its result is an fp32 subnormal, where it rounds by at most half
// the smallest subnormal, 2^-150.
void h32_fp32_bound(const float* x, double pow2, double* err) {
  double v[32], e[32];
  for (int i = 0; i < 32; ++i) {
    v[i] = x[i];
    e[i] = 0;
  }
  fwht_err_rec(v, e, 32);
  for (int i = 0; i < 32; ++i) err[i] = (pow2 * e[i] + std::ldexp(1.0, -150)) * kBoundSlack;
}

uint16_t fp16_from_double(double v) {
  if (std::isnan(v)) return 0x7E00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7C00;  // past the midpoint of 65504 and 2^16
  if (a < std::ldexp(1.0, -14)) {
    // Subnormals are the integers k * 2^-24, k = 0..1023 (k = 1024 is the smallest normal).
    return sign | uint16_t(rne_int(a * std::ldexp(1.0, 24)));
  }
  int e;
  const double m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  // a = (1 + f/1024) 2^(e-1): f = RNE((2m - 1) * 1024), a carry of 1024 moves the exponent.
  double f = rne_int((2 * m - 1) * 1024.0);
  int ex = e - 1;
  if (f == 1024) {
    f = 0;
    ++ex;
  }
  return sign | uint16_t(((ex + 15) << 10) | int(f));
}

double fp16_value(uint16_t h) {
  const int e = (h >> 10) & 31;
  const int f = h & 1023;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 31) return f ? nan() : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(double(f), -24);
  return sign * std::ldexp(1.0 + f / 1024.0, e - 15);
}

// One group. Derivation of the roundtrip bound, with y = 2^-3 H x the exact rotation,
// y' the fp32 rotation, s the group scale, z_i = code_i * s, and the decoded row
// 2^-2 H z computed exactly (kernels/codecs/q4.h: every partial sum is an integer
// multiple of s of magnitude <= 224 s):
//   decode_j - x_j = 2^-2 sum_i H(j,i) (z_i - y_i)          (2^-2 H 2^-3 H = I)
//   |decode_j - x_j| <= 2^-2 sum_i (q_i + eps_i), where
//   eps_i = |y'_i - y_i|, bounded by h32_fp32_bound (the butterflies' rounding);
//   q_i   = |z_i - y'_i|, the quantisation of the fp32 value: with t = fl(y'/s) =
//           (y'/s)(1 + d), |d| <= u: if |t| <= 7.5 the RNE code is within 1/2 of t, so
//           q_i <= s/2 + u |y'_i|; otherwise the code clips to +-7 and q_i = |y'_i| - 7s
//           (>= s/2 - u|y'_i|); q_i = max(s/2 + u|y'_i|, |y'_i| - 7s). With s = 0 (an
//           all-zero group, or amax/7 below fp16's half-subnormal) the code is 0 and q_i = |y'_i|.
// The sum over i is the worst case of 32 errors lining up with row j of H; for random
// rows the error is a random walk of the 32 terms, so the receipt's worst ratio sits well
// below 1, but a decoder without the inverse rotation, with a wrong sign pattern or with
// a neighbour's scale errs by O(|x|) and fails it. A truncating encoder (q_i up to s)
// breaks it on rows whose errors align; codes==reference catches any encoder change.
Q4GroupRef q4_group(const float* x) {
  Q4GroupRef g;
  h32_fp32(x, 0.125, g.rotated.data());
  bool finite = true;
  double amax = 0;
  for (float y : g.rotated) {
    if (!std::isfinite(y)) finite = false;
    else amax = std::max(amax, std::fabs(double(y)));
  }
  if (!finite) {
    g.poisoned = true;
    g.scale_bits = 0x7E00;
    g.scale = nan();
    g.codes.fill(0x00);
    g.deq.fill(nan());
    g.values.fill(std::numeric_limits<float>::quiet_NaN());
    g.bound.fill(0);
    return g;
  }
  // scale = fp16 RNE of min(fl32(amax / 7), 65504); the double quotient rounded once to
  // float is the fp32 quotient (53 >= 2 * 24 + 2).
  double q = to_f32(amax / 7.0);
  if (q > 65504.0) q = 65504.0;
  g.scale_bits = fp16_from_double(q);
  const double s = fp16_value(g.scale_bits);
  g.scale = s;
  int code[32];
  for (int i = 0; i < 32; ++i) {
    if (s == 0) {
      code[i] = 0;
      continue;
    }
    double t = to_f32(double(g.rotated[i]) / s);  // the fp32 quotient
    t = std::min(7.0, std::max(-7.0, t));
    code[i] = int(rne_int(t));
  }
  for (int i = 0; i < 16; ++i) g.codes[i] = uint8_t((code[2 * i] + 8) | ((code[2 * i + 1] + 8) << 4));
  for (int i = 0; i < 32; ++i) g.deq[i] = code[i] * s;
  double hz[32];
  h32_apply(g.deq.data(), hz);  // integers times s, |.| <= 224 s: exact in float64
  for (int j = 0; j < 32; ++j) g.values[j] = to_f32(0.25 * hz[j]);

  double eps[32];
  h32_fp32_bound(x, 0.125, eps);
  double sum = 0;
  for (int i = 0; i < 32; ++i) {
    const double ay = std::fabs(double(g.rotated[i]));
    const double qi = s > 0 ? std::max(s / 2 + kU * ay, ay - 7 * s) : ay;
    if (s > 0 ? ay - 7 * s > s / 2 : ay > 0) g.clipped = true;
    sum += qi + eps[i];
  }
  g.bound.fill(0.25 * sum * kBoundSlack);
  return g;
}

std::vector<Q4GroupRef> q4_row(const float* x, int d) {
  std::vector<Q4GroupRef> r;
  for (int g = 0; g < d / 32; ++g) r.push_back(q4_group(x + 32 * g));
  return r;
}

std::array<double, 32> q4_decode_bytes(const uint8_t* codes16, uint16_t scale_bits) {
  std::array<double, 32> out;
  const double s = fp16_value(scale_bits);
  if (!std::isfinite(s)) {
    out.fill(nan());
    return out;
  }
  double z[32];
  for (int i = 0; i < 32; ++i) {
    const int nib = (i & 1) ? codes16[i / 2] >> 4 : codes16[i / 2] & 15;
    z[i] = (nib - 8) * s;
  }
  h32_apply(z, out.data());  // integers times s, |.| <= 256 s: exact
  for (double& v : out) v *= 0.25;
  return out;
}

// q.k through the rotation. Let r = 2^-2 H q (exact, per group) and r' the fp32 query
// the kernel helpers produce; k = 2^-2 H z the key decoded to original space (exact).
// Since H is symmetric, r . z = 2^-2 q^T H z = q . k exactly, so
//   got - want = (r' - r) . z + (float64 rounding of the two dot products), and
//   |got - want| <= sum_i |z_i| e_i + gamma53_d (sum_i |r'_i z_i| + sum_j |q_j k_j|),
// e_i the butterfly bound of the query's rotation (h32_fp32_bound with pow2 = 2^-2),
// gamma53_d = d u64 / (1 - d u64) for a float64 sum of d terms (the products are exact:
// 24 + 15 and 24 + 20 significant bits). A query left unrotated, rotated with the wrong
// scale or sign pattern, or a key whose rotation is skipped on one side, errs by O(|q||k|).
Q4DotRef q4_dot(const float* q, const float* q_rot, const float* z, int d) {
  Q4DotRef r;
  double sum_rz = 0, sum_qk = 0, rot_term = 0;
  for (int g = 0; g < d; g += 32) {
    double zd[32], k[32], e[32];
    for (int i = 0; i < 32; ++i) zd[i] = z[g + i];
    h32_apply(zd, k);
    h32_fp32_bound(q + g, 0.25, e);
    for (int i = 0; i < 32; ++i) {
      k[i] *= 0.25;
      r.got += double(q_rot[g + i]) * zd[i];
      r.want += double(q[g + i]) * k[i];
      sum_rz += std::fabs(double(q_rot[g + i]) * zd[i]);
      sum_qk += std::fabs(double(q[g + i]) * k[i]);
      rot_term += std::fabs(zd[i]) * e[i];
    }
  }
  const double gamma53 = d * kU64 / (1 - d * kU64);
  r.bound = (rot_term + gamma53 * (sum_rz + sum_qk)) * kBoundSlack;
  return r;
}

}  // namespace kc::ref
