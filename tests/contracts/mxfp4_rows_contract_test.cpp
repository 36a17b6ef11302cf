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

}  // namespace
}  // namespace kc
