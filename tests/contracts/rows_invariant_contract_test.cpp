// The rows-invariant contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/engine/rows.h"
#include "kernels/backend/forwarding.h"
#include "reference/engine_ref.h"
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
  EXPECT_EQ(r.receipt["controls"].size(), 7u);
  // Every gate but the device comparison ran on some case (64 cases: every kernel).
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "device==host-twin") continue;
    EXPECT_GT(g["passed"].get<int>(), 0) << name;
  }
  // The 64 cases hold matmul_parts launches of 2 and 3 parts, not only of 1.
  const auto& parts = r.receipt["numbers"]["coverage"]["matmul_parts"];
  EXPECT_GT(parts.value("2 parts", 0), 0) << parts.dump();
  EXPECT_GT(parts.value("3 parts", 0), 0) << parts.dump();
}

// The bound's depth (reference/engine_ref.cpp, written apart from the kernels) covers the
// longest path of rows.h's product order, counted here by walking the order itself, and
// is that path when K is a multiple of 1024 or at most 8.
TEST(RowsInvariantContract, ProductDepthIsTheLongestPathOfTheOrder) {
  for (int64_t k = 1; k <= 5000; ++k) {
    int64_t chain[eng::kDotParts] = {};
    for (int64_t b = 0; b * eng::kDotOctet < k; ++b)
      chain[b % eng::kDotParts] += std::min<int64_t>(eng::kDotOctet, k - b * eng::kDotOctet);
    const int64_t longest = *std::max_element(chain, chain + eng::kDotParts) + 7;  // + the 7 tree levels
    ASSERT_GE(ref::product_depth(k), longest) << k;
    ASSERT_LE(ref::product_depth(k), longest + 7) << k;
    if (k % 1024 == 0 || k <= 8) ASSERT_EQ(ref::product_depth(k), longest) << k;
    ASSERT_EQ(eng::matmul_dot_depth(k), ref::product_depth(k)) << k;
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

// parts-ulp plants in every row alike (batch-independent) and writes-past-output changes
// no output byte: each is seen by its own gate and by no other.
TEST(RowsInvariantContract, NewControlsAreCaughtOnlyByTheirGate) {
  const RunResult r = run_on("cpu", "^$");
  auto caught_by = [&](const std::string& control) {
    for (const auto& c : r.receipt["controls"])
      if (c["name"] == control) return c["caught_by"];
    return nlohmann::json::array();
  };
  EXPECT_EQ(caught_by("parts-ulp"), nlohmann::json::array({"parts==matmul"}));
  EXPECT_EQ(caught_by("writes-past-output"), nlohmann::json::array({"guards"}));
}

// add==reference compares bytes: an add that loses a zero sum's sign (-0 + -0 gives +0,
// equal as a value) is caught, by that gate alone among the case gates. The contract's
// add cases place -0 + -0 (host memory: the cpu engine's scratch).
class ZeroSignEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status add(float* h, const float* t, int64_t count) override {
    KC_RETURN_IF_ERROR(in_.add(h, t, count));
    for (int64_t i = 0; i < count; ++i)
      if (h[i] == 0.0f) h[i] = 0.0f;
    return Status::Ok();
  }
};
class ZeroSignBackend final : public ForwardingBackend {
 public:
  explicit ZeroSignBackend(Backend& real) : ForwardingBackend(real), eng_(*real.engine()) {}
  EngineBackend* engine() override { return &eng_; }

 private:
  ZeroSignEngine eng_;
};

TEST(RowsInvariantContract, AddComparesBytesSoALostZeroSignFails) {
  Status st;
  auto cpu = select_backend("cpu", &st);
  ASSERT_TRUE(cpu && cpu->engine()) << st.message;
  ZeroSignBackend zb(*cpu);
  RunOptions o;
  o.cases = KC_TEST_CASES * 8;
  o.quiet = true;
  o.filter = "op=add,";
  const RunResult r = run_contract(*find_contract("rows-invariant"), zb, o);
  int64_t add_failed = -1;
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "add==reference") add_failed = g["failed"].get<int64_t>();
    else EXPECT_EQ(g["failed"].get<int64_t>(), 0) << name;
  }
  EXPECT_GT(add_failed, 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

TEST(RowsInvariantContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

}  // namespace
}  // namespace kc
