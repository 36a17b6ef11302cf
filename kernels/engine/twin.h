// Host twins of the engine kernels (kernels.cu), in the order kernels/engine/rows.h fixes.
// Layouts: activations row-major [n][dim] fp32; a weight [rows][cols] of bf16 bit patterns
// (Hugging Face linear layout: rows = out_features). engine/ops.h is the engine's face of
// these; the cpu backend's EngineBackend runs them.
#pragma once
#include <cstdint>

namespace kc {

float engine_dot_bf16(const uint16_t* w, const float* x, int64_t k);
float engine_dot_f32(const float* a, const float* b, int64_t k);
// out[i][:] = E[tokens[i]][:] widened; tokens in range (the caller checks).
void engine_embed_host(const uint16_t* E, int64_t dim, const int32_t* tokens, int n, float* out);
// out may alias x.
void engine_rms_norm_host(const float* x, const float* w, int n, int dim, float eps, float* out);
// y[i][o] = dot(W[o], x[i]).
void engine_matmul_host(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y);
void engine_swiglu_host(const float* gate, const float* up, int64_t count, float* out);
// out[i] = argmax of row i of x ([n][len]).
void engine_argmax_host(const float* x, int n, int64_t len, int32_t* out);
int32_t engine_argmax_row(const float* x, int64_t len);
// Logits of the selected rows: out[j][:] = W . RMSNorm(h[sel[j]]; norm), [m][vocab];
// tmp holds dim floats.
void engine_logits_host(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps,
                        const uint16_t* W, int64_t vocab, float* tmp, float* out);

}  // namespace kc
