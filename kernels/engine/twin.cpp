// Host twins of the engine kernels: one output element at a time, in the order of rows.h.
#include "kernels/engine/twin.h"

#include <algorithm>
#include <cmath>

#include "kernels/engine/rows.h"
#include "kernels/layout/host_fma.h"

namespace kc {

KC_HOST_FMA float engine_dot_bf16(const uint16_t* w, const float* x, int64_t k) {
  // The product's order (rows.h): 128 partials, partial p takes the octets b = p (mod 128)
  // in ascending b, then the halving tree.
  float s[eng::kDotParts] = {};
  const int64_t octets = (k + eng::kDotOctet - 1) / eng::kDotOctet;
  for (int64_t b = 0; b < octets; ++b) {
    float& a = s[b % eng::kDotParts];
    const int64_t end = std::min<int64_t>(k, (b + 1) * eng::kDotOctet);
    for (int64_t i = b * eng::kDotOctet; i < end; ++i) a = eng::fma_rn(eng::bf16_to_f32(w[i]), x[i], a);
  }
  for (int h = eng::kDotParts / 2; h >= 1; h /= 2)
    for (int p = 0; p < h; ++p) s[p] = eng::add_rn(s[p], s[p + h]);
  return s[0];
}

KC_HOST_FMA float engine_dot_f32(const float* p, const float* q, int64_t k) {
  float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int j = 0; j < 8; ++j) a[j] = eng::fma_rn(p[i + j], q[i + j], a[j]);
  for (; i < k; ++i) a[i % 8] = eng::fma_rn(p[i], q[i], a[i % 8]);
  return eng::tree8(a);
}

void engine_embed_host(const uint16_t* E, int64_t dim, const int32_t* tokens, int n, float* out) {
  for (int i = 0; i < n; ++i) {
    const uint16_t* r = E + int64_t(tokens[i]) * dim;
    for (int64_t j = 0; j < dim; ++j) out[i * dim + j] = eng::bf16_to_f32(r[j]);
  }
}

void engine_rms_norm_host(const float* x, const float* w, int n, int dim, float eps, float* out) {
#ifdef KC_PLANT_ENGINE_RMS_NO_EPS
  eps = 0.0f;  // plant (mutant engine-rms-no-eps): the epsilon dropped from RMSNorm
#endif
  for (int i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * dim;
    float* yi = out + int64_t(i) * dim;
    const float r = eng::rms_factor(engine_dot_f32(xi, xi, dim), dim, eps);
    for (int j = 0; j < dim; ++j) yi[j] = eng::rms_apply(xi[j], r, w[j]);
  }
}

void engine_matmul_host(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) {
  for (int i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * cols;
    float* yi = y + int64_t(i) * rows;
    for (int64_t o = 0; o < rows; ++o) yi[o] = engine_dot_bf16(W + o * cols, xi, cols);
#ifdef KC_PLANT_ENGINE_BATCH_ORDER
    // plant (mutant engine-batch-order): in a batch, rows after the first reduce in plain
    // ascending order with one accumulator, as a kernel tiled by batch size might
    if (n > 1 && i > 0)
      for (int64_t o = 0; o < rows; ++o) {
        float acc = 0.0f;
        for (int64_t k = 0; k < cols; ++k) acc = eng::fma_rn(eng::bf16_to_f32(W[o * cols + k]), xi[k], acc);
        yi[o] = acc;
      }
#endif
  }
}

void engine_swiglu_host(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

int32_t engine_argmax_row(const float* x, int64_t n) {
  int64_t best = 0;
  bool has = false;
  for (int64_t i = 0; i < n; ++i)
    if (eng::argmax_beats(x[i], i, has, has ? x[best] : 0.0f, best)) {
      best = i;
      has = true;
    }
  return int32_t(best);
}

void engine_argmax_host(const float* x, int n, int64_t len, int32_t* out) {
  for (int i = 0; i < n; ++i) out[i] = engine_argmax_row(x + int64_t(i) * len, len);
}

void engine_logits_host(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps,
                        const uint16_t* W, int64_t vocab, float* tmp, float* out) {
  for (int j = 0; j < m; ++j) {
    engine_rms_norm_host(h + int64_t(sel[j]) * dim, norm, 1, dim, eps, tmp);
    engine_matmul_host(W, vocab, dim, tmp, 1, out + int64_t(j) * vocab);
#ifdef KC_PLANT_ENGINE_BATCH_ORDER
    if (m > 1 && j > 0)  // plant: as in engine_matmul_host
      for (int64_t o = 0; o < vocab; ++o) {
        float acc = 0.0f;
        for (int k = 0; k < dim; ++k) acc = eng::fma_rn(eng::bf16_to_f32(W[o * dim + k]), tmp[k], acc);
        out[int64_t(j) * vocab + o] = acc;
      }
#endif
  }
}

}  // namespace kc
