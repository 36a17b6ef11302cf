// The fp8 row helpers against the float64 reference, on edges and random inputs.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/backend/backend.h"
#include "kernels/codecs/fp8.h"
#include "reference/e4m3_ref.h"

namespace kc {
namespace {

TEST(E4M3, EdgeConversions) {
  struct E { float x; uint8_t code; };
  const E edges[] = {
      {448.f, 0x7E},   {464.f, 0x7E},   {465.f, 0x7E},   {1e30f, 0x7E},  {-448.f, 0xFE},
      {std::numeric_limits<float>::infinity(), 0x7E},    {-std::numeric_limits<float>::infinity(), 0xFE},
      {std::ldexp(1.f, -10), 0x00},     {-std::ldexp(1.f, -10), 0x80},   {std::ldexp(1.f, -9), 0x01},
      {std::ldexp(3.f, -10), 0x02},     // 1.5 * 2^-9 ties to the even code 2
      {std::ldexp(5.f, -10), 0x02},     // 2.5 * 2^-9 ties to 2
      {std::ldexp(1.f, -6), 0x08},      {1.0625f, 0x38},  // tie between 1 and 1.125 -> 1
      {1.1875f, 0x3A},                  // tie between 1.125 and 1.25 -> 1.25 (even)
      {0.0f, 0x00},    {-0.0f, 0x80},   {std::numeric_limits<float>::quiet_NaN(), 0x7F},
  };
  for (const E& e : edges) {
    EXPECT_EQ(int(e4m3_encode(e.x)), int(e.code)) << "x=" << e.x;
    EXPECT_EQ(int(ref::e4m3_from_double(e.x)), int(e.code)) << "reference, x=" << e.x;
  }
}

TEST(E4M3, DecodeMatchesReferenceOnAllCodes) {
  for (int c = 0; c < 256; ++c) {
    const double want = ref::e4m3_value(uint8_t(c));
    const float got = e4m3_decode(uint8_t(c));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << c;
    else EXPECT_EQ(double(got), want) << c;
  }
}

RC_GTEST_PROP(E4M3, SoftEncoderEqualsReferenceOnAnyBits, (uint32_t bits)) {
  const float x = bits_float(bits);
  RC_ASSERT(int(e4m3_encode_soft(x)) == int(ref::e4m3_from_double(x)));
}

// The cpu backend's e4m3_encode_bits (the exhaustive check's host side): a range that
// ends exactly at 2^32 is valid, one past it is refused.
TEST(E4M3, CpuEncodeBitsRangeEndsAt2To32) {
  const auto be = make_cpu_backend();
  const uint64_t end = uint64_t(1) << 32;
  uint8_t out[5] = {0, 0, 0, 0, 0x5A};
  const Status st = be->e4m3_encode_bits(end - 4, 4, out);
  ASSERT_TRUE(st.ok) << st.message;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(int(out[i]), int(e4m3_encode(bits_float(uint32_t(end - 4 + i))))) << i;  // -NaN: 0xFF
  EXPECT_EQ(out[4], 0x5A);
  EXPECT_TRUE(be->e4m3_encode_bits(0, 3, out).ok);
  const Status past = be->e4m3_encode_bits(end - 3, 4, out);
  EXPECT_FALSE(past.ok);
  EXPECT_NE(past.message.find("range past 2^32"), std::string::npos) << past.message;
}

TEST(Fp8Row, DefinedEdgeRules) {
  // amax = 0: scale 0, zero codes.
  EXPECT_EQ(fp8_row_scale(0.0f), 0.0f);
  EXPECT_EQ(fp8_code(-0.0f, 0.0f), 0);
  // Non-finite amax poisons the row.
  EXPECT_TRUE(std::isnan(fp8_row_scale(std::numeric_limits<float>::infinity())));
  EXPECT_EQ(fp8_code(1.0f, fp8_row_scale(std::numeric_limits<float>::infinity())), kE4M3NaN);
  float acc = 0;
  for (float v : {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f}) acc = amax_step(acc, v);
  EXPECT_TRUE(std::isnan(acc)) << "a NaN must survive the amax reduction";
  // The row maximum encodes to 448 exactly.
  const float s = fp8_row_scale(3.7f);
  EXPECT_EQ(fp8_code(3.7f, s), 0x7E);
}

}  // namespace
}  // namespace kc
