// float64 reference forward of a Qwen3 dense decoder (Hugging Face Qwen3ForCausalLM),
// written from the math. It shares no code with engine/ or kernels/: it takes plain
// arrays and its own dims, so a bug in the engine's loader or kernels cannot cancel out.
//
// For tokens x_0..x_{T-1} at positions 0..T-1, with every product in float64:
//   h = E[x]                                                   (embedding rows)
//   per layer:
//     a  = RMSNorm(h; w_in)          RMSNorm(x; w)_j = x_j / sqrt(mean_j(x^2) + eps) * w_j
//     q  = a Wq^T, k = a Wk^T, v = a Wv^T, split into heads of head_dim D
//     q_h = RoPE(RMSNorm(q_h; w_qn)), k_g = RoPE(RMSNorm(k_g; w_kn))   (per head, over D)
//     RoPE (neox pairing) over the first r = rotary_dim dims at position p:
//       for i < r/2, angle = p * theta^(-2i/r) (computed in long double):
//       y_i = x_i cos - x_{i+r/2} sin,  y_{i+r/2} = x_{i+r/2} cos + x_i sin; dims >= r unchanged
//     o_h[t] = sum_{u<=t} softmax_u(q_h[t] . k_g[u] / sqrt(D)) v_g[u],  g = h / (heads / kv_heads)
//     h += concat_h(o_h) Wo^T
//     m  = RMSNorm(h; w_post)
//     h += (silu(m Wg^T) * (m Wu^T)) Wd^T,   silu(z) = z / (1 + e^-z)
//   logits = RMSNorm(h; w_final) W_head^T,  W_head = lm_head or (tied) E
// Linear weights are row-major [out_features, in_features], as Hugging Face stores them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Dense>

namespace kc::ref {

struct Qwen3RefDims {
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0, vocab = 0;
  double eps = 1e-6, rope_theta = 1e6;
  bool tied = false;
};

struct Qwen3RefLayer {
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> q_proj;      // [heads * head_dim, hidden]
  std::vector<float> k_proj;      // [kv_heads * head_dim, hidden]
  std::vector<float> v_proj;      // [kv_heads * head_dim, hidden]
  std::vector<float> o_proj;      // [hidden, heads * head_dim]
  std::vector<float> q_norm;      // [head_dim]
  std::vector<float> k_norm;      // [head_dim]
  std::vector<float> post_norm;   // [hidden]
  std::vector<float> gate_proj;   // [intermediate, hidden]
  std::vector<float> up_proj;     // [intermediate, hidden]
  std::vector<float> down_proj;   // [hidden, intermediate]
};

struct Qwen3RefModel {
  Qwen3RefDims dims;
  std::vector<float> embed;  // [vocab, hidden]
  std::vector<Qwen3RefLayer> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied
};

// What one layer computed, for tests of the pieces (rows are positions).
struct Qwen3RefLayerTrace {
  Eigen::MatrixXd attn_in;               // [T, hidden]  RMSNorm(h; w_in)
  std::vector<Eigen::MatrixXd> q, k, v;  // per q head / kv head: [T, head_dim], q and k normed and rotated
  Eigen::MatrixXd attn_out;              // [T, heads * head_dim] before o_proj
  Eigen::MatrixXd out;                   // [T, hidden] the residual stream after the layer
};

// "" when every array has the size its dims call for and the dims are consistent;
// otherwise what is wrong.
std::string qwen3_ref_check(const Qwen3RefModel& m);

// Teacher-forced logits [T, vocab] for `tokens` at positions 0..T-1. Returns "" or the
// reason nothing was computed (a bad model, an empty sequence, a token out of range).
// `trace` (optional) receives every layer's intermediates.
std::string qwen3_ref_logits(const Qwen3RefModel& m, const std::vector<int32_t>& tokens, Eigen::MatrixXd* logits,
                             std::vector<Qwen3RefLayerTrace>* trace = nullptr);

// ---- The pieces, exposed for tests.

// Each row of x normalised: x_j / sqrt(mean(x^2) + eps) * w_j.
Eigen::MatrixXd qwen3_ref_rms_norm(const Eigen::MatrixXd& x, const Eigen::VectorXd& w, double eps);

// RoPE, neox pairing, on each row of x (one head, [T, head_dim]); row t at position pos[t].
void qwen3_ref_rope(Eigen::MatrixXd& x, const std::vector<int64_t>& pos, int64_t rotary_dim, double theta);

// Causal attention of one q head over one kv head: rows t of q attend to rows u <= t of
// k and v, softmax of q.k * scale (max subtracted first).
Eigen::MatrixXd qwen3_ref_causal_attention(const Eigen::MatrixXd& q, const Eigen::MatrixXd& k, const Eigen::MatrixXd& v,
                                           double scale);

}  // namespace kc::ref
