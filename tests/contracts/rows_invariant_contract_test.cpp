// The rows-invariant contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/engine/rows.h"
#include "kernels/engine/twin.h"
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
  test::expect_controls_red_through(r.receipt, {{"batch-split-k", "rows==solo"},
                                                {"planted-row", "rows==solo"},
                                                {"parts-ulp", "parts==matmul"},
                                                {"joined-ulp", "joined==plain"},
                                                {"writes-past-output", "guards"},
                                                {"accepts-one-past", "refusals"},
                                                {"unnamed-refusal", "refusals"},
                                                {"writes-then-refuses", "refusals"}});
  EXPECT_EQ(r.receipt["controls"].size(), 8u);
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
  // ... and add cases whose rows cuda's joined add + RMSNorm kernel takes (dim % 4 == 0, at
  // most 8192 floats), and others (the two plain launches).
  const auto& joined = r.receipt["numbers"]["coverage"]["add_rms_norm"];
  EXPECT_GT(joined.value("dim % 4 == 0, <= 8192", 0), 0) << joined.dump();
  EXPECT_GT(joined.value("other dim", 0), 0) << joined.dump();
  // ... and RMSNorm rows (rms_norm, logits' final norm) past the device kernel's 8192-float
  // staging chunk, of 2 and of 3 chunks (the barrier between chunks: mutation sweep round 3,
  // eng-rms-chunk-barrier).
  const auto& norm = r.receipt["numbers"]["coverage"]["norm_row"];
  EXPECT_GE(norm.value("2 chunks of 8192", 0), 2) << norm.dump();
  EXPECT_GE(norm.value("3 chunks of 8192", 0), 2) << norm.dump();
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

// parts-ulp and joined-ulp plant in every row alike (batch-independent) and
// writes-past-output changes no output byte: each is seen by its own gate and by no other.
TEST(RowsInvariantContract, NewControlsAreCaughtOnlyByTheirGate) {
  const RunResult r = run_on("cpu", "^$");
  auto caught_by = [&](const std::string& control) {
    for (const auto& c : r.receipt["controls"])
      if (c["name"] == control) return c["caught_by"];
    return nlohmann::json::array();
  };
  EXPECT_EQ(caught_by("parts-ulp"), nlohmann::json::array({"parts==matmul"}));
  EXPECT_EQ(caught_by("joined-ulp"), nlohmann::json::array({"joined==plain"}));
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
// A backend whose engine is the real one's, decorated by Engine (a ForwardingEngine).
template <class Engine>
class EngineDecorated final : public ForwardingBackend {
 public:
  explicit EngineDecorated(Backend& real) : ForwardingBackend(real), eng_(*real.engine()) {}
  EngineBackend* engine() override { return &eng_; }

 private:
  Engine eng_;
};

TEST(RowsInvariantContract, AddComparesBytesSoALostZeroSignFails) {
  const RunResult r = test::run_cpu_through<EngineDecorated<ZeroSignEngine>>("rows-invariant", KC_TEST_CASES * 8, "op=add,");
  int64_t add_failed = -1;
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "add==reference") add_failed = g["failed"].get<int64_t>();
    else EXPECT_EQ(g["failed"].get<int64_t>(), 0) << name;
  }
  EXPECT_GT(add_failed, 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// add==reference compares every element of the launch (host mutation sweep, round 15: a
// comparison of the first element alone passed every check). This add leaves the launch's
// last sum one ulp up.
class LastSumUlpEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status add(float* h, const float* t, int64_t count) override {
    KC_RETURN_IF_ERROR(in_.add(h, t, count));
    if (count > 0) h[count - 1] = std::nextafter(h[count - 1], INFINITY);
    return Status::Ok();
  }
};

