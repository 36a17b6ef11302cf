#include "reference/qwen3_ref.h"

#include <cmath>

namespace kc::ref {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// A row-major [rows, cols] float array as a float64 matrix.
MatrixXd as_matrix(const std::vector<float>& a, int64_t rows, int64_t cols) {
  return Eigen::Map<const RowMajorF>(a.data(), rows, cols).cast<double>();
}

VectorXd as_vector(const std::vector<float>& a) {
  return Eigen::Map<const Eigen::VectorXf>(a.data(), static_cast<Eigen::Index>(a.size())).cast<double>();
}

std::string size_problem(const char* what, const std::vector<float>& a, int64_t want) {
  if (static_cast<int64_t>(a.size()) == want) return "";
  return std::string(what) + ": " + std::to_string(a.size()) + " values, dims call for " + std::to_string(want);
}

}  // namespace

std::string qwen3_ref_check(const Qwen3RefModel& m) {
  const Qwen3RefDims& d = m.dims;
  if (d.hidden <= 0 || d.intermediate <= 0 || d.layers < 0 || d.heads <= 0 || d.kv_heads <= 0 || d.head_dim <= 0 ||
      d.vocab <= 0)
    return "dims: every size must be positive";
  if (d.heads % d.kv_heads != 0) return "dims: kv_heads does not divide heads";
  if (d.rotary_dim < 0 || d.rotary_dim > d.head_dim || d.rotary_dim % 2 != 0)
    return "dims: rotary_dim must be even and at most head_dim";
  if (!(d.eps > 0) || !(d.rope_theta > 0)) return "dims: eps and rope_theta must be positive";
  if (static_cast<int64_t>(m.layers.size()) != d.layers) return "layers: count differs from dims.layers";
  const int64_t H = d.hidden, I = d.intermediate, Q = d.heads * d.head_dim, KV = d.kv_heads * d.head_dim;
  std::string p;
  if (!(p = size_problem("embed", m.embed, d.vocab * H)).empty()) return p;
  if (!(p = size_problem("final_norm", m.final_norm, H)).empty()) return p;
  if (!(p = size_problem("lm_head", m.lm_head, d.tied ? 0 : d.vocab * H)).empty()) return p;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Qwen3RefLayer& l = m.layers[i];
    const std::pair<const char*, std::pair<const std::vector<float>*, int64_t>> parts[] = {
        {"input_norm", {&l.input_norm, H}}, {"q_proj", {&l.q_proj, Q * H}},     {"k_proj", {&l.k_proj, KV * H}},
        {"v_proj", {&l.v_proj, KV * H}},    {"o_proj", {&l.o_proj, H * Q}},     {"q_norm", {&l.q_norm, d.head_dim}},
        {"k_norm", {&l.k_norm, d.head_dim}}, {"post_norm", {&l.post_norm, H}}, {"gate_proj", {&l.gate_proj, I * H}},
        {"up_proj", {&l.up_proj, I * H}},   {"down_proj", {&l.down_proj, H * I}}};
    for (const auto& [name, arr] : parts)
      if (!(p = size_problem(name, *arr.first, arr.second)).empty()) return "layers[" + std::to_string(i) + "]." + p;
  }
  return "";
}

MatrixXd qwen3_ref_rms_norm(const MatrixXd& x, const VectorXd& w, double eps) {
  MatrixXd y(x.rows(), x.cols());
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    const double mean_sq = x.row(t).squaredNorm() / static_cast<double>(x.cols());
    const double inv = 1.0 / std::sqrt(mean_sq + eps);
    y.row(t) = (x.row(t).array() * inv * w.transpose().array()).matrix();
  }
  return y;
}

void qwen3_ref_rope(MatrixXd& x, const std::vector<int64_t>& pos, int64_t rotary_dim, double theta) {
  const int64_t half = rotary_dim / 2;
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const long double inv_freq =
          std::pow(static_cast<long double>(theta), -2.0L * static_cast<long double>(i) / static_cast<long double>(rotary_dim));
      const long double angle = static_cast<long double>(pos[static_cast<size_t>(t)]) * inv_freq;
      const double c = static_cast<double>(std::cos(angle)), s = static_cast<double>(std::sin(angle));
      const double x1 = x(t, i), x2 = x(t, i + half);
      x(t, i) = x1 * c - x2 * s;
      x(t, i + half) = x2 * c + x1 * s;
    }
  }
}

