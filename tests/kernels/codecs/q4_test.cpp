// The q4 row helpers (kernels/codecs/q4.h) against the float64 reference (reference/q4_ref.h):
// the H32 butterflies against the matrix, inv(fwd(x)) within the derived bound, fp16
// conversion, the group code's edge rules, and the host twin's validation.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "contracts/arena.h"
#include "kernels/codecs/rows.h"
#include "kernels/codecs/q4.h"
#include "reference/q4_ref.h"

namespace kc {
namespace {

// 32 finite floats of mixed magnitudes (no overflow in the rotation).
rc::Gen<std::vector<float>> group_gen() {
  return rc::gen::container<std::vector<float>>(
      32, rc::gen::map(rc::gen::pair(rc::gen::inRange(-1000000, 1000000), rc::gen::inRange(-60, 60)),
                       [](std::pair<int, int> p) { return std::ldexp(float(p.first), p.second - 20); }));
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

TEST(Hadamard32, ButterfliesGiveTheSylvesterMatrix) {
  for (int j = 0; j < 32; ++j) {
    float v[32] = {};
    v[j] = 1.0f;
    hadamard32_butterflies(v);
    for (int i = 0; i < 32; ++i) ASSERT_EQ(v[i], float(ref::h32(i, j))) << "H(" << i << "," << j << ")";
  }
  // H H = 32 I (the reason fwd 2^-3 and inv 2^-2 are inverses).
  for (int i = 0; i < 32; ++i)
    for (int j = 0; j < 32; ++j) {
      int s = 0;
      for (int k = 0; k < 32; ++k) s += ref::h32(i, k) * ref::h32(k, j);
      ASSERT_EQ(s, i == j ? 32 : 0);
    }
}

RC_GTEST_PROP(Hadamard32, FwdEqualsReferenceBitsAndIsWithinBoundOfTheMatrix, ()) {
  const std::vector<float> x = *group_gen();
  float y[32], want[32];
  std::copy(x.begin(), x.end(), y);
  hadamard32_fwd(y);
  ref::h32_fp32(x.data(), 0.125, want);
  double xd[32], hx[32], err[32];
  for (int i = 0; i < 32; ++i) xd[i] = x[i];
  ref::h32_apply(xd, hx);
  ref::h32_fp32_bound(x.data(), 0.125, err);
  for (int i = 0; i < 32; ++i) {
    RC_ASSERT(same_bits(y[i], want[i]));
    RC_ASSERT(std::fabs(double(y[i]) - 0.125 * hx[i]) <= err[i]);
  }
}

RC_GTEST_PROP(Hadamard32, InvOfFwdIsIdentityWithinBound, ()) {
  // |inv(y') - x| <= |inv(y') - 2^-2 H y'| + 2^-2 sum_i |y'_i - y_i|: the inv tree bound
  // on the computed y' plus the fwd bound spread by 2^-2 H (each |H(j,i)| = 1).
  const std::vector<float> x = *group_gen();
  float y[32], z[32];
  std::copy(x.begin(), x.end(), y);
  hadamard32_fwd(y);
  std::copy(y, y + 32, z);
  hadamard32_inv(z);
  double e_fwd[32], e_inv[32];
  ref::h32_fp32_bound(x.data(), 0.125, e_fwd);
  ref::h32_fp32_bound(y, 0.25, e_inv);
  double spread = 0;
  for (double e : e_fwd) spread += 0.25 * e;
  for (int j = 0; j < 32; ++j) RC_ASSERT(std::fabs(double(z[j]) - double(x[j])) <= e_inv[j] + spread);
}

TEST(Hadamard32, InvOfFwdIsExactOnSmallIntegers) {
  float v[32];
  for (int i = 0; i < 32; ++i) v[i] = float(i * 7 % 19) - 9.0f;
  float w[32];
  std::copy(v, v + 32, w);
  hadamard32_fwd(w);
  hadamard32_inv(w);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(w[i], v[i]);
}

TEST(Fp16, AllPatternsDecodeToTheReference) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = fp16_to_float(uint16_t(h));
    const double want = ref::fp16_value(uint16_t(h));
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << h;
    else ASSERT_TRUE(double(got) == want && std::signbit(got) == std::signbit(want)) << h;
  }
}

TEST(Fp16, EncodeEdges) {
  struct E { float x; uint16_t h; };
  const E edges[] = {
      {65504.f, 0x7BFF}, {65519.99f, 0x7BFF}, {65520.f, 0x7C00}, {1e30f, 0x7C00},
      {std::ldexp(1.f, -14), 0x0400}, {std::ldexp(1.f, -24), 0x0001}, {std::ldexp(1.f, -25), 0x0000},
      {std::ldexp(3.f, -25), 0x0002},  // 1.5 * 2^-24 ties to 2 (even)
      {std::ldexp(5.f, -25), 0x0002},  // 2.5 * 2^-24 ties to 2
      {std::ldexp(3.f, -26), 0x0001},  // 0.75 * 2^-24
      {1.0f + std::ldexp(1.f, -11), 0x3C00},  // tie between 1 and 1 + 2^-10: even
      {1.0f + std::ldexp(3.f, -11), 0x3C02},
      {0.0f, 0x0000}, {-0.0f, 0x8000}, {-2.0f, 0xC000},
      {std::numeric_limits<float>::infinity(), 0x7C00}, {std::numeric_limits<float>::quiet_NaN(), 0x7E00},
  };
  for (const E& e : edges) {
    EXPECT_EQ(fp16_from_float(e.x), e.h) << "x=" << e.x;
    EXPECT_EQ(ref::fp16_from_double(e.x), e.h) << "reference, x=" << e.x;
  }
}

RC_GTEST_PROP(Fp16, EncodeEqualsReferenceOnAnyBits, (uint32_t bits)) {
  const float x = bits_float(bits);
  const uint16_t got = fp16_from_float(x), want = ref::fp16_from_double(x);
  if (std::isnan(x)) RC_ASSERT((got & 0x7FFF) == 0x7E00);
  else RC_ASSERT(got == want);
}

// Encodes 32 already-rotated values; returns the 32 codes (nibble - 8) and the scale bits.
struct Enc {
  int code[32];
  uint16_t scale;
  uint8_t bytes[16];
};
Enc encode_rotated(const float* y) {
  Enc e;
  uint8_t s2[2];
  q4_encode_group_rotated(y, e.bytes, s2);
  std::memcpy(&e.scale, s2, 2);
  for (int i = 0; i < 32; ++i) e.code[i] = int(q4_nibble(e.bytes, i)) - 8;
  return e;
}

TEST(Q4Group, TiesRoundToEvenAndAmaxGetsCode7) {
  float y[32] = {};
  const float t[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 6.5f, -6.5f, 7.0f, 3.49f, 3.51f, -7.0f};
  const int want[] = {0, 2, 2, 0, -2, -2, 6, -6, 7, 3, 4, -7};
  for (int i = 0; i < 12; ++i) y[i] = t[i];
  const Enc e = encode_rotated(y);
  EXPECT_EQ(e.scale, 0x3C00);  // 7 / 7 = 1
  for (int i = 0; i < 12; ++i) EXPECT_EQ(e.code[i], want[i]) << "y=" << t[i];
  for (int i = 12; i < 32; ++i) EXPECT_EQ(e.code[i], 0);
  // Nibble order: element 0 low nibble of byte 0, element 1 high nibble.
  EXPECT_EQ(e.bytes[0], uint8_t((0 + 8) | ((2 + 8) << 4)));
}

// An Inf scale (fp16 0x7C00 or 0xFC00) poisons the group: the twin decodes it as NaN (q4_finite)
// and so must the reference's q4_decode_bytes (host mutation sweep, round 9: the contract's
// decode-all-scales probes give every group a nibble 8, and 0 * Inf is NaN, so a reference that
// poisoned only NaN scales passed; a group of one sign predicted +-Inf at element 0).
TEST(Q4Group, InfScaleDecodesToNanInTheReferenceAsInTheTwin) {
  for (uint16_t h : {uint16_t(0x7C00), uint16_t(0xFC00)})
    for (uint8_t byte : {uint8_t(0xFF), uint8_t(0x00), uint8_t(0x99)}) {
      uint8_t codes[16];
      std::memset(codes, byte, 16);
      uint8_t scale2[2];
      std::memcpy(scale2, &h, 2);
      const std::array<double, 32> want = ref::q4_decode_bytes(codes, h);
      float got[32];
      q4_decode_group(codes, scale2, got);
      for (int j = 0; j < 32; ++j) {
        EXPECT_TRUE(std::isnan(want[j])) << std::hex << "scale 0x" << h << " bytes 0x" << int(byte) << std::dec
                                         << " element " << j << ": reference " << want[j];
        EXPECT_TRUE(std::isnan(got[j])) << "twin, element " << j;
      }
    }
}

// q4_nibble_by_recip (one reciprocal per group) gives q4_nibble_of's nibble for every fp16
// scale: values around every rounding boundary (41 floats centred on fl(k s) for k = +-0.5 ..
// +-7.5, the boundaries and the clamp), values drawn across [-8 s, 8 s], and the extremes. The
// sweep reaches products that round to another code than the quotient: without its fallback the
// reciprocal is wrong on some of them, so the comparison can fail, and each such disagreement
// lies inside the fallback's window.
TEST(Q4Group, ReciprocalNibbleIsTheDivisionsForEveryScale) {
  const auto no_fallback = [](float y, float r) {
    float t = y * r;
    t = t < -7.0f ? -7.0f : (t > 7.0f ? 7.0f : t);
    return uint8_t(int(rintf(t)) + 8);
  };
  uint64_t checked = 0, fallbacks = 0, recip_wrong = 0, x = 0x9E3779B97F4A7C15ull;
  auto check = [&](float y, float s, float r) {
    const uint8_t want = q4_nibble_of(y, s);
    ASSERT_EQ(q4_nibble_by_recip(y, s, r), want) << "y=" << y << " s=" << s;
    float k;
    const bool near = q4_recip_near_tie(y * r, &k);
    fallbacks += near;
    if (no_fallback(y, r) != want) {
      ++recip_wrong;
      ASSERT_TRUE(near) << "the reciprocal's nibble differs outside the window: y=" << y << " s=" << s;
    }
    ++checked;
  };
  for (uint16_t h = 1; h <= 0x7BFF; ++h) {  // every positive finite fp16 scale
    const float s = fp16_to_float(h), r = q4_recip(s);
    for (int k = -15; k <= 15; k += 2) {  // k / 2: the half-integers -7.5 .. 7.5
      float y = float(k) * 0.5f * s;
      for (int i = 0; i < 20; ++i) y = std::nextafter(y, -INFINITY);
      for (int i = 0; i < 41; ++i, y = std::nextafter(y, INFINITY)) check(y, s, r);
      if (testing::Test::HasFatalFailure()) return;
    }
    for (int i = 0; i < 64; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      check(float(int32_t(x >> 32)) * 0x1p-28f * s, s, r);  // [-8 s, 8 s)
    }
    for (float y : {0.0f, -0.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min(), 1e30f, -1e-30f})
      check(y, s, r);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(checked, uint64_t(0x7BFF) * (16 * 41 + 64 + 7));
  EXPECT_GT(fallbacks, 0u);
  EXPECT_GT(recip_wrong, 0u) << "the sweep never reached a product that rounds to another code";
  std::printf("%llu values over 31743 scales: %llu took the division, %llu would round wrong by the reciprocal alone\n",
              (unsigned long long)checked, (unsigned long long)fallbacks, (unsigned long long)recip_wrong);
}

// q4_nibble_magic (the ring kernel's fast encode: the clamped quotient plus 1.5 2^23 + 8, its low
// 4 bits) gives q4_nibble_of's nibble for every fp16 scale: the quotients at and around every
// half-integer (ties to even both ways), values drawn across [-8 s, 8 s], the clamp and the
// extremes. A mask of the wrong width, an odd magic constant (ties the other way) or a missing
// clamp would each differ on these.
TEST(Q4Group, MagicAddNibbleIsTheDivisionsForEveryScale) {
  uint64_t checked = 0, ties = 0, x = 0x2545F4914F6CDD1Dull;
  auto check = [&](float y, float s) {
    ASSERT_EQ(q4_nibble_magic(y, s), q4_nibble_of(y, s)) << "y=" << y << " s=" << s;
    const float t = y / s;
    ties += std::fabs(t) < 7.5f && t - std::floor(t) == 0.5f;
    ++checked;
  };
  for (uint16_t h = 1; h <= 0x7BFF; ++h) {  // every positive finite fp16 scale
    const float s = fp16_to_float(h);
    for (int k = -15; k <= 15; ++k) {  // k / 2: the integers and half-integers -7.5 .. 7.5
      float y = float(k) * 0.5f * s;
      for (int i = 0; i < 8; ++i) y = std::nextafter(y, -INFINITY);
      for (int i = 0; i < 17; ++i, y = std::nextafter(y, INFINITY)) check(y, s);
      if (testing::Test::HasFatalFailure()) return;
    }
    for (int i = 0; i < 32; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      check(float(int32_t(x >> 32)) * 0x1p-28f * s, s);  // [-8 s, 8 s)
    }
    for (float y : {0.0f, -0.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                    std::numeric_limits<float>::denorm_min(), 1e30f, -1e-30f})
      check(y, s);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(checked, uint64_t(0x7BFF) * (31 * 17 + 32 + 7));
  EXPECT_GT(ties, uint64_t(0x7BFF) * 8) << "the sweep met too few exact ties";
}

// q4_magic_bits_recip (the ring kernel's fast encode since session 47: the quotient by one
// reciprocal per group and Markstein's fma correction, then the magic add) gives q4_nibble_of's
// nibble for every fp16 scale, over the same values as the magic add's sweep plus values whose
// quotient underflows. Without the correction (q0 alone) the sweep finds nibbles that differ.
TEST(Q4Group, MarksteinQuotientNibbleIsTheDivisionsForEveryScale) {
  uint64_t checked = 0, q0_wrong = 0, x = 0x51ED27A3C6B4F109ull;
  auto check = [&](float y, float s, float r) {
    const uint8_t want = q4_nibble_of(y, s);
    ASSERT_EQ(uint8_t(q4_magic_bits_recip(y, s, r) & 15u), want) << "y=" << y << " s=" << s;
    float t = y * r;
    t = t < -7.0f ? -7.0f : (t > 7.0f ? 7.0f : t);
    q0_wrong += uint8_t(int(rintf(t)) + 8) != want;
    ++checked;
  };
  for (uint16_t h = 1; h <= 0x7BFF; ++h) {  // every positive finite fp16 scale
    const float s = fp16_to_float(h), r = q4_recip(s);
    for (int k = -15; k <= 15; ++k) {  // k / 2: the integers and half-integers -7.5 .. 7.5
      float y = float(k) * 0.5f * s;
      for (int i = 0; i < 8; ++i) y = std::nextafter(y, -INFINITY);
      for (int i = 0; i < 17; ++i, y = std::nextafter(y, INFINITY)) check(y, s, r);
      if (testing::Test::HasFatalFailure()) return;
    }
    for (int i = 0; i < 32; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      check(float(int32_t(x >> 32)) * 0x1p-28f * s, s, r);  // [-8 s, 8 s)
    }
    // The encode's domain: |y| <= amax and s the group scale of that amax, so |y / s| <= 7 (1 +
    // 2^-10) but where s is the largest scale, 65504, and y any float (y r stays finite).
    const float big = h == 0x7BFF ? std::numeric_limits<float>::max() : 7.007f * s;
    for (float y : {0.0f, -0.0f, big, -big, std::numeric_limits<float>::denorm_min(),
                    -std::numeric_limits<float>::min(), 0x1p-140f * s, -0x1p-120f, 1e-30f})
      check(y, s, r);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(checked, uint64_t(0x7BFF) * (31 * 17 + 32 + 9));
  EXPECT_GT(q0_wrong, 0u) << "the sweep never reached a quotient that the product alone rounds to another code";
}

// q4_scale_quotient (the ring kernel's fast encode: the group scale's amax / 7 by Markstein's
// correction) is the division's float for every mantissa of the binades where it could break:
// the subnormals and the lowest normals (the remainder near underflow), the binades around 1 and
// 7, and the top ones (q0 near the largest float); the division by 7 is the same in every other
// binade up to the power of two. q0 alone differs: the sweep must meet such values.
TEST(Q4Group, ScaleQuotientIsTheDivision) {
  uint64_t checked = 0, q0_wrong = 0;
  // Every mantissa of the subnormals, the lowest normals, [1, 2) and the top binade; every
  // third of three more (the low binade where a / 7 turns subnormal, [0.5, 1), [2^126, 2^127)).
  for (uint32_t e : {0u, 1u, 127u, 254u, 24u, 126u, 253u}) {
    const uint32_t step = e == 24u || e == 126u || e == 253u ? 3u : 1u;
    for (uint32_t m = 0; m < (1u << 23); m += step) {
      const float a = bits_float((e << 23) | m), want = a / 7.0f;
      const float got = q4_scale_quotient(a);
      if (float_bits(got) != float_bits(want)) {
        ADD_FAILURE() << "amax=" << a << " (bits " << ((e << 23) | m) << "): " << got << " against " << want;
        return;
      }
      q0_wrong += float_bits(a * 0.142857149f) != float_bits(want);
      ++checked;
    }
  }
  EXPECT_EQ(checked, (uint64_t(4) << 23) + 3 * (((uint64_t(1) << 23) + 2) / 3));
  EXPECT_GT(q0_wrong, checked / 8) << "the sweep met too few values that the product alone rounds wrong";
  // The encode's scale: q4_group_scale's bits through the same clamp and fp16 conversion.
  for (float a : {0.0f, 1.0f, 7.0f, 458528.0f, 458535.0f, 1e30f, std::numeric_limits<float>::max()})
    EXPECT_EQ(fp16_from_float(std::fmin(q4_scale_quotient(a), kQ4ScaleMax)), q4_group_scale(a)) << a;
}

// The cross-lane Hadamard butterflies of the rope store's q4 encode (rope_kv_store) run o - v
// and v + o as fma(-+1, v, o): -v is exact and the sum is rounded once, so every result is the
// add's or subtract's, signed zeros, infinities and NaN included.
TEST(Q4Group, SignedFmaIsTheAddAndTheSubtract) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> vals = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::numeric_limits<float>::denorm_min(),
                             -std::numeric_limits<float>::min(), std::numeric_limits<float>::max(), 3.0f, 0x1p-149f};
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 4000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    vals.push_back(bits_float(uint32_t(x >> 32) & 0xFF7FFFFFu));  // finite, any sign and exponent below the top
  }
  const auto same = [](float a, float b) { return std::isnan(a) ? std::isnan(b) : float_bits(a) == float_bits(b); };
  for (size_t i = 0; i < vals.size(); ++i)
    for (size_t j = i; j < vals.size(); j += 1 + (j > 64 ? 97 : 0)) {
      const float o = vals[i], v = vals[j];
      ASSERT_TRUE(same(std::fma(-1.0f, v, o), o - v)) << "o=" << o << " v=" << v;
      ASSERT_TRUE(same(std::fma(1.0f, v, o), v + o)) << "o=" << o << " v=" << v;
      ASSERT_TRUE(same(std::fma(-1.0f, o, v), v - o)) << "o=" << o << " v=" << v;
    }
}

TEST(Q4Group, DefinedEdgeRules) {
  float y[32];
  // Zeros of either sign: scale 0, codes 0 (bytes 0x88), decodes to +0.
  for (float z : {0.0f, -0.0f}) {
    std::fill(y, y + 32, z);
    const Enc e = encode_rotated(y);
    EXPECT_EQ(e.scale, 0);
    for (uint8_t b : e.bytes) EXPECT_EQ(b, kQ4ZeroCodes);
  }
  // NaN or Inf: poisoned (scale 0x7E00, code bytes 0x00), decodes to NaN.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    for (int i = 0; i < 32; ++i) y[i] = float(i);
    y[17] = bad;
    const Enc e = encode_rotated(y);
    EXPECT_EQ(e.scale, kQ4ScaleNaN);
    for (uint8_t b : e.bytes) EXPECT_EQ(b, kQ4PoisonCodes);
    uint8_t s2[2];
    std::memcpy(s2, &e.scale, 2);
    float out[32];
    q4_decode_group(e.bytes, s2, out);
    for (float v : out) EXPECT_TRUE(std::isnan(v));
  }
  // Saturation: amax / 7 > 65504 gives scale 65504 and clamped codes.
  std::fill(y, y + 32, 0.0f);
  y[0] = 1e6f;
  y[1] = -65504.0f * 7.5f;
  y[2] = 65504.0f * 3.0f;
  Enc e = encode_rotated(y);
  EXPECT_EQ(e.scale, 0x7BFF);
  EXPECT_EQ(e.code[0], 7);
  EXPECT_EQ(e.code[1], -7);
  EXPECT_EQ(e.code[2], 3);
  // fp16-subnormal scale: amax / 7 = 1.5 * 2^-24 ties to s = 2 * 2^-24.
  std::fill(y, y + 32, 0.0f);
  y[3] = std::ldexp(10.5f, -24);
  e = encode_rotated(y);
  EXPECT_EQ(e.scale, 0x0002);
  EXPECT_EQ(e.code[3], 5);  // 10.5 * 2^-24 / 2^-23 = 5.25
  // Scale underflow: amax / 7 below 2^-25 gives scale 0, codes 0.
  y[3] = std::ldexp(3.0f, -24);
  e = encode_rotated(y);
  EXPECT_EQ(e.scale, 0);
  EXPECT_EQ(e.code[3], 0);
  // A NaN survives the amax reduction wherever it sits.
  for (int pos : {0, 31}) {
    for (int i = 0; i < 32; ++i) y[i] = 1.0f;
    y[pos] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(encode_rotated(y).scale, kQ4ScaleNaN) << pos;
  }
}

