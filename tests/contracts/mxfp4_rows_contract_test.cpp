// The mxfp4-rows contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/backend/forwarding.h"
#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend) { return test::run_contract_on("mxfp4-rows", backend, KC_TEST_CASES); }
using test::expect_pass;

TEST(Mxfp4RowsContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  test::expect_controls_red_through(r.receipt, test::codec_control_gates({{"exponent-from-neighbour", "decode==reference"},
                                                                          {"ties-away-from-zero", "codes==reference"},
                                                                          {"floor-scale-clips", "exponents==reference"}}));
  EXPECT_EQ(r.receipt["backend"], "cpu");
  EXPECT_GT(r.receipt["cases"]["run"].get<int>(), 0);
}

TEST(Mxfp4RowsContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

TEST(Mxfp4RowsContract, FilterSelectsCases) { test::expect_filter_selects("mxfp4-rows", "ptok=16,", 6, 1); }

// exponents==reference compares each group's exponent byte (host mutation sweep, round 15: a
// comparison of the lengths alone passed every check but the floor-scale control's target
// gate); the encode flips the lowest bit of the last row's first exponent in both caches.
TEST(Mxfp4RowsContract, ExponentsGateComparesEveryExponentByte) {
  // With its controls: under --gates-only the once-per-run gates (which this encode fails first)
  // would stop every case before it ran.
  const RunResult r = test::run_cpu_through<test::LastRowScaleBitEncodeBackend>("mxfp4-rows", 2, "");
  EXPECT_GT(test::gate_failed(r, "exponents==reference"), 0) << summary_table(r.receipt);
  EXPECT_EQ(test::gate_failed(r, "paged==window"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// decode-all-codes reaches exponent byte 0xFF (host mutation sweep, round 18: a check of bytes
// 0..254 passed a decode that gives a NaN-scale group zeros instead of NaN; binade-edges' NaN
// groups saw it, decode-all-codes did not). This decode zeroes every group whose exponent is 0xFF.
class NanExponentToZeroBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (!st.ok || f != Format::mxfp4) return st;
    const int d = c.lay.head_dim;
    for (int i = 0; i < n; ++i) {
      const uint8_t* e = kv_scale(c.view(r[i].lane), r[i].layer, r[i].kv, r[i].head, r[i].pos);
      for (int g = 0; g < d / 32; ++g)
        if (e[g] == 0xFF) std::fill_n(o + size_t(i) * d + 32 * g, 32, 0.0f);
    }
    return st;
  }
};

TEST(Mxfp4RowsContract, DecodeAllCodesChecksTheNanExponentByte) {
  const RunResult r = test::run_cpu_through<NanExponentToZeroBackend>("mxfp4-rows", 2, "", true);
  EXPECT_GT(test::gate_failed(r, "decode-all-codes"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// The edge rows (ties, binade edges) compare all 32 decoded values of a group (round 18: a
// comparison of the first 31 passed a decode that moves each group's last value by its lowest
// bit; the codes and exponents it decodes from are the reference's).
class LastValueOfGroupBitBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (!st.ok || f != Format::mxfp4) return st;
    const int d = c.lay.head_dim;
    for (int i = 0; i < n; ++i)
      for (int g = 0; g < d / 32; ++g) test::flip_lowest_bit(o + size_t(i) * d + 32 * g + 31);
    return st;
  }
};

TEST(Mxfp4RowsContract, EdgeRowsCompareEveryValueOfAGroup) {
  const RunResult r = test::run_cpu_through<LastValueOfGroupBitBackend>("mxfp4-rows", 2, "", true);
  EXPECT_GT(test::gate_failed(r, "ties==reference"), 0) << summary_table(r.receipt);
  EXPECT_GT(test::gate_failed(r, "binade-edges==reference"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

}  // namespace
}  // namespace kc
