// reference/qwen3_ref: the float64 forward checked against an independent naive float64
// computation written here with plain loops (RMSNorm from its formula, RoPE as complex
// multiplication, attention as a direct softmax), on synthetic checkpoints written by
// make-model; and causality.
#include "reference/qwen3_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>

#include "engine/checkpoint.h"
#include "engine/make_model.h"
#include "tests/engine/ref_adapter.h"
#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;
using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // [rows][cols]

// ---- The naive side: loops over std::vector, nothing from reference/.

Vec naive_rms(const Vec& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t j = 0; j < x.size(); ++j) y[j] = x[j] / r * w[j];
  return y;
}

// y = W x for W row-major [out, in].
Vec naive_linear(const std::vector<float>& W, const Vec& x, size_t out) {
  Vec y(out, 0.0);
  for (size_t o = 0; o < out; ++o)
    for (size_t i = 0; i < x.size(); ++i) y[o] += static_cast<double>(W[o * x.size() + i]) * x[i];
  return y;
}

// RoPE as the complex product (x_i + i x_{i+r/2}) * e^{i p theta^(-2i/r)}.
Vec naive_rope(const Vec& x, int64_t p, int64_t r, double theta) {
  Vec y = x;
  for (int64_t i = 0; i < r / 2; ++i) {
    const double freq = std::exp(-(2.0 * static_cast<double>(i) / static_cast<double>(r)) * std::log(theta));
    const std::complex<double> z(x[static_cast<size_t>(i)], x[static_cast<size_t>(i + r / 2)]);
    const std::complex<double> w = z * std::polar(1.0, static_cast<double>(p) * freq);
    y[static_cast<size_t>(i)] = w.real();
    y[static_cast<size_t>(i + r / 2)] = w.imag();
  }
  return y;
}

struct NaiveLayer0 {
  Mat attn_in;                  // [T][hidden]
  std::vector<Mat> q, k;        // [head][T][D]
  Mat attn_out;                 // [T][heads * D]
};

// The whole forward, returning logits [T][vocab] and layer 0's pieces.
Mat naive_forward(const Qwen3Weights& w, const std::vector<int32_t>& tokens, NaiveLayer0* l0) {
  const Qwen3Config& c = w.config;
  const size_t T = tokens.size(), H = static_cast<size_t>(c.hidden_size), D = static_cast<size_t>(c.head_dim);
  const size_t nq = static_cast<size_t>(c.num_attention_heads), nkv = static_cast<size_t>(c.num_key_value_heads);
  Mat h(T, Vec(H));
  for (size_t t = 0; t < T; ++t)
    for (size_t j = 0; j < H; ++j) h[t][j] = w.embed_tokens.data[static_cast<size_t>(tokens[t]) * H + j];
  for (size_t li = 0; li < w.layers.size(); ++li) {
    const Qwen3LayerWeights& L = w.layers[li];
    Mat a(T), o(T, Vec(nq * D));
    std::vector<Mat> qs(nq, Mat(T)), ks(nkv, Mat(T)), vs(nkv, Mat(T));
    for (size_t t = 0; t < T; ++t) {
      a[t] = naive_rms(h[t], L.input_layernorm.data, c.rms_norm_eps);
      const Vec q = naive_linear(L.q_proj.data, a[t], nq * D), k = naive_linear(L.k_proj.data, a[t], nkv * D),
                v = naive_linear(L.v_proj.data, a[t], nkv * D);
      for (size_t hh = 0; hh < nq; ++hh)
        qs[hh][t] = naive_rope(naive_rms(Vec(q.begin() + hh * D, q.begin() + (hh + 1) * D), L.q_norm.data, c.rms_norm_eps),
                               static_cast<int64_t>(t), c.rotary_dim, c.rope_theta);
      for (size_t g = 0; g < nkv; ++g) {
        ks[g][t] = naive_rope(naive_rms(Vec(k.begin() + g * D, k.begin() + (g + 1) * D), L.k_norm.data, c.rms_norm_eps),
                              static_cast<int64_t>(t), c.rotary_dim, c.rope_theta);
        vs[g][t] = Vec(v.begin() + g * D, v.begin() + (g + 1) * D);
      }
    }
    // Direct softmax (scores are O(1) here, so no max subtraction is needed).
    for (size_t hh = 0; hh < nq; ++hh) {
      const size_t g = hh / (nq / nkv);
      for (size_t t = 0; t < T; ++t) {
        Vec e(t + 1);
        double sum = 0;
        for (size_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (size_t j = 0; j < D; ++j) dot += qs[hh][t][j] * ks[g][u][j];
          e[u] = std::exp(dot / std::sqrt(static_cast<double>(D)));
          sum += e[u];
        }
        for (size_t j = 0; j < D; ++j) {
          double acc = 0;
          for (size_t u = 0; u <= t; ++u) acc += e[u] / sum * vs[g][u][j];
          o[t][hh * D + j] = acc;
        }
      }
    }
    for (size_t t = 0; t < T; ++t) {
      const Vec attn = naive_linear(L.o_proj.data, o[t], H);
      for (size_t j = 0; j < H; ++j) h[t][j] += attn[j];
      const Vec m = naive_rms(h[t], L.post_attention_layernorm.data, c.rms_norm_eps);
      const size_t I = static_cast<size_t>(c.intermediate_size);
      const Vec gate = naive_linear(L.gate_proj.data, m, I), up = naive_linear(L.up_proj.data, m, I);
      Vec act(I);
      for (size_t i = 0; i < I; ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const Vec down = naive_linear(L.down_proj.data, act, H);
      for (size_t j = 0; j < H; ++j) h[t][j] += down[j];
    }
    if (li == 0 && l0 != nullptr) *l0 = {a, qs, ks, o};
  }
  Mat logits(T);
  const HostTensor& head = w.output_head();
  for (size_t t = 0; t < T; ++t)
    logits[t] = naive_linear(head.data, naive_rms(h[t], w.norm.data, c.rms_norm_eps), static_cast<size_t>(c.vocab_size));
  return logits;
}

// Largest |a - b| relative to the largest |b| (both sides are O(1) by construction).
double rel_diff(const MatrixXd& a, const Mat& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i)
    for (size_t j = 0; j < b[i].size(); ++j) {
      worst = std::max(worst, std::abs(a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) - b[i][j]));
      scale = std::max(scale, std::abs(b[i][j]));
    }
  return worst / scale;
}

