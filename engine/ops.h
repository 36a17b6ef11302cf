// Engine math on the host: embedding gather, RMSNorm, matrix product with bf16 weights
// and fp32 activations, SwiGLU, greedy argmax. These are the engine's face of the host
// twins of the engine kernels (kernels/engine/twin.h; the CUDA kernels are
// kernels/engine/kernels.cu, the contract `rows-invariant`); the order below is fixed in
// kernels/engine/rows.h, shared by both sides.
//
// Layouts: activations are row-major [n][dim] fp32, one row per token of a batch.
// Weights are Hugging Face linear weights [out_features][in_features], stored as bf16
// bit patterns (uint16, round-to-nearest-even from the checkpoint's values; a bf16
// checkpoint is kept exactly).
//
// Batch invariance (the property every function here promises): output row r depends
// only on input row r and the weights, and every output element is reduced in one fixed
// order that depends on nothing but the reduction length. So a row's bytes are the same
// whether it is computed alone, first or last in a batch of 64. Concretely:
//   dot(w, x) of the matrix product over K elements: the elements in octets of 8; 128
//     fp32 partials, partial p takes the octets p, p + 128, p + 256, ... (each octet's
//     elements in ascending k) with std::fmaf, then the halving tree s_p += s_{p+h} for
//     h = 64, 32, ..., 1 (the device runs one partial per thread of a 128-thread block).
//   RMSNorm sum of squares: 8 accumulators a_j over k = j (mod 8), then the fixed tree
//     ((a_0 + a_4) + (a_2 + a_6)) + ((a_1 + a_5) + (a_3 + a_7)).
// Nothing here splits a reduction by batch size or thread count.
//
// Bound (float64 reference): the product's dot of length K has relative error at most
// gamma_{min(K, 8 ceil(K/1024)) + 7} (u = 2^-24) of sum |w_k x_k|; weights are exact, so
// the matrix product adds nothing else.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/checkpoint.h"

namespace kc::engine {

// A linear weight kept as bf16: rows = out_features, cols = in_features.
struct Bf16Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<uint16_t> w;  // [rows][cols]
  // From a 2-D host tensor (values rounded to bf16, nearest even; exact for bf16 files).
  static Bf16Matrix from(const HostTensor& t);
  const uint16_t* row(int64_t r) const { return w.data() + r * cols; }
};

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// The fixed-order dot products (see above).
float dot_bf16(const uint16_t* w, const float* x, int64_t k);
float dot_f32(const float* a, const float* b, int64_t k);

// out[i][:] = E[tokens[i]][:] (bf16 rows widened to fp32). Tokens must be in range
// (the caller checks; an out-of-range token is a programming error here).
void embed_rows(const Bf16Matrix& E, const int32_t* tokens, int n, float* out);

// out[i][j] = x[i][j] * (1 / sqrt(sum_j x[i][j]^2 / dim + eps)) * w[j]; out may alias x.
void rms_norm_rows(const float* x, const float* w, int n, int dim, float eps, float* out);

// y[i][o] = dot(W[o], x[i]) for i < n, o < W.rows; x is [n][W.cols], y is [n][W.rows].
void matmul_rows(const Bf16Matrix& W, const float* x, int n, float* y);

// out[i] = silu(gate[i]) * up[i], silu(z) = z / (1 + exp(-z)), over n * dim elements.
void swiglu(const float* gate, const float* up, int64_t count, float* out);

// Index of the largest of x[0..n); the lowest index wins a tie; NaN is never chosen
// (all NaN: 0).
int32_t argmax(const float* x, int64_t n);

}  // namespace kc::engine
