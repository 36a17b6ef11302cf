// kv-gate (issue 18): the float64 KL arithmetic against hand-computed values, the fixture
// validator's refusals (exit 2 naming the field, nothing written), the ci fixture's verdict
// on the cpu backend with every control red, the controls' plants doing what their controls
// describe, and the bf16 arm's store (the second run reads it and gives the same numbers).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/kv_gate.h"
#include "engine/kv_plant_backend.h"
#include "engine/model.h"
#include "tests/cuda_backend_or_skip.h"
#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

const std::string kSrc = KC_SOURCE_DIR;

// The controls' plants (engine/kv_plant_backend.h) do what the controls say they do, on the
// cpu backend. scales_from_neighbour_row: after a rope store of slots 0..3 (handed over out
// of order), slot s holds the scale the real store gave slot s + 1, and the last slot keeps
// its own; the codes are the real ones.
TEST(KvPlant, NeighbourScalesAreTheNextRowsAndTheLastKeepsItsOwn) {
  auto cpu = make_cpu_backend();
  const int d = 32, n = 4;
  const KvLayout lay(1, 1, d, Format::fp8);
  Cache real, planted;
  ASSERT_TRUE(make_engine_cache(lay, {{8, 0}}, &real).ok);
  ASSERT_TRUE(make_engine_cache(lay, {{8, 0}}, &planted).ok);
  std::vector<float> q(n * d, 0.5f), k(n * d), v(n * d), qo(n * d);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < d; ++i) {
      k[r * d + i] = float(r + 1) * 0.75f * float(i % 5 - 2);
      v[r * d + i] = float(r + 1) * 0.5f * float(i % 3 - 1);
    }
  const RopeParams p{1, d, 1e6, 0};
  const std::vector<RopeRow> rows = {{0, 2, 2}, {0, 0, 0}, {0, 3, 3}, {0, 1, 1}};
  std::vector<float> k_in(n * d), v_in(n * d);  // row i of the call holds the values of its slot
  for (int i = 0; i < n; ++i) {
    std::copy(k.begin() + rows[i].slot * d, k.begin() + (rows[i].slot + 1) * d, k_in.begin() + i * d);
    std::copy(v.begin() + rows[i].slot * d, v.begin() + (rows[i].slot + 1) * d, v_in.begin() + i * d);
  }
  ASSERT_TRUE(cpu->rope_store(real, p, rows.data(), n, q.data(), k_in.data(), v_in.data(), qo.data()).ok);
  KvPlantBackend pb(*cpu, KvPlant::scales_from_neighbour_row);
  ASSERT_TRUE(pb.rope_store(planted, p, rows.data(), n, q.data(), k_in.data(), v_in.data(), qo.data()).ok);
  EXPECT_EQ(pb.planted(), 1);
  const KvView rv = real.view(0), pv = planted.view(0);
  for (int kv = 0; kv < 2; ++kv)
    for (int s = 0; s < n; ++s) {
      SCOPED_TRACE("kv " + std::to_string(kv) + " slot " + std::to_string(s));
      const int from = std::min(s + 1, n - 1);
      if (s + 1 < n) {  // the test has power: neighbouring rows' scales differ
        ASSERT_NE(std::memcmp(kv_scale(rv, 0, kv, 0, s), kv_scale(rv, 0, kv, 0, s + 1), lay.scale_bytes), 0);
      }
      EXPECT_EQ(std::memcmp(kv_scale(pv, 0, kv, 0, s), kv_scale(rv, 0, kv, 0, from), lay.scale_bytes), 0);
      EXPECT_EQ(std::memcmp(kv_row(pv, 0, kv, 0, s), kv_row(rv, 0, kv, 0, s), lay.code_bytes), 0);
    }
}

// probe_query_zeroed: only lane 1's rows (the recall probes') score a zero query, and only
// calls that hold such a row count as planted (a run whose probe lane never attended is
// reported as "the plant never acted").
TEST(KvPlant, ProbePlantActsOnLaneOneRowsOnly) {
  auto cpu = make_cpu_backend();
  const int d = 32;
  const KvLayout lay(1, 1, d, Format::bf16);
  Cache c;
  ASSERT_TRUE(make_engine_cache(lay, {{8, 0}, {8, 0}}, &c).ok);
  std::vector<float> q(2 * d), k(2 * d), v(2 * d), qo(2 * d);
  for (int i = 0; i < 2 * d; ++i) q[i] = 0.25f * float(i % 7 - 3), k[i] = 0.5f * float(i % 5 - 2), v[i] = float(i % 9);
  const RopeParams rp{1, d, 1e6, 0};
  for (int lane = 0; lane < 2; ++lane) {
    const std::vector<RopeRow> rows = {{lane, 0, 0}, {lane, 1, 1}};
    ASSERT_TRUE(cpu->rope_store(c, rp, rows.data(), 2, q.data(), k.data(), v.data(), qo.data()).ok);
  }
  const AttnParams ap{1, 0, 16, 1.0f / std::sqrt(float(d))};
  KvPlantBackend pb(*cpu, KvPlant::probe_query_zeroed);
  const AttnRow lane0{0, 2, 0, 0}, both[2] = {{0, 2, 0, 0}, {1, 2, 0, 0}};
  std::vector<float> out(2 * d), want(2 * d);
  ASSERT_TRUE(pb.attention(c, ap, &lane0, 1, {}, q.data(), out.data()).ok);
  EXPECT_EQ(pb.planted(), 0) << "a call without a lane-1 row counted as planted";
  ASSERT_TRUE(cpu->attention(c, ap, &lane0, 1, {}, q.data(), want.data()).ok);
  EXPECT_EQ(std::memcmp(out.data(), want.data(), d * 4), 0);
  ASSERT_TRUE(pb.attention(c, ap, both, 2, {}, q.data(), out.data()).ok);
  EXPECT_EQ(pb.planted(), 1);
  std::vector<float> qz(q);
  std::fill(qz.begin() + d, qz.end(), 0.0f);
  ASSERT_TRUE(cpu->attention(c, ap, both, 2, {}, qz.data(), want.data()).ok);
  EXPECT_EQ(std::memcmp(out.data(), want.data(), 2 * d * 4), 0);
  ASSERT_TRUE(cpu->attention(c, ap, both, 2, {}, q.data(), want.data()).ok);
  EXPECT_NE(std::memcmp(out.data() + d, want.data() + d, d * 4), 0) << "lane 1's zero query changed nothing";
}

