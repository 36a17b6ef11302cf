// float64 reference for q4 rows (Hadamard-rotated 4-bit groups of 32 with an fp16
// scale), written from the math and from the documented rule (kernels/codecs/q4.h). Shares
// no code with kernels/: H32 is a matrix of +-1 here, the fast transform is re-derived
// from the Sylvester recursion H_2n = [[H_n, H_n], [H_n, -H_n]] with every fp32 add
// emulated in double (a double sum of two floats rounded once to float is the fp32 sum),
// the fp16 conversion is a nearest-value search on frexp/ldexp, the integer rounding an
// explicit tie rule.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace kc::ref {

// H(i,j) = (-1)^popcount(i & j), 32 x 32.
int h32(int i, int j);
// y = H x in float64 (the matrix product, outputs summed in index order).
void h32_apply(const double* x, double* y);
// The fp32 fast transform as documented, times the power of two `pow2` (2^-3 fwd,
// 2^-2 inv): y = fl32 result, bit for bit.
void h32_fp32(const float* x, double pow2, float* y);
// A rigorous per-output bound of |h32_fp32(x, pow2)_i - pow2 * (H x)_i| (derived in q4_ref.cpp).
void h32_fp32_bound(const float* x, double pow2, double* err);

// fp16: nearest value, ties to the even significand; >= 65520 gives Inf; NaN 0x7E00.
uint16_t fp16_from_double(double v);
double fp16_value(uint16_t h);  // NaN for NaN patterns

struct Q4GroupRef {
  bool poisoned = false;          // a non-finite rotated value: scale 0x7E00, codes 0x00, values NaN
  bool clipped = false;           // some |y_i| / s beyond 7.5 (saturated or coarse scale), or s = 0 with y != 0
  uint16_t scale_bits = 0;
  double scale = 0;
  std::array<uint8_t, 16> codes{};
  std::array<float, 32> rotated{};  // fp32 fwd-rotated inputs (emulated exactly)
  std::array<double, 32> deq{};     // code_i * scale (rotated space)
  std::array<float, 32> values{};   // decoded, original space (exact)
  std::array<double, 32> bound{};   // |values_j - x_j| <= bound_j (roundtrip, derived)
};
// One row of d (d % 32 == 0) original-space values: d / 32 groups.
std::vector<Q4GroupRef> q4_row(const float* x, int d);

// Decoded original-space values of arbitrary group bytes (16 code bytes, fp16 scale
// bits): 2^-2 H (code_i * s) with code = nibble - 8, exact; NaN when s is not finite.
std::array<double, 32> q4_decode_bytes(const uint8_t* codes16, uint16_t scale_bits);

// q.k through the rotation: q (original space), q_rot (the kernel helpers' fp32 inv-
// rotated query), z (dequantized rotated key, finite). got = q_rot . z, want =
// q . (2^-2 H z) (the key decoded to original space), both in float64; |got - want| <=
// bound (derived in q4_ref.cpp).
struct Q4DotRef {
  double got = 0;
  double want = 0;
  double bound = 0;
};
Q4DotRef q4_dot(const float* q, const float* q_rot, const float* z, int d);

}  // namespace kc::ref
