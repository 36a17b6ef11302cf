// The qwen-pages contract under GoogleTest (a reduced case count; CTest also runs the
// full default through the command line).
#include <gtest/gtest.h>

#include "contracts/contracts.h"
#include "contracts/framework.h"

namespace kc {
namespace {

RunResult run_qwen(const std::string& backend, int cases) {
  Status st;
  auto be = select_backend(backend, &st);
  EXPECT_TRUE(be) << st.message;
  RunOptions o;
  o.cases = cases;
  o.quiet = true;
  return run_contract(*find_contract("qwen-pages"), *be, o);
}

TEST(QwenPagesContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_qwen("cpu", 4);
  EXPECT_TRUE(r.pass) << summary_table(r.receipt);
  ASSERT_EQ(r.receipt["controls"].size(), 9u);  // 4 planted setups + 5 backend-boundary faults
  for (const auto& c : r.receipt["controls"]) EXPECT_TRUE(c["red"].get<bool>()) << c.dump();
}

TEST(QwenPagesContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  const RunResult r = run_qwen("cuda", 6);
  EXPECT_TRUE(r.pass) << summary_table(r.receipt);
}

}  // namespace
}  // namespace kc
