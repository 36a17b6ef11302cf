// The scale-planes contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend, const std::string& filter = "") {
  return test::run_contract_on("scale-planes", backend, KC_TEST_CASES, filter);
}
using test::expect_pass;

TEST(ScalePlanesContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  test::expect_controls_red_through(r.receipt, {{"dropped-scale-plane", "blob==cache"},
                                                {"kv-scales-swapped", "blob==cache"},
                                                {"stale-version-accepted", "refusals"},
                                                {"truncated-accepted", "refusals"},
                                                {"corrupted-byte-accepted", "refusals"},
                                                {"refusal-accepts-one-past", "refusals"},
                                                {"refusal-unnamed", "refusals"},
                                                {"refusal-writes-first", "refusals"},
                                                {"refusal-writes-output-first", "refusals"}});
  EXPECT_EQ(r.receipt["controls"].size(), 9u);  // 5 packer and unpacker faults + 4 refusals
  EXPECT_GT(r.receipt["cases"]["run"].get<int>(), 0);
  // Every byte gate ran on every case (none silently skipped).
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "device==host-twin") continue;
    EXPECT_GT(g["passed"].get<int>(), 0) << name;
  }
}

TEST(ScalePlanesContract, ControlsAreCaughtByTheRightGates) {
  const RunResult r = run_on("cpu", "^$");  // no cases: controls only
  auto caught = [&](const std::string& control, const std::string& gate) {
    for (const auto& c : r.receipt["controls"])
      if (c["name"] == control)
        for (const auto& g : c["caught_by"])
          if (g == gate) return true;
    return false;
  };
  EXPECT_TRUE(caught("dropped-scale-plane", "roundtrip"));
  EXPECT_TRUE(caught("dropped-scale-plane", "blob==cache"));
  EXPECT_TRUE(caught("kv-scales-swapped", "roundtrip"));
  EXPECT_TRUE(caught("kv-scales-swapped", "attention-restored"));
  EXPECT_TRUE(caught("stale-version-accepted", "refusals"));
  EXPECT_TRUE(caught("truncated-accepted", "refusals"));
  EXPECT_TRUE(caught("corrupted-byte-accepted", "refusals"));
}

TEST(ScalePlanesContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

}  // namespace
}  // namespace kc