TEST(Q4Group, ValueIsExact) {
  for (uint16_t h : {uint16_t(0x0001), uint16_t(0x03FF), uint16_t(0x3C01), uint16_t(0x7BFF), uint16_t(0x1234)}) {
    const float s = fp16_to_float(h);
    for (int nib = 0; nib < 16; ++nib)
      EXPECT_EQ(double(q4_value(uint8_t(nib), s)), (nib - 8) * ref::fp16_value(h)) << h << " " << nib;
  }
  EXPECT_TRUE(std::isnan(q4_value(9, std::numeric_limits<float>::quiet_NaN())));
}

RC_GTEST_PROP(Q4Row, EncodeDecodeEqualReferenceAndStayWithinBound, ()) {
  const int d = *rc::gen::element(32, 64, 128, 256);
  std::vector<float> x;
  for (int g = 0; g < d / 32; ++g) {
    const auto grp = *group_gen();
    x.insert(x.end(), grp.begin(), grp.end());
  }
  std::vector<uint8_t> codes(d / 2), scales(2 * (d / 32));
  std::vector<float> out(d);
  q4_encode_row(x.data(), d, codes.data(), scales.data());
  q4_decode_row(codes.data(), scales.data(), d, out.data());
  const auto want = ref::q4_row(x.data(), d);
  for (int g = 0; g < d / 32; ++g) {
    uint16_t h;
    std::memcpy(&h, scales.data() + 2 * g, 2);
    RC_ASSERT(h == want[g].scale_bits);
    RC_ASSERT(std::equal(want[g].codes.begin(), want[g].codes.end(), codes.begin() + 16 * g));
    for (int j = 0; j < 32; ++j) {
      RC_ASSERT(same_bits(out[32 * g + j], want[g].values[j]));
      RC_ASSERT(std::fabs(double(out[32 * g + j]) - double(x[32 * g + j])) <= want[g].bound[j]);
    }
  }
}

