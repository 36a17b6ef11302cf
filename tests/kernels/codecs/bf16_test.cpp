// bf16 conversion (kernels/attention/rows.h: the rope store's k and v rows and the
// tensor-core q split) against the float64 reference: every pattern decoded, the
// neighbourhood of every pattern encoded (ties included), edges, and random bits.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/attention/rows.h"
#include "reference/bf16_ref.h"

namespace kc {
namespace {

TEST(Bf16, EdgeConversions) {
  struct E { uint32_t in; uint16_t out; const char* what; };
  const E edges[] = {
      {0x3F800000u, 0x3F80, "1"},
      {0x3F808000u, 0x3F80, "tie between 1 and its successor: to the even 1"},
      {0x3F818000u, 0x3F82, "tie above an odd pattern: up to the even one"},
      {0x3F808001u, 0x3F81, "just past the tie: up"},
      {0x3F807FFFu, 0x3F80, "just below the tie: down"},
      {0xBF818000u, 0xBF82, "negative tie: magnitude to even"},
      {0x3FFF8000u, 0x4000, "tie that carries into the exponent"},
      {0x7F7F0000u, 0x7F7F, "largest finite"},
      {0x7F7F7FFFu, 0x7F7F, "below largest finite + half an ulp"},
      {0x7F7F8000u, 0x7F80, "largest finite + half an ulp: tie to even = infinity"},
      {0x7F7FFFFFu, 0x7F80, "largest float: infinity"},
      {0x7F800000u, 0x7F80, "infinity"},
      {0xFF800000u, 0xFF80, "-infinity"},
      {0x7FC00000u, 0x7FC0, "quiet NaN"},
      {0x7F800001u, 0x7FC0, "signalling NaN quieted"},
      {0xFFFFFFFFu, 0xFFC0, "negative NaN keeps its sign"},
      {0x00000000u, 0x0000, "+0"},
      {0x80000000u, 0x8000, "-0"},
      {0x00008000u, 0x0000, "subnormal tie at zero: to even 0"},
      {0x00018000u, 0x0002, "subnormal tie above 1: up to even 2"},
      {0x007F8000u, 0x0080, "tie from the largest subnormal to the smallest normal"},
      {0x00000001u, 0x0000, "smallest float subnormal"},
  };
  for (const E& e : edges) {
    EXPECT_EQ(bf16_from_float(bits_float(e.in)), e.out) << e.what;
    EXPECT_EQ(ref::bf16_from_double(double(bits_float(e.in))), e.out) << "reference: " << e.what;
  }
}

TEST(Bf16, DecodeMatchesReferenceOnAllPatterns) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const double want = ref::bf16_value(uint16_t(b));
    const float got = bf16_to_float(uint16_t(b));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << std::hex << b;
    else ASSERT_EQ(double(got), want) << std::hex << b;
  }
}

// Every bf16 pattern's neighbourhood: the pattern itself, one float above, just below,
// at and just above the tie with the next pattern, and the last float before it.
TEST(Bf16, EncodeMatchesReferenceAroundEveryPattern) {
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
  for (uint32_t hi = 0; hi < 0x10000u; ++hi)
    for (uint32_t lo : lows) {
      const uint32_t bits = (hi << 16) | lo;
      const float x = bits_float(bits);
      ASSERT_EQ(bf16_from_float(x), ref::bf16_from_double(double(x))) << std::hex << "bits 0x" << bits;
    }
}

RC_GTEST_PROP(Bf16, EncodeEqualsReferenceOnAnyBits, (uint32_t bits)) {
  const float x = bits_float(bits);
  RC_ASSERT(bf16_from_float(x) == ref::bf16_from_double(double(x)));
}

}  // namespace
}  // namespace kc
