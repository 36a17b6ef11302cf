// The mxfp4-rows contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kc
