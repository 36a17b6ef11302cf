#include "reference/engine_ref.h"

#include <algorithm>
#include <cmath>

#include "reference/bf16_ref.h"
#include "reference/bounds.h"

namespace kc::ref {
namespace {

constexpr double kU64 = 1.1102230246251565e-16;  // 2^-53
const double kTiny = std::ldexp(1.0, -140);
constexpr double kSecondOrder = 1.0 + 9.5367431640625e-07;  // 1 + 2^-20

double rms_rel(int dim) { return 0.5 * bound::gamma(dot_depth(dim) + 2) + bound::gamma(4); }

}  // namespace

int dot_depth(int64_t k) { return int((k + 7) / 8) + 3; }

int product_depth(int64_t k) {
  // 128 partials over the octets of the row: partial p holds octets p, p + 128, ..., so at
  // most ceil(k / 1024) octets of 8 (and never more than k elements); then 7 tree levels.
  const int64_t octets_per_partial = (k + 1023) / 1024;
  return int(std::min<int64_t>(k, 8 * octets_per_partial)) + 7;
}

EngineRef matmul_ref(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n) {
  EngineRef r;
  r.value.resize(size_t(n) * rows);
  r.bound.resize(size_t(n) * rows);
  const double g = bound::gamma(product_depth(cols)) + bound::gamma(double(cols), kU64);
  std::vector<double> wd(size_t(rows * cols));
  for (size_t i = 0; i < wd.size(); ++i) wd[i] = bf16_value(W[i]);
  for (int i = 0; i < n; ++i)
    for (int64_t o = 0; o < rows; ++o) {
      double s = 0, a = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const double p = wd[size_t(o * cols + k)] * double(x[int64_t(i) * cols + k]);
        s += p;
        a += std::fabs(p);
      }
      r.value[size_t(i) * rows + o] = s;
      r.bound[size_t(i) * rows + o] = g * a * kSecondOrder + kTiny * double(product_depth(cols));
    }
  return r;
}

EngineRef rms_norm_ref(const float* x, const float* w, int n, int dim, double eps) {
  EngineRef r;
  r.value.resize(size_t(n) * dim);
  r.bound.resize(size_t(n) * dim);
  const double rel = rms_rel(dim) + bound::gamma(double(dim), kU64);
  for (int i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * dim;
    double ss = 0;
    for (int j = 0; j < dim; ++j) ss += double(xi[j]) * double(xi[j]);
    const double f = 1.0 / std::sqrt(ss / dim + eps);
    for (int j = 0; j < dim; ++j) {
      const double y = double(xi[j]) * f * double(w[j]);
      r.value[size_t(i) * dim + j] = y;
      r.bound[size_t(i) * dim + j] = rel * std::fabs(y) * kSecondOrder + kTiny;
    }
  }
  return r;
}

EngineRef swiglu_ref(const float* gate, const float* up, int64_t count) {
  EngineRef r;
  r.value.resize(size_t(count));
  r.bound.resize(size_t(count));
  const double rel = bound::kExpErr + bound::gamma(3);
  for (int64_t i = 0; i < count; ++i) {
    const double g = gate[i];
    const double y = g / (1.0 + std::exp(-g)) * double(up[i]);
    r.value[size_t(i)] = y;
    // |g u| 2^-126: where e^-g exceeds float's range (-g above about 88.72, or within
    // expf's 2 ulp of it) float gives e^-g = inf and the product 0, while |y| < |g u| 2^-127.99;
    // it also covers the quotient's rounding when that is subnormal (then |g| > 80).
    r.bound[size_t(i)] = rel * std::fabs(y) * kSecondOrder + std::fabs(g * double(up[i])) * 0x1p-126 + kTiny;
  }
  return r;
}

EngineRef logits_ref(const float* h, const std::vector<int32_t>& sel, int dim, const float* norm, double eps,
                     const uint16_t* W, int64_t vocab) {
  EngineRef r;
  const int m = int(sel.size());
  r.value.resize(size_t(m) * vocab);
  r.bound.resize(size_t(m) * vocab);
  const double rho = rms_rel(dim);
  const double g = bound::gamma(product_depth(dim));
  const double coef = g * (1.0 + rho) + rho + bound::gamma(double(dim) + 2, kU64);
  std::vector<double> wd(static_cast<size_t>(vocab * dim));
  std::vector<double> y(static_cast<size_t>(dim));
  for (size_t i = 0; i < wd.size(); ++i) wd[i] = bf16_value(W[i]);
  for (int j = 0; j < m; ++j) {
    const float* xi = h + int64_t(sel[j]) * dim;
    double ss = 0;
    for (int k = 0; k < dim; ++k) ss += double(xi[k]) * double(xi[k]);
    const double f = 1.0 / std::sqrt(ss / dim + eps);
    for (int k = 0; k < dim; ++k) y[k] = double(xi[k]) * f * double(norm[k]);
    for (int64_t o = 0; o < vocab; ++o) {
      double s = 0, a = 0;
      for (int k = 0; k < dim; ++k) {
        const double p = wd[size_t(o * dim + k)] * y[k];
        s += p;
        a += std::fabs(p);
      }
      r.value[size_t(j) * vocab + o] = s;
      r.bound[size_t(j) * vocab + o] = coef * a * kSecondOrder + kTiny * double(product_depth(dim) + 8);
    }
  }
  return r;
}

EngineRef embed_ref(const uint16_t* E, int64_t dim, const int32_t* tokens, int n) {
  EngineRef r;
  r.value.resize(size_t(n) * dim);
  r.bound.assign(size_t(n) * dim, 0.0);
  for (int i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) r.value[size_t(i) * dim + j] = bf16_value(E[int64_t(tokens[i]) * dim + j]);
  return r;
}

std::vector<int32_t> argmax_ref(const float* x, int n, int64_t len) {
  std::vector<int32_t> out(n, 0);
  for (int i = 0; i < n; ++i) {
    double best = -INFINITY;
    bool has = false;
    for (int64_t k = 0; k < len; ++k) {
      const double v = x[int64_t(i) * len + k];
      if (std::isnan(v)) continue;
      if (!has || v > best) best = v, out[i] = int32_t(k), has = true;
    }
  }
  return out;
}

}  // namespace kc::ref