RC_GTEST_PROP(Q4Row, RotatedQueryPreservesTheDotProduct, ()) {
  const int d = *rc::gen::element(32, 64, 128, 256);
  std::vector<float> q, k;
  for (int g = 0; g < d / 32; ++g) {
    const auto a = *group_gen(), b = *group_gen();
    q.insert(q.end(), a.begin(), a.end());
    k.insert(k.end(), b.begin(), b.end());
  }
  std::vector<uint8_t> codes(d / 2), scales(2 * (d / 32));
  q4_encode_row(k.data(), d, codes.data(), scales.data());
  std::vector<float> z(d), qr = q;
  q4_decode_row_rotated(codes.data(), scales.data(), d, z.data());
  q4_rotate_query(qr.data(), d);
  const ref::Q4DotRef r = ref::q4_dot(q.data(), qr.data(), z.data(), d);
  RC_ASSERT(std::fabs(r.got - r.want) <= r.bound);
}

TEST(Q4Row, UnrotatedOrWronglyRotatedQueryMissesTheBound) {
  // The qk bound is not vacuous: skipping the query rotation, or rotating it with fwd
  // (2^-3 instead of 2^-2), errs far beyond it.
  const int d = 128;
  std::vector<float> q(d), k(d);
  for (int i = 0; i < d; ++i) {
    q[i] = std::sin(0.7f * i + 0.3f);
    k[i] = std::cos(1.3f * i) * 2.0f;
  }
  std::vector<uint8_t> codes(d / 2), scales(2 * (d / 32));
  q4_encode_row(k.data(), d, codes.data(), scales.data());
  std::vector<float> z(d), qr = q, qf = q;
  q4_decode_row_rotated(codes.data(), scales.data(), d, z.data());
  q4_rotate_query(qr.data(), d);
  for (int g = 0; g < d; g += 32) hadamard32_fwd(qf.data() + g);
  const ref::Q4DotRef good = ref::q4_dot(q.data(), qr.data(), z.data(), d);
  const ref::Q4DotRef skipped = ref::q4_dot(q.data(), q.data(), z.data(), d);
  const ref::Q4DotRef fwd = ref::q4_dot(q.data(), qf.data(), z.data(), d);
  EXPECT_LE(std::fabs(good.got - good.want), good.bound);
  EXPECT_GT(std::fabs(skipped.got - skipped.want), 1000 * skipped.bound);
  EXPECT_GT(std::fabs(fwd.got - fwd.want), 1000 * fwd.bound);
}

