// The qwen-pages contract under GoogleTest (a reduced case count; CTest also runs the
// full default through the command line).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "contracts/faulty_backend.h"
#include "kernels/backend/forwarding.h"
#include "kernels/backend/kernel_paths.h"
#include "tests/contracts/contract_test_util.h"
#include "kernels/attention/rows.h"

namespace kc {
namespace {

RunResult run_qwen(const std::string& backend, int cases) { return test::run_contract_on("qwen-pages", backend, cases); }

// One cpu run of 3 cases (cases 0, 1, 2: bf16, fp8, q4), checked three ways in one test
// (CTest runs each test in a process of its own, and a run costs about 17 s on a CI core,
// mostly the controls): it passes with every control red; the receipt names the attention
// arithmetic (the host twin's fma chain); it records what ran (numbers.coverage) and the
// non-finite gate ran every format.
TEST(QwenPagesContract, CpuRunPassesNamesItsArithmeticAndRecordsCoverage) {
  const RunResult r = run_qwen("cpu", 3);
  test::expect_pass(r);
  EXPECT_EQ(r.receipt["controls"].size(), 15u);  // 4 planted setups + 7 backend-boundary faults + 4 refusals
  test::expect_controls_red_through(
      r.receipt, {{"swapped-page-table", "paged==window"},      {"planted-row", "paged==window"},
                  {"reverse-order-moves", "keep==reference"},   {"dropped-key", "attention-bound"},
                  {"attention-writes-its-input", "inputs"},     {"launch-dependent-rows", "rows==solo"},
                  {"nondeterministic-attention", "repeats"},    {"write-past-output", "guards"},
                  {"rope-off-by-one-position", "rope-bound"},   {"empty-row-nan", "empty-rows"},
                  {"keep-skips-a-layer", "keep==reference"},    {"refusal-accepts-one-past", "refusals"},
                  {"refusal-unnamed", "refusals"},              {"refusal-writes-first", "refusals"},
                  {"refusal-writes-output-first", "refusals"}});

  const auto& a = r.receipt["numbers"]["attention_arithmetic"];
  ASSERT_TRUE(a.is_object()) << r.receipt["numbers"].dump();
  for (const auto& [k, v] : a.items()) EXPECT_EQ(v, "fma_chain") << k;  // the host twin
  EXPECT_TRUE(a.contains("fp8/d256"));

  const auto& cov = r.receipt["numbers"]["coverage"];
  ASSERT_TRUE(cov.is_object()) << r.receipt["numbers"].dump();
  EXPECT_EQ(cov["cases"], 3);
  EXPECT_FALSE(cov.contains("kernel_path"));  // the twins note no kernel variant (one path each)
  for (const char* key : {"format", "shape", "page_tokens", "chunk", "scale", "scores", "lane_mix"}) {
    int sum = 0;
    for (const auto& [k, v] : cov[key].items()) sum += v.get<int>();
    EXPECT_EQ(sum, 3) << key;
  }
  EXPECT_EQ(cov["format"].size(), 3u);  // cases 0, 1, 2: bf16, fp8, q4
  EXPECT_EQ(cov["scores"]["near -200"], 1);
  EXPECT_EQ(cov["scores"]["near +200"], 1);
  for (const char* k : {"fp8/d64", "q4/d64", "mxfp4/d64"})
    EXPECT_EQ(cov["non_finite"][k], 6) << k;  // NaN and +Inf in q, K and V
  EXPECT_EQ(cov["non_finite"]["bf16/d64"], 7);  // and FLT_MAX in V (bf16 alone: it must store as +Inf)
  for (const char* k : {"fp8/d128", "q4/d128", "mxfp4/d128"})
    EXPECT_EQ(cov["non_finite"][k], 12) << k;  // two shapes: rotary dims 128 and 20
  EXPECT_EQ(cov["non_finite"]["bf16/d128"], 14);
  // The 51 probes ran (once per run), apart from the drawn cases' coverage.
  int probes = 0;
  for (const auto& [k, v] : cov["probe"].items()) probes += v.get<int>();
  EXPECT_EQ(probes, 51);
  // The fourth device sweep's blind spots: q4 groups rotated to NaN beside finite values (the ring
  // kernel at d 128 and 256), q4 V scales largest past a chunk's first 512 keys (d 128 regular and
  // short, d 256 short), d 128 at rotary dims 64 (fp8, q4: the ring kernel's plan).
  for (const char* k : {"q4-half-nan/q4/d128", "q4-half-nan/q4/d256", "late-vmax/q4/d256", "partial-rotary/fp8/d128",
                        "partial-rotary/q4/d128"})
    EXPECT_EQ(cov["probe"][k], 1) << k;
  EXPECT_EQ(cov["probe"]["late-vmax/q4/d128"], 2);  // group 4 over two chunks (regular), group 6 over one (short)
  for (const char* k : {"fp8/d128/r64", "q4/d128/r64"}) EXPECT_EQ(cov["dims"][k], 1) << k;
  EXPECT_FALSE(cov.contains("non_finite_kernel_path"));  // the twins note no kernel variant
  // The wide probes: 72 slots of 256 (mxfp4, fp8, q4) and 80 slots of 128 (fp8, q4: the ring
  // kernel's consumers in two passes, "rope-ring, passes > 1" on cuda).
  for (const char* k : {"wide/mxfp4/d256", "wide/fp8/d256", "wide/q4/d256", "wide/fp8/d128", "wide/q4/d128"})
    EXPECT_EQ(cov["probe"][k], 1) << k;
  // Row magnitudes where the short path cannot take the partial: fp8 and q4 at both head_dims.
  EXPECT_EQ(cov["probe"]["magnitudes/fp8/d128"], 1);
  EXPECT_EQ(cov["probe"]["magnitudes/fp8/d256"], 1);
  EXPECT_EQ(cov["probe"]["magnitudes/q4/d256"], 1);
  EXPECT_EQ(cov["probe"]["magnitudes/q4/d128"], 2);  // group 4 (packed) and group 6
  // q4 scale ties on both store kernels and both head_dims; bf16 over many chunks on the
  // tensor-core shapes (d 256 twice); the wide shape's second stage in three formats.
  EXPECT_EQ(cov["probe"]["q4-ties/q4/d128"], 2);
  EXPECT_EQ(cov["probe"]["q4-ties/q4/d256"], 1);
  EXPECT_EQ(cov["probe"]["chunks/bf16/d256"], 2);
  EXPECT_EQ(cov["probe"]["chunks/bf16/d128"], 1);
  for (const char* k : {"wide/mxfp4/d256", "wide/fp8/d256", "wide/q4/d256"}) EXPECT_EQ(cov["probe"][k], 1) << k;
  for (const char* k : {"huge-v/mxfp4/d128", "huge-v/mxfp4/d256"}) EXPECT_EQ(cov["probe"][k], 1) << k;
  EXPECT_EQ(cov["probe"]["peaked/q4/d128"], 2);  // groups 4 (packed) and 6
  EXPECT_EQ(cov["probe"]["peaked/bf16/d128"], 1);
  for (const char* k : {"far-max/bf16/d64", "v-binade/q4/d256", "magnitudes/fp8/d128", "v-ties/fp8/d256",
                        "tiny/bf16/d256", "tiny/fp8/d128", "tiny/q4/d128", "tiny/mxfp4/d128"})
    EXPECT_EQ(cov["probe"][k], 1) << k;
  EXPECT_EQ(cov["probe"]["v-ties/fp8/d128"], 2);  // rotary dims 128 and 20
  // fp8 and q4 at d 64 and 32: the bulk-copy rope store, which the drawn cases reach by chance
  for (const char* k : {"v-ties/fp8/d64", "v-ties/fp8/d32", "q4-ties/q4/d32", "q4-ties/q4/d64", "huge-v/mxfp4/d32"})
    EXPECT_EQ(cov["probe"][k], 1) << k;
  EXPECT_EQ(cov["probe"]["zero-groups/q4/d128"], 2);
  // The six long keeps ran (once per run, whatever the case count).
  for (const char* k : {"bf16/d128", "fp8/d256", "q4/d128", "q4/d32", "mxfp4/d32", "mxfp4/d64"})
    EXPECT_EQ(cov["keep_long"][k], 1) << k;
  bool found = false;
  for (const auto& g : r.receipt["gates"])
    if (g["name"] == "non-finite") {
      found = true;
      EXPECT_EQ(g["status"], "ok");
      EXPECT_EQ(g["passed"], 75);  // 4 formats x 3 shapes x NaN/+Inf x q, K, V, and bf16's FLT_MAX V x 3 shapes
    }
  EXPECT_TRUE(found);
}

// The cuda backend's choice of order (it decides the bound's depths) and its forwarding
// through the fault decorator; no device needed.
TEST(AttentionArith, TensorCoresForBf16Fp8AndQ4AtHeadDim128And256Only) {  // mxfp4: the fma chain
  for (int d : {32, 64, 128, 256})
    for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4})
      EXPECT_EQ(attn_uses_mma(f, d), f != Format::mxfp4 && d >= 128) << format_name(f) << " d" << d;
  auto cpu = make_cpu_backend();
  FaultyBackend fb(*cpu, Fault::input_write);
  EXPECT_EQ(cpu->attention_arith(Format::bf16, 256), AttnArith::fma_chain);
  EXPECT_EQ(fb.attention_arith(Format::bf16, 256), AttnArith::fma_chain);
  // Depths: 37 u per mma step, then one fp32 sum per k-step / a key group's tile, one for
  // two groups' sum (head_dim 128); fp8: 4 u for the two fp16 parts, 1 for p * V row scale.
  EXPECT_EQ(attn_mma_dot_depth(256, Format::bf16), 37 + 16);
  EXPECT_EQ(attn_mma_dot_depth(256, Format::fp8), 37 + 4 + 16);
  EXPECT_EQ(attn_mma_key_groups(128), 2);
  EXPECT_EQ(attn_mma_key_groups(256), 1);
  EXPECT_EQ(attn_mma_pv_depth(512, 128, Format::bf16), 37 + 16 + 1);
  EXPECT_EQ(attn_mma_pv_depth(512, 128, Format::fp8), 37 + 4 + 16 + 1 + 1);
  EXPECT_EQ(attn_mma_pv_depth(100, 128, Format::bf16), 37 + 4 + 1);  // 7 tiles: 4 in group 0
  EXPECT_EQ(attn_mma_pv_depth(16, 128, Format::bf16), 37 + 1 + 1);
  EXPECT_EQ(attn_mma_pv_depth(512, 256, Format::bf16), 37 + 32);
  EXPECT_EQ(attn_mma_pv_depth(512, 256, Format::fp8), 37 + 4 + 32 + 1);
  EXPECT_EQ(attn_mma_pv_depth(100, 256, Format::bf16), 37 + 7);
  EXPECT_EQ(attn_mma_parts(Format::bf16), 3);
  EXPECT_EQ(attn_mma_parts(Format::fp8), 2);
  // q4 (fp16 inputs like fp8; its group scale enters each k-step's fmaf, its V scale p's
  // one product): fp8's depths.
  EXPECT_EQ(attn_mma_parts(Format::q4), 2);
  EXPECT_EQ(attn_mma_dot_depth(128, Format::q4), 37 + 4 + 8);
  EXPECT_EQ(attn_mma_pv_depth(512, 128, Format::q4), 37 + 4 + 16 + 1 + 1);
  EXPECT_EQ(attn_mma_pv_depth(512, 256, Format::q4), 37 + 4 + 32 + 1);
  // q4 with a GQA group of <= 4: both parts in one mma's columns, summed apart and added at
  // the end (one more rounding in each product); larger groups and other formats as above.
  EXPECT_TRUE(attn_mma_q4_packed(Format::q4, 128, 4));
  EXPECT_TRUE(attn_mma_q4_packed(Format::q4, 128, 1));
  EXPECT_FALSE(attn_mma_q4_packed(Format::q4, 128, 6));
  EXPECT_FALSE(attn_mma_q4_packed(Format::q4, 256, 4));  // d 256 unpacked (no contract shape would run it)
  EXPECT_FALSE(attn_mma_q4_packed(Format::fp8, 128, 4));
  EXPECT_EQ(attn_mma_dot_depth(256, Format::q4, 4), 37 + 4 + 16);
  EXPECT_EQ(attn_mma_dot_depth(128, Format::q4, 4), 37 + 4 + 8 + 1);
  EXPECT_EQ(attn_mma_dot_depth(128, Format::q4, 6), 37 + 4 + 8);
  EXPECT_EQ(attn_mma_dot_depth(256, Format::fp8, 4), 37 + 4 + 16);
  EXPECT_EQ(attn_mma_pv_depth(512, 128, Format::q4, 4), 37 + 4 + 16 + 1 + 1 + 1);
  EXPECT_EQ(attn_mma_pv_depth(512, 256, Format::q4, 8), 37 + 4 + 32 + 1);
  EXPECT_EQ(attn_mma_pv_depth(512, 128, Format::bf16, 2), 37 + 16 + 1);
}

