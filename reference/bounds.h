// The numerics policy in one place: unit roundoffs, gamma_n and the named terms of the
// float64 bounds (numerics.md, "Error model for the float64 bound").
#pragma once
#include <cmath>

namespace kc::bound {

constexpr double kU32 = 5.9604644775390625e-08;   // fp32 unit roundoff 2^-24
constexpr double kUBf16 = 0.00390625;             // bf16 unit roundoff 2^-8
// expf without fast math: 2 ulp on the device (CUDA programming guide), <= 1 ulp in
// glibc; an ulp of a result in [2^k, 2^k+1) is 2^-23 relative at most.
constexpr double kExpErr = 2.0 * 1.1920928955078125e-07;
// The attention bound is first order in u (numerics.md, derived); the factor covers
// the dropped second-order terms and is the only slack. Stated in the receipt.
constexpr double kAttnSafety = 2.0;

inline double gamma(double n, double u = kU32) { return n * u / (1.0 - n * u); }

}  // namespace kc::bound