TEST(RowsInvariantContract, AddComparesEveryElement) {
  const RunResult r = test::run_cpu_through<EngineDecorated<LastSumUlpEngine>>("rows-invariant", KC_TEST_CASES * 8, "op=add,");
  EXPECT_GT(test::gate_failed(r, "add==reference"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// embed==reference is exact (a bf16 row widened to fp32; round 15: a relative tolerance of
// 1e-3 passed every check). This embed scales every value by 1 + 2^-12.
class ScaledEmbedEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status embed(const uint16_t* E, int64_t v, int64_t d, const int32_t* t, int n, float* out) override {
    KC_RETURN_IF_ERROR(in_.embed(E, v, d, t, n, out));
    for (int64_t i = 0; i < int64_t(n) * d; ++i) out[i] *= 1.0f + 0x1p-12f;
    return Status::Ok();
  }
};

TEST(RowsInvariantContract, EmbedIsExact) {
  const RunResult r = test::run_cpu_through<EngineDecorated<ScaledEmbedEngine>>("rows-invariant", KC_TEST_CASES * 8, "op=embed,");
  EXPECT_GT(test::gate_failed(r, "embed==reference"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// The device RMSNorm stages a row 8192 floats at a time (kernels/engine/kernels.cu); with
// the barrier between chunks dropped (mutation sweep round 3, eng-rms-chunk-barrier) the
// next chunk's staging overwrites squares lanes 0..7 have not summed yet. The host twin
// has no chunks, so the race cannot be planted in it; this engine does what the race
// does to a row past 8192 floats (the first chunk's last 2048 squares are the second
// chunk's first 2048) in rms_norm and in logits' final norm, and the contract's long rows
// (kLongRows) must see it: rms_norm-bound and logits-bound red, no other gate.
class ChunkRaceEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  // The inner kernel first (its refusals), then the rows again as the race leaves them,
  // from a copy of x (out may be x: rms_norm_parts in place, the joined==plain gate).
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    std::vector<float> xs;
    if (x && n > 0 && dim > 0) xs.assign(x, x + int64_t(n) * dim);
    KC_RETURN_IF_ERROR(in_.rms_norm(x, w, n, dim, eps, out));
    for (int i = 0; i < n; ++i) norm_row(xs.data() + int64_t(i) * dim, w, dim, eps, out + int64_t(i) * dim);
    return Status::Ok();
  }
  Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps, const uint16_t* W,
                int64_t vocab, float* out) override {
    KC_RETURN_IF_ERROR(in_.logits(h, sel, m, dim, norm, eps, W, vocab, out));
    std::vector<float> tmp(static_cast<size_t>(dim));
    for (int j = 0; j < m; ++j) {
      norm_row(h + int64_t(sel[j]) * dim, norm, dim, eps, tmp.data());
      KC_RETURN_IF_ERROR(in_.matmul(W, vocab, dim, tmp.data(), 1, out + int64_t(j) * vocab));
    }
    return Status::Ok();
  }

 private:
  static void norm_row(const float* x, const float* w, int dim, float eps, float* y) {
    constexpr int kChunk = 8192, kLate = 2048;
    std::vector<float> seen(x, x + dim);
    if (dim >= kChunk + kLate)
      for (int k = 0; k < kLate; ++k) seen[size_t(kChunk - kLate + k)] = x[kChunk + k];
    const float r = eng::rms_factor(engine_dot_f32(seen.data(), seen.data(), dim), dim, eps);
    for (int j = 0; j < dim; ++j) y[j] = eng::rms_apply(x[j], r, w[j]);
  }
};

TEST(RowsInvariantContract, LongRowsSeeASecondChunkRace) {
  const RunResult r =
      test::run_cpu_through<EngineDecorated<ChunkRaceEngine>>("rows-invariant", KC_TEST_CASES * 8, "op=(rms_norm|logits),");
  int64_t rms_failed = -1, logits_failed = -1;
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "rms_norm-bound") rms_failed = g["failed"].get<int64_t>();
    else if (name == "logits-bound") logits_failed = g["failed"].get<int64_t>();
    else EXPECT_EQ(g["failed"].get<int64_t>(), 0) << name;
  }
  EXPECT_EQ(rms_failed, 2) << summary_table(r.receipt);  // the two long rms_norm cases, no other
  EXPECT_EQ(logits_failed, 2) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// ---- mutation sweep round 7 (reports/mutation-sweep/host-7-local/) ----

// argmax rows of NaN put one NaN at the front: an argmax that starts from x[0] (best = x[0],
// then x[k] > best) never leaves a NaN there and returns 0, where the reference skips NaN.
// Only argmax==reference sees it (the same in a batch and alone). Controls included: the
// whole run, not only up to the first failure (--gates-only stops there).
class FirstElementArgmaxEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status argmax(const float* x, int n, int64_t len, int32_t* out) override {
    KC_RETURN_IF_ERROR(in_.argmax(x, n, len, out));  // its refusals
    for (int i = 0; i < n; ++i) {
      const float* r = x + int64_t(i) * len;
      int32_t best = 0;
      for (int64_t k = 1; k < len; ++k)
        if (r[k] > r[best]) best = int32_t(k);
      out[i] = best;
    }
    return Status::Ok();
  }
};