// fp16 round to nearest even in float64 (11 significant bits, subnormal step 2^-24, no
// overflow below 65520): the rounding of __floats2half2_rn for the values the split sees.
double round_f16(double x) {
  if (x == 0) return x;
  int e;
  (void)std::frexp(x, &e);                       // |x| in [2^(e-1), 2^e)
  const int q = std::max(e - 11, -24);            // the step of x's binade
  return std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
}

// The error model of fp8's two fp16 parts (attention/rows.h): for a scaled value x with
// |x| < 2^15, x - hi - lo is at most 2^-22 |x| (4 u) plus 2^-25 (a part below the normal
// range), and the bound is nearly reached.
TEST(AttentionArith, TwoF16PartsLeaveAtMost4UPlus2ToMinus25) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> ex(-40, 14), sign(0, 1);
  double worst = 0;
  for (int it = 0; it < 200000; ++it) {
    const float x = std::ldexp(mant(gen), ex(gen)) * (sign(gen) ? -1.0f : 1.0f);
    const double hi = round_f16(x), lo = round_f16(double(x) - hi);  // x - hi is exact in fp32
    const double err = std::fabs(double(x) - hi - lo), lim = std::ldexp(std::fabs(double(x)), -22) + std::ldexp(1.0, -25);
    ASSERT_LE(err, lim) << x;
    worst = std::max(worst, err / lim);
  }
  EXPECT_GT(worst, 0.4);  // the term is not slack by orders of magnitude
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