MatrixXd qwen3_ref_causal_attention(const MatrixXd& q, const MatrixXd& k, const MatrixXd& v, double scale) {
  const Eigen::Index T = q.rows();
  MatrixXd out = MatrixXd::Zero(T, v.cols());
  for (Eigen::Index t = 0; t < T; ++t) {
    VectorXd s = (k.topRows(t + 1) * q.row(t).transpose()) * scale;
    const double mx = s.maxCoeff();
    VectorXd p = (s.array() - mx).exp().matrix();
    out.row(t) = (p.transpose() * v.topRows(t + 1)) / p.sum();
  }
  return out;
}

std::string qwen3_ref_logits(const Qwen3RefModel& m, const std::vector<int32_t>& tokens, MatrixXd* logits,
                             std::vector<Qwen3RefLayerTrace>* trace) {
  const std::string bad = qwen3_ref_check(m);
  if (!bad.empty()) return bad;
  if (tokens.empty()) return "tokens: empty sequence";
  const Qwen3RefDims& d = m.dims;
  const int64_t T = static_cast<int64_t>(tokens.size()), H = d.hidden, D = d.head_dim;
  const int64_t group = d.heads / d.kv_heads;
  for (size_t t = 0; t < tokens.size(); ++t)
    if (tokens[t] < 0 || tokens[t] >= d.vocab)
      return "tokens[" + std::to_string(t) + "]: " + std::to_string(tokens[t]) + " is outside the vocabulary of " +
             std::to_string(d.vocab);
  std::vector<int64_t> pos(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(t)] = t;

  MatrixXd h(T, H);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j) h(t, j) = m.embed[static_cast<size_t>(tokens[static_cast<size_t>(t)] * H + j)];
  if (trace != nullptr) trace->clear();

  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (const Qwen3RefLayer& l : m.layers) {
    Qwen3RefLayerTrace tr;
    tr.attn_in = qwen3_ref_rms_norm(h, as_vector(l.input_norm), d.eps);
    const MatrixXd q = tr.attn_in * as_matrix(l.q_proj, d.heads * D, H).transpose();
    const MatrixXd k = tr.attn_in * as_matrix(l.k_proj, d.kv_heads * D, H).transpose();
    const MatrixXd v = tr.attn_in * as_matrix(l.v_proj, d.kv_heads * D, H).transpose();
    const VectorXd qn = as_vector(l.q_norm), kn = as_vector(l.k_norm);
    for (int64_t g = 0; g < d.kv_heads; ++g) {
      MatrixXd kg = qwen3_ref_rms_norm(k.middleCols(g * D, D), kn, d.eps);
      qwen3_ref_rope(kg, pos, d.rotary_dim, d.rope_theta);
      tr.k.push_back(kg);
      tr.v.push_back(v.middleCols(g * D, D));
    }
    tr.attn_out.resize(T, d.heads * D);
    for (int64_t hq = 0; hq < d.heads; ++hq) {
      MatrixXd qh = qwen3_ref_rms_norm(q.middleCols(hq * D, D), qn, d.eps);
      qwen3_ref_rope(qh, pos, d.rotary_dim, d.rope_theta);
      const int64_t g = hq / group;
      tr.attn_out.middleCols(hq * D, D) =
          qwen3_ref_causal_attention(qh, tr.k[static_cast<size_t>(g)], tr.v[static_cast<size_t>(g)], scale);
      tr.q.push_back(std::move(qh));
    }
    h += tr.attn_out * as_matrix(l.o_proj, H, d.heads * D).transpose();
    const MatrixXd mlp_in = qwen3_ref_rms_norm(h, as_vector(l.post_norm), d.eps);
    const MatrixXd gate = mlp_in * as_matrix(l.gate_proj, d.intermediate, H).transpose();
    const MatrixXd up = mlp_in * as_matrix(l.up_proj, d.intermediate, H).transpose();
    const MatrixXd act = (gate.array() / (1.0 + (-gate.array()).exp()) * up.array()).matrix();
    h += act * as_matrix(l.down_proj, H, d.intermediate).transpose();
    if (trace != nullptr) {
      tr.out = h;
      trace->push_back(std::move(tr));
    }
  }
  const MatrixXd final_h = qwen3_ref_rms_norm(h, as_vector(m.final_norm), d.eps);
  *logits = final_h * as_matrix(d.tied ? m.embed : m.lm_head, d.vocab, H).transpose();
  return "";
}

}  // namespace kc::ref
