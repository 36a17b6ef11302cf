// float64 reference for MXFP4 rows (OCP Microscaling v1.0: E2M1 elements, one E8M0
// exponent per 32), round-up scale variant, written from the format definition. Shares
// no code with kernels/: its own E2M1 table and nearest-value search, its own exponent
// search by comparisons in float64 (no bit tricks), its own nibble packing.
//
// The rule it predicts (kernels/codecs/mxfp4.h states the same rule for the kernels):
//   group of 32; amax = max |x| (a NaN or Inf anywhere poisons the group);
//   e = smallest integer with amax <= 6 * 2^e, clamped to [-127, 127] (amax = 0: -127);
//   exponent byte e + 127, 0xFF for a poisoned group;
//   code = the E2M1 value nearest to x / 2^e (exact in float64), ties to the even
//          code (mantissa bit 0), sign kept (also for zero); poisoned group: code 0;
//   value = code * 2^e as fp32, saturated to +-FLT_MAX; poisoned group: NaN.
#pragma once
#include <cstdint>
#include <vector>

namespace kc::ref {

// Exact value of an E2M1 nibble (bit 3 sign, bits 2..1 exponent with bias 1, bit 0
// mantissa; exponent 0 is the subnormal 0 / 0.5).
double e2m1_value(uint8_t nibble);
// Round-to-nearest-even E2M1 code of v (|v| > 6 saturates to 6; sign kept; NaN -> 0).
uint8_t e2m1_from_double(double v);
// 2^(b - 127) for an E8M0 byte; NaN for 0xFF.
double e8m0_value(uint8_t b);
// The unclamped exponent rule: the smallest integer e with amax <= 6 * 2^e (amax > 0,
// finite), found by comparisons against exact powers of two.
int mx_exponent_unclamped(double amax);

struct Mxfp4RowRef {
  std::vector<uint8_t> codes;      // d/2 bytes, packed as the code plane stores them
  std::vector<uint8_t> exponents;  // d/32 E8M0 bytes
  std::vector<uint8_t> poisoned;   // per group: 1 when a non-finite input poisoned it
  std::vector<float> values;       // decoded
  std::vector<double> bound;       // |value_i - x_i| <= bound_i (derived below)
};
Mxfp4RowRef mxfp4_row(const float* x, int d);

// The per-element roundtrip bound |decode(encode(x)) - x| for x in a group of exponent
// e (s = 2^e), derived from the rule above:
//   1. y = x / s: every |x| <= amax <= 6 s, so |y| <= 6: the E2M1 grid covers y and no
//      value clips (this is what rounding the scale *up* buys).
//   2. The grid 0, 0.5, 1, 1.5, 2, 3, 4, 6 has gaps 0.5 on [0, 2], 1 on [2, 4], 2 on
//      [4, 6]; round to nearest errs by at most half the gap of the interval holding
//      |y|: h(|y|) = 0.25 (|y| <= 2), 0.5 (|y| <= 4), 1 (|y| <= 6). Ties meet it with
//      equality, so the bound is attained (worst ratio exactly 1 on tie inputs).
//   3. Decoding multiplies a code of at most two significant bits by a power of two:
//      exact in fp32, down to 2^-128 (e >= -127) — no rounding term.
//   4. Saturation at decode (exact value above FLT_MAX): x <= FLT_MAX < exact value,
//      so FLT_MAX lies between x and the exact value: the error only shrinks.
//   5. The kernels' y = fl(x * 2^-e) is exact unless |y| < 2^-126, where it rounds to
//      0 either way (error |x| <= 0.25 s).
//   Hence |value - x| <= h(|x| / s) * s. Every quantity is a power of two times a
//   small integer, so the bound is computed exactly in float64: no safety factor. A
//   floor-based (clipping) scale errs by up to |x| - 6 s (25 % of the group maximum)
//   and fails it; so does a decode against the wrong group's exponent.
double mxfp4_element_bound(double x, int e);

}  // namespace kc::ref