// A bound gate's ratio (bound_ratio, shared by the rows-invariant and q4 gates): an exact
// result passes whatever the bound; a bound of 0 is an exact promise, so any error there is
// +Inf (host mutation sweep, round 15: rows-invariant-zero-bound-passes read it as 0); a NaN
// error, or a bound that is NaN or negative with an error, is NaN, the worst.
TEST(Framework, BoundRatioFailsAnErrorWhereTheBoundIsZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(bound_ratio(0.5, 2.0), 0.25);
  EXPECT_EQ(bound_ratio(0.0, 0.0), 0.0);
  EXPECT_EQ(bound_ratio(0.0, nan), 0.0);
  EXPECT_EQ(bound_ratio(0x1p-1074, 0.0), INFINITY);
  EXPECT_EQ(bound_ratio(1.0, 0.0), INFINITY);
  EXPECT_TRUE(std::isnan(bound_ratio(nan, 1.0)));
  EXPECT_TRUE(std::isnan(bound_ratio(nan, 0.0)));
  EXPECT_TRUE(std::isnan(bound_ratio(1.0, nan)));
  EXPECT_TRUE(std::isnan(bound_ratio(1e-300, -1.0)));
  EXPECT_FALSE(bound_ratio(1.0, 0.0) <= 1.0);  // check_ratio's pass test
}

// rows==solo runs every row of a launch alone, the first included, and compares every float
// of it: an attention whose first row changes (one bit of its last value, the last head's
// last element) whenever other rows share its launch fails that gate. (The control
// launch-dependent-rows flips a row's first value; mutation sweep round 7,
// qp-rows-solo-one-float-short.)
struct FirstRowBatched {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* /*rows*/, int n, float* out) {
    if (n > 1) test::flip_lowest_bit(out + size_t(p.q_heads) * c.lay.head_dim - 1);
  }
};
using FirstRowBatchedBackend = test::AttentionEditBackend<FirstRowBatched>;