Qwen3Weights load_tiny(uint64_t seed) {
  test::TempDir dir;
  std::ostringstream out, err;
  EXPECT_EQ(make_model_command("tiny", 2, seed, dir.file("m"), out, err), 0) << err.str();
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(dir.file("m"), &w);
  EXPECT_TRUE(st.ok) << st.message;
  return w;
}

// Untied, partial rotary (8 of 16 dims), GQA 3:1: the paths the tiny preset does not take.
Qwen3Weights load_partial_untied(uint64_t seed) {
  Qwen3Config c;
  c.hidden_size = 48;
  c.intermediate_size = 80;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 37;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 1e4;
  c.partial_rotary_factor = 0.5;
  c.rotary_dim = 8;
  c.tie_word_embeddings = false;
  c.dtype = "bfloat16";
  test::TempDir dir;
  Status st = write_synthetic_checkpoint(c, seed, dir.file("m"), "test");
  EXPECT_TRUE(st.ok) << st.message;
  Qwen3Weights w;
  st = load_qwen3_checkpoint(dir.file("m"), &w);
  EXPECT_TRUE(st.ok) << st.message;
  return w;
}

std::vector<int32_t> bytes_of(const std::string& s) { return std::vector<int32_t>(s.begin(), s.end()); }

// ---- The pieces.

TEST(Qwen3Ref, RmsNormIsItsFormula) {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> n(0.0, 3.0);
  MatrixXd x(5, 24);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n(rng);
  std::vector<float> wf(24);
  for (auto& v : wf) v = static_cast<float>(1.0 + 0.1 * n(rng));
  VectorXd w(24);
  for (int j = 0; j < 24; ++j) w(j) = wf[static_cast<size_t>(j)];
  const MatrixXd y = ref::qwen3_ref_rms_norm(x, w, 1e-6);
  for (int t = 0; t < 5; ++t) {
    Vec row(24);
    for (int j = 0; j < 24; ++j) row[static_cast<size_t>(j)] = x(t, j);
    const Vec want = naive_rms(row, wf, 1e-6);
    for (int j = 0; j < 24; ++j) EXPECT_NEAR(y(t, j), want[static_cast<size_t>(j)], 1e-14 * std::abs(want[static_cast<size_t>(j)]) + 1e-300);
  }
}

TEST(Qwen3Ref, RopeIsComplexMultiplicationOverTheRotaryDims) {
  std::mt19937_64 rng(2);
  std::normal_distribution<double> n(0.0, 1.0);
  for (int64_t rot : {16, 8, 2}) {
    MatrixXd x(6, 16);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = n(rng);
    const std::vector<int64_t> pos = {0, 1, 2, 17, 4095, 262143};
    MatrixXd y = x;
    ref::qwen3_ref_rope(y, pos, rot, 1e6);
    for (int t = 0; t < 6; ++t) {
      Vec row(16);
      for (int j = 0; j < 16; ++j) row[static_cast<size_t>(j)] = x(t, j);
      const Vec want = naive_rope(row, pos[static_cast<size_t>(t)], rot, 1e6);
      // The angle p * theta^(-2i/r) is rounded differently on the two sides (long double
      // pow vs double exp/log): at p = 262,143 that is up to ~1e-10 rad.
      const double tol = pos[static_cast<size_t>(t)] > 10000 ? 1e-9 : 1e-12;
      for (int j = 0; j < 16; ++j) EXPECT_NEAR(y(t, j), want[static_cast<size_t>(j)], tol) << "rot " << rot << " t " << t << " j " << j;
      for (int j = static_cast<int>(rot); j < 16; ++j) EXPECT_EQ(y(t, j), x(t, j)) << "dims past the rotary part pass through";
    }
    EXPECT_TRUE(y.row(0) == x.row(0)) << "position 0 is the identity";
  }
}

