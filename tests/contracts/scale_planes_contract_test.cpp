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

// ---- host mutation sweep round 16 (reports/mutation-sweep/host-16-local/) ----
// Each decorator plants a defect that one gate alone must see; its test runs a few drawn cases
// gates only (well under a second on cpu) and wants that gate failed. Runs of two or more
// positions (count=1 has no "last row" apart from the first).
constexpr const char* kRunsOfTwoOrMore = R"(^scale-planes\(.*count=(?!1,))";

uint64_t blob_word(const std::vector<uint8_t>& b, uint64_t off, int bytes) {
  uint64_t v = 0;
  if (off + bytes <= b.size()) std::memcpy(&v, b.data() + off, size_t(bytes));
  return v;
}

// blob==cache compares every row of every field: a pack that flips the lowest bit of the last
// field's last row (its last byte; the checksum resealed, so the blob is well formed) fails it
// (sp-blob-cache-first-row).
class LastRowBlobByteBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    const Status st = ForwardingBackend::pack(c, lane, p0, n, b);
    if (!st.ok || n < 1 || b->size() < 64 + 8) return st;
    const uint64_t fields = blob_word(*b, 32, 4), count = blob_word(*b, 40, 8), e = 64 + 48 * (fields - 1);
    const uint64_t at = blob_word(*b, e + 40, 8) + count * blob_word(*b, e + 32, 4) - 1;
    if (fields < 1 || at >= b->size() - 8) return st;
    (*b)[at] ^= 0x01;
    const uint64_t h = fnv1a(b->data(), b->size() - 8);
    std::memcpy(b->data() + b->size() - 8, &h, 8);
    return st;
  }
};

TEST(ScalePlanesContract, BlobEqualsCacheComparesEveryRow) {
  const RunResult r = test::run_cpu_through<LastRowBlobByteBackend>("scale-planes", 8, kRunsOfTwoOrMore, true);
  EXPECT_GT(test::gate_failed(r, "blob==cache"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// roundtrip compares every restored row, the last included: an unpack that flips the lowest bit
// of the last restored position's first byte (the last field) fails it
// (sp-roundtrip-last-row-skipped).
class LastRowUnpackByteBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override {
    const Status st = ForwardingBackend::unpack(c, lane, p0, b);
    const int64_t count = int64_t(blob_word(b, 40, 8));
    if (st.ok && count > 0) kv_field_row(c.view(lane), c.lay.field_count() - 1, p0 + count - 1)[0] ^= 0x01;
    return st;
  }
};

TEST(ScalePlanesContract, RoundtripComparesTheLastRestoredRow) {
  const RunResult r = test::run_cpu_through<LastRowUnpackByteBackend>("scale-planes", 8, kRunsOfTwoOrMore, true);
  EXPECT_GT(test::gate_failed(r, "roundtrip"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// attention-restored runs attention over every layer: an unpack that changes one bit (bit 2: a
// bf16 mantissa bit, an E4M3 mantissa bit, finite either way) of the last layer's first K code
// byte (head 0) at the first restored position fails it in the two-layer cases
// (sp-attention-restored-layer0-only).
class LastLayerKeyUnpackBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override {
    const Status st = ForwardingBackend::unpack(c, lane, p0, b);
    if (st.ok && blob_word(b, 40, 8) > 0) kv_row(c.view(lane), c.lay.layers - 1, 0, 0, p0)[0] ^= 0x04;
    return st;
  }
};

TEST(ScalePlanesContract, AttentionRestoredRunsEveryLayer) {
  const RunResult r =
      test::run_cpu_through<LastLayerKeyUnpackBackend>("scale-planes", 64, R"(^scale-planes\(fmt=(bf16|fp8),L=2,)", true);
  EXPECT_GT(test::gate_failed(r, "attention-restored"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// field-table reads the blob's checksum trailer: a pack whose trailer is one off (the rest of the
// blob right) fails it; the unpack then refuses the blob, an error of the run
// (sp-field-table-checksum-unchecked).
class ChecksumOffBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    const Status st = ForwardingBackend::pack(c, lane, p0, n, b);
    if (st.ok && b->size() >= 8) ++(*b)[b->size() - 8];
    return st;
  }
};

TEST(ScalePlanesContract, FieldTableReadsTheChecksum) {
  const RunResult r = test::run_cpu_through<ChecksumOffBackend>("scale-planes", 2, R"(^scale-planes\()", true);
  EXPECT_GT(test::gate_failed(r, "field-table"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// guards sees a byte an unpack changed outside the destination rows: an unpack that also bumps
// the destination cache's last byte (its trailing guard band, which no row reads) fails it
// (sp-guards-mask-size-only: the gate checked only that its mask covered every field).
class GuardByteUnpackBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override {
    const Status st = ForwardingBackend::unpack(c, lane, p0, b);
    if (st.ok) ++c.mem.back();
    return st;
  }
};

TEST(ScalePlanesContract, GuardsSeeAByteOutsideTheRestoredRows) {
  const RunResult r = test::run_cpu_through<GuardByteUnpackBackend>("scale-planes", 2, R"(^scale-planes\()", true);
  EXPECT_GT(test::gate_failed(r, "guards"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// A drawn case's range refusal probes the first position past the lane: an unpack that lets a run
// ending one position past its lane through (writing nothing) fails refusals there, by that
// probe's name (sp-refusal-range-two-past: the probe two past was refused, the gate passed). The
// generic probes' blob of 5 positions still meets the real check, so only the case's probe can see it.
class UnpackOnePastAcceptedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override {
    const int64_t count = int64_t(blob_word(b, 40, 8));
    if (count != 5 && lane >= 0 && lane < int(c.views.size()) && p0 + count == c.views[lane].capacity() + 1)
      return Status::Ok();
    return ForwardingBackend::unpack(c, lane, p0, b);
  }
};

TEST(ScalePlanesContract, RefusalsProbeARunOnePastTheLane) {
  const RunResult r = test::run_cpu_through<UnpackOnePastAcceptedBackend>("scale-planes", 2, R"(^scale-planes\()", true);
  EXPECT_GT(test::gate_failed(r, "refusals"), 0) << summary_table(r.receipt);
  EXPECT_NE(r.receipt.doc().dump().find("range past the lane: accepted"), std::string::npos) << summary_table(r.receipt);
}

TEST(ScalePlanesContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

}  // namespace
}  // namespace kc
