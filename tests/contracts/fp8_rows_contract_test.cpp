// The fp8-rows contract under GoogleTest, through the same runner as the command line.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <vector>

#include "contracts/codec_harness.h"
#include "kernels/backend/forwarding.h"
#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

RunResult run_on(const std::string& backend) { return test::run_contract_on("fp8-rows", backend, KC_TEST_CASES); }
using test::expect_pass;

TEST(Fp8RowsContract, CpuPassesWithEveryControlRed) {
  const RunResult r = run_on("cpu");
  expect_pass(r);
  test::expect_controls_red_through(r.receipt, test::codec_control_gates({{"scale-from-neighbour", "decode==reference"}}));
  EXPECT_EQ(r.receipt["backend"], "cpu");
  EXPECT_GT(r.receipt["cases"]["run"].get<int>(), 0);
}

TEST(Fp8RowsContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  expect_pass(run_on("cuda"));
}

TEST(Fp8RowsContract, FilterSelectsCases) { test::expect_filter_selects("fp8-rows", "ptok=16,", 6, 1); }

// check_decoded (contracts/codec_harness.h, mutation round 6) on hand-made rows, apart from
// any codec: decode==reference compares every row with its reference, the launch's first
// row included; the bound gate measures the decoded values against the INPUTS (a reference
// that the decode matches but that lies outside its bound fails it); a poisoned element
// that decodes finite fails the bound gate even where its reference value agrees.
struct HandWant {
  std::vector<float> values;
  std::vector<double> bound;
};

struct HandCheck {
  int64_t decode_failed = 0, bound_failed = 0;
};

HandCheck hand_check(const std::function<void(const CaseRows&, std::vector<HandWant>&, std::vector<float>&)>& edit,
                     int poisoned_j = -1) {
  const CodecCase c{"fp8-rows", 16, 32, 1, 1, 3, 2, "normal", 9};
  const CaseRows cr(c, Format::fp8, [](const CodecCase& cc, size_t n) {
    std::vector<float> x(n * size_t(cc.head_dim));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * float(int(i % 13) - 6);
    return x;
  });
  std::vector<HandWant> want(size_t(cr.n()));
  std::vector<float> out(cr.x);
  for (int i = 0; i < cr.n(); ++i) {
    want[size_t(i)].values.assign(cr.row_x(i), cr.row_x(i) + cr.d);
    want[size_t(i)].bound.assign(size_t(cr.d), 0.01);
  }
  edit(cr, want, out);
  auto be = make_cpu_backend();
  Run run(*be, nullptr, 1, 1, CaseSelection{}, true);
  check_decoded(run, cr, out.data(), "decode-bound", [&](int i) -> const HandWant& { return want[size_t(i)]; },
                [&](const HandWant&, int j) { return j == poisoned_j; });
  HandCheck h;
  for (const GateStat& g : run.gates()) {
    if (g.name == "decode==reference") h.decode_failed = g.failed;
    if (g.name == "decode-bound") h.bound_failed = g.failed;
  }
  return h;
}

TEST(CodecHarness, CheckDecodedSeesTheFirstRowTheInputsAndPoisonedElements) {
  HandCheck h = hand_check([](const CaseRows&, std::vector<HandWant>&, std::vector<float>&) {});
  EXPECT_EQ(h.decode_failed, 0);
  EXPECT_EQ(h.bound_failed, 0);
  // The launch's first row decodes one value off its reference (inside the bound).
  h = hand_check([](const CaseRows&, std::vector<HandWant>&, std::vector<float>& out) { out[3] += 0.001f; });
  EXPECT_EQ(h.decode_failed, 1) << "the first row is not compared";
  EXPECT_EQ(h.bound_failed, 0);
  // Reference and decode agree, 0.5 away from the input (bound 0.01): only the bound sees it.
  h = hand_check([](const CaseRows& cr, std::vector<HandWant>& want, std::vector<float>& out) {
    const size_t j = size_t(cr.d) + 5;  // row 1, element 5
    out[j] += 0.5f;
    want[1].values[5] += 0.5f;
  });
  EXPECT_EQ(h.decode_failed, 0);
  EXPECT_EQ(h.bound_failed, 1) << "the bound gate measures against the reference, not the input";
  // Element 7 of every row must decode NaN; it decodes to its (finite) reference value.
  h = hand_check([](const CaseRows&, std::vector<HandWant>&, std::vector<float>&) {}, 7);
  EXPECT_EQ(h.bound_failed, 1) << "a poisoned element that decodes finite passed the bound gate";
}

// Decode's paged==window gate compares every decoded float (host mutation sweep, round 9: a
// comparison of n * d bytes, a quarter of the output, passed every control, since the planted
// rows and the swapped page table already fail the encode side's paged==window). A decode that
// alters the window cache's last float, and nothing else, fails it.
class WindowDecodeLastFloatBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (st.ok && n > 1 && !c.views[r[n - 1].lane].paged()) {
      float& last = o[size_t(n) * c.lay.head_dim - 1];
      last = last == 0.0f ? 1.0f : -last;
    }
    return st;
  }
};