// The plants on the engine path (KvPlantBackend::engine(): a KvPlantEngine over the real
// engine, the cache held, q, k, v and out in the engine's memory) give the bytes of the
// Backend path (the cache image, host buffers): the cache after a planted rope store of two
// lanes' rows (lane 1's first stored slot takes the scale of a row stored before), and
// attention's output under a planted query. Each plant also changes something (against the
// real backend unplanted), so an engine path that skipped its plant fails here.
void expect_engine_plants_as_backend_plants(Backend& real, KvPlant plant, Format f) {
  SCOPED_TRACE(std::string(format_name(f)) + " plant " + std::to_string(int(plant)));
  const int d = 32, qh = 4, L = 2;
  const KvLayout lay(L, 2, d, f);
  Cache base;
  ASSERT_TRUE(make_engine_cache(lay, {{24, 0}, {24, 0}}, &base).ok);
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 1.5f);
  auto drawn = [&](size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = nd(g);
    return x;
  };
  // Slots 0..9 of both lanes at both layers, unplanted.
  for (int layer = 0; layer < L; ++layer) {
    std::vector<RopeRow> rows;
    for (int lane = 0; lane < 2; ++lane)
      for (int s = 0; s < 10; ++s) rows.push_back({lane, s, s});
    const size_t n = rows.size();
    const std::vector<float> q = drawn(n * qh * d), k = drawn(n * 2 * d), v = drawn(n * 2 * d);
    std::vector<float> qo(q.size());
    ASSERT_TRUE(real.rope_store(base, {qh, d, 1e6, layer}, rows.data(), int(n), q.data(), k.data(), v.data(),
                                qo.data()).ok);
  }
  // The planted call: slots 10..13 of lane 0 and 10..11 of lane 1 at layer 1 (out of order).
  const std::vector<RopeRow> rows = {{0, 12, 12}, {1, 10, 10}, {0, 10, 10}, {0, 13, 13}, {1, 11, 11}, {0, 11, 11}};
  const int n = int(rows.size());
  const RopeParams rp{qh, d, 1e6, 1};
  const std::vector<float> q = drawn(size_t(n) * qh * d), k = drawn(size_t(n) * 2 * d), v = drawn(size_t(n) * 2 * d);
  const std::vector<AttnRow> arows = {{0, 14, 0, 0}, {1, 12, 0, 0}, {0, 7, 0, 0}};
  const AttnParams ap{qh, 1, 4, float(1.0 / std::sqrt(double(d)))};
  const std::vector<float> aq = drawn(arows.size() * qh * d);
  const size_t nout = arows.size() * qh * d;

  Cache by_backend = base, by_engine = base, unplanted = base;
  std::vector<float> qo(q.size()), out_backend(nout), out_engine(nout), out_real(nout);
  KvPlantBackend pb(real, plant);
  ASSERT_TRUE(pb.rope_store(by_backend, rp, rows.data(), n, q.data(), k.data(), v.data(), qo.data()).ok);
  ASSERT_TRUE(pb.attention(by_backend, ap, arows.data(), int(arows.size()), {}, aq.data(), out_backend.data()).ok);
  ASSERT_TRUE(real.rope_store(unplanted, rp, rows.data(), n, q.data(), k.data(), v.data(), qo.data()).ok);
  ASSERT_TRUE(real.attention(unplanted, ap, arows.data(), int(arows.size()), {}, aq.data(), out_real.data()).ok);
  const int planted_by_backend = pb.planted();

  EngineBackend* eb = pb.engine();
  ASSERT_NE(eb, nullptr) << "the plant has no engine over " << real.name() << "'s";
  ASSERT_TRUE(eb->hold(by_engine).ok);
  void *dq, *dk, *dv, *dqo, *daq, *dout;
  const std::pair<void**, size_t> bufs[] = {{&dq, q.size()},   {&dk, k.size()},    {&dv, v.size()},
                                            {&dqo, q.size()}, {&daq, aq.size()}, {&dout, nout}};
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(eb->scratch(i, bufs[i].second * 4, bufs[i].first).ok);
  ASSERT_TRUE(eb->upload(dq, q.data(), q.size() * 4).ok);
  ASSERT_TRUE(eb->upload(dk, k.data(), k.size() * 4).ok);
  ASSERT_TRUE(eb->upload(dv, v.data(), v.size() * 4).ok);
  ASSERT_TRUE(eb->upload(daq, aq.data(), aq.size() * 4).ok);
  ASSERT_TRUE(eb->rope_store(by_engine, rp, rows.data(), n, static_cast<float*>(dq), static_cast<float*>(dk),
                             static_cast<float*>(dv), static_cast<float*>(dqo)).ok);
  ASSERT_TRUE(eb->attention(by_engine, ap, arows.data(), int(arows.size()), {}, static_cast<float*>(daq),
                            static_cast<float*>(dout)).ok);
  ASSERT_TRUE(eb->download(out_engine.data(), dout, nout * 4).ok);
  ASSERT_TRUE(eb->release(by_engine).ok);

  EXPECT_EQ(pb.planted(), 2 * planted_by_backend) << "the engine path planted in other calls than the Backend path";
  EXPECT_GT(planted_by_backend, 0);
  EXPECT_TRUE(by_engine.mem == by_backend.mem) << "the cache after the engine path's planted store";
  EXPECT_EQ(std::memcmp(out_engine.data(), out_backend.data(), nout * 4), 0) << "attention on the engine path";
  if (plant == KvPlant::scales_from_neighbour_row)
    EXPECT_FALSE(by_engine.mem == unplanted.mem) << "the planted store changed no byte";
  else
    EXPECT_NE(std::memcmp(out_engine.data(), out_real.data(), nout * 4), 0) << "the planted query changed nothing";
}

TEST(KvPlant, EnginePathPlantsAsTheBackendPathOnCpu) {
  auto cpu = make_cpu_backend();
  expect_engine_plants_as_backend_plants(*cpu, KvPlant::scales_from_neighbour_row, Format::fp8);
  expect_engine_plants_as_backend_plants(*cpu, KvPlant::scales_from_neighbour_row, Format::q4);
  expect_engine_plants_as_backend_plants(*cpu, KvPlant::q4_query_unrotated, Format::q4);
  expect_engine_plants_as_backend_plants(*cpu, KvPlant::probe_query_zeroed, Format::bf16);
}

// The same on cuda: the engine path holds the cache on the device (the scales plant packs and
// unpacks the device copy), the Backend path copies it per call.
TEST(KvPlant, EnginePathPlantsAsTheBackendPathOnCuda) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  expect_engine_plants_as_backend_plants(*cuda, KvPlant::scales_from_neighbour_row, Format::fp8);
  expect_engine_plants_as_backend_plants(*cuda, KvPlant::scales_from_neighbour_row, Format::q4);
  expect_engine_plants_as_backend_plants(*cuda, KvPlant::q4_query_unrotated, Format::q4);
  expect_engine_plants_as_backend_plants(*cuda, KvPlant::probe_query_zeroed, Format::bf16);
}

