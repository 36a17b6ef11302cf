// The q4-rows contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend) { return test::run_contract_on("q4-rows", backend, KC_TEST_CASES); }
using test::expect_pass;

TEST(Q4RowsContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  EXPECT_EQ(r.receipt["backend"], "cpu");
  EXPECT_GT(r.receipt["cases"]["run"].get<int>(), 0);
  EXPECT_EQ(r.receipt["controls"].size(), 14u);  // 5 planted setups + 4 backend-boundary faults + 5 refusals
}

TEST(Q4RowsContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

TEST(Q4RowsContract, FilterSelectsCases) { test::expect_filter_selects("q4-rows", "dist=ties,", 6, 1); }

}  // namespace
}  // namespace kc