TEST(QwenPagesContract, RowsSoloSeesTheFirstRowChangeInABatch) {
  const RunResult r = test::run_cpu_through<FirstRowBatchedBackend>("qwen-pages", 3, "", true);
  EXPECT_GT(test::gate_failed(r, "rows==solo"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// The kernel variants a case's launches note (KernelPaths, the cuda launchers) reach the
// receipt's numbers.coverage.kernel_path as "format/dD/path", once per case; a control's
// runs add nothing. A cpu decorator notes what the cuda launchers would.
class NotingBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KernelPaths::note("partial-fma");
    KernelPaths::note(n > 1 ? "merge, chunks > 1" : "merge, 1 chunk");
    return ForwardingBackend::attention(c, p, rows, n, tails, q, out);
  }
};

TEST(QwenPagesContract, KernelPathsNotedByTheLaunchesAreCoveredPerCase) {
  // The three drawn cases (mxfp4 d256, fp8 d128, q4 d128); no control: the coverage is the cases'.
  const RunResult r = test::run_cpu_through<NotingBackend>("qwen-pages", 3, R"(^qwen-pages\((?!.*probe=))", true);
  for (const auto& g : r.receipt["gates"]) EXPECT_EQ(g["failed"], 0) << g["name"];
  // Each case once, however many of its launches noted a path; "1 chunk" from rows==solo's.
  nlohmann::json want = nlohmann::json::object();
  for (const char* fd : {"mxfp4/d256/", "fp8/d128/", "q4/d128/"})
    for (const char* path : {"partial-fma", "merge, chunks > 1", "merge, 1 chunk"}) want[std::string(fd) + path] = 1;
  EXPECT_EQ(r.receipt["numbers"]["coverage"]["kernel_path"], want) << r.receipt["numbers"]["coverage"].dump();
}

// A backend whose rope store refuses every call: each case stops right after its coverage
// is counted (QwenCaseRun::run_steps), so a run costs little more than drawing its inputs.
class StoreRefusedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status rope_store(Cache&, const RopeParams&, const RopeRow*, int, const float*, const float*, const float*,
                    float*) override {
    return Status::Error("refused: this test counts the cases' dims only");
  }
};

// Every format at every head_dim, and fp8, q4 and mxfp4 with rotary dims that are not a
// multiple of 8, from cases no seed changes: the first nine drawn cases (their shapes and formats
// are fixed by index) and the probes. The cuda rope store and partials pick their kernel by these
// (numbers.coverage.dims); the H200's first kernel-path run found the bulk-copy store (fp8 and q4
// at d 32 and 64) reached by no case of the default seed.
TEST(QwenPagesContract, FixedCasesCoverEveryFormatAtEveryHeadDim) {
  testing::internal::CaptureStderr();  // each refused case prints its ERROR line
  // Not gates_only: that stops at the first failing case. The seed does not matter: cases 0-8
  // take their shapes and formats from their index.
  const RunResult r = test::run_cpu_through<StoreRefusedBackend>("qwen-pages", 9, "");
  testing::internal::GetCapturedStderr();
  const auto& dims = r.receipt["numbers"]["coverage"]["dims"];
  ASSERT_TRUE(dims.is_object()) << r.receipt["numbers"].dump();
  std::set<std::string> fd, odd_rotary;
  int n = 0;
  for (const auto& [k, v] : dims.items()) {  // "format/dD/rR"
    const size_t r_at = k.rfind("/r");
    ASSERT_NE(r_at, std::string::npos) << k;
    fd.insert(k.substr(0, r_at));
    if (std::stoi(k.substr(r_at + 2)) % 8 != 0) odd_rotary.insert(k.substr(0, k.find('/')));
    n += v.get<int>();
  }
  EXPECT_EQ(n, 9 + 51);  // the nine drawn cases and the probes
  for (const char* f : {"bf16", "fp8", "q4", "mxfp4"})
    for (int d : {32, 64, 128, 256}) EXPECT_EQ(fd.count(std::string(f) + "/d" + std::to_string(d)), 1u) << f << " d" << d;
  for (const char* f : {"fp8", "q4", "mxfp4"}) EXPECT_EQ(odd_rotary.count(f), 1u) << f;
}

// The tensor-core kernels a run's numbers.coverage.kernel_path never reached: at bf16, fp8 and
// q4 and head_dim 128 and 256, "format/dD/partial-mma" (the regular grid) and
// "format/dD/partial-short-cl*" (the short path). A path's name alone does not do: each format at
// each head_dim is a kernel of its own (983675a's default run had reached q4 d256's short path
// only, and bf16's and fp8's partial-mma stood in for its regular kernel).
std::vector<std::string> tensor_core_kernels_not_reached(const nlohmann::json& kp) {
  std::vector<std::string> missing;
  for (const char* f : {"bf16", "fp8", "q4"})
    for (const char* d : {"d128", "d256"}) {
      const std::string at = std::string(f) + "/" + d + "/";
      if (!kp.contains(at + "partial-mma")) missing.push_back(at + "partial-mma");
      bool short_path = false;
      for (const auto& [key, n] : kp.items()) short_path |= key.rfind(at + "partial-short-cl", 0) == 0;
      if (!short_path) missing.push_back(at + "partial-short-cl*");
    }
  return missing;
}

// The default run's cases (drawn and probes) reach every kernel the cuda launchers can pick on
// this device (kKernelPathNames): a path no case reaches is a kernel no gate checks (the device
// mutation sweep's round-3 survivors were such paths).
TEST(QwenPagesContract, CudaDefaultRunReachesEveryKernelPath) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  const RunResult r = test::run_contract_on("qwen-pages", "cuda", std::nullopt, "", true);  // the default cases
  for (const auto& g : r.receipt["gates"]) EXPECT_EQ(g["failed"], 0) << g["name"];
  std::vector<std::string> seen;
  for (const auto& [key, n] : r.receipt["numbers"]["coverage"]["kernel_path"].items()) {
    const size_t slash = key.find('/', key.find('/') + 1);  // "format/dD/path"
    ASSERT_NE(slash, std::string::npos) << key;
    const std::string path = key.substr(slash + 1);
    EXPECT_EQ(path.rfind("unregistered: ", 0), std::string::npos) << key << " (add it to kKernelPathNames)";
    seen.push_back(path);
  }
  EXPECT_EQ(KernelPaths::not_reached(seen), std::vector<std::string>{}) << r.receipt["numbers"]["coverage"]["kernel_path"].dump(1);
  // A path's name alone can be reached by another format's kernel (tensor_core_kernels_not_reached).
  EXPECT_EQ(tensor_core_kernels_not_reached(r.receipt["numbers"]["coverage"]["kernel_path"]), std::vector<std::string>{});
}