TEST(KvGateMath, KlAgainstAHandComputedCase) {
  // P = (1/2, 1/2); Q = (1/4, 3/4) from logits (0, ln 3):
  // KL(P || Q) = 1/2 ln(2) + 1/2 ln(2/3) = 1/2 ln(4/3).
  const float ref[2] = {0.0f, 0.0f};
  const float q[2] = {0.0f, float(std::log(3.0))};
  std::vector<double> lp, lq;
  log_softmax64(ref, 2, &lp);
  log_softmax64(q, 2, &lq);
  EXPECT_NEAR(std::exp(lq[0]), 0.25, 1e-7);  // ln 3 rounded to fp32
  EXPECT_NEAR(kl64(lp.data(), lq.data(), 2), 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_EQ(kl64(lp.data(), lp.data(), 2), 0.0);
  // A three-way case with exact fp32 logits: P = softmax(0, 1, 2), Q = softmax(2, 1, 0).
  const float a[3] = {0, 1, 2}, b[3] = {2, 1, 0};
  log_softmax64(a, 3, &lp);
  log_softmax64(b, 3, &lq);
  const double z = 1 + std::exp(1.0) + std::exp(2.0);
  const double p[3] = {1 / z, std::exp(1.0) / z, std::exp(2.0) / z};
  // log p_v - log q_v = (a_v - b_v) since both share the same normaliser z.
  const double want = p[0] * (0 - 2) + p[1] * 0 + p[2] * (2 - 0);
  EXPECT_NEAR(kl64(lp.data(), lq.data(), 3), want, 1e-15);
  // Large logits: the float64 log-softmax does not overflow.
  const float big[2] = {1000.0f, 0.0f};
  log_softmax64(big, 2, &lp);
  EXPECT_EQ(lp[0], 0.0);
  EXPECT_NEAR(lp[1], -1000.0, 1e-9);
}

TEST(KvGateMath, PercentilesByNearestRankAndTop2) {
  std::vector<double> v;
  for (int i = 10; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(percentile_nearest_rank(v, 50), 5);
  EXPECT_EQ(percentile_nearest_rank(v, 90), 9);
  EXPECT_EQ(percentile_nearest_rank(v, 95), 10);
  EXPECT_EQ(percentile_nearest_rank(v, 99.9), 10);
  std::vector<double> w;
  for (int i = 1; i <= 2000; ++i) w.push_back(i);
  EXPECT_EQ(percentile_nearest_rank(w, 99.9), 1998);  // ceil(1998.0)
  EXPECT_EQ(percentile_nearest_rank(w, 99), 1980);
  EXPECT_TRUE(std::isnan(percentile_nearest_rank({}, 50)));
  const double lp[4] = {-3, -0.5, -1.25, -9};
  int32_t top = -1;
  double margin = 0;
  top2(lp, 4, &top, &margin);
  EXPECT_EQ(top, 1);
  EXPECT_EQ(margin, 0.75);
}

// top2's top token is argmax's: on a tie the lowest index (the engine's greedy choice), so
// a tie reads as agreement, not as a top-1 difference; the margin is then 0.
TEST(KvGateMath, Top2TiesGoToTheLowestIndexAsArgmax) {
  const double lp[4] = {-2, -0.5, -3, -0.5};
  int32_t top = -1;
  double margin = -1;
  top2(lp, 4, &top, &margin);
  EXPECT_EQ(top, 1);
  EXPECT_EQ(margin, 0.0);
}

TEST(KvGateMath, DepthStatsNameEveryTopTokenDifferenceAndTheBar) {
  // Two rows over a 3-token vocabulary at depth 5; tokens[6], tokens[7] are the targets.
  const std::vector<int32_t> tokens = {0, 0, 0, 0, 0, 0, 2, 1};
  const float ref[6] = {0, 1, 2, /*row 2*/ 0, 3, 0};
  const float q[6] = {0, 1, 2, /*row 2*/ 0, 0, 3};
  const KvDepthStats s = kv_depth_stats(5, 2, 3, ref, q, tokens);
  EXPECT_EQ(s.kl[0], 0.0);
  EXPECT_GT(s.kl[1], 0.0);
  EXPECT_EQ(s.worst_kl, s.kl[1]);
  EXPECT_EQ(s.worst_pos, 6);
  EXPECT_DOUBLE_EQ(s.mean_kl, s.kl[1] / 2);
  EXPECT_EQ(s.agree, 1);
  ASSERT_EQ(s.diffs.size(), 1u);
  EXPECT_EQ(s.diffs[0].pos, 6);
  EXPECT_EQ(s.diffs[0].target, 1);
  EXPECT_EQ(s.diffs[0].ref_top, 1);
  EXPECT_EQ(s.diffs[0].q_top, 2);
  EXPECT_NEAR(s.diffs[0].ref_margin, 3.0, 1e-12);
  EXPECT_NEAR(s.diffs[0].q_margin, 3.0, 1e-12);
  // Perplexity: exp(mean NLL of the targets) per arm.
  std::vector<double> a, b;
  log_softmax64(ref, 3, &a);
  log_softmax64(ref + 3, 3, &b);
  EXPECT_NEAR(s.ppl_ref, std::exp(-(a[2] + b[1]) / 2), 1e-12);
  KvBar bar;
  bar.mean_kl = 1e-9;
  bar.worst_token_kl = 1e9;
  EXPECT_NE(kv_bar_failure(s, bar).find("mean KL"), std::string::npos);
  bar = KvBar();
  bar.worst_token_kl = s.worst_kl / 2;
  bar.mean_kl = 1e9;
  EXPECT_NE(kv_bar_failure(s, bar).find("worst-token KL"), std::string::npos);
  EXPECT_NE(kv_bar_failure(s, bar).find("position 6"), std::string::npos);
  bar.worst_token_kl = s.worst_kl;  // the bar is inclusive
  EXPECT_EQ(kv_bar_failure(s, bar), "");
}

// A NaN mean KL fails the bar and says so, whatever the worst token says (host mutation sweep,
// round 16: kv-bar-nan-mean-passes, a `>` for `!(<=)`, passed it). From real rows a NaN mean comes
// with a NaN worst, which fails the bar too; the mean's clause must still be named, since the
// reason is what the receipt's depth and control entries print.
TEST(KvGateMath, ANanMeanKlFailsTheBarByName) {
  KvDepthStats s;
  s.mean_kl = std::numeric_limits<double>::quiet_NaN();
  s.worst_kl = 0;
  KvBar bar;
  EXPECT_NE(kv_bar_failure(s, bar).find("mean KL nan"), std::string::npos) << kv_bar_failure(s, bar);
  s.kl = {0.0, std::numeric_limits<double>::quiet_NaN(), 0.0};  // a NaN row, through the summary
  kv_refresh_summary(&s);
  const std::string why = kv_bar_failure(s, bar);
  EXPECT_NE(why.find("mean KL nan"), std::string::npos) << why;
  EXPECT_NE(why.find("worst-token KL nan"), std::string::npos) << why;
}

// A planted control is judged on the plant's own effect: against an unplanted arm that meets
// the bar, the planted stats; against one that already fails it, the excess per row. A plant
// that changed nothing stays green in both cases (before, it went red wherever the format
// already failed the bar: the q4 control on the ci fixture).
TEST(KvGateMath, ControlsAreJudgedOnThePlantsOwnEffect) {
  KvBar bar;
  bar.mean_kl = 0.01;
  bar.worst_token_kl = 0.1;
  auto stats = [](std::vector<double> kl) {
    KvDepthStats s;
    s.depth = 100;
    s.rows = int(kl.size());
    s.kl = std::move(kl);
    kv_refresh_summary(&s);
    return s;
  };
  const KvDepthStats good = stats({0.001, 0.002, 0.003, 0.004});  // meets the bar
  const KvDepthStats bad = stats({0.02, 0.03, 0.15, 0.02});         // fails it (q4 on the ci fixture)
  bool meets = true;
  KvDepthStats ex;
  // The plant changed nothing: green whichever the baseline.
  EXPECT_EQ(kv_bar_failure(kv_control_judged(good, good, bar, &meets, &ex), bar), "");
  EXPECT_TRUE(meets);
  EXPECT_EQ(kv_bar_failure(kv_control_judged(bad, bad, bar, &meets, &ex), bar), "");
  EXPECT_FALSE(meets);
  EXPECT_EQ(ex.mean_kl, 0.0);
  // A plant that adds less than the bar on a failing baseline: still green.
  EXPECT_EQ(kv_bar_failure(kv_control_judged(stats({0.021, 0.031, 0.16, 0.021}), bad, bar, nullptr, nullptr), bar), "");
  // A plant that breaks the bar on a good baseline, or adds more than the bar on a bad one: red.
  EXPECT_NE(kv_bar_failure(kv_control_judged(bad, good, bar, &meets, nullptr), bar), "");
  EXPECT_TRUE(meets);
  const KvDepthStats worse = stats({0.02, 0.03, 0.15, 0.5});  // one row 0.48 above its baseline
  const std::string why = kv_bar_failure(kv_control_judged(worse, bad, bar, &meets, &ex), bar);
  EXPECT_NE(why.find("worst-token KL 0.48"), std::string::npos) << why;
  EXPECT_NE(why.find("position 103"), std::string::npos) << why;
}

// ---- the fixture and the command ----

nlohmann::json ci_fixture() { return nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/kv/ci.json")); }

int run_kv(const std::string& fixture, const std::string& format, const std::string& out, const std::string& cache,
           std::string* out_text, std::string* err_text) {
  std::ostringstream o, e;
  KvGateCommand cmd;
  cmd.fixture = fixture;
  cmd.format = format;
  cmd.backend = "cpu";
  cmd.out_file = out;
  cmd.bf16_cache = cache;
  const int rc = kv_gate_command(cmd, o, e);
  if (out_text) *out_text = o.str();
  *err_text = e.str();
  return rc;
}

TEST(KvFixture, ShippedFixturesParse) {
  for (const char* name : {"ci.json", "h200.json", "h200-long.json"}) {
    KvFixture f;
    std::string err;
    const auto j = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/kv/" + name));
    EXPECT_TRUE(parse_kv_fixture(j, kSrc + "/fixtures/kv", &f, &err)) << name << ": " << err;
    EXPECT_EQ(f.tokens.front(), 257);
  }
}

// A fixture without a bar is judged by the bar its schema and kv_gate.h name as the default:
// mean KL <= 0.01 and worst-token KL <= 0.1. Every shipped fixture gives its bar, so nothing else
// reads KvBar's defaults (mutation sweep round 10: a default of 0.1 passed every test).
TEST(KvFixture, NoBarTakesTheSchemasDefaultBar) {
  const auto schema = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/schema/kv-fixture.schema.json"));
  const auto& bar = schema["properties"]["bar"]["properties"];
  nlohmann::json j = ci_fixture();
  j.erase("bar");
  KvFixture f;
  std::string err;
  ASSERT_TRUE(parse_kv_fixture(j, kSrc + "/fixtures/kv", &f, &err)) << err;
  EXPECT_EQ(f.bar.mean_kl, 0.01);
  EXPECT_EQ(f.bar.mean_kl, bar["mean_kl"]["default"].get<double>());
  EXPECT_EQ(f.bar.worst_token_kl, 0.1);
  EXPECT_EQ(f.bar.worst_token_kl, bar["worst_token_kl"]["default"].get<double>());
}

// Whole-valued floats are integers, as in the schema (JSON Schema 2020-12): the same fixture
// with every integer written as a float reads the same.
TEST(KvFixture, WholeValuedFloatsAreIntegersAsInTheSchema) {
  const nlohmann::json j = ci_fixture();
  nlohmann::json g = j;
  for (const char* k : {"rows", "decode_steps", "prefill_chunk"}) g[k] = g[k].get<double>();
  for (auto& x : g["depths"]) x = x.get<double>();
  for (auto& x : g["recall"][0]["depths"]) x = x.get<double>();
  g["control_depths"] = {g["depths"][1]};
  ASSERT_TRUE(g["rows"].is_number_float());
  KvFixture a, b;
  std::string err;
  ASSERT_TRUE(parse_kv_fixture(j, kSrc + "/fixtures/kv", &a, &err)) << err;
  ASSERT_TRUE(parse_kv_fixture(g, kSrc + "/fixtures/kv", &b, &err)) << err;
  EXPECT_EQ(b.rows, a.rows);
  EXPECT_EQ(b.decode_steps, a.decode_steps);
  EXPECT_EQ(b.prefill_chunk, a.prefill_chunk);
  EXPECT_EQ(b.depths, a.depths);
  ASSERT_EQ(b.recall.size(), a.recall.size());
  EXPECT_EQ(b.recall[0].depths, a.recall[0].depths);
  EXPECT_EQ(b.control_depths, std::vector<int>{a.depths[1]});
}

TEST(KvFixture, EachBadClassExits2NamingTheFieldAndWritesNothing) {
  test::TempDir dir;
  struct Bad {
    std::string field;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Bad> bad = {
      {"field name: missing", [](nlohmann::json& j) { j.erase("name"); }},
      {"field model: ", [](nlohmann::json& j) { j["model"] = "/no/such/model"; }},
      {"field tokens: missing", [](nlohmann::json& j) { j.erase("tokens"); }},
      {"field tokens.sha256: ", [](nlohmann::json& j) { j["tokens"]["sha256"] = std::string(64, '0'); }},
      {"field tokens.sha256: must be 64 lowercase hex digits", [](nlohmann::json& j) { j["tokens"]["sha256"] = "abc"; }},
      {"field tokens.file: ", [](nlohmann::json& j) { j["tokens"]["file"] = "/no/such/text"; }},
      {"field tokens.encoding: must be \"bytes\"", [](nlohmann::json& j) { j["tokens"]["encoding"] = "utf8"; }},
      {"field tokens.licence: missing", [](nlohmann::json& j) { j["tokens"].erase("licence"); }},
      {"field depths: must be a non-empty array", [](nlohmann::json& j) { j["depths"] = nlohmann::json::array(); }},
      {"field depths[1]: must be at least depths[0] + rows + decode_steps",
       [](nlohmann::json& j) { j["depths"][1] = j["depths"][0]; }},
      {"field depths[0]: must be an integer", [](nlohmann::json& j) { j["depths"][0] = "1K"; }},
      {"field depths: the deepest depth needs", [](nlohmann::json& j) { j["depths"].push_back(1 << 20); }},
      // decode_steps 0: the last scored row still needs its target token, one past the rows
      {"field depths: the deepest depth needs",
       [](nlohmann::json& j) {
         const auto n = int64_t(std::filesystem::file_size(kSrc + "/fixtures/text/stdlib-heldout-3.11.7.txt")) + 1;
         j["decode_steps"] = 0;
         j["depths"] = {n - j["rows"].get<int64_t>()};  // depth + rows == the token count: one short
         j["control_depths"] = j["depths"];
         j.erase("recall");
       }},
      {"field rows: must be in 1..65536", [](nlohmann::json& j) { j["rows"] = 0; }},
      {"field bar.mean_kl: must be a finite number > 0", [](nlohmann::json& j) { j["bar"]["mean_kl"] = -1; }},
      {"field bar.worst: unknown field", [](nlohmann::json& j) { j["bar"]["worst"] = 1; }},
      {"field recall[0].plant: must contain the passphrase",
       [](nlohmann::json& j) { j["recall"][0]["plant"] = "nothing here"; }},
      {"field recall[0].depths[0]: must be at least", [](nlohmann::json& j) { j["recall"][0]["depths"][0] = 10; }},
      {"field recall[0].ask: missing", [](nlohmann::json& j) { j["recall"][0].erase("ask"); }},
      // decode_steps 0: the main lane ends at the deepest depth + rows; a probe forked one past
      // it passed the parser and the bf16 arm died ("position outside the lane", exit 1).
      {"field recall[0].depths[0]: at most twice the main stream's end",
       [](nlohmann::json& j) {
         j["decode_steps"] = 0;
         const int64_t end = j["depths"].back().get<int64_t>() + j["rows"].get<int64_t>();
         j["recall"][0]["depths"] = {2 * (end + 1)};
       }},
      {"field control_depths[0]: must be one of depths", [](nlohmann::json& j) { j["control_depths"] = {7}; }},
      // passphrase lists (the long-context fixture's probes)
      {"field recall[0].passphrase: give either passphrase or passphrases",
       [](nlohmann::json& j) { j["recall"][0]["passphrases"] = {"AB-12"}; }},
      {"field recall[0].passphrase: give either passphrase or passphrases",
       [](nlohmann::json& j) { j["recall"][0].erase("passphrase"); }},
      {"field recall[0].plant: must contain {passphrase}",
       [](nlohmann::json& j) {
         j["recall"][0].erase("passphrase");
         j["recall"][0]["passphrases"] = {"copper-lantern-17"};  // a list needs the slot, even where the plant names it
       }},
      {"field recall[0].passphrases[1]: repeats AB-12",
       [](nlohmann::json& j) {
         j["recall"][0].erase("passphrase");
         j["recall"][0]["passphrases"] = {"AB-12", "AB-12"};
         j["recall"][0]["plant"] = "# the passphrase is {passphrase}.";
       }},
      {"field recall[0].passphrases: must be an array of 1..1024",
       [](nlohmann::json& j) {
         j["recall"][0].erase("passphrase");
         j["recall"][0]["passphrases"] = nlohmann::json::array();
       }},
      {"field recall[0].plant: must hold {passphrase} once",
       [](nlohmann::json& j) { j["recall"][0]["plant"] = "{passphrase} {passphrase}"; }},
      {"field recall[0].ask: must not contain the passphrase copper-lantern-17",
       [](nlohmann::json& j) { j["recall"][0]["ask"] = "\n# was it copper-lantern-17? "; }},
      {"field recall[0].ask: must not contain {passphrase}",
       [](nlohmann::json& j) { j["recall"][0]["ask"] = "\n# {passphrase}? "; }},
      {"field recall[0].name: must not contain '#'", [](nlohmann::json& j) { j["recall"][0]["name"] = "a#1"; }},
      {"field recall[1].name: repeats passphrase",
       [](nlohmann::json& j) { j["recall"].push_back(j["recall"][0]); }},
      {"field recall[0].depths[0]: must be at least",  // the longest passphrase of a list decides
       [](nlohmann::json& j) {
         j["recall"][0].erase("passphrase");
         j["recall"][0]["passphrases"] = {"QZ", std::string(100, 'Z')};
         j["recall"][0]["plant"] = "{passphrase}";
         j["recall"][0]["depths"] = {210};
       }},
      {"field colour: unknown field", [](nlohmann::json& j) { j["colour"] = "red"; }},
      // One probe keyed twice (name and depth): it counted twice in the recall summary.
      {"field $schema: must be a string", [](nlohmann::json& j) { j["$schema"] = nullptr; }},
      {"field note: must be a string", [](nlohmann::json& j) { j["note"] = 3; }},
      {"field rows: must be an integer", [](nlohmann::json& j) { j["rows"] = 32.5; }},
      {"field rows: must be in 1..65536", [](nlohmann::json& j) { j["rows"] = UINT64_MAX; }},
      {"field recall[0].depths[1]: repeats", [](nlohmann::json& j) { j["recall"][0]["depths"].push_back(j["recall"][0]["depths"][0]); }},
  };
  for (const Bad& b : bad) {
    nlohmann::json j = ci_fixture();
    j["model"] = kSrc + "/fixtures/models/stdlib-bytes-3m";
    j["tokens"]["file"] = kSrc + "/fixtures/text/stdlib-heldout-3.11.7.txt";
    b.edit(j);
    const std::string path = dir.file("fx.json"), out = dir.file("receipt.json"), cache = dir.file("cache");
    std::ofstream(path) << j.dump(2);
    std::string err;
    EXPECT_EQ(run_kv(path, "q4", out, cache, nullptr, &err), 2) << b.field;
    EXPECT_NE(err.find(b.field), std::string::npos) << "want '" << b.field << "' in: " << err;
    EXPECT_FALSE(std::filesystem::exists(out)) << b.field;
    EXPECT_FALSE(std::filesystem::exists(cache)) << b.field;
  }
  // A repeated key: plain parsing kept the last value, so "rows": 0 passed beside "rows": 8.
  nlohmann::json j = ci_fixture();
  j["model"] = kSrc + "/fixtures/models/stdlib-bytes-3m";
  j["tokens"]["file"] = kSrc + "/fixtures/text/stdlib-heldout-3.11.7.txt";
  std::string text = j.dump();
  const size_t at = text.find("\"rows\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"rows\":0,");
  const std::string path = dir.file("dup.json"), out = dir.file("receipt.json"), cache = dir.file("cache");
  std::ofstream(path) << text;
  std::string err;
  EXPECT_EQ(run_kv(path, "q4", out, cache, nullptr, &err), 2);
  EXPECT_NE(err.find("field rows: appears twice"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// A probe with a list of passphrases is one probe per passphrase (NAME#k, the plant's
// {passphrase} replaced), each at every depth; a single passphrase may use the slot too.
TEST(KvFixture, PassphraseListsExpandToOneProbePerPassphrase) {
  nlohmann::json j = ci_fixture();
  j["recall"] = {{{"name", "pp"},
                  {"passphrases", {"MH6X-RN99", "LXNK-QKGY", "28X4-6XCD"}},
                  {"plant", "\nThe passphrase is {passphrase}.\n"},
                  {"ask", "\nWhat is the passphrase? The passphrase is "},
                  {"depths", {200, 256}}},
                 {{"name", "one"}, {"passphrase", "ab-12"}, {"plant", "# {passphrase} #"}, {"ask", "\n# "},
                  {"depths", {64}}}};
  KvFixture f;
  std::string err;
  ASSERT_TRUE(parse_kv_fixture(j, kSrc + "/fixtures/kv", &f, &err)) << err;
  ASSERT_EQ(f.recall.size(), 4u);
  for (int k = 0; k < 3; ++k) {
    const KvProbe& p = f.recall[size_t(k)];
    EXPECT_EQ(p.name, "pp#" + std::to_string(k));
    EXPECT_EQ(p.group, "pp");
    EXPECT_EQ(p.source, 0);
    EXPECT_EQ(p.plant, "\nThe passphrase is " + p.passphrase + ".\n");
    EXPECT_EQ(p.ask, "\nWhat is the passphrase? The passphrase is ");
    EXPECT_EQ(p.depths, (std::vector<int>{200, 256}));
  }
  EXPECT_EQ(f.recall[1].passphrase, "LXNK-QKGY");
  EXPECT_EQ(f.recall[3].name, "one");
  EXPECT_EQ(f.recall[3].group, "one");
  EXPECT_EQ(f.recall[3].source, 1);
  EXPECT_EQ(f.recall[3].plant, "# ab-12 #");
  // The probe's tokens hold the expanded plant at half the depth and the answer last.
  auto be = make_cpu_backend();
  Qwen3Weights w;
  ASSERT_TRUE(load_qwen3_checkpoint(kSrc + "/fixtures/models/stdlib-bytes-3m", &w).ok);
  Model m;
  ASSERT_TRUE(Model::create(w, ModelOptions(), &m).ok);
  std::vector<float> lg;
  ASSERT_TRUE(kv_probe_logits(m, *be, f.recall[1], 200, f.tokens, 64, true, &lg).ok);
  EXPECT_EQ(lg.size(), 9u * 260);
  // The shipped long fixture's probes: 8 passphrases at 3 depths, 2 at 3 deeper ones.
  const auto jl = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/kv/h200-long.json"));
  ASSERT_EQ(jl["recall"].size(), 2u);
  EXPECT_EQ(jl["recall"][0]["passphrases"].size(), 8u);
  EXPECT_EQ(jl["recall"][1]["passphrases"].size(), 2u);
}

// Beyond training: training.seq of the model's fixture.json, else max_position_embeddings.
TEST(KvFixture, TrainingContextComesFromTheModelsFixtureJson) {
  int64_t n = 0;
  std::string src, err;
  ASSERT_TRUE(kv_training_context(kSrc + "/fixtures/models/stdlib-bytes-3m", 4096, &n, &src, &err)) << err;
  EXPECT_EQ(n, 512);  // trained at 512 although config.json says 4096
  EXPECT_NE(src.find("fixture.json training.seq"), std::string::npos);
  ASSERT_TRUE(kv_training_context(kSrc + "/fixtures/models/stdlib-bytes-long", 8192, &n, &src, &err)) << err;
  EXPECT_EQ(n, 8192);  // the long-context model's schedule ends at 8192
  test::TempDir dir;
  ASSERT_TRUE(kv_training_context(dir.str(), 4096, &n, &src, &err)) << err;
  EXPECT_EQ(n, 4096);
  EXPECT_NE(src.find("max_position_embeddings"), std::string::npos);
  for (const char* bad : {"{\"training\": {}}", "{\"training\": {\"seq\": 0}}", "{\"training\": {\"seq\": \"8K\"}}", "[1]"}) {
    std::ofstream(dir.file("fixture.json")) << bad;
    err.clear();
    EXPECT_FALSE(kv_training_context(dir.str(), 4096, &n, &src, &err)) << bad;
    EXPECT_NE(err.find("fixture.json: field training.seq: "), std::string::npos) << err;
  }
  std::ofstream(dir.file("fixture.json")) << "{not json";
  EXPECT_FALSE(kv_training_context(dir.str(), 4096, &n, &src, &err));
  EXPECT_NE(err.find("not JSON"), std::string::npos) << err;
}

TEST(KvGateMath, RecallSummaryCountsPerGroupAndDepth) {
  auto e = [](const char* group, int depth, bool b, bool q) {
    return nlohmann::json{{"probe", std::string(group) + "#x"}, {"group", group}, {"depth", depth},
                          {"beyond_training", depth > 100}, {"bf16", {{"recalled", b}}}, {"quant", {{"recalled", q}}}};
  };
  const nlohmann::json recall = {e("a", 50, true, true),  e("a", 50, true, false), e("a", 50, false, true),
                                 e("a", 50, false, false), e("a", 200, true, true), e("b", 50, true, true),
                                 e("b", 50, false, true),  e("b", 50, false, true)};
  const nlohmann::json s = kv_recall_summary(recall);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0]["group"], "a");
  EXPECT_EQ(s[0]["depth"], 50);
  EXPECT_EQ(s[0]["probes"], 4);
  EXPECT_EQ(s[0]["bf16_recalled"], 2);
  EXPECT_EQ(s[0]["quant_recalled"], 2);
  EXPECT_EQ(s[0]["informative"], 2);
  EXPECT_EQ(s[0]["kept"], 1);
  EXPECT_EQ(s[0]["lost"], 1);
  EXPECT_EQ(s[0]["gained"], 1);
  EXPECT_FALSE(s[0]["beyond_training"].get<bool>());
  EXPECT_EQ(s[1]["depth"], 200);
  EXPECT_TRUE(s[1]["beyond_training"].get<bool>());
  EXPECT_EQ(s[2]["group"], "b");
  // Group b: the quantized arm recalls more than the bf16 arm; informative counts the bf16
  // arm's recalls (a probe it misses is uninformative), never the quantized arm's.
  EXPECT_EQ(s[2]["probes"], 3);
  EXPECT_EQ(s[2]["bf16_recalled"], 1);
  EXPECT_EQ(s[2]["quant_recalled"], 3);
  EXPECT_EQ(s[2]["informative"], 1);
  EXPECT_EQ(s[2]["kept"], 1);
  EXPECT_EQ(s[2]["lost"], 0);
  EXPECT_EQ(s[2]["gained"], 2);
  // Entries without a group (receipts before passphrase lists) count under the probe name.
  const nlohmann::json old = kv_recall_summary({{{"probe", "passphrase"}, {"depth", 8}, {"bf16", {{"recalled", false}}},
                                                 {"quant", {{"recalled", false}}}}});
  EXPECT_EQ(old[0]["group"], "passphrase");
}

// beyond_training: a depth whose scored rows reach the training context (depth <= ctx <
// depth + rows) is beyond it; one whose last scored row is ctx - 1 is not.
TEST(KvGateMath, BeyondTrainingCountsEveryScoredRow) {
  KvDepthStats s;
  s.rows = 16;
  s.kl.assign(16, 0.0);
  kv_refresh_summary(&s);
  const KvBar bar;
  for (const auto& [depth, beyond] : std::vector<std::pair<int, bool>>{{480, false}, {496, false}, {497, true},
                                                                       {500, true}, {512, true}, {513, true}}) {
    s.depth = depth;
    const nlohmann::json j = kv_depth_json(s, bar, 512, 0, 0);
    EXPECT_EQ(j["beyond_training"].get<bool>(), beyond) << "depth " << depth << " + 16 rows, trained at 512";
    EXPECT_EQ(j["positions"], nlohmann::json::array({depth, depth + 15}));
  }
}

// The stored bf16 arm's key names every input of that arm: the same inputs give the same
// key; another backend (or fixture, token file, checkpoint, engine commit) another key.
class NamedBackend final : public Backend {
 public:
  explicit NamedBackend(std::string n) : n_(std::move(n)) {}
  std::string name() const override { return n_; }
  DeviceInfo device() const override { return {}; }
  Status encode_rows(Format, Cache&, const float*, const RowRef*, int) override { return no(); }
  Status decode_rows(Format, const Cache&, const RowRef*, int, float*) override { return no(); }
  Status e4m3_encode_bits(uint64_t, uint64_t, uint8_t*) override { return no(); }
  Status rope_store(Cache&, const RopeParams&, const RopeRow*, int, const float*, const float*, const float*,
                    float*) override {
    return no();
  }
  Status attention(const Cache&, const AttnParams&, const AttnRow*, int, const std::vector<int32_t>&, const float*,
                   float*) override {
    return no();
  }
  Status pack(const Cache&, int, int64_t, int64_t, std::vector<uint8_t>*) override { return no(); }
  Status unpack(Cache&, int, int64_t, const std::vector<uint8_t>&) override { return no(); }
  Status keep(Cache&, const KeepMove*, int) override { return no(); }

 private:
  static Status no() { return Status::Error("a name only"); }
  std::string n_;
};

TEST(KvGate, TheStoredBf16ArmsKeyNamesTheBackend) {
  const NamedBackend cpu("cpu"), cuda("cuda"), cpu2("cpu");
  const std::string k = kv_bf16_arm_key("f", "t", "c", "e", &cpu);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(kv_bf16_arm_key("f", "t", "c", "e", &cpu2), k);
  EXPECT_NE(kv_bf16_arm_key("f", "t", "c", "e", &cuda), k);
  EXPECT_NE(kv_bf16_arm_key("f2", "t", "c", "e", &cpu), k);
  EXPECT_NE(kv_bf16_arm_key("f", "t2", "c", "e", &cpu), k);
  EXPECT_NE(kv_bf16_arm_key("f", "t", "c2", "e", &cpu), k);
  EXPECT_NE(kv_bf16_arm_key("f", "t", "c", "e2", &cpu), k);
}

TEST(KvFixture, UnsupportedFormatsExit2WithAClearMessage) {
  test::TempDir dir;
  const std::string out = dir.file("receipt.json"), cache = dir.file("cache");
  std::string err;
  // (mxfp4 is a cache format the engine stores since the mxfp4 KV-cache change: it runs.)
  EXPECT_EQ(run_kv(kSrc + "/fixtures/kv/ci.json", "int3", out, cache, nullptr, &err), 2);
  EXPECT_NE(err.find("--format int3: expected fp8, q4 or mxfp4"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(cache));
}

// A small fixture derived from the ci one (two shallow depths, 16 rows, a short probe), so
// that several runs stay cheap: fp8 passes, every control is red in each run, the bf16 arm
// is stored by the first run and read by the later ones with the same numbers, and a stored
// arm whose bytes were altered is recomputed. (The ci fixture itself runs as cli.kv_gate_ci.)
TEST(KvGate, SmallFixtureVerdictControlsAndTheStoredBf16Arm) {
  test::TempDir dir;
  nlohmann::json j = ci_fixture();
  j["model"] = kSrc + "/fixtures/models/stdlib-bytes-3m";
  j["tokens"]["file"] = kSrc + "/fixtures/text/stdlib-heldout-3.11.7.txt";
  j["depths"] = {16, 48};
  j["rows"] = 16;
  j["decode_steps"] = 2;
  j["prefill_chunk"] = 16;
  j["recall"] = {{{"name", "short"}, {"passphrase", "ab-12"}, {"plant", "# pass ab-12\n"}, {"ask", "\n# pass "},
                  {"depths", {64}}},
                 {{"name", "list"}, {"passphrases", {"cd-34", "ef-56"}}, {"plant", "# pass {passphrase}\n"},
                  {"ask", "\n# pass "}, {"depths", {64}}}};
  const std::string fx = dir.file("small.json"), cache = dir.file("cache");
  std::ofstream(fx) << j.dump(2);
  std::string text, err;
  const int rc1 = run_kv(fx, "fp8", dir.file("r1.json"), cache, &text, &err);
  EXPECT_EQ(rc1, 0) << text << err;
  const auto r1 = nlohmann::json::parse(std::ifstream(dir.file("r1.json")));
  EXPECT_EQ(r1["kind"], "kv-gate");
  EXPECT_EQ(r1["name"], "kv-ci/fp8");
  EXPECT_EQ(r1["verdict"], "pass") << r1["verdict_reasons"].dump();
  EXPECT_FALSE(r1["kv"]["bf16_arm"]["from_cache"].get<bool>());
  ASSERT_EQ(r1["controls"].size(), 3u);
  for (const auto& k : r1["controls"]) EXPECT_TRUE(k["red"].get<bool>()) << k.dump();
  // The planted arms are far above the bar, not just over it.
  EXPECT_GT(r1["controls"][0]["seen"][0]["mean_kl"].get<double>(), 10 * 0.01);
  EXPECT_GT(r1["controls"][1]["seen"][0]["mean_kl"].get<double>(), 10 * 0.01);
  // The bar control: one bad row at each depth, each named once.
  ASSERT_EQ(r1["controls"][2]["seen"].size(), 2u);
  EXPECT_EQ(r1["controls"][2]["seen"][0]["depth"], 16);
  EXPECT_EQ(r1["controls"][2]["seen"][1]["depth"], 48);
  ASSERT_EQ(r1["kv"]["depths"].size(), 2u);
  for (const auto& d : r1["kv"]["depths"]) {
    EXPECT_FALSE(d["beyond_training"].get<bool>());
    EXPECT_GT(d["mean_kl"].get<double>(), 0.0);  // fp8 changes the bits
    EXPECT_EQ(d["rows"], 16);
  }
  ASSERT_EQ(r1["kv"]["recall"].size(), 3u);
  EXPECT_EQ(r1["kv"]["recall"][1]["probe"], "list#0");
  EXPECT_EQ(r1["kv"]["recall"][2]["probe"], "list#1");
  EXPECT_EQ(r1["kv"]["recall"][2]["group"], "list");
  EXPECT_EQ(r1["kv"]["recall"][2]["passphrase"], "ef-56");
  ASSERT_EQ(r1["kv"]["recall_summary"].size(), 2u);
  EXPECT_EQ(r1["kv"]["recall_summary"][1]["group"], "list");
  EXPECT_EQ(r1["kv"]["recall_summary"][1]["probes"], 2);
  EXPECT_EQ(r1["kv"]["training_context"]["positions"], 512);
  EXPECT_EQ(r1["kv"]["memory"]["bytes_per_position"]["bf16"], 4 * 2 * 2 * 128);
  EXPECT_EQ(r1["kv"]["memory"]["bytes_per_position"]["fp8"], 4 * 2 * 2 * (64 + 4));
  EXPECT_EQ(r1["kv"]["memory"]["bytes_per_position"]["q4"], 4 * 2 * 2 * (32 + 4));

  // q4 reads the stored bf16 arm; its controls are red too.
  const int rc2 = run_kv(fx, "q4", dir.file("r2.json"), cache, &text, &err);
  EXPECT_TRUE(rc2 == 0 || rc2 == 1) << err;
  EXPECT_NE(err.find("bf16 arm read from"), std::string::npos) << err;
  const auto r2 = nlohmann::json::parse(std::ifstream(dir.file("r2.json")));
  EXPECT_TRUE(r2["kv"]["bf16_arm"]["from_cache"].get<bool>());
  EXPECT_EQ(r2["verdict"], rc2 == 0 ? "pass" : "fail");
  for (const auto& k : r2["controls"]) EXPECT_TRUE(k["red"].get<bool>()) << k.dump();

  // fp8 again from the store: the same numbers.
  const int rc3 = run_kv(fx, "fp8", dir.file("r3.json"), cache, &text, &err);
  EXPECT_EQ(rc3, 0);
  const auto r3 = nlohmann::json::parse(std::ifstream(dir.file("r3.json")));
  EXPECT_TRUE(r3["kv"]["bf16_arm"]["from_cache"].get<bool>());
  for (size_t i = 0; i < 2; ++i)
    for (const char* k : {"mean_kl", "worst_kl", "top1_agreement", "top1_differences", "perplexity", "kl_percentiles"})
      EXPECT_EQ(r3["kv"]["depths"][i][k], r1["kv"]["depths"][i][k]) << k;
  EXPECT_EQ(r3["kv"]["recall"], r1["kv"]["recall"]);

  // A stored arm whose logits were altered is not used (checksum) but recomputed: same numbers.
  int altered = 0;
  for (const auto& e : std::filesystem::directory_iterator(cache))
    if (e.path().extension() == ".f32") {
      std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(8);
      f.put('\x7f');
      ++altered;
    }
  EXPECT_EQ(altered, 1);
  EXPECT_EQ(run_kv(fx, "fp8", dir.file("r4.json"), cache, &text, &err), 0);
  EXPECT_NE(err.find("stored copy not used: key, size or checksum differs"), std::string::npos) << err;
  const auto r4 = nlohmann::json::parse(std::ifstream(dir.file("r4.json")));
  EXPECT_FALSE(r4["kv"]["bf16_arm"]["from_cache"].get<bool>());
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(r4["kv"]["depths"][i]["mean_kl"], r1["kv"]["depths"][i]["mean_kl"]);

  // Metadata the checksum does not cover, edited so that it lacks what the gate reads (the
  // probes' results, a rate per depth): the copy is not used, the arm is computed again (it
  // once ended in map::at or a read past the end, no receipt).
  for (const char* edit : {"probes", "decode_tok_s"}) {
    for (const auto& e : std::filesystem::directory_iterator(cache))
      if (e.path().extension() == ".json") {
        nlohmann::json meta = nlohmann::json::parse(std::ifstream(e.path()));
        meta[edit] = std::string(edit) == "probes" ? nlohmann::json::object() : nlohmann::json::array();
        std::ofstream(e.path()) << meta.dump();
      }
    EXPECT_EQ(run_kv(fx, "fp8", dir.file("r5.json"), cache, &text, &err), 0) << edit << ": " << err;
    EXPECT_NE(err.find("stored copy not used: bad metadata"), std::string::npos) << edit << ": " << err;
    const auto r5 = nlohmann::json::parse(std::ifstream(dir.file("r5.json")));
    EXPECT_FALSE(r5["kv"]["bf16_arm"]["from_cache"].get<bool>()) << edit;
    EXPECT_EQ(r5["kv"]["recall"], r1["kv"]["recall"]) << edit;
  }

  // A probe's result flipped in the metadata (every entry still there): results_sha256 no
  // longer matches, so the copy is not used and the bf16 arm's recall is computed again. Then
  // metadata that is not store_bf16's object (an array; a key that is a number), which once
  // ended the run in an uncaught type_error (exit 134): not used, computed again.
  const auto edit_meta = [&](const std::function<void(nlohmann::json&)>& f) {
    for (const auto& e : std::filesystem::directory_iterator(cache))
      if (e.path().extension() == ".json") {
        nlohmann::json meta = nlohmann::json::parse(std::ifstream(e.path()));
        f(meta);
        std::ofstream(e.path()) << meta.dump();
      }
  };
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> bad_meta = {
      {"results_sha256", [](nlohmann::json& m) {
         ASSERT_TRUE(m["probes"].is_object() && !m["probes"].empty());
         auto& p = m["probes"].begin().value();
         p["recalled"] = !p["recalled"].get<bool>();
       }},
      {"bad metadata: not an object", [](nlohmann::json& m) { m = nlohmann::json::array(); }},
      {"bad metadata: not an object", [](nlohmann::json& m) { m["key"] = 5; }},
      {"bad metadata: not an object", [](nlohmann::json& m) { m.erase("f32_sha256"); }}};
  for (const auto& [want, f] : bad_meta) {
    edit_meta(f);
    EXPECT_EQ(run_kv(fx, "fp8", dir.file("r6.json"), cache, &text, &err), 0) << want << ": " << err;
    EXPECT_NE(err.find("stored copy not used: "), std::string::npos) << want << ": " << err;
    EXPECT_NE(err.find(want), std::string::npos) << want << ": " << err;
    const auto r6 = nlohmann::json::parse(std::ifstream(dir.file("r6.json")));
    EXPECT_FALSE(r6["kv"]["bf16_arm"]["from_cache"].get<bool>()) << want;
    EXPECT_EQ(r6["kv"]["recall"], r1["kv"]["recall"]) << want;
  }

  // --bf16-only: stores (here: finds) the bf16 arm and writes no receipt.
  EXPECT_EQ(run_kv(fx, "", "", cache, &text, &err), 2);  // no --format
  KvGateCommand only;
  only.fixture = fx;
  only.bf16_cache = cache;
  only.bf16_only = true;
  std::ostringstream o, e;
  EXPECT_EQ(kv_gate_command(only, o, e), 0) << e.str();
  EXPECT_NE(o.str().find("already stored"), std::string::npos) << o.str();

  // --bf16-only whose store fails after the arm ran (here the logits' name is taken by a folder
  // in a fresh cache: the rename onto it fails) exits 2, never "computed and stored".
  std::string stem;
  for (const auto& ent : std::filesystem::directory_iterator(cache))
    if (ent.path().extension() == ".json") stem = ent.path().stem().string();
  ASSERT_FALSE(stem.empty());
  const std::string cache2 = dir.file("cache2");
  std::filesystem::create_directories(cache2 + "/" + stem + ".f32/taken");
  only.bf16_cache = cache2;
  std::ostringstream o2, e2;
  EXPECT_EQ(kv_gate_command(only, o2, e2), 2) << o2.str() << e2.str();
  EXPECT_EQ(o2.str().find("stored in"), std::string::npos) << o2.str();
  EXPECT_NE(e2.str().find("the bf16 arm was not stored: "), std::string::npos) << e2.str();
  EXPECT_FALSE(std::filesystem::exists(cache2 + "/" + stem + ".json"));
  EXPECT_FALSE(std::filesystem::exists(cache2 + "/" + stem + ".f32.tmp"));
}

}  // namespace
}  // namespace kc::engine

namespace kc::engine {
namespace {

// The gate runs each recall probe forked from the main lane at half its depth; the answer
// rows' logits are the same bytes as a probe prefilled on its own lane.
// The recall gate's control (the probe lane attends uniformly) is registered where a probe is
// recalled by both arms unplanted, and goes red on the recall gate: the long-context fixture
// model, probes of 224 tokens (two passphrases), on cpu.
TEST(KvGate, RecallControlIsRedWhereBothArmsRecallAProbe) {
  test::TempDir dir;
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/kv/h200-long.json"));
  j["model"] = kSrc + "/fixtures/models/stdlib-bytes-long";
  j["tokens"]["file"] = kSrc + "/fixtures/text/stdlib-heldout-3.11.7.txt";
  j["depths"] = {96};
  j["control_depths"] = {96};
  j["rows"] = 16;
  j["decode_steps"] = 0;
  nlohmann::json probe = j["recall"][0];
  probe["passphrases"] = {probe["passphrases"][0], probe["passphrases"][1]};
  probe["depths"] = {224};
  j["recall"] = {probe};
  const std::string fx = dir.file("fx.json");
  std::ofstream(fx) << j.dump(2);
  std::string out, err;
  run_kv(fx, "fp8", dir.file("r.json"), dir.file("cache"), &out, &err);
  const nlohmann::json r = nlohmann::json::parse(std::ifstream(dir.file("r.json")));
  int both = 0;
  for (const auto& x : r["kv"]["recall"]) both += x["bf16"]["recalled"].get<bool>() && x["quant"]["recalled"].get<bool>();
  ASSERT_GT(both, 0) << "no probe recalled by both arms at 224: " << r["kv"]["recall"].dump();
  const nlohmann::json* k = nullptr;
  for (const auto& c : r["controls"])
    if (c["name"] == "recall-probe-attends-uniformly") k = &c;
  ASSERT_NE(k, nullptr) << r["controls"].dump();
  EXPECT_TRUE((*k)["red"].get<bool>()) << k->dump();
  EXPECT_EQ((*k)["caught_by"], nlohmann::json::array({"recall"}));
  EXPECT_FALSE((*k)["seen"]["recalled"].get<bool>());
}

TEST(KvGate, AForkedProbeEqualsAFreshOneByteForByte) {
  Qwen3Weights w;
  ASSERT_TRUE(load_qwen3_checkpoint(kSrc + "/fixtures/models/stdlib-bytes-3m", &w).ok);
  KvFixture f;
  std::string err;
  ASSERT_TRUE(parse_kv_fixture(ci_fixture(), kSrc + "/fixtures/kv", &f, &err)) << err;
  auto be = make_cpu_backend();
  KvProbe probe;
  probe.name = "short";
  probe.passphrase = "ab-12";
  probe.plant = "# pass ab-12\n";
  probe.ask = "\n# pass ";
  for (Format fmt : {Format::bf16, Format::fp8}) {
    ModelOptions mo;
    mo.kv_format = fmt;
    Model m;
    ASSERT_TRUE(Model::create(w, mo, &m).ok);
    std::vector<float> fresh, forked;
    ASSERT_TRUE(kv_probe_logits(m, *be, probe, 80, f.tokens, 16, false, &fresh).ok);
    ASSERT_TRUE(kv_probe_logits(m, *be, probe, 80, f.tokens, 16, true, &forked).ok);
    ASSERT_EQ(fresh.size(), probe.passphrase.size() * 260);
    ASSERT_EQ(fresh.size(), forked.size());
    EXPECT_EQ(std::memcmp(fresh.data(), forked.data(), fresh.size() * 4), 0) << format_name(fmt);
  }
  ModelOptions mo;
  Model m;
  ASSERT_TRUE(Model::create(w, mo, &m).ok);
  std::vector<float> lg;
  EXPECT_FALSE(kv_probe_logits(m, *be, f.recall[0], 160, f.tokens, 16, true, &lg).ok);  // too short for the probe
}

}  // namespace
}  // namespace kc::engine
