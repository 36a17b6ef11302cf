// float64 references for the qwen-pages kernels, on logical (unpaged) inputs, and the
// per-element bounds of numerics.md. No code shared with kernels/.
#pragma once
#include <cstdint>
#include <vector>

#include <Eigen/Dense>

#include "reference/bf16_ref.h"  // bf16_value

namespace kc::ref {

// RoPE, neox pairing, angles pos * base^(-2i/r) in long double.
void rope(const double* x, double* y, int d, int rot_dims, double base, int64_t pos);

// Bound of |fp32 rope(x)_j - rope(x)_j| for the kernel's arithmetic: cos and sin rounded
// once to fp32 (u each), two fp32 products and a sum (gamma_2 with or without FMA).
double rope_bound(const double* x, int d, int rot_dims, double base, int64_t pos, int j);

// Softmax-weighted attention out = sum_i p_i v_i / sum_i p_i, p_i = exp(c q.k_i - max),
// over exactly the keys given (rows of K and V, already dequantised as the kernel
// reads them), with the element bound of numerics.md for a split-K kernel of chunk
// width `chunk`: q.k products accumulate to depth `dot_depth`; one chunk's p.v and l
// sums to depth `acc_depth` (the kernel's order, attention/rows.h), and the merge adds
// one term per chunk, so n' = acc_depth + number of chunks. score_extra (optional) adds a
// known per-key score error (e.g. the fp32 rotation of a q4 query) to term 1.
struct AttnRef {
  std::vector<double> out;
  std::vector<double> bound;
};
AttnRef attention(const Eigen::VectorXd& q, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V, double scale,
                  int chunk, int dot_depth, int acc_depth, const std::vector<double>* score_extra = nullptr);

}  // namespace kc::ref
