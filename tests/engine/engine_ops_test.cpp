// engine/ops: each function against float64 on random inputs, and batch invariance: a
// row computed inside batches of 1..64 (at every place in the batch) has the bytes it has
// alone. Control: a product whose reduction is split by the batch size (as a split-K
// launch that adapts to the batch would) changes some row's bytes, so the comparison
// can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/ops.h"
#include "engine/safetensors.h"

namespace kc::engine {
namespace {

Bf16Matrix random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f / std::sqrt(float(cols)));
  HostTensor t;
  t.shape = {rows, cols};
  t.data.resize(size_t(rows * cols));
  for (float& x : t.data) x = bf16_to_f32(f32_to_bf16(d(g)));
  return Bf16Matrix::from(t);
}

std::vector<float> random_rows(int n, int64_t dim, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(size_t(n * dim));
  for (float& v : x) v = d(g);
  return x;
}

// The control: the reduction split into `splits` parts that depend on the batch size.
void split_by_batch_matmul(const Bf16Matrix& W, const float* x, int n, float* y) {
  const int splits = n >= 8 ? 4 : 1;
  for (int i = 0; i < n; ++i)
    for (int64_t o = 0; o < W.rows; ++o) {
      float total = 0;
      const int64_t per = (W.cols + splits - 1) / splits;
      for (int s = 0; s < splits; ++s) {
        const int64_t b = s * per, e = std::min<int64_t>(W.cols, b + per);
        if (b < e) total += dot_bf16(W.row(o) + b, x + i * W.cols + b, e - b);
      }
      y[i * W.rows + o] = total;
    }
}

template <class F>
int invariance_failures(const Bf16Matrix& W, F product) {
  const std::vector<float> x = random_rows(64, W.cols, 11);
  std::vector<float> alone(size_t(64 * W.rows));
  for (int i = 0; i < 64; ++i) product(W, x.data() + i * W.cols, 1, alone.data() + i * W.rows);
  int failures = 0;
  for (int n : {1, 2, 3, 7, 8, 13, 33, 64}) {
    for (int start : {0, 64 - n}) {
      std::vector<float> y(size_t(n * W.rows));
      product(W, x.data() + start * W.cols, n, y.data());
      if (std::memcmp(y.data(), alone.data() + start * W.rows, y.size() * 4) != 0) ++failures;
    }
  }
  return failures;
}

TEST(EngineOps, MatmulIsBatchInvariantAndTheSplitByBatchControlIsNot) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 131}, {64, 256}, {5, 7}}) {
    const Bf16Matrix W = random_matrix(rows, cols, 3 + rows);
    EXPECT_EQ(invariance_failures(W, matmul_rows), 0) << rows << "x" << cols;
    if (cols >= 128) {
      EXPECT_GT(invariance_failures(W, split_by_batch_matmul), 0) << "control stayed green";
    }
  }
}

// The order of kernels/engine/rows.h, transcribed from its text alone (no shared code):
// octet b (elements 8b .. min(8b + 8, K) - 1) goes to partial b mod 128, its elements in
// ascending k, one fused multiply-add each; then s_p += s_{p+h} for h = 64 .. 1; the
// result is s_0. The device kernel is held to the twin's bytes (rows-invariant's
// device==host-twin, cuda only); this holds the twin to the documented order on every
// machine, so an edit of the twin's order cannot pass as long as no GPU runs.
float documented_dot_bf16(const uint16_t* w, const float* x, int64_t k) {
  float s[128] = {};
  for (int64_t b = 0; 8 * b < k; ++b)
    for (int64_t i = 8 * b; i < std::min<int64_t>(k, 8 * b + 8); ++i) s[b % 128] = std::fmaf(bf16_to_f32(w[i]), x[i], s[b % 128]);
  for (int h = 64; h >= 1; h /= 2)
    for (int p = 0; p < h; ++p) s[p] = s[p] + s[p + h];
  return s[0];
}

