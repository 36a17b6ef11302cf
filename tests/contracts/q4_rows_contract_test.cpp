// The q4-rows contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include "contracts/contracts.h"
#include "contracts/framework.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend) {
  Status st;
  auto be = select_backend(backend, &st);
  EXPECT_TRUE(be) << st.message;
  RunOptions o;
  o.cases = KC_TEST_CASES;
  o.quiet = true;
  return run_contract(*find_contract("q4-rows"), *be, o);
}

void expect_pass(const RunResult& r) {
  EXPECT_TRUE(r.pass) << summary_table(r.receipt);
  for (const auto& c : r.receipt["controls"]) EXPECT_TRUE(c["red"].get<bool>()) << c.dump();
  for (const auto& g : r.receipt["gates"]) EXPECT_TRUE(g["ok"].get<bool>()) << g.dump();
}

TEST(Q4RowsContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  EXPECT_EQ(r.receipt["backend"], "cpu");
  EXPECT_GT(r.receipt["cases"]["run"].get<int>(), 0);
  EXPECT_EQ(r.receipt["controls"].size(), 8u);  // 5 planted setups + 3 backend-boundary faults
}

TEST(Q4RowsContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

TEST(Q4RowsContract, FilterSelectsCases) {
  Status st;
  auto be = select_backend("cpu", &st);
  RunOptions o;
  o.cases = 6;
  o.quiet = true;
  o.filter = "dist=ties,";
  const RunResult r = run_contract(*find_contract("q4-rows"), *be, o);
  EXPECT_EQ(r.receipt["cases"]["run"].get<int>(), 1);
  EXPECT_EQ(r.receipt["cases"]["filtered_out"].get<int>(), 5);
}

}  // namespace
}  // namespace kc