// The probes alone, whatever the seed, reach every tensor-core kernel: at bf16, fp8 and q4 and
// head_dim 128 and 256, the regular grid (partial-mma) and the short path; at q4 d128 the packed
// kernels too (GQA groups up to 4: partial-mma-packed, and partial-packed beside the short
// path's name). The q4 d128 probes at group 6 are not packed (checked first), so partial-mma
// there is the unpacked regular kernel; their short path shares its name with the packed one's.
TEST(QwenPagesContract, CudaProbesAloneReachEveryTensorCoreKernel) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  ASSERT_FALSE(attn_mma_q4_packed(Format::q4, 128, 6));  // shape gqa6-6q1kv-d128
  ASSERT_TRUE(attn_mma_q4_packed(Format::q4, 128, 4));   // shape qwen3-32q8kv-d128
  const RunResult r = test::run_contract_on("qwen-pages", "cuda", std::nullopt, "probe=", true);
  for (const auto& g : r.receipt["gates"]) EXPECT_EQ(g["failed"], 0) << g["name"];
  const nlohmann::json& kp = r.receipt["numbers"]["coverage"]["kernel_path"];
  EXPECT_EQ(tensor_core_kernels_not_reached(kp), std::vector<std::string>{});
  EXPECT_TRUE(kp.contains("q4/d128/partial-mma-packed")) << kp.dump(1);
  EXPECT_TRUE(kp.contains("q4/d128/partial-packed")) << kp.dump(1);
}

// The probes for the fourth device sweep's blind spots (reports/h200/mutation-sweep/round4/README.md)
// take the kernels they exist for: q4-half-nan the ring kernel's fast encode at d 128 (its per-block
// plan: 8 head slots, one pass) and d 256; late-vmax the q4 partials whose V-scale maximum follows
// the third batch of 256 keys (KPT > 0: d 128 regular and short, d 256 short), never the regular
// d 256 kernel (KPT 0); partial-rotary the ring kernel's plan at d 128 (not the block-per-row store).
TEST(QwenPagesContract, CudaRound4ProbesTakeTheirKernels) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  auto paths = [](const std::string& probe) {
    const RunResult r = test::run_contract_on("qwen-pages", "cuda", std::nullopt, "probe=" + probe + ",", true);
    for (const auto& g : r.receipt["gates"]) EXPECT_EQ(g["failed"], 0) << probe << " " << g["name"];
    std::set<std::string> kp;
    for (const auto& [key, n] : r.receipt["numbers"]["coverage"]["kernel_path"].items()) kp.insert(key);
    return kp;
  };
  auto any = [](const std::set<std::string>& kp, const std::string& prefix) {
    for (const std::string& k : kp)
      if (k.rfind(prefix, 0) == 0) return true;
    return false;
  };
  auto dump = [](const std::set<std::string>& kp) {
    std::string o;
    for (const std::string& k : kp) o += k + "; ";
    return o;
  };
  const std::set<std::string> nan = paths("q4-half-nan");
  EXPECT_TRUE(nan.count("q4/d128/rope-ring") || nan.count("q4/d128/rope-ring, deep")) << dump(nan);
  EXPECT_FALSE(nan.count("q4/d128/rope-ring, passes > 1") || any(nan, "q4/d128/rope-block")) << dump(nan);
  EXPECT_TRUE(nan.count("q4/d256/rope-ring")) << dump(nan);
  const std::set<std::string> late = paths("late-vmax");
  EXPECT_TRUE(late.count("q4/d128/partial-mma-packed")) << dump(late);
  EXPECT_TRUE(any(late, "q4/d128/partial-short-cl")) << dump(late);
  EXPECT_TRUE(any(late, "q4/d256/partial-short-cl")) << dump(late);
  EXPECT_FALSE(late.count("q4/d256/partial-mma")) << dump(late);
  const std::set<std::string> rot = paths("partial-rotary");
  for (const char* f : {"fp8", "q4"}) {
    const std::string at = std::string(f) + "/d128/";
    EXPECT_TRUE(rot.count(at + "rope-ring") || rot.count(at + "rope-ring, deep")) << dump(rot);
    EXPECT_FALSE(rot.count(at + "rope-ring, passes > 1") || any(rot, at + "rope-block")) << dump(rot);
  }
}

// The condition itself, on receipts that ran: 983675a's default run on the H200 lacks q4 d256's
// regular kernel (the short path took every q4 d256 case); 533a1db's on an H100, with the 38th
// probe, lacks nothing, nor does 98afef3's on the H200 (reports/h200, session 42).
TEST(QwenPagesContract, TensorCoreKernelsNotReachedNamesEachFormatsOwn) {
  auto kernel_paths = [](const std::string& rel) {
    std::ifstream f(std::string(KC_SOURCE_DIR) + "/" + rel);
    EXPECT_TRUE(f.good()) << rel;
    return nlohmann::json::parse(f, nullptr, false)["numbers"]["coverage"]["kernel_path"];
  };
  EXPECT_EQ(tensor_core_kernels_not_reached(kernel_paths("reports/h200/receipts-s36/qwen-pages-983675a.json")),
            std::vector<std::string>{"q4/d256/partial-mma"});
  EXPECT_EQ(tensor_core_kernels_not_reached(kernel_paths("reports/h200/qwen-pages.json")), std::vector<std::string>{});
  EXPECT_EQ(tensor_core_kernels_not_reached(kernel_paths("reports/h100/receipts-s40/call3-533a1db/qwen-pages.json")),
            std::vector<std::string>{});
  EXPECT_EQ(tensor_core_kernels_not_reached(nlohmann::json::object()).size(), 12u);  // none reached
}