TEST(Q4Rows, HostTwinRefusesWrongFormatAndHeadDim) {
  const std::vector<RowRef> rows = {{0, 0, 0, 0, 0}};
  std::vector<float> x(64, 1.0f), out(64);
  Cache fp8 = make_window_cache(KvLayout(1, 1, 64, Format::fp8), {1}, 0, 1);
  Status st = encode_rows_host(Format::q4, fp8, x.data(), rows.data(), 1);
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("not q4"), std::string::npos) << st.message;
  Cache odd = make_window_cache(KvLayout(1, 1, 48, Format::q4), {1}, 0, 1);
  st = decode_rows_host(Format::q4, odd, rows.data(), 1, out.data());
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("multiple of 32"), std::string::npos) << st.message;
  Cache ok = make_window_cache(KvLayout(1, 1, 64, Format::q4), {1}, 0, 1);
  const std::vector<RowRef> outside = {{0, 0, 0, 0, 1}};
  EXPECT_FALSE(encode_rows_host(Format::q4, ok, x.data(), outside.data(), 1).ok);
  EXPECT_TRUE(encode_rows_host(Format::q4, ok, x.data(), rows.data(), 1).ok);
}

TEST(Q4Rows, GuardMaskCoversTheScalePlane) {
  // mark_rows must mark the q4 scale entry (2 bytes per group) as well as the codes.
  const KvLayout lay(1, 2, 128, Format::q4);
  Cache c = make_paged_cache(lay, 3, {5}, 1, 9);
  const std::vector<RowRef> rows = {{0, 0, 1, 1, 4}};
  std::vector<uint8_t> mask;
  mark_rows(c, rows, mask);
  const KvView v = c.view(0);
  const size_t code_off = kv_row(v, 0, 1, 1, 4) - c.mem.data();
  const size_t scale_off = kv_scale(v, 0, 1, 1, 4) - c.mem.data();
  size_t marked = 0;
  for (uint8_t m : mask) marked += m;
  EXPECT_EQ(marked, size_t(64 + 8));
  for (size_t i = 0; i < 64; ++i) EXPECT_TRUE(mask[code_off + i]);
  for (size_t i = 0; i < 8; ++i) EXPECT_TRUE(mask[scale_off + i]);
}

}  // namespace
}  // namespace kc
