// The mxfp4 row helpers against the float64 reference, on edges and random inputs.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/codecs/mxfp4.h"
#include "reference/mxfp4_ref.h"

namespace kc {
namespace {

TEST(E2M1, TiesRoundToEvenAsTheSpecTableSays) {
  struct T { float y; float to; };
  const T ties[] = {{0.25f, 0.f}, {0.75f, 1.f}, {1.25f, 1.f}, {1.75f, 2.f}, {2.5f, 2.f}, {3.5f, 4.f}, {5.f, 4.f}};
  for (const T& t : ties)
    for (float s : {1.f, -1.f}) {
      EXPECT_EQ(e2m1_decode(e2m1_encode(s * t.y)), s * t.to) << "y=" << s * t.y;
      EXPECT_EQ(ref::e2m1_value(ref::e2m1_from_double(s * t.y)), s * t.to) << "reference, y=" << s * t.y;
      // One float either side of a tie goes to the nearer neighbour.
      const float below = std::nextafter(t.y, 0.f), above = std::nextafter(t.y, 10.f);
      EXPECT_EQ(e2m1_encode(s * below), ref::e2m1_from_double(s * below)) << "y=" << s * below;
      EXPECT_EQ(e2m1_encode(s * above), ref::e2m1_from_double(s * above)) << "y=" << s * above;
      EXPECT_LT(std::fabs(ref::e2m1_value(ref::e2m1_from_double(below))),
                std::fabs(ref::e2m1_value(ref::e2m1_from_double(above))));
    }
  EXPECT_EQ(e2m1_encode(6.5f), 0x7);   // beyond 6 saturates (unreachable from encode)
  EXPECT_EQ(e2m1_encode(-0.0f), 0x8);  // the sign of zero is kept
  EXPECT_EQ(e2m1_encode(-0.1f), 0x8);
}

TEST(E2M1, DecodeMatchesReferenceOnAllNibbles) {
  const float want[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(double(e2m1_decode(uint8_t(c))), ref::e2m1_value(uint8_t(c))) << c;
    EXPECT_EQ(e2m1_decode(uint8_t(c)), (c & 8 ? -1.f : 1.f) * want[c & 7]) << c;
    EXPECT_EQ(std::signbit(e2m1_decode(uint8_t(c))), c >= 8) << c;
  }
}

// Attention's reading of an mxfp4 element (the fma partial's conv4 / elem_scale, which
// avoid mx_value's branches) against mx_value and the float64 reference on every nibble
// and exponent byte: the same bits (NaN for 0xFF), saturation at e = 126 included.
TEST(MxAttention, ElementReadEqualsMxValueOnAllPairs) {
  int nan = 0, saturated = 0, subnormal = 0;
  for (int b = 0; b < 256; ++b)
    for (uint32_t nib = 0; nib < 16; ++nib) {
      const float got = mx_attn_value(nib, mx_half_scale(uint8_t(b)));
      const float want = mx_value(uint8_t(nib), uint8_t(b));
      if (b == kE8M0NaN) {
        EXPECT_TRUE(std::isnan(got)) << "nibble " << nib;
        ++nan;
        continue;
      }
      EXPECT_EQ(float_bits(got), float_bits(want)) << "nibble " << nib << " byte " << b;
      const double exact = ref::e2m1_value(uint8_t(nib)) * ref::e8m0_value(uint8_t(b));
      const double sat = std::fabs(exact) > double(FLT_MAX) ? std::copysign(double(FLT_MAX), exact) : exact;
      EXPECT_EQ(double(got), sat) << "nibble " << nib << " byte " << b;
      EXPECT_EQ(std::signbit(got), (nib & 8u) != 0) << "nibble " << nib << " byte " << b;
      saturated += std::fabs(exact) > double(FLT_MAX);
      subnormal += got != 0 && std::fabs(got) < FLT_MIN;
    }
  EXPECT_EQ(nan, 16);
  EXPECT_EQ(saturated, 12);  // e = 126: 4 and 6; e = 127 (byte 254, hand-made): 2, 3, 4, 6; either sign
  EXPECT_GT(subnormal, 0);
}

TEST(MxExponent, BinadeEdgesFromBits) {
  for (int e = -126; e <= 125; ++e) {
    const float six = std::ldexp(6.0f, e);
    EXPECT_EQ(int(mx_group_exponent(six)), std::max(e, -127) + 127) << e;
    EXPECT_EQ(int(mx_group_exponent(std::nextafter(six, 0.f))), std::max(e, -127) + 127) << e;
    EXPECT_EQ(int(mx_group_exponent(std::nextafter(six, FLT_MAX))), std::max(e + 1, -127) + 127) << e;
  }
  // Just below a power of two: floorf(log2f(a)) rounds up there; the bits do not.
  const float below4 = std::nextafter(4.0f, 0.f);
  EXPECT_EQ(int(mx_group_exponent(below4)), 0 + 127);  // 3.9999998 <= 6 * 2^0
  EXPECT_EQ(int(mx_group_exponent(4.0f)), 0 + 127);
  EXPECT_EQ(int(mx_group_exponent(FLT_MAX)), 126 + 127);
  EXPECT_EQ(int(mx_group_exponent(0.0f)), 0);
  EXPECT_EQ(int(mx_group_exponent(std::ldexp(1.0f, -149))), 0);
  EXPECT_EQ(int(mx_group_exponent(FLT_MIN)), 0);
  EXPECT_EQ(mx_group_exponent(std::numeric_limits<float>::infinity()), kE8M0NaN);
  EXPECT_EQ(mx_group_exponent(std::numeric_limits<float>::quiet_NaN()), kE8M0NaN);
}

TEST(MxGroup, DefinedEdgeRules) {
  float x[32];
  uint8_t codes[16], e;
  float out[32];
  // amax = 0: exponent byte 0, signed-zero codes, decodes to the same signed zeros.
  for (int i = 0; i < 32; ++i) x[i] = i % 3 ? 0.0f : -0.0f;
  mx_encode_group(x, codes, &e);
  EXPECT_EQ(e, 0);
  mx_decode_group(codes, e, out);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(std::signbit(out[i]), std::signbit(x[i])) << i;
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.0f);
  // A NaN survives the amax reduction even after a large value: the group is poisoned.
  for (int i = 0; i < 32; ++i) x[i] = float(i);
  x[3] = FLT_MAX;
  x[31] = std::numeric_limits<float>::quiet_NaN();
  mx_encode_group(x, codes, &e);
  EXPECT_EQ(e, kE8M0NaN);
  for (int k = 0; k < 16; ++k) EXPECT_EQ(codes[k], 0);
  mx_decode_group(codes, e, out);
  for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
  // Inf poisons too.
  x[31] = -std::numeric_limits<float>::infinity();
  mx_encode_group(x, codes, &e);
  EXPECT_EQ(e, kE8M0NaN);
  // Nibble order: element 2i low, 2i+1 high.
  for (int i = 0; i < 32; ++i) x[i] = 0.0f;
  x[0] = 6.0f;   // code 7, low nibble of byte 0
  x[1] = -0.5f;  // code 0x9, high nibble of byte 0
  x[3] = 1.0f;   // code 2, high nibble of byte 1
  mx_encode_group(x, codes, &e);
  EXPECT_EQ(e, 127);
  EXPECT_EQ(codes[0], 0x97);
  EXPECT_EQ(codes[1], 0x20);
  // Near FLT_MAX the decoded 4 * 2^126 = 2^128 saturates to FLT_MAX.
  EXPECT_EQ(mx_value(0x6, 126 + 127), FLT_MAX);
  EXPECT_EQ(mx_value(0xE, 126 + 127), -FLT_MAX);
  EXPECT_EQ(mx_value(0x1, 0), std::ldexp(1.0f, -128));  // 0.5 * 2^-127, a subnormal, exact
}

// Random groups of any float bits (non-finite included) against the reference: bytes,
// values, and the bound.
RC_GTEST_PROP(MxGroup, EqualsReferenceOnAnyGroup, ()) {
  const int shift = *rc::gen::inRange(-140, 120);
  const auto raw = *rc::gen::container<std::vector<float>>(32, rc::gen::arbitrary<float>());
  const bool any_bits = *rc::gen::arbitrary<bool>();
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = any_bits ? raw[i] : std::ldexp(std::fmod(raw[i], 8.0f), shift);
  uint8_t codes[16], e;
  mx_encode_group(x.data(), codes, &e);
  const ref::Mxfp4RowRef want = ref::mxfp4_row(x.data(), 32);
  RC_ASSERT(int(e) == int(want.exponents[0]));
  for (int k = 0; k < 16; ++k) RC_ASSERT(int(codes[k]) == int(want.codes[k]));
  float out[32];
  mx_decode_group(codes, e, out);
  for (int i = 0; i < 32; ++i) {
    if (want.poisoned[0]) {
      RC_ASSERT(std::isnan(out[i]));
      continue;
    }
    RC_ASSERT(std::memcmp(&out[i], &want.values[i], 4) == 0);
    RC_ASSERT(std::fabs(double(out[i]) - double(x[i])) <= want.bound[i]);
  }
}

RC_GTEST_PROP(E2M1, EncoderEqualsReferenceOnAnyBits, (uint32_t bits)) {
  const float y = bits_float(bits);
  if (std::isnan(y)) return;
  RC_ASSERT(int(e2m1_encode(y)) == int(ref::e2m1_from_double(y)));
}

}  // namespace
}  // namespace kc