// ---- mutation sweep round 7 (reports/mutation-sweep/host-7-local/) ----

// The drawn cases' keep moves overlap (a destination an earlier move of the call reads from,
// draw: tails of 3 and 4 rows): a keep whose small calls run their moves last to first
// (fine for moves that do not overlap) fails keep==reference on the drawn cases alone. The
// long keeps (820 moves in one call) are left in order, so they cannot be what sees it.
class SmallKeepsReversedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status keep(Cache& c, const KeepMove* m, int n) override {
    if (n >= 16) return ForwardingBackend::keep(c, m, n);
    for (int i = n - 1; i >= 0; --i) KC_RETURN_IF_ERROR(ForwardingBackend::keep(c, m + i, 1));
    return Status::Ok();
  }
};

TEST(QwenPagesContract, DrawnKeepsOverlapSoMoveOrderMatters) {
  // Case 1: fp8, pages of 48, a tail of 4 (0.4 s on cpu).
  const RunResult r = test::run_cpu_through<SmallKeepsReversedBackend>("qwen-pages", 2, R"(^qwen-pages\(.*ptok=48,(?!.*probe=))", true);
  EXPECT_EQ(r.receipt["cases"]["run"], 1);
  EXPECT_GT(test::gate_failed(r, "keep==reference"), 0) << summary_table(r.receipt);
}

// store==reference compares every byte of a q4 group's codes: a rope store that leaves a wrong
// code in a group's last byte (element 30 of group 0 of head 0's V rows, within the store's
// bounds) fails it.
struct LastCodeByte {
  static void apply(Cache& c, const RopeParams& p, const RopeRow* rows, int n, float* /*q_out*/) {
    if (c.lay.format == Format::q4)
      for (int i = 0; i < n; ++i) {
        uint8_t* b = kv_row(c.view(rows[i].lane), p.layer, 1, 0, rows[i].slot) + 15;
        *b = uint8_t((*b & 0xF0) | ((*b & 0x0F) == 8 ? 9 : 8));  // code 0 or 1
      }
  }
};
using LastCodeByteBackend = test::RopeStoreEditBackend<LastCodeByte>;

TEST(QwenPagesContract, StoreBytesSeeAGroupsLastCodeByte) {
  // Case 2: q4, pages of 128.
  const RunResult r = test::run_cpu_through<LastCodeByteBackend>("qwen-pages", 3, R"(^qwen-pages\(.*fmt=q4,ptok=128,(?!.*probe=))", true);
  EXPECT_EQ(r.receipt["cases"]["run"], 1);
  EXPECT_GT(test::gate_failed(r, "store==reference"), 0) << summary_table(r.receipt);
}

// empty-rows compares bytes: a row with no keys must come out +0, and -0 (equal as a value) fails.
struct NegativeZeroEmptyRows {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, float* out) {
    const size_t m = size_t(p.q_heads) * c.lay.head_dim;
    for (int r = 0; r < n; ++r)
      if (rows[r].len + rows[r].tail_len == 0) std::fill_n(out + r * m, m, -0.0f);
  }
};
using NegativeZeroEmptyRowsBackend = test::AttentionEditBackend<NegativeZeroEmptyRows>;

TEST(QwenPagesContract, EmptyRowsMustBePositiveZeroBytes) {
  // Case 3: bf16, pages of 256 (0.2 s on cpu).
  const RunResult r = test::run_cpu_through<NegativeZeroEmptyRowsBackend>("qwen-pages", 4, R"(^qwen-pages\(.*ptok=256,(?!.*probe=))", true);
  EXPECT_EQ(r.receipt["cases"]["run"], 1);
  EXPECT_GT(test::gate_failed(r, "empty-rows"), 0) << summary_table(r.receipt);
}

// The drawn cases reach RoPE positions near 262,144 (every third case, from case 2: the angles
// the rope-bound gate's description promises), seen at the rope store's rows.
class MaxPositionBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  static inline int32_t max_pos = -1;
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    for (int i = 0; i < n; ++i) max_pos = std::max(max_pos, rows[i].pos);
    return ForwardingBackend::rope_store(c, p, rows, n, q, k, v, q_out);
  }
};

TEST(QwenPagesContract, DrawnCasesReachPositionsNear262144) {
  MaxPositionBackend::max_pos = -1;
  const RunResult r = test::run_cpu_through<MaxPositionBackend>("qwen-pages", 6, R"(^qwen-pages\(.*ptok=1,(?!.*probe=))", true);
  EXPECT_EQ(r.receipt["cases"]["run"], 1);  // case 5 (mxfp4, pages of 1)
  EXPECT_GT(MaxPositionBackend::max_pos, 250000);
  EXPECT_LT(MaxPositionBackend::max_pos, 262144);
}

