// The q4-rows contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/backend/forwarding.h"
#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend) { return test::run_contract_on("q4-rows", backend, KC_TEST_CASES); }
using test::expect_pass;

TEST(Q4RowsContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  test::expect_controls_red_through(r.receipt, test::codec_control_gates({{"scale-from-neighbour-group", "decode==reference"},
                                                                          {"query-rotation-skipped", "qk-bound"}}));
  EXPECT_EQ(r.receipt["backend"], "cpu");
  EXPECT_GT(r.receipt["cases"]["run"].get<int>(), 0);
  EXPECT_EQ(r.receipt["controls"].size(), 14u);  // 5 planted setups + 4 backend-boundary faults + 5 refusals
}

TEST(Q4RowsContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

// A decode that turns every NaN it produces into 0 (what a NaN-scale group must decode to is
// NaN, by predicate): decode-all-scales, the only gate that meets NaN scales in cases of
// normal values, fails.
class NanToZeroBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (st.ok)
      for (size_t i = 0; i < size_t(n) * c.lay.head_dim; ++i)
        if (std::isnan(o[i])) o[i] = 0.0f;
    return st;
  }
};

TEST(Q4RowsContract, DecodeAllScalesSeesANanScaleDecodedAsZero) {
  const RunResult r = test::run_cpu_through<NanToZeroBackend>("q4-rows", KC_TEST_CASES, "dist=normal,");
  EXPECT_GT(test::gate_failed(r, "decode-all-scales"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// decode-all-scales decodes every fp16 scale pattern, the negative ones too: a decode that
// drops a finite scale's sign (decodes with |s|) fails it. The encoder writes no negative
// scale, so no other gate meets one.
class AbsScaleDecodeBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    const int d = c.lay.head_dim;
    if (st.ok && f == Format::q4)
      for (int i = 0; i < n; ++i) {
        const uint8_t* sc = kv_scale(c.view(r[i].lane), r[i].layer, r[i].kv, r[i].head, r[i].pos);
        for (int g = 0; g < d / 32; ++g) {
          uint16_t h;
          std::memcpy(&h, sc + 2 * g, 2);
          if ((h & 0x8000) && (h & 0x7C00) != 0x7C00)
            for (int j = 0; j < 32; ++j) o[size_t(i) * d + 32 * g + j] = -o[size_t(i) * d + 32 * g + j];
        }
      }
    return st;
  }
};

TEST(Q4RowsContract, DecodeAllScalesSeesANegativeScaleDecodedAsPositive) {
  const RunResult r = test::run_cpu_through<AbsScaleDecodeBackend>("q4-rows", 1, "^$", true);
  EXPECT_GT(test::gate_failed(r, "decode-all-scales"), 0) << summary_table(r.receipt);
}

TEST(Q4RowsContract, FilterSelectsCases) { test::expect_filter_selects("q4-rows", "dist=ties,", 6, 1); }

// scales==reference compares each group's fp16 scale bit for bit (host mutation sweep, round 15:
// a comparison of the exponent field alone passed every check); the encode flips the lowest
// mantissa bit of the last row's first group scale in both caches.
TEST(Q4RowsContract, ScalesGateComparesEveryScaleBit) {
  const RunResult r = test::run_cpu_through<test::LastRowScaleBitEncodeBackend>("q4-rows", 2, "", true);
  EXPECT_GT(test::gate_failed(r, "scales==reference"), 0) << summary_table(r.receipt);
  EXPECT_EQ(test::gate_failed(r, "paged==window"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// decode-all-scales reaches the last scale patterns, 0xFFF8..0xFFFF (host mutation sweep, round
// 18: a check of the first 8,191 rows passed a decode that gives scale 0xFFFF, a negative NaN,
// zeros; the encoder writes no such scale, so no other gate meets one).
class NanScaleFfffToZeroBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (!st.ok || f != Format::q4) return st;
    const int d = c.lay.head_dim;
    for (int i = 0; i < n; ++i) {
      const uint8_t* s = kv_scale(c.view(r[i].lane), r[i].layer, r[i].kv, r[i].head, r[i].pos);
      for (int g = 0; g < d / 32; ++g) {
        uint16_t h;
        std::memcpy(&h, s + 2 * g, 2);
        if (h == 0xFFFF)
          for (int k = 0; k < 32; ++k) o[size_t(i) * d + 32 * g + k] = 0.0f;
      }
    }
    return st;
  }
};

TEST(Q4RowsContract, DecodeAllScalesReachesTheLastScalePattern) {
  const RunResult r = test::run_cpu_through<NanScaleFfffToZeroBackend>("q4-rows", 2, "", true);
  EXPECT_EQ(test::gate_failed(r, "decode-all-scales"), 1) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// qk-bound holds the rotated-space decode that attention reads to the reference's code x scale
// (round 18: without that comparison, a stored code one bit off the reference passed qk-bound,
// whose dot products take both sides from the same decode). The encode flips the lowest bit of
// the first code byte of each launch's last row, in both caches.
TEST(Q4RowsContract, QkBoundSeesAStoredCodeOffTheReference) {
  const RunResult r =
      test::run_cpu_through<test::LastRowBitEncodeBackend<test::RowField::codes, 1>>("q4-rows", 2, "", true);
  EXPECT_GT(test::gate_failed(r, "qk-bound"), 0) << summary_table(r.receipt);
  EXPECT_GT(test::gate_failed(r, "codes==reference"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

}  // namespace
}  // namespace kc
