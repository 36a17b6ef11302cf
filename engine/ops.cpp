#include "engine/ops.h"

#include "engine/safetensors.h"
#include "kernels/engine/twin.h"

namespace kc::engine {

Bf16Matrix Bf16Matrix::from(const HostTensor& t) {
  Bf16Matrix m;
  m.rows = t.shape.size() == 2 ? t.shape[0] : 1;
  m.cols = t.shape.size() == 2 ? t.shape[1] : t.numel();
  m.w.resize(t.data.size());
  for (size_t i = 0; i < t.data.size(); ++i) m.w[i] = f32_to_bf16(t.data[i]);
  return m;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t k) { return engine_dot_bf16(w, x, k); }
float dot_f32(const float* p, const float* q, int64_t k) { return engine_dot_f32(p, q, k); }

void embed_rows(const Bf16Matrix& E, const int32_t* tokens, int n, float* out) {
  engine_embed_host(E.w.data(), E.cols, tokens, n, out);
}

void rms_norm_rows(const float* x, const float* w, int n, int dim, float eps, float* out) {
  engine_rms_norm_host(x, w, n, dim, eps, out);
}

void matmul_rows(const Bf16Matrix& W, const float* x, int n, float* y) {
  engine_matmul_host(W.w.data(), W.rows, W.cols, x, n, y);
}

void swiglu(const float* gate, const float* up, int64_t count, float* out) { engine_swiglu_host(gate, up, count, out); }

int32_t argmax(const float* x, int64_t n) { return engine_argmax_row(x, n); }

}  // namespace kc::engine