// ---- host mutation sweep round 16 (reports/mutation-sweep/host-16-local/) ----
// Each decorator below plants a defect that one gate alone sees: the other gates compare
// launches or caches that carry the same defect (paged and window, repeats, a row alone),
// or read another layer. Each test runs drawn case 1 alone (fp8, d128, 32 query heads over 8
// KV heads, pages of 48; gates only, well under a second on cpu) and wants that gate failed.
constexpr const char* kCase1 = R"(^qwen-pages\(.*ptok=48,(?!.*probe=))";
template <class Decorated>
RunResult run_case1_through() {
  return test::run_cpu_through<Decorated>("qwen-pages", 2, kCase1, true);
}
template <class Decorated>
void expect_case1_fails(const std::string& gate) {
  const RunResult r = run_case1_through<Decorated>();
  EXPECT_EQ(r.receipt["cases"]["run"], 1);
  EXPECT_GT(test::gate_failed(r, gate), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// rope-bound checks every rotated query head: a rope store whose last query head comes out
// 1 + 2^-6 times too large (K and V right) fails it (qp-rope-bound-query-head0-only).
struct LastQueryHeadScaled {
  static void apply(Cache& c, const RopeParams& p, const RopeRow* /*rows*/, int n, float* q_out) {
    const int d = c.lay.head_dim;
    if (q_out)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < d; ++j) q_out[(size_t(i) * p.q_heads + p.q_heads - 1) * d + j] *= 1.0f + 1.0f / 64;
  }
};
using LastQueryHeadScaledBackend = test::RopeStoreEditBackend<LastQueryHeadScaled>;

TEST(QwenPagesContract, RopeBoundSeesEveryQueryHead) { expect_case1_fails<LastQueryHeadScaledBackend>("rope-bound"); }

// empty-rows compares every element of a row with no keys: -0 in its last element alone fails
// (qp-empty-rows-first-element).
struct LastElementNegativeZeroEmptyRows {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, float* out) {
    const size_t m = size_t(p.q_heads) * c.lay.head_dim;
    for (int r = 0; r < n; ++r)
      if (rows[r].len + rows[r].tail_len == 0) out[r * m + m - 1] = -0.0f;
  }
};
using LastElementNegativeZeroEmptyRowsBackend = test::AttentionEditBackend<LastElementNegativeZeroEmptyRows>;

TEST(QwenPagesContract, EmptyRowsComparesEveryElement) {
  expect_case1_fails<LastElementNegativeZeroEmptyRowsBackend>("empty-rows");
}

// A launch of more than two rows (the case's mixed launch of six; tail==committed's has two):
// its last row's last value (the last head's last element) one bit off.
struct LastRowBatched {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* /*rows*/, int n, float* out) {
    if (n > 2) test::flip_lowest_bit(out + size_t(n) * p.q_heads * c.lay.head_dim - 1);
  }
};
using LastRowBatchedBackend = test::AttentionEditBackend<LastRowBatched>;

// rows==solo runs the launch's last row alone too (row E, lane 0's tail with no committed keys):
// an attention whose last row changes when other rows share its launch fails it
// (qp-rows-solo-skips-last-row; the control launch-dependent-rows and
// RowsSoloSeesTheFirstRowChangeInABatch alter the first row).
TEST(QwenPagesContract, RowsSoloSeesTheLastRowChangeInABatch) { expect_case1_fails<LastRowBatchedBackend>("rows==solo"); }

// tail==committed compares row F too (lane 1 over its tail, the second row of that launch): an
// attention whose second row of a two-row launch (only tail==committed's) is one bit off fails
// it (qp-tail-committed-row-A-only).
struct SecondOfTwoRows {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* /*rows*/, int n, float* out) {
    if (n == 2) test::flip_lowest_bit(out + size_t(p.q_heads) * c.lay.head_dim);  // row 1's first value
  }
};
using SecondOfTwoRowsBackend = test::AttentionEditBackend<SecondOfTwoRows>;

TEST(QwenPagesContract, TailEqualsCommittedComparesRowF) { expect_case1_fails<SecondOfTwoRowsBackend>("tail==committed"); }

// keep==reference compares lane 1's rows too: a keep (calls of fewer than 16 moves: the drawn
// cases', not the long keeps') that writes zeros instead of layer 0's bytes at lane 1's last
// move, in both caches alike, fails it; attention reads layer 1 only (qp-keep-reference-lane0-only).
class Lane1Layer0ZeroedKeepBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status keep(Cache& c, const KeepMove* m, int n) override {
    const Status st = ForwardingBackend::keep(c, m, n);
    int last = -1;
    for (int i = 0; i < n && n < 16; ++i)
      if (m[i].lane == 1) last = i;
    for (int f = 0; st.ok && last >= 0 && f < c.lay.field_count(); ++f)
      if (c.lay.field(f).layer == 0) std::fill_n(kv_field_row(c.view(1), f, m[last].dst), c.lay.field(f).bytes_per_pos, 0);
    return st;
  }
};

TEST(QwenPagesContract, KeepReferenceComparesLaneOne) { expect_case1_fails<Lane1Layer0ZeroedKeepBackend>("keep==reference"); }

// attention-bound checks the query heads of every KV head: an attention whose last query head
// (of the last KV head) comes out twice too large in every row with keys, the same in every
// launch, fails it (qp-attention-bound-first-kv-head).
struct LastHeadDoubled {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, float* out) {
    const int d = c.lay.head_dim;
    for (int r = 0; r < n; ++r)
      if (rows[r].len + rows[r].tail_len > 0)
        for (int j = 0; j < d; ++j) out[(size_t(r) * p.q_heads + p.q_heads - 1) * d + j] *= 2.0f;
  }
};
using LastHeadDoubledBackend = test::AttentionEditBackend<LastHeadDoubled>;

TEST(QwenPagesContract, AttentionBoundChecksEveryKvHead) { expect_case1_fails<LastHeadDoubledBackend>("attention-bound"); }