TEST(Qwen3Ref, RopeScoresDependOnlyOnTheOffset) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> n(0.0, 1.0);
  MatrixXd q(1, 32), k(1, 32);
  for (int j = 0; j < 32; ++j) q(0, j) = n(rng), k(0, j) = n(rng);
  auto score = [&](int64_t m, int64_t p) {
    MatrixXd a = q, b = k;
    ref::qwen3_ref_rope(a, {m}, 32, 1e4);
    ref::qwen3_ref_rope(b, {p}, 32, 1e4);
    return a.row(0).dot(b.row(0));
  };
  EXPECT_NEAR(score(5, 2), score(105, 102), 1e-11);
  EXPECT_NEAR(score(7, 7), q.row(0).dot(k.row(0)), 1e-12);
}

TEST(Qwen3Ref, AttentionIsADirectCausalSoftmax) {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> n(0.0, 1.0);
  const int T = 7, D = 8;
  MatrixXd q(T, D), k(T, D), v(T, D);
  for (Eigen::Index i = 0; i < q.size(); ++i) q.data()[i] = n(rng), k.data()[i] = n(rng), v.data()[i] = n(rng);
  const double scale = 0.3;
  const MatrixXd o = ref::qwen3_ref_causal_attention(q, k, v, scale);
  for (int t = 0; t < T; ++t) {
    double sum = 0;
    Vec e(static_cast<size_t>(t + 1));
    for (int u = 0; u <= t; ++u) sum += e[static_cast<size_t>(u)] = std::exp(scale * q.row(t).dot(k.row(u)));
    for (int j = 0; j < D; ++j) {
      double want = 0;
      for (int u = 0; u <= t; ++u) want += e[static_cast<size_t>(u)] / sum * v(u, j);
      EXPECT_NEAR(o(t, j), want, 1e-14);
    }
  }
  EXPECT_TRUE(o.row(0).isApprox(v.row(0), 1e-15)) << "the first row sees only itself";
  // Scores far below zero: the max is subtracted, nothing underflows to 0/0.
  const MatrixXd big = ref::qwen3_ref_causal_attention(q * 1e3, k, v, 1.0);
  EXPECT_TRUE(big.allFinite());
}

// ---- The whole model against the naive forward.

void expect_matches_naive(const Qwen3Weights& w, const std::vector<int32_t>& tokens) {
  const ref::Qwen3RefModel m = test::to_reference(w);
  MatrixXd logits;
  std::vector<ref::Qwen3RefLayerTrace> trace;
  const std::string err = ref::qwen3_ref_logits(m, tokens, &logits, &trace);
  ASSERT_EQ(err, "");
  ASSERT_EQ(logits.rows(), static_cast<Eigen::Index>(tokens.size()));
  ASSERT_EQ(logits.cols(), w.config.vocab_size);
  ASSERT_EQ(trace.size(), w.layers.size());
  NaiveLayer0 l0;
  const Mat want = naive_forward(w, tokens, &l0);
  // Both sides are float64 sums of the same O(1) terms in different orders: they agree to
  // a few hundred ulps of the largest value, far below anything a wrong formula gives.
  constexpr double kTol = 1e-12;
  EXPECT_LT(rel_diff(trace[0].attn_in, l0.attn_in), kTol) << "input RMSNorm";
  for (size_t h = 0; h < l0.q.size(); ++h) EXPECT_LT(rel_diff(trace[0].q[h], l0.q[h]), kTol) << "q head " << h;
  for (size_t g = 0; g < l0.k.size(); ++g) EXPECT_LT(rel_diff(trace[0].k[g], l0.k[g]), kTol) << "k head " << g;
  EXPECT_LT(rel_diff(trace[0].attn_out, l0.attn_out), kTol) << "attention";
  EXPECT_LT(rel_diff(logits, want), kTol) << "logits";
  EXPECT_TRUE(logits.allFinite());
  // O(1) by construction of make-model's scales, and not degenerate.
  EXPECT_LT(logits.cwiseAbs().maxCoeff(), 30.0);
  EXPECT_GT(logits.cwiseAbs().maxCoeff(), 0.1);
}