// RMSNorm's sum of squares: a_j takes the elements k = j (mod 8) in ascending k (fused
// multiply-adds), then ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
float documented_dot_f32(const float* p, const float* q, int64_t k) {
  float a[8] = {};
  for (int64_t i = 0; i < k; ++i) a[i % 8] = std::fmaf(p[i], q[i], a[i % 8]);
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// Inputs whose sums depend on the order: magnitudes spread over 2^-12 .. 2^12, both signs.
std::vector<float> wide_values(int64_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = std::ldexp(float(int(g() % 2001) - 1000) / 1000.0f, int(g() % 25) - 12);
  return v;
}

TEST(EngineOps, DotsFollowTheDocumentedOrderBitForBit) {
  int order_sensitive = 0;  // lengths where a plain left-to-right sum gives other bits
  for (int64_t k : {1, 7, 8, 9, 63, 1023, 1024, 1025, 1031, 2056, 4097, 9000, 17411}) {
    const std::vector<float> xs = wide_values(k, 100 + k), ws = wide_values(k, 200 + k);
    std::vector<uint16_t> w(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) w[size_t(i)] = f32_to_bf16(ws[size_t(i)]);
    const float got = dot_bf16(w.data(), xs.data(), k), want = documented_dot_bf16(w.data(), xs.data(), k);
    EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << "dot_bf16, K = " << k << ": " << got << " against " << want;
    const float got32 = dot_f32(xs.data(), ws.data(), k), want32 = documented_dot_f32(xs.data(), ws.data(), k);
    EXPECT_EQ(std::memcmp(&got32, &want32, 4), 0) << "dot_f32, K = " << k << ": " << got32 << " against " << want32;
    float seq = 0, seq32 = 0;
    for (int64_t i = 0; i < k; ++i) {
      seq = std::fmaf(bf16_to_f32(w[size_t(i)]), xs[size_t(i)], seq);
      seq32 = std::fmaf(xs[size_t(i)], ws[size_t(i)], seq32);
    }
    order_sensitive += (seq != want) + (seq32 != want32);
  }
  // The control: the inputs tell orders apart (else the comparison above could not fail).
  EXPECT_GE(order_sensitive, 10);
}

TEST(EngineOps, MatmulWithinItsFloat64Bound) {
  // gamma_{min(K, 8 ceil(K/1024)) + 7} of sum |w x| (engine/ops.h: 128 fma partials over
  // octets, then a 7-level tree); K = 771 (one octet per partial, the last short) and
  // K = 2571 (three octets on the first partials).
  for (int64_t K : {771, 2571}) {
    const Bf16Matrix W = random_matrix(48, K, 5);
    const std::vector<float> x = random_rows(3, K, 6);
    std::vector<float> y(3 * 48);
    matmul_rows(W, x.data(), 3, y.data());
    const double u = std::ldexp(1.0, -24), n = double(std::min<int64_t>(K, 8 * ((K + 1023) / 1024)) + 7),
                 gamma = n * u / (1 - n * u);
    for (int i = 0; i < 3; ++i)
      for (int o = 0; o < 48; ++o) {
        double exact = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = double(bf16_bits_to_float(W.row(o)[k])) * x[i * K + k];
          exact += p;
          mag += std::fabs(p);
        }
        EXPECT_LE(std::fabs(y[i * 48 + o] - exact), gamma * mag) << K << ": " << i << "," << o;
      }
  }
}

TEST(EngineOps, RmsNormSwigluEmbedArgmax) {
  const std::vector<float> x = random_rows(4, 96, 9);
  std::vector<float> w(96);
  for (int j = 0; j < 96; ++j) w[j] = 0.75f + 0.005f * j;
  std::vector<float> y(x.size());
  rms_norm_rows(x.data(), w.data(), 4, 96, 1e-6f, y.data());
  for (int i = 0; i < 4; ++i) {
    double ss = 0;
    for (int j = 0; j < 96; ++j) ss += double(x[i * 96 + j]) * x[i * 96 + j];
    const double r = 1 / std::sqrt(ss / 96 + 1e-6);
    for (int j = 0; j < 96; ++j) EXPECT_NEAR(y[i * 96 + j], x[i * 96 + j] * r * w[j], 1e-5 * (1 + std::fabs(y[i * 96 + j])));
  }
  const float g[3] = {-2.0f, 0.0f, 3.0f}, u[3] = {1.5f, 2.0f, -1.0f};
  float s[3];
  swiglu(g, u, 3, s);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(s[i], g[i] / (1 + std::exp(-double(g[i]))) * u[i], 1e-6);
  const Bf16Matrix E = random_matrix(10, 8, 2);
  const int32_t toks[2] = {9, 3};
  float e[16];
  embed_rows(E, toks, 2, e);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(e[j], bf16_bits_to_float(E.row(9)[j]));
    EXPECT_EQ(e[8 + j], bf16_bits_to_float(E.row(3)[j]));
  }
  const float tie[5] = {1.0f, 4.0f, NAN, 4.0f, -1.0f};
  EXPECT_EQ(argmax(tie, 5), 1) << "the lowest index wins a tie; NaN is never chosen";
  const float nan_first[3] = {NAN, -3.0f, -2.0f};
  EXPECT_EQ(argmax(nan_first, 3), 2);
}

// SwiGLU in the documented order, (g / (1 + e^-g)) * u: the quotient first, so where g * u
// is beyond float's range y stays finite (g = -80, u = 3e38: y = -4.3e5; e^80 is a float).
// Multiplying g * u first gives -inf there; the bound test's random data never reaches it.
// The model's weight matrices are rounded to bf16 by round-to-nearest-even (a float32 or
// float16 checkpoint holds values bf16 cannot): above, below and at a tie, both signs.
TEST(EngineOps, WeightsRoundToBf16NearestEven) {
  auto f = [](uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  };
  HostTensor t;
  t.shape = {2, 4};
  t.data = {f(0x3F80C000u), f(0x3F807FFFu), f(0x3F808000u), f(0x3F818000u),
            f(0xBF80C000u), f(0xBF808000u), f(0xBF818000u), f(0x3F800000u)};
  const Bf16Matrix m = Bf16Matrix::from(t);
  EXPECT_EQ(m.rows, 2);
  EXPECT_EQ(m.cols, 4);
  const std::vector<uint16_t> want = {0x3F81, 0x3F80, 0x3F80, 0x3F82, 0xBF81, 0xBF80, 0xBF82, 0x3F80};
  EXPECT_EQ(m.w, want);
}

TEST(EngineOps, SwigluDividesBeforeItMultiplies) {
  const float g[3] = {-80.0f, -60.0f, -50.0f}, u[3] = {3e38f, 1e38f, -2e38f};
  float s[3];
  swiglu(g, u, 3, s);
  for (int i = 0; i < 3; ++i) {
    const double want = g[i] / (1 + std::exp(-double(g[i]))) * u[i];
    ASSERT_TRUE(std::isfinite(s[i])) << "g " << g[i] << " u " << u[i] << ": " << s[i];
    EXPECT_NEAR(s[i], want, 1e-5 * std::fabs(want)) << "g " << g[i] << " u " << u[i];
  }
}

}  // namespace
}  // namespace kc::engine
