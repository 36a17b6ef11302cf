#include "engine/ops.h"

#include <cmath>

#include "engine/safetensors.h"

namespace kc::engine {

Bf16Matrix Bf16Matrix::from(const HostTensor& t) {
  Bf16Matrix m;
  m.rows = t.shape.size() == 2 ? t.shape[0] : 1;
  m.cols = t.shape.size() == 2 ? t.shape[1] : t.numel();
  m.w.resize(t.data.size());
  for (size_t i = 0; i < t.data.size(); ++i) m.w[i] = f32_to_bf16(t.data[i]);
  return m;
}

namespace {

// The fixed tree over the 8 accumulators.
inline float tree8(const float* a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

}  // namespace

float dot_bf16(const uint16_t* w, const float* x, int64_t k) {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) a[j] = std::fmaf(bf16_bits_to_float(w[i + j]), x[i + j], a[j]);
  for (; i < k; ++i) a[i % 8] = std::fmaf(bf16_bits_to_float(w[i]), x[i], a[i % 8]);
  return tree8(a);
}

float dot_f32(const float* p, const float* q, int64_t k) {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) a[j] = std::fmaf(p[i + j], q[i + j], a[j]);
  for (; i < k; ++i) a[i % 8] = std::fmaf(p[i], q[i], a[i % 8]);
  return tree8(a);
}

void embed_rows(const Bf16Matrix& E, const int32_t* tokens, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const uint16_t* r = E.row(tokens[i]);
    for (int64_t j = 0; j < E.cols; ++j) out[i * E.cols + j] = bf16_bits_to_float(r[j]);
  }
}

void rms_norm_rows(const float* x, const float* w, int n, int dim, float eps, float* out) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * dim;
    float* yi = out + int64_t(i) * dim;
    const float ss = dot_f32(xi, xi, dim);
    const float r = 1.0f / std::sqrt(ss / float(dim) + eps);
    for (int j = 0; j < dim; ++j) yi[j] = (xi[j] * r) * w[j];
  }
}

void matmul_rows(const Bf16Matrix& W, const float* x, int n, float* y) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * W.cols;
    float* yi = y + int64_t(i) * W.rows;
    for (int64_t o = 0; o < W.rows; ++o) yi[o] = dot_bf16(W.row(o), xi, W.cols);
  }
}

void swiglu(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

int32_t argmax(const float* x, int64_t n) {
  int32_t best = 0;
  bool found = false;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (!found || x[i] > x[best]) {
      best = int32_t(i);
      found = true;
    }
  }
  return best;
}

}  // namespace kc::engine