TEST(RowsInvariantContract, ArgmaxSeesANanAtTheFront) {
  const RunResult r =
      test::run_cpu_through<EngineDecorated<FirstElementArgmaxEngine>>("rows-invariant", KC_TEST_CASES * 8, "op=argmax,");
  int64_t argmax_failed = -1;
  for (const auto& g : r.receipt["gates"]) {
    const std::string name = g["name"];
    if (name == "argmax==reference") argmax_failed = g["failed"].get<int64_t>();
    else if (name != "refusals") EXPECT_EQ(g["failed"].get<int64_t>(), 0) << name;
  }
  // Each of the 8 argmax cases among the 64 (batches of 7 rows and more) holds a row of NaNs
  // with one at the front, so each fails; the random NaNs alone reach the front in 1 of them.
  EXPECT_EQ(argmax_failed, 8) << summary_table(r.receipt);
}

// The refusals gate probes rms_norm's eps at its edge, the first invalid value (-1e-30): an
// engine whose check allows a small negative eps (eps < -1e-6 refused) fails it.
class SmallNegativeEpsEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    return in_.rms_norm(x, w, n, dim, eps < 0.0f && eps >= -1e-6f ? 0.0f : eps, out);
  }
};

TEST(RowsInvariantContract, RefusalsProbeEpsAtItsEdge) {
  const RunResult r = test::run_cpu_through<EngineDecorated<SmallNegativeEpsEngine>>("rows-invariant", 1, "^$", true);
  EXPECT_EQ(test::gate_failed(r, "refusals"), 1) << summary_table(r.receipt);  // rms_norm(eps, first invalid) -1e-30 accepted
}

// The refusals gate wants each last valid value accepted, not only each first invalid one
// refused (host mutation sweep, round 18: with that check gone an engine refusing rms_norm's
// eps of 0, the last valid value, passed).
class ZeroEpsRefusedEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    if (eps == 0.0f) return Status::Error("rms_norm: eps 0: refused");
    return in_.rms_norm(x, w, n, dim, eps, out);
  }
};

TEST(RowsInvariantContract, RefusalsWantTheLastValidValueAccepted) {
  const RunResult r = test::run_cpu_through<EngineDecorated<ZeroEpsRefusedEngine>>("rows-invariant", 1, "^$", true);
  EXPECT_EQ(test::gate_failed(r, "refusals"), 1) << summary_table(r.receipt);  // rms_norm(eps, last valid) 0 refused
}

// joined==plain compares every part of rms_norm_parts with the batched rms_norm: the third
// part (the rows apart) too (round 18: a comparison of the first part alone passed a launch
// whose last part is one ulp off; joined-ulp's add_rms_norm plant kept that control red).
class LastNormPartUlpEngine final : public ForwardingEngine {
 public:
  using ForwardingEngine::ForwardingEngine;
  Status rms_norm_parts(const NormPart* parts, int count, int dim, float eps) override {
    KC_RETURN_IF_ERROR(in_.rms_norm_parts(parts, count, dim, eps));
    if (count == 3 && parts[2].n > 0) test::flip_lowest_bit(parts[2].out);  // host memory on cpu
    return Status::Ok();
  }
};

TEST(RowsInvariantContract, JoinedComparesTheLastNormPart) {
  const RunResult r =
      test::run_cpu_through<EngineDecorated<LastNormPartUlpEngine>>("rows-invariant", KC_TEST_CASES * 8, "op=rms_norm,", true);
  EXPECT_GT(test::gate_failed(r, "joined==plain"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// The controls draw from at least 512 cases whatever --cases says: a run of one case (a
// matmul of batch 1, which no control can use) still has every control red (round 18: drawn
// from --cases alone, they found no batched case and stayed green).
TEST(RowsInvariantContract, ARunOfOneCaseHasEveryControlRed) {
  const RunResult r = test::run_contract_on("rows-invariant", "cpu", 1);
  ASSERT_EQ(r.receipt["controls"].size(), 8u);
  for (const auto& c : r.receipt["controls"]) EXPECT_TRUE(c["red"].get<bool>()) << c.dump();
  EXPECT_TRUE(r.pass) << summary_table(r.receipt);
}

TEST(RowsInvariantContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

}  // namespace
}  // namespace kc
