#include "reference/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference/bounds.h"

namespace kc::ref {

namespace {
// theta_i = base^(-2i/rot) in long double, computed once per (base, rot) and kept: the contracts
// ask for it per element of every stored row, and powl was about a tenth of a cpu qwen-pages run.
long double theta_of(int i, int rot, double base) {
  thread_local double t_base = 0.0;
  thread_local int t_rot = 0;
  thread_local std::vector<long double> t_theta;
  if (rot != t_rot || base != t_base) {
    t_theta.resize(size_t(rot / 2));
    for (int k = 0; k < rot / 2; ++k) t_theta[size_t(k)] = powl((long double)base, -2.0L * k / rot);
    t_base = base;
    t_rot = rot;
  }
  return t_theta[size_t(i)];
}

void angle(int64_t pos, int i, int rot, double base, long double* c, long double* s) {
  const long double theta = theta_of(i, rot, base);
  const long double a = (long double)pos * theta;
  *c = cosl(a);
  *s = sinl(a);
}
}  // namespace

void rope(const double* x, double* y, int d, int rot, double base, int64_t pos) {
  const int h = rot / 2;
  for (int j = rot; j < d; ++j) y[j] = x[j];
  for (int i = 0; i < h; ++i) {
    long double c, s;
    angle(pos, i, rot, base, &c, &s);
    y[i] = double(x[i] * c - x[i + h] * s);
    y[i + h] = double(x[i + h] * c + x[i] * s);
  }
}

double rope_bound(const double* x, int d, int rot, double base, int64_t pos, int j) {
  (void)d;
  if (j >= rot) return 0.0;
  const int h = rot / 2, i = j < h ? j : j - h;
  long double c, s;
  angle(pos, i, rot, base, &c, &s);
  // y_j takes x_j times cos and its partner times sin.
  const int partner = j < h ? j + h : j - h;
  const double a = std::fabs(x[j]) * std::fabs(double(c)) + std::fabs(x[partner]) * std::fabs(double(s));
  // cos/sin rounded to fp32 (u each, on the product), the products and the sum
  // (gamma_2), and the double -> fp32 rounding slack of the angle's cos/sin (u).
  const double e = a * (bound::kU32 + bound::gamma(2)) + (std::fabs(x[i]) + std::fabs(x[i + h])) * bound::kU32;
  return e * 1.01 + 1e-38;
}

AttnRef attention(const Eigen::VectorXd& q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V, double scale,
                  int chunk, int dot_depth, int acc_depth, const std::vector<double>* score_extra) {
  const int n = int(K.rows()), d = int(q.size());
  AttnRef r;
  r.out.assign(d, 0.0);
  r.bound.assign(d, 0.0);
  if (n == 0) return r;  // no keys: the kernel's defined output is 0, exactly
  const Eigen::VectorXd s = (K * q) * scale;
  const double m = s.maxCoeff();
  const Eigen::VectorXd p = (s.array() - m).exp().matrix();
  const double sp = p.sum();
  const Eigen::VectorXd out = (V.transpose() * p) / sp;
  // 1. score error per key: c * gamma_depth * sum_k |q_k k_ik| + u |s_i| (numerics.md
  //    states gamma_d for any order; the kernel's order has depth d).
  const Eigen::VectorXd qk_abs = (K.cwiseAbs() * q.cwiseAbs()) * scale;
  // 2. weight perturbation: the score error, the shift s - m (twice: chunk max then the
  //    merge max), two exps (chunk and merge) and the merge product.
  double r_w = 0;
  for (int i = 0; i < n; ++i) {
    const double ds = bound::gamma(dot_depth) * qk_abs[i] + bound::kU32 * std::fabs(s[i]) +
                      (score_extra ? (*score_extra)[i] : 0.0);
    r_w = std::max(r_w, ds + 2 * bound::kU32 * std::fabs(s[i] - m));
  }
  r_w += 2 * bound::kExpErr + bound::kU32;
  const int chunks = (n + chunk - 1) / chunk;
  const double g = bound::gamma(acc_depth + chunks);
  for (int j = 0; j < d; ++j) {
    double spread = 0, mag = 0;
    for (int i = 0; i < n; ++i) {
      spread += p[i] * std::fabs(V(i, j) - out[j]);
      mag += p[i] * std::fabs(V(i, j));
    }
    spread /= sp;
    mag /= sp;
    // 3. weights, accumulation of p v and of l (depth n'), the final division, and the
    //    fp32 output rounding.
    const double b = r_w / (1 - r_w) * spread + g * mag + (g + 2 * bound::kU32) * std::fabs(out[j]) +
                     bound::kU32 * std::fabs(out[j]);
    r.out[j] = out[j];
    r.bound[j] = bound::kAttnSafety * b + 1e-30;
  }
  return r;
}

}  // namespace kc::ref
