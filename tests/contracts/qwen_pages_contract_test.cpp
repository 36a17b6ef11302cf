// The qwen-pages contract under GoogleTest (a reduced case count; CTest also runs the
// full default through the command line).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "contracts/faulty_backend.h"
#include "tests/contracts/contract_test_util.h"
#include "kernels/attention_rows.h"

namespace kc {
namespace {

RunResult run_qwen(const std::string& backend, int cases) { return test::run_contract_on("qwen-pages", backend, cases); }

TEST(QwenPagesContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_qwen("cpu", 4);
  test::expect_pass(r);
  EXPECT_EQ(r.receipt["controls"].size(), 9u);  // 4 planted setups + 5 backend-boundary faults
}

TEST(QwenPagesContract, ReceiptNamesTheAttentionArithmetic) {
  const RunResult r = run_qwen("cpu", 1);
  const auto& a = r.receipt["numbers"]["attention_arithmetic"];
  ASSERT_TRUE(a.is_object()) << r.receipt["numbers"].dump();
  for (const auto& [k, v] : a.items()) EXPECT_EQ(v, "fma_chain") << k;  // the host twin
  EXPECT_TRUE(a.contains("fp8/d256"));
}

// The cuda backend's choice of order (it decides the bound's depths) and its forwarding
// through the fault decorator; no device needed.
TEST(AttentionArith, TensorCoresForBf16AndFp8AtHeadDim128And256Only) {
  for (int d : {32, 64, 128, 256})
    for (Format f : {Format::bf16, Format::fp8, Format::q4})
      EXPECT_EQ(attn_uses_mma(f, d), f != Format::q4 && d >= 128) << format_name(f) << " d" << d;
  auto cpu = make_cpu_backend();
  FaultyBackend fb(*cpu, Fault::input_write);
  EXPECT_EQ(cpu->attention_arith(Format::bf16, 256), AttnArith::fma_chain);
  EXPECT_EQ(fb.attention_arith(Format::bf16, 256), AttnArith::fma_chain);
  // Depths: 37 u per mma step, then one fp32 sum per k-step / key tile.
  EXPECT_EQ(attn_mma_dot_depth(256), 37 + 16);
  EXPECT_EQ(attn_mma_pv_depth(512), 37 + 32);
  EXPECT_EQ(attn_mma_pv_depth(100), 37 + 7);
}

TEST(AttentionArith, F16ShiftPutsTheLargestMagnitudeIn2To14And2To15) {
  for (float a : {1.0f, 0.75f, 3.0e-3f, 448.0f, 65504.0f, 1.0e20f, 3.4e38f, 1.17549435e-38f, 1.0e-40f, 1.4e-45f}) {
    const int sh = attn_f16_shift(a);
    const double s = std::ldexp(double(a), sh);
    EXPECT_GE(s, 16384.0) << a;
    EXPECT_LT(s, 32768.0) << a;
  }
  EXPECT_EQ(attn_f16_shift(0.0f), 0);
  EXPECT_EQ(attn_f16_shift(std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(attn_f16_shift(std::numeric_limits<float>::quiet_NaN()), 0);
}

// A NaN ratio stays the worst: a later finite ratio must not hide it (bound gates keep
// their worst with this rule).
TEST(Framework, NaNRatioIsNeverReplaced) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(worse_ratio(0.5, 0.25));
  EXPECT_FALSE(worse_ratio(0.25, 0.5));
  EXPECT_TRUE(worse_ratio(nan, 0.5));
  EXPECT_FALSE(worse_ratio(0.5, nan));
  EXPECT_FALSE(worse_ratio(1e300, nan));
  double worst = 0;
  for (double r : {0.1, nan, 0.2, 3.0})
    if (worse_ratio(r, worst)) worst = r;
  EXPECT_TRUE(std::isnan(worst));
}

TEST(QwenPagesContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  const RunResult r = run_qwen("cuda", 6);
  test::expect_pass(r);
}

}  // namespace
}  // namespace kc
