// The scale-planes contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/backend/forwarding.h"
#include "kernels/layout/bits.h"
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

// ---- mutation sweep round 7 (reports/mutation-sweep/host-7-local/) ----

// The drawn runs start one before a page boundary (the last slot of a page) as well as at
// random offsets: counted here at the pack and unpack calls that succeed, for pages of 48
// tokens or more (the random offsets, 0..40, never land there).
class PageEdgeRunsBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  static inline int edge_runs = 0;
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    const Status st = ForwardingBackend::pack(c, lane, p0, n, b);
    if (st.ok) note(c, lane, p0, n);
    return st;
  }
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override {
    const Status st = ForwardingBackend::unpack(c, lane, p0, b);
    if (st.ok) note(c, lane, p0, 2);
    return st;
  }

 private:
  static void note(const Cache& c, int lane, int64_t p0, int64_t n) {
    const ViewDesc& v = c.views[size_t(lane)];
    if (v.paged() && v.ptok >= 48 && n >= 2 && p0 % v.ptok == v.ptok - 1) ++edge_runs;
  }
};

TEST(ScalePlanesContract, DrawnRunsStartAtAPagesLastSlot) {
  PageEdgeRunsBackend::edge_runs = 0;
  // The first 64 cases: every ordered pair of addressing modes once (under a second on cpu).
  const RunResult r = test::run_cpu_through<PageEdgeRunsBackend>("scale-planes", 64, R"(^scale-planes\()", true);
  for (const auto& g : r.receipt["gates"]) EXPECT_EQ(g["failed"], 0) << g["name"];
  EXPECT_GT(PageEdgeRunsBackend::edge_runs, 0);
}

// field-table reads every entry's kind: a packer that writes field 0 (codes) as a scales field
// (the checksum resealed, so only the table is wrong) fails it.
class WrongKindBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    const Status st = ForwardingBackend::pack(c, lane, p0, n, b);
    if (st.ok && b->size() >= 64 + 48 + 8) {
      const uint32_t kind = uint32_t(FieldKind::scales);
      std::memcpy(b->data() + 64 + 36, &kind, 4);
      const uint64_t h = fnv1a(b->data(), b->size() - 8);
      std::memcpy(b->data() + b->size() - 8, &h, 8);
    }
    return st;
  }
};

TEST(ScalePlanesContract, FieldTableReadsEachEntrysKind) {
  const RunResult r = test::run_cpu_through<WrongKindBackend>("scale-planes", 2, R"(^scale-planes\()", true);
  EXPECT_GT(test::gate_failed(r, "field-table"), 0) << summary_table(r.receipt);
}

// A pack whose range check lets a window lane's count run one position past the window
// (it packs one position fewer and says Ok): the refusal probe at one past fails it.
class PackOnePastAWindowBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    if (lane >= 0 && lane < int(c.views.size()) && !c.views[size_t(lane)].paged() && p0 >= 0 && n > 1 &&
        p0 + n == c.views[size_t(lane)].capacity() + 1)
      return ForwardingBackend::pack(c, lane, p0, n - 1, b);
    return ForwardingBackend::pack(c, lane, p0, n, b);
  }
};

TEST(ScalePlanesContract, RefusalsProbePackOnePastAWindow) {
  const RunResult r = test::run_cpu_through<PackOnePastAWindowBackend>("scale-planes", 1, R"(^refusals\(op=pack,)", true);
  EXPECT_GT(test::gate_failed(r, "refusals"), 0) << summary_table(r.receipt);
}

TEST(ScalePlanesContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

}  // namespace
}  // namespace kc
