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

}  // namespace
}  // namespace kc::engine