TEST(Fp8RowsContract, DecodePagedEqualsWindowComparesEveryFloat) {
  const RunResult r = test::run_cpu_through<WindowDecodeLastFloatBackend>("fp8-rows", 1, "", true);
  EXPECT_GT(test::gate_failed(r, "paged==window"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// A NaN decoded where the reference also says NaN but the element is not poisoned: only the
// bound gate can see it (host mutation sweep, round 15: a NaN ratio read as 0 passed every check).
TEST(CodecHarness, CheckDecodedCountsAnUnpoisonedNanAsOutOfBound) {
  const HandCheck h = hand_check([](const CaseRows& cr, std::vector<HandWant>& want, std::vector<float>& out) {
    const size_t j = size_t(cr.d) + 2;  // row 1, element 2
    out[j] = std::numeric_limits<float>::quiet_NaN();
    want[1].values[2] = std::numeric_limits<float>::quiet_NaN();
  });
  EXPECT_EQ(h.decode_failed, 0);
  EXPECT_EQ(h.bound_failed, 1) << "a NaN where the input is finite passed the bound gate";
}

// codes==reference compares each row's fp32 scale too, bit for bit (host mutation sweep, round
// 15: with the scale's comparison gone, every check stayed green); the encode stores the last
// row's scale one ulp off in both caches, so paged and window still agree.
TEST(Fp8RowsContract, CodesGateComparesTheScaleBits) {
  const RunResult r = test::run_cpu_through<test::LastRowScaleBitEncodeBackend>("fp8-rows", 2, "", true);
  EXPECT_GT(test::gate_failed(r, "codes==reference"), 0) << summary_table(r.receipt);
  EXPECT_EQ(test::gate_failed(r, "paged==window"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// e4m3-decode-all-codes wants the sign of zero: code 0x80 decodes to -0 (round 15: a check of
// the value alone passed a decode that gives +0). This decode turns every -0 into +0.
class PositiveZeroDecodeBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (st.ok)
      for (size_t i = 0; i < size_t(n) * size_t(c.lay.head_dim); ++i)
        if (o[i] == 0.0f) o[i] = 0.0f;
    return st;
  }
};

TEST(Fp8RowsContract, AllCodesGateSeesTheSignOfZero) {
  const RunResult r = test::run_cpu_through<PositiveZeroDecodeBackend>("fp8-rows", 1, "", true);
  EXPECT_GT(test::gate_failed(r, "e4m3-decode-all-codes"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// rows==solo encodes the launch's last row alone too, not the first only (host mutation sweep,
// round 15: with the first row alone, the launch-dependent-encode control, which alters the
// first row, kept every check green); the encode alters the last row of a launch of more
// than one row, in both caches alike.
TEST(Fp8RowsContract, RowsSoloEncodesTheLastRowAlone) {
  const RunResult r = test::run_cpu_through<test::LastRowBitEncodeBackend<test::RowField::codes, 2>>("fp8-rows", 2, "", true);
  EXPECT_GT(test::gate_failed(r, "rows==solo"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// e4m3-sampled==reference samples the floats just below each threshold (448, 464, 2^-10, 2^-6,
// the subnormal step, Inf), both signs (host mutation sweep, round 18: blocks that started at
// the threshold passed a conversion wrong on the float just below each; the spread blocks reach
// none of them). This conversion flips the code's lowest bit there.
class BelowThresholdEncodeBitsBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) override {
    const Status st = ForwardingBackend::e4m3_encode_bits(first, count, out);
    if (!st.ok) return st;
    for (uint32_t edge : {0x43E00000u, 0x43E80000u, 0x3A800000u, 0x3C800000u, 0x3B000000u, 0x7F800000u})
      for (uint32_t sign : {0u, 0x80000000u}) {
        const uint64_t below = uint64_t((edge | sign) - 1);
        if (below >= first && below - first < count) out[below - first] ^= 1;
      }
    return st;
  }
};

TEST(Fp8RowsContract, SampledConversionReachesTheFloatBelowEachThreshold) {
  const RunResult r = test::run_cpu_through<BelowThresholdEncodeBitsBackend>("fp8-rows", 1, "", true);
  EXPECT_GT(test::gate_failed(r, "e4m3-sampled==reference"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// The refusals gate wants each last valid value accepted, not only each first invalid one
// refused (round 18: with that check gone a backend refusing encode_rows of 0 rows, the last
// valid count, passed).
class EmptyEncodeRefusedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* r, int n) override {
    if (n == 0) return Status::Error("encode_rows: count 0: refused");
    return ForwardingBackend::encode_rows(f, c, x, r, n);
  }
};

TEST(Fp8RowsContract, RefusalsWantTheLastValidValueAccepted) {
  const RunResult r = test::run_cpu_through<EmptyEncodeRefusedBackend>("fp8-rows", 1, "", true);
  EXPECT_EQ(test::gate_failed(r, "refusals"), 1) << summary_table(r.receipt);  // encode_rows(n, last valid) 0 refused
  EXPECT_FALSE(r.pass);
}

}  // namespace
}  // namespace kc
