// The rows-invariant contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend, const std::string& filter = "") {
  return test::run_contract_on("rows-invariant", backend, KC_TEST_CASES * 8, filter);
}
using test::expect_pass;

bool caught(const RunResult& r, const std::string& control, const std::string& gate) {
  for (const auto& c : r.receipt["controls"])
    if (c["name"] == control)
      for (const auto& g : c["caught_by"])
        if (g == gate) return true;
  return false;
}

TEST(RowsInvariantContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  EXPECT_EQ(r.receipt["controls"].size(), 5u);
  // Every gate but the device comparison ran on some case (64 cases: every kernel).
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "device==host-twin") continue;
    EXPECT_GT(g["passed"].get<int>(), 0) << name;
  }
}

TEST(RowsInvariantContract, ControlsAreCaughtByTheRightGates) {
  const RunResult r = run_on("cpu", "^$");  // no cases: controls only
  EXPECT_TRUE(caught(r, "batch-split-k", "rows==solo"));
  EXPECT_TRUE(caught(r, "planted-row", "rows==solo"));
  EXPECT_TRUE(caught(r, "accepts-one-past", "refusals"));
  EXPECT_TRUE(caught(r, "unnamed-refusal", "refusals"));
  EXPECT_TRUE(caught(r, "writes-then-refuses", "refusals"));
}

TEST(RowsInvariantContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

}  // namespace
}  // namespace kc
