// float64 references of the engine kernels (embedding, RMSNorm, bf16-weight matrix
// product, SwiGLU, logits, greedy argmax) with their derived bounds. Shares no code with
// kernels/: weights decode through reference/bf16_ref (ldexp on the fields), every sum is
// a plain float64 loop. u = 2^-24. The matrix product's dot of length K (kernels/engine/
// rows.h: 128 partials, partial p takes the octets p, p + 128, ... with fused
// multiply-adds, then a 7-level halving tree) rounds at most min(K, 8 ceil(K/1024)) + 7
// times on any path, so
//   |dot - exact| <= gamma_{min(K, 8 ceil(K/1024)) + 7} * sum_k |w_k x_k|   (product_depth)
// RMSNorm's sum of squares (8 chains of fused multiply-adds, ceil(K/8) roundings each,
// then a 3-level tree) has depth ceil(K/8) + 3 (dot_depth). The float64 sum itself adds
// gamma_K(2^-53) of the same sum.
//   RMSNorm  y_j = x_j w_j / sqrt(ss/dim + eps): ss carries gamma_m (all terms positive),
//            /dim and +eps two roundings (gamma_{m+2} relative), sqrt halves it and adds u,
//            1/ adds u, two products 2u: relative 0.5 gamma_{m+2} + gamma_4 per element.
//   SwiGLU   (g / (1 + e^-g)) u: expf's relative error kExpErr (bounds.h) carries to
//            1 + e^-g at most as is; +, /, * one rounding each: kExpErr + gamma_3; plus
//            |g u| 2^-126 absolute: for -g beyond about 88.72 float's e^-g is inf and the
//            result 0, while the exact |y| < |g u| 2^-127.99 (found on the H200 at 1,500 cases).
//   logits   W . RMSNorm(h): rho (RMSNorm's relative bound) and the dot's gamma_m:
//            (gamma_m (1 + rho) + rho) sum_k |W_k y_k| (y the exact norm output).
// Every bound adds 2^-140 absolute for rounding near the subnormal range (the cases keep
// values normal); the first-order bounds are multiplied by 1 + 2^-20 for the dropped
// second-order terms.
#pragma once
#include <cstdint>
#include <vector>

namespace kc::ref {

struct EngineRef {
  std::vector<double> value;  // the exact-ish float64 result per output element
  std::vector<double> bound;  // the derived bound on |fp32 result - value|
};

// Rounding depth of RMSNorm's sum of squares of length k.
int dot_depth(int64_t k);
// Rounding depth of the matrix product's (and the logits') dot of length k.
int product_depth(int64_t k);

// y[i][o] = sum_k W[o][k] x[i][k]; W as bf16 patterns [rows][cols].
EngineRef matmul_ref(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n);
EngineRef rms_norm_ref(const float* x, const float* w, int n, int dim, double eps);
EngineRef swiglu_ref(const float* gate, const float* up, int64_t count);
// Logits of the selected rows of h.
EngineRef logits_ref(const float* h, const std::vector<int32_t>& sel, int dim, const float* norm, double eps,
                     const uint16_t* W, int64_t vocab);
// Embedding rows (exact: bf16 widens to fp32 without rounding); bound 0.
EngineRef embed_ref(const uint16_t* E, int64_t dim, const int32_t* tokens, int n);
// Lowest index of the largest non-NaN value of each row; 0 for a row of NaN.
std::vector<int32_t> argmax_ref(const float* x, int n, int64_t len);

}  // namespace kc::ref