// attention-bound fails a NaN output where every input is finite: an attention whose last
// value of every row with keys is NaN, the same in every launch, fails it
// (qp-attention-bound-nan-passes).
struct LastValueNan {
  static void apply(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, float* out) {
    const size_t m = size_t(p.q_heads) * c.lay.head_dim;
    for (int r = 0; r < n; ++r)
      if (rows[r].len + rows[r].tail_len > 0) out[r * m + m - 1] = std::numeric_limits<float>::quiet_NaN();
  }
};
using LastValueNanBackend = test::AttentionEditBackend<LastValueNan>;

TEST(QwenPagesContract, AttentionBoundFailsANanOutput) { expect_case1_fails<LastValueNanBackend>("attention-bound"); }

// store==reference checks layer 0's stored bytes too (attention reads layer 1 only): a rope
// store that flips the lowest bit of the first code byte (kField codes) or of the fp32 scale
// (scales: one ulp) of head 0's V rows in layer 0, in both caches alike, fails it
// (qp-store-bytes-layer1-only; scales: qp-store-fp8-exact-scale-unchecked, V rows being exact
// input).
template <test::RowField kField>
struct Layer0VBitStore {
  static void apply(Cache& c, const RopeParams& p, const RopeRow* rows, int n, float* /*q_out*/) {
    if (p.layer == 0)
      for (int i = 0; i < n; ++i) {
        const KvView kv = c.view(rows[i].lane);
        (kField == test::RowField::scales ? kv_scale(kv, 0, 1, 0, rows[i].slot) : kv_row(kv, 0, 1, 0, rows[i].slot))[0] ^= 0x01;
      }
  }
};
template <test::RowField kField>
using Layer0VBitStoreBackend = test::RopeStoreEditBackend<Layer0VBitStore<kField>>;

TEST(QwenPagesContract, StoreBytesCheckLayerZero) {
  expect_case1_fails<Layer0VBitStoreBackend<test::RowField::codes>>("store==reference");
}

TEST(QwenPagesContract, StoreBytesCompareAnExactFp8RowsScale) {
  expect_case1_fails<Layer0VBitStoreBackend<test::RowField::scales>>("store==reference");
}

// The rope store's and keep's guards scan the window cache as well as the paged one: a rope
// store that changes the window cache's last byte (its trailing guard band, which no row
// reads) fails them (qp-guards-window-unchecked).
struct WindowGuardWrite {
  static void apply(Cache& c, const RopeParams& /*p*/, const RopeRow* /*rows*/, int /*n*/, float* /*q_out*/) {
    if (!c.views.empty() && !c.views[0].paged()) ++c.mem.back();  // four stores a case: +4, never back
  }
};
using WindowGuardWriteBackend = test::RopeStoreEditBackend<WindowGuardWrite>;

TEST(QwenPagesContract, GuardsScanTheWindowCache) { expect_case1_fails<WindowGuardWriteBackend>("guards"); }

// The refusals gate probes attention's length on a paged lane at capacity + 1, the first
// invalid value (host mutation sweep, round 18: a probe at capacity + 2 passed an attention whose
// check lets a paged row one position past its lane through). This attention accepts such a row.
class PagedLengthOnePastAcceptedBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    for (int i = 0; i < n; ++i)
      if (rows[i].lane >= 0 && rows[i].lane < int(c.views.size()) && c.views[rows[i].lane].paged() &&
          rows[i].len == c.views[rows[i].lane].capacity() + 1)
        return Status::Ok();
    return ForwardingBackend::attention(c, p, rows, n, tails, q, out);
  }
};

TEST(QwenPagesContract, RefusalsProbeAttentionOnePastAPagedLane) {
  const RunResult r = test::run_cpu_through<PagedLengthOnePastAcceptedBackend>("qwen-pages", 1, "", true);
  // --gates-only stops at the first failing probe: attention's len at paged-cap+1, in bf16.
  EXPECT_EQ(test::gate_failed(r, "refusals"), 1) << summary_table(r.receipt);
  EXPECT_NE(r.receipt.doc().dump().find("arg=len,value=paged-cap+1"), std::string::npos) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// The drawn cases take the softmax scale 1/d (case 5 of every 8: among the first six, case 5 alone;
// qp-scale-1-over-d-never-drawn: no case drew it, and a kernel that ignores that scale passed).
TEST(QwenPagesContract, DrawnCasesTakeTheScaleOneOverD) {
  const RunResult r = test::run_contract_on("qwen-pages", "cpu", 6, R"(^qwen-pages\(.*,scale=1/d,(?!.*probe=))", true);
  EXPECT_EQ(r.receipt["cases"]["run"], 1) << summary_table(r.receipt);
}

// The long keeps compact lane 1 from position 0: one move of each long keep (six, paged and
// window) has destination 0, where the drawn cases' tails (destinations from len0 >= 2) never go
// (qp-keep-long-no-destination-0: the compaction started at destination 1). The long keeps alone.
class KeepToZeroBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  static inline int to_zero = 0;
  Status keep(Cache& c, const KeepMove* m, int n) override {
    if (n >= 520)  // a long keep's call (820 moves), not a refusal probe's
      for (int i = 0; i < n; ++i) to_zero += m[i].dst == 0;
    return ForwardingBackend::keep(c, m, n);
  }
};

TEST(QwenPagesContract, LongKeepsMoveARowToPositionZero) {
  KeepToZeroBackend::to_zero = 0;
  const RunResult r = test::run_cpu_through<KeepToZeroBackend>("qwen-pages", 1, R"(^qwen-pages-keep-long\()", true);
  EXPECT_EQ(test::gate_failed(r, "keep==reference"), 0) << summary_table(r.receipt);
  EXPECT_EQ(KeepToZeroBackend::to_zero, 12);
}

TEST(QwenPagesContract, CudaPassesWithEveryControlRed) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  const RunResult r = run_qwen("cuda", 6);
  test::expect_pass(r);
}

}  // namespace
}  // namespace kc