TEST(Qwen3Ref, TinyPresetMatchesTheNaiveForward) {
  const Qwen3Weights w = load_tiny(5);
  expect_matches_naive(w, bytes_of("def main():\n    return 0"));
}

TEST(Qwen3Ref, PartialRotaryUntiedModelMatchesTheNaiveForward) {
  const Qwen3Weights w = load_partial_untied(6);
  expect_matches_naive(w, {0, 36, 5, 5, 17, 2, 30, 11, 9, 1, 0});
}

TEST(Qwen3Ref, OneUlpOfOneNormWeightMovesTheLogitsPastTheTolerance) {
  // The comparison above is sharp: a model whose q_norm weight is changed by one bf16 ulp
  // in one element gives logits further from the original than the tolerance.
  Qwen3Weights w = load_tiny(5);
  const auto tokens = bytes_of("abcdefgh");
  MatrixXd a, b;
  ASSERT_EQ(ref::qwen3_ref_logits(test::to_reference(w), tokens, &a), "");
  w.layers[0].q_norm.data[3] *= 1.0f + 0x1p-7f;
  ASSERT_EQ(ref::qwen3_ref_logits(test::to_reference(w), tokens, &b), "");
  EXPECT_GT((a - b).cwiseAbs().maxCoeff() / a.cwiseAbs().maxCoeff(), 1e-9);
}

TEST(Qwen3Ref, Causal) {
  for (const Qwen3Weights& w : {load_tiny(8), load_partial_untied(9)}) {
    const ref::Qwen3RefModel m = test::to_reference(w);
    const int32_t V = static_cast<int32_t>(w.config.vocab_size);
    std::vector<int32_t> a = {1, 7, 3, 9, 4, 2, 8, 6, 5, 0}, b = a;
    for (size_t t = 6; t < b.size(); ++t) b[t] = (b[t] * 5 + 3) % V;  // change every token after position 5
    MatrixXd la, lb, lp;
    ASSERT_EQ(ref::qwen3_ref_logits(m, a, &la), "");
    ASSERT_EQ(ref::qwen3_ref_logits(m, b, &lb), "");
    ASSERT_EQ(ref::qwen3_ref_logits(m, std::vector<int32_t>(a.begin(), a.begin() + 6), &lp), "");
    const double scale = la.cwiseAbs().maxCoeff();
    // Positions 0..5 do not see the change (up to the order Eigen sums in for another T).
    EXPECT_LT((la.topRows(6) - lb.topRows(6)).cwiseAbs().maxCoeff(), 1e-13 * scale);
    EXPECT_LT((la.topRows(6) - lp).cwiseAbs().maxCoeff(), 1e-13 * scale);
    // Every later position does.
    for (int t = 6; t < 10; ++t) EXPECT_GT((la.row(t) - lb.row(t)).cwiseAbs().maxCoeff(), 1e-3 * scale) << t;
  }
}

TEST(Qwen3Ref, RefusesBadInput) {
  const Qwen3Weights w = load_tiny(5);
  ref::Qwen3RefModel m = test::to_reference(w);
  MatrixXd l;
  EXPECT_EQ(ref::qwen3_ref_logits(m, {}, &l), "tokens: empty sequence");
  EXPECT_EQ(ref::qwen3_ref_logits(m, {1, 260}, &l), "tokens[1]: 260 is outside the vocabulary of 260");
  EXPECT_EQ(ref::qwen3_ref_logits(m, {-1}, &l), "tokens[0]: -1 is outside the vocabulary of 260");
  m.layers[1].k_proj.pop_back();
  EXPECT_EQ(ref::qwen3_ref_logits(m, {1}, &l), "layers[1].k_proj: 8191 values, dims call for 8192");
  m = test::to_reference(w);
  m.dims.kv_heads = 3;
  EXPECT_EQ(ref::qwen3_ref_check(m), "dims: kv_heads does not divide heads");
  // RoPE pairs dim i with i + rotary_dim / 2: an odd rotary_dim leaves one dim unrotated and
  // unpaired, and one beyond head_dim reads past the head. The last valid values pass.
  for (const auto& [rot, why] : std::vector<std::pair<int64_t, std::string>>{
           {31, "dims: rotary_dim must be even and at most head_dim"},
           {1, "dims: rotary_dim must be even and at most head_dim"},
           {34, "dims: rotary_dim must be even and at most head_dim"},
           {-2, "dims: rotary_dim must be even and at most head_dim"},
           {32, ""},
           {30, ""},
           {0, ""}}) {
    m = test::to_reference(w);
    ASSERT_EQ(m.dims.head_dim, 32);
    m.dims.rotary_dim = rot;
    EXPECT_EQ(ref::qwen3_ref_check(m), why) << "rotary_dim " << rot;
  }
}

}  // namespace
}  // namespace kc::engine
