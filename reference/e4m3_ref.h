// float64 reference for E4M3 ("E4M3FN") and for fp8 rows, written from the format
// definition. Shares no code with kernels/: its own bit decoder (ldexp on the fields),
// its own encoder (nearest of the 126 finite magnitudes, ties to the even code).
#pragma once
#include <cstdint>
#include <vector>

namespace kc::ref {

// Exact value of an E4M3 code (NaN for 0x7F / 0xFF).
double e4m3_value(uint8_t code);
// Satfinite round-to-nearest-even encoding of v: |v| > 448 gives 448, NaN gives 0x7F,
// zero keeps its sign.
uint8_t e4m3_from_double(double v);

// The fp8 row rule, predicted exactly in float64 (see kernels/codecs/fp8.h for the rule;
// this side derives it from the math):
//   scale = fp32(amax / 448)  (a double quotient rounded once to float equals the fp32
//          quotient: 53 >= 2*24 + 2, so double rounding is innocuous for division);
//   code_i = E4M3(fp32(x_i / scale)); value_i = fp32(e4m3(code_i) * scale) (the double
//          product is exact: 4 + 24 significant bits).
struct Fp8RowRef {
  float scale = 0;
  bool poisoned = false;       // a non-finite input: scale NaN, codes 0x7F, values NaN
  std::vector<uint8_t> codes;
  std::vector<float> values;   // decoded
  std::vector<double> bound;   // |value_i - x_i| <= bound_i (derived below)
};
Fp8RowRef fp8_row(const float* x, int d);

// The per-element bound of |decode(encode(x))_i - x_i|, derived from the error model
// (numerics.md), with s the row scale and y_i = x_i / s:
//   quantisation: RNE to E4M3 errs by at most max(2^-4 |y|, 2^-10) (half an ulp of a
//                 normal, half the subnormal step 2^-9), times s;
//   the fp32 quotient y = fl(x/s) adds u |x| (u = 2^-24) after scaling back;
//   saturation: if |x|/s exceeds 448 (a scale rounded down, or 0 after underflow) the
//               code clips: max(0, |x| - 448 s);
//   the fp32 product code * s adds u |value| and at most 2^-150 when it is subnormal.
// Each term is a worst case; the sum is multiplied by 1 + 2^-20 for the rounding of
// the bound's own arithmetic, not by a loose safety factor, so a truncating encoder
// (errors up to one full ulp, 2^-3 relative) fails it.
double fp8_element_bound(double x, double s, double value);

}  // namespace kc::ref
