// float64 reference for bf16 (1 sign, 8 exponent, 7 fraction bits), written from the
// format definition. Shares no code with kernels/: its own decoder (ldexp on the fields)
// and its own encoder (the nearest of the two bf16 values around v, found by bisection
// over the ordered finite magnitudes; ties to the even code).
#pragma once
#include <cstdint>

namespace kc::ref {

// Exact value of a bf16 pattern: NaN for exponent 255 with a nonzero fraction, +-inf for
// exponent 255 with a zero fraction.
double bf16_value(uint16_t b);
// Round-to-nearest-even encoding of v. Overflow follows IEEE 754: a magnitude at or past
// the largest finite value plus half its ulp (2^128 - 2^119) gives infinity (the tie
// there goes to the even pattern 0x7F80). NaN gives 0x7FC0 with v's sign; zero keeps
// its sign.
uint16_t bf16_from_double(double v);

}  // namespace kc::ref
