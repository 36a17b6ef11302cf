// JUnit output, shard merging, the premerge slowdown rule and the HTML plots (issue 21), on
// the committed receipts (reports/cpu, reports/h200) and edited copies of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "contracts/framework.h"
#include "tools/html_report.h"
#include "tools/junit.h"
#include "tools/premerge.h"
#include "tools/receipt_merge.h"
#include "tools/receipt_views.h"

namespace kc {
namespace {

using json = nlohmann::json;

json receipt(const std::string& rel) {
  json r;
  const Status st = Receipt::load(std::string(KC_SOURCE_DIR) + "/" + rel, &r);
  EXPECT_TRUE(st.ok) << st.message;
  return r;
}

const JunitCase* find_case(const JunitSuite& s, const std::string& name) {
  for (const auto& c : s.cases)
    if (c.name == name) return &c;
  return nullptr;
}

TEST(Junit, OneCasePerGateAndControlAndTheVerdict) {
  const json r = receipt("reports/cpu/fp8-rows.json");
  const JunitSuite s = junit_suite(r);
  EXPECT_EQ(s.cases.size(), r["gates"].size() + r["controls"].size() + 1);
  for (const auto& c : s.cases) {
    if (c.name.rfind("gate ", 0) == 0) {
      // The cpu receipt's device gates are skipped, with their reason; the others pass.
      const bool skipped = c.result == JunitCase::Result::skipped;
      EXPECT_TRUE(skipped || c.result == JunitCase::Result::passed) << c.name;
      if (skipped) EXPECT_NE(c.message.find("needs a CUDA device"), std::string::npos) << c.message;
    } else {
      EXPECT_EQ(c.result, JunitCase::Result::passed) << c.name;  // controls red, verdict pass
    }
  }
}

TEST(Junit, AGreenControlIsAFailure) {
  json r = receipt("reports/cpu/fp8-rows.json");
  r["controls"][1]["red"] = false;
  r["controls"][1]["caught_by"] = json::array();
  r["verdict"] = "fail";
  r["verdict_reasons"] = {"control planted-row stayed green"};
  const JunitSuite s = junit_suite(r);
  const JunitCase* c = find_case(s, "control " + r["controls"][1]["name"].get<std::string>());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->result, JunitCase::Result::failure);
  EXPECT_NE(c->message.find("stayed green"), std::string::npos);
  const JunitCase* other = find_case(s, "control " + r["controls"][0]["name"].get<std::string>());
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->result, JunitCase::Result::passed);
  EXPECT_EQ(find_case(s, "verdict")->result, JunitCase::Result::failure);
  const std::string xml = junit_xml("t", {s});
  EXPECT_NE(xml.find("<testsuite name=\"fp8-rows (contract, cpu)\" tests=\"" + std::to_string(s.cases.size()) +
                     "\" failures=\"2\""),
            std::string::npos)
      << xml.substr(0, 400);
}

TEST(Junit, FailedGateCarriesItsFailuresAndNotRunIsSkipped) {
  json r = receipt("reports/cpu/q4-rows.json");
  r["gates"][0]["failed"] = 2;
  r["gates"][0]["total"] = r["gates"][0]["total"].get<int>() + 2;
  r["gates"][0]["failures"] = {"q4-rows(ptok=3,...): 1 row differs", "q4-rows(ptok=7,...): <&> differs"};
  r["gates"][1]["passed"] = 0;
  r["gates"][1]["total"] = 0;
  const JunitSuite s = junit_suite(r);
  const JunitCase& g0 = s.cases[0];
  EXPECT_EQ(g0.result, JunitCase::Result::failure);
  EXPECT_NE(g0.message.find("2 of"), std::string::npos) << g0.message;
  EXPECT_NE(g0.text.find("q4-rows(ptok=3,...): 1 row differs"), std::string::npos);
  EXPECT_EQ(s.cases[1].result, JunitCase::Result::skipped);
  EXPECT_NE(s.cases[1].message.find("not run"), std::string::npos);
  const std::string xml = junit_xml("t", {s});
  EXPECT_NE(xml.find("q4-rows(ptok=7,...): &lt;&amp;&gt; differs"), std::string::npos);
}

// Backend or setup errors are one case whose result is an error (not a failure), counted in
// the suite's errors= and carrying each error; the verdict case stays a failure.
TEST(Junit, ReceiptErrorsAreAnErrorCase) {
  json r = receipt("reports/cpu/fp8-rows.json");
  r["errors"] = {"cpu: decode_rows: out of memory", "cpu: encode_rows: <refused>"};
  r["verdict"] = "fail";
  const JunitSuite s = junit_suite(r);
  const JunitCase* e = find_case(s, "errors");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->result, JunitCase::Result::error);
  EXPECT_EQ(e->message, "2 backend or setup errors");
  EXPECT_NE(e->text.find("cpu: decode_rows: out of memory"), std::string::npos) << e->text;
  EXPECT_EQ(find_case(s, "verdict")->result, JunitCase::Result::failure);
  const std::string xml = junit_xml("t", {s});
  EXPECT_NE(xml.find("\" failures=\"1\" errors=\"1\""), std::string::npos) << xml.substr(0, 400);
  EXPECT_NE(xml.find("<error message=\"2 backend or setup errors\" type=\"error\">"), std::string::npos);
  EXPECT_NE(xml.find("cpu: encode_rows: &lt;refused&gt;"), std::string::npos);
}

// A case's text lists its first 20 lines and then how many more there are.
TEST(Junit, TextListsTwentyLinesThenHowManyMore) {
  json r = receipt("reports/cpu/fp8-rows.json");
  r["errors"] = json::array();
  for (int i = 0; i < 25; ++i) r["errors"].push_back("e" + std::to_string(i));
  r["verdict"] = "fail";
  const JunitSuite s = junit_suite(r);
  const JunitCase* e = find_case(s, "errors");
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->text.find("e0\n"), std::string::npos) << e->text;
  EXPECT_NE(e->text.find("\ne19\n... 5 more\n"), std::string::npos) << e->text;
  EXPECT_EQ(e->text.find("e20"), std::string::npos) << e->text;
}

TEST(Junit, BenchTargetsAreCases) {
  json r = receipt("reports/h200/bench-attention.json");
  r["targets"][0]["measured"] = false;
  r["targets"][0]["met"] = false;
  r["targets"][1]["met"] = false;
  const JunitSuite s = junit_suite(r);
  const JunitCase* t0 = find_case(s, "target " + r["targets"][0]["name"].get<std::string>());
  const JunitCase* t1 = find_case(s, "target " + r["targets"][1]["name"].get<std::string>());
  const JunitCase* t2 = find_case(s, "target " + r["targets"][2]["name"].get<std::string>());
  ASSERT_TRUE(t0 && t1 && t2);
  EXPECT_EQ(t0->result, JunitCase::Result::skipped);
  EXPECT_EQ(t1->result, JunitCase::Result::failure);
  EXPECT_NE(t1->message.find("not met: wanted"), std::string::npos);
  EXPECT_EQ(t2->result, JunitCase::Result::passed);
}

TEST(Junit, EscapesWhatXmlCannotCarry) {
  EXPECT_EQ(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
  EXPECT_EQ(xml_escape(std::string("x\x01y\xff", 4)), "x?y?");
  EXPECT_EQ(xml_escape("caf\xc3\xa9"), "caf\xc3\xa9");            // valid UTF-8 kept
  EXPECT_EQ(xml_escape("a\nb", true), "a&#10;b");                  // attribute
  EXPECT_EQ(xml_escape("a\nb", false), "a\nb");                    // text
  EXPECT_EQ(xml_escape(std::string("\xc0\xaf", 2)), "??");         // overlong encoding refused
  // XML 1.0's characters end at U+FFFD below U+10000: the two noncharacters above it are
  // refused (each byte a '?'), their neighbours and the other planes' characters kept.
  EXPECT_EQ(xml_escape("a\xef\xbf\xbe" "b"), "a???b");                // U+FFFE
  EXPECT_EQ(xml_escape("a\xef\xbf\xbf" "b"), "a???b");                // U+FFFF
  EXPECT_EQ(xml_escape("\xef\xbf\xbd"), "\xef\xbf\xbd");             // U+FFFD
  EXPECT_EQ(xml_escape("\xee\x80\x80"), "\xee\x80\x80");             // U+E000
  EXPECT_EQ(xml_escape("\xed\x9f\xbf"), "\xed\x9f\xbf");             // U+D7FF
  EXPECT_EQ(xml_escape("\xf0\x90\x80\x80"), "\xf0\x90\x80\x80");     // U+10000
  EXPECT_EQ(xml_escape("\xed\xa0\x80"), "???");                      // a surrogate (U+D800)
}

// Two shard receipts made from one whole receipt: each keeps part of the cases.
std::vector<json> two_shards(const json& whole, int run1) {
  json a = whole, b = whole;
  const int run = whole["cases"]["run"].get<int>();
  a["cases"]["shard"] = "1/2";
  b["cases"]["shard"] = "2/2";
  a["argv"].push_back("--shard"), a["argv"].push_back("1/2");  // the command that ran each shard
  b["argv"].push_back("--shard"), b["argv"].push_back("2/2");
  a["cases"]["run"] = run1;
  b["cases"]["run"] = run - run1;
  a["cases"]["filtered_out"] = run - run1;
  b["cases"]["filtered_out"] = run1;
  return {a, b};
}

TEST(Merge, ShardsMergeIntoOneReceipt) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  const auto s = two_shards(whole, 40);
  json m;
  const Status st = merge_shards(s, {"s1.json", "s2.json"}, &m);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(m["verdict"], "pass");
  EXPECT_EQ(m["cases"]["run"], whole["cases"]["run"]);
  EXPECT_EQ(m["cases"]["filtered_out"], 0);
  EXPECT_EQ(m["cases"]["merged_shards"], 2);
  EXPECT_FALSE(m["cases"].contains("shard"));
  for (size_t i = 0; i < m["gates"].size(); ++i)
    EXPECT_EQ(m["gates"][i]["passed"].get<int64_t>(), 2 * whole["gates"][i]["passed"].get<int64_t>());
  // The merged receipt is a receipt: report and diff read it.
  std::string path = ::testing::TempDir() + "/merged.json";
  std::ofstream(path) << m.dump();
  json back;
  EXPECT_TRUE(Receipt::load(path, &back).ok);
}

// A shard's cases.shard must be the --shard its command ran: 1/2 relabelled 2/2 merged shard
// 1's cases twice and shard 2's never, and passed.
TEST(Merge, ShardLabelMustBeTheCommands) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  auto s = two_shards(whole, 40);
  for (int k = 0; k < 2; ++k) {
    s[k]["argv"] = {"tf-cuda-test", "rows-invariant", "--backend", "cpu", "--shard", k == 0 ? "1/2" : "2/2"};
  }
  json m;
  ASSERT_TRUE(merge_shards(s, {"s1.json", "s2.json"}, &m).ok);
  s[1]["argv"][5] = "1/2";
  Status st = merge_shards(s, {"s1.json", "s2.json"}, &m);
  EXPECT_NE(st.message.find("s2.json: cases.shard 2/2 but its command ran --shard 1/2"), std::string::npos) << st.message;
  s[1]["argv"] = {"tf-cuda-test", "rows-invariant", "--shard=1/2"};
  st = merge_shards(s, {"s1.json", "s2.json"}, &m);
  EXPECT_NE(st.message.find("s2.json: cases.shard 2/2 but its command ran --shard 1/2"), std::string::npos) << st.message;
}

// Shards of two binaries of one commit (a mutant, another build's flags) do not merge: their
// build ids differ, or one has none. Shards that carry none (older receipts) merge as before.
TEST(Merge, ShardsOfTwoBinariesAreRefused) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  auto s = two_shards(whole, 40);
  s[0]["build"] = {{"id", "00112233445566778899aabbccddeeff00112233"}};
  s[1]["build"] = s[0]["build"];
  json m;
  ASSERT_TRUE(merge_shards(s, {"s1.json", "s2.json"}, &m).ok);
  EXPECT_EQ(m["build"], s[0]["build"]);
  s[1]["build"]["id"] = "00112233445566778899aabbccddeeff00112234";
  Status st = merge_shards(s, {"s1.json", "s2.json"}, &m);
  EXPECT_NE(st.message.find("s2.json: build.id \"00112233445566778899aabbccddeeff00112234\" differs from s1.json's "
                            "\"00112233445566778899aabbccddeeff00112233\": shards of two binaries do not merge"),
            std::string::npos)
      << st.message;
  s[1].erase("build");
  st = merge_shards(s, {"s1.json", "s2.json"}, &m);
  EXPECT_NE(st.message.find("s2.json: build.id missing differs from s1.json's"), std::string::npos) << st.message;
  s[0].erase("build");
  EXPECT_TRUE(merge_shards(s, {"s1.json", "s2.json"}, &m).ok);
}

TEST(Merge, AGreenControlInOneShardIsGreen) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  auto s = two_shards(whole, 40);
  s[1]["controls"][0]["red"] = false;
  s[1]["controls"][0]["caught_by"] = json::array();
  s[1]["verdict"] = "fail";
  json m;
  ASSERT_TRUE(merge_shards(s, {"s1.json", "s2.json"}, &m).ok);
  EXPECT_EQ(m["verdict"], "fail");
  EXPECT_FALSE(m["controls"][0]["red"].get<bool>());
}

// A control that one shard did not run is not the run's control: green, named, the merge fails.
TEST(Merge, AControlMissingFromOneShardIsGreen) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  auto s = two_shards(whole, 40);
  const std::string name = s[1]["controls"][0]["name"].get<std::string>();
  s[1]["controls"].erase(0);
  json m;
  const Status st = merge_shards(s, {"s1.json", "s2.json"}, &m);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(m["verdict"], "fail");
  ASSERT_EQ(m["controls"][0]["name"], name);
  EXPECT_FALSE(m["controls"][0]["red"].get<bool>());
  EXPECT_NE(m["verdict_reasons"].dump().find("control " + name + " ran in 1 of 2 shards"), std::string::npos)
      << m["verdict_reasons"].dump();
}

TEST(Merge, WorstRatioIsTheWorstShardsAndNanWins) {
  const json whole = receipt("reports/cpu/fp8-rows.json");
  size_t gi = 0;
  while (gi < whole["gates"].size() && !whole["gates"][gi].contains("worst")) ++gi;
  ASSERT_LT(gi, whole["gates"].size()) << "fp8-rows has a bound gate";
  auto s = two_shards(whole, 20);
  s[0]["gates"][gi]["worst"]["ratio"] = 0.5;
  s[1]["gates"][gi]["worst"]["ratio"] = 0.7;
  json m;
  ASSERT_TRUE(merge_shards(s, {"a", "b"}, &m).ok);
  EXPECT_DOUBLE_EQ(m["gates"][gi]["worst"]["ratio"].get<double>(), 0.7);
  s[0]["gates"][gi]["worst"]["ratio"] = "nan";
  ASSERT_TRUE(merge_shards(s, {"a", "b"}, &m).ok);
  EXPECT_EQ(m["gates"][gi]["worst"]["ratio"], "nan");
}

// The merged receipt's start is the earliest shard's (whichever file comes first), its host
// one host or "several", dirty when any shard was, and its times the longest shard's and
// the shards' sum.
TEST(Merge, StartHostDirtyAndTimesComeFromEveryShard) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  auto s = two_shards(whole, 40);
  s[0]["started_at"] = "2026-12-04T10:00:05Z";
  s[1]["started_at"] = "2026-12-04T10:00:01Z";
  s[0]["host"] = s[1]["host"] = "box-a";
  s[0]["git"]["dirty"] = false;
  s[1]["git"]["dirty"] = true;
  s[0]["timings"]["total_s"] = 3.0;
  s[1]["timings"]["total_s"] = 5.0;
  json m;
  ASSERT_TRUE(merge_shards(s, {"a", "b"}, &m).ok);
  EXPECT_EQ(m["started_at"], "2026-12-04T10:00:01Z");
  EXPECT_EQ(m["host"], "box-a");
  EXPECT_TRUE(m["git"]["dirty"].get<bool>());
  EXPECT_DOUBLE_EQ(m["timings"]["total_s"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(m["timings"]["shards_total_s"].get<double>(), 8.0);
  std::swap(s[0]["started_at"], s[1]["started_at"]);
  s[1]["host"] = "box-b";
  ASSERT_TRUE(merge_shards(s, {"a", "b"}, &m).ok);
  EXPECT_EQ(m["started_at"], "2026-12-04T10:00:01Z");
  EXPECT_EQ(m["host"], "several");
}

// Shards that count their selection (cases.matched, other_shards, every_case) merge into a
// pass only when together they ran every selected case: one that stopped early (fewer run)
// makes the merge fail, naming both counts.
TEST(Merge, ShardsThatRanFewerCasesThanSelectedFail) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  const int run = whole["cases"]["run"].get<int>();
  auto s = two_shards(whole, run / 2);
  for (json& r : s) {
    r["cases"]["matched"] = run;
    r["cases"]["other_shards"] = r["cases"]["filtered_out"];
    r["cases"]["every_case"] = true;
  }
  json m;
  ASSERT_TRUE(merge_shards(s, {"a", "b"}, &m).ok);
  EXPECT_EQ(m["verdict"], "pass") << m["verdict_reasons"].dump();
  s[1]["cases"]["run"] = s[1]["cases"]["run"].get<int>() - 4;
  ASSERT_TRUE(merge_shards(s, {"a", "b"}, &m).ok);
  EXPECT_EQ(m["verdict"], "fail");
  EXPECT_NE(m["verdict_reasons"].dump().find("the shards ran " + std::to_string(run - 4) + " cases, but " +
                                             std::to_string(run) + " were selected"),
            std::string::npos)
      << m["verdict_reasons"].dump();
}

TEST(Merge, RefusesIncompleteOrMixedShards) {
  const json whole = receipt("reports/cpu/rows-invariant.json");
  auto s = two_shards(whole, 40);
  json m;
  Status st = merge_shards({s[0]}, {"a"}, &m);
  EXPECT_NE(st.message.find("shard 2/2 missing"), std::string::npos) << st.message;
  st = merge_shards({s[0], s[0]}, {"a", "b"}, &m);
  EXPECT_NE(st.message.find("b: shard 1/2 given twice"), std::string::npos) << st.message;
  auto t = s;
  t[1]["seed"] = 5u;
  st = merge_shards(t, {"a", "b"}, &m);
  EXPECT_NE(st.message.find("b: seed 5 differs"), std::string::npos) << st.message;
  t = s;
  t[1]["git"]["commit"] = "0000";
  EXPECT_FALSE(merge_shards(t, {"a", "b"}, &m).ok);
  // Every field the shards must share, each changed alone in the second shard.
  for (const auto& [path, v] : std::vector<std::pair<std::string, json>>{{"/name", "q4-rows"},
                                                                       {"/backend", "cuda"},
                                                                       {"/git/commit", "0000"},
                                                                       {"/cases/requested", 7},
                                                                       {"/cases/filter", "ptok"},
                                                                       {"/cases/case", "x"}}) {
    t = s;
    t[1][json::json_pointer(path)] = v;
    st = merge_shards(t, {"a", "b"}, &m);
    EXPECT_FALSE(st.ok) << path;
    std::string field = path.substr(1);
    std::replace(field.begin(), field.end(), '/', '.');
    EXPECT_NE(st.message.find("b: " + field + " "), std::string::npos) << path << ": " << st.message;
  }
  st = merge_shards({whole}, {"w"}, &m);
  EXPECT_NE(st.message.find("w: cases.shard: missing"), std::string::npos) << st.message;
}

TEST(Shard, Parse) {
  int i = 0, n = 0;
  std::string why;
  EXPECT_TRUE(parse_shard("2/4", &i, &n, &why));
  EXPECT_EQ(i, 2);
  EXPECT_EQ(n, 4);
  for (const char* bad : {"0/2", "3/2", "1/0", "x", "1/", "/2", "-1/2", "1/2/3", " 1/2", "01/2", "1/02", "00/1"})
    EXPECT_FALSE(parse_shard(bad, &i, &n, &why)) << bad;
}

TEST(Premerge, SlowdownOfSameRunRatios) {
  EXPECT_NEAR(same_run_slowdown("of_ceiling", 0.8, 0.72), 0.8 / 0.72, 1e-12);       // a fraction fell: slower
  EXPECT_NEAR(same_run_slowdown("pack_of_ceiling", 0.9, 1.0), 0.9, 1e-12);          // rose: faster
  EXPECT_NEAR(same_run_slowdown("ours_over_sdpa_best", 1.0, 1.1), 1.1, 1e-12);      // a time ratio rose: slower
  EXPECT_EQ(same_run_slowdown("median_us", 10, 20), 0);                             // absolute times: never
  EXPECT_EQ(same_run_slowdown("of_ceiling", 0, 0.5), 0);
  EXPECT_EQ(same_run_slowdown("of_ceiling", 0.5, std::nan("")), 0);
}

TEST(Premerge, L2PolicyOfABenchReceipt) {
  EXPECT_EQ(bench_l2_policy(json{{"name", "compact"}}), "warm");  // receipts before the field ran back to back
  EXPECT_EQ(bench_l2_policy(json{{"name", "compact"}, {"l2_policy", "flush"}}), "flush");
  EXPECT_EQ(bench_l2_policy(json{{"name", "rope-store"}, {"l2_policy", "warm"}}), "warm");
  EXPECT_EQ(bench_l2_policy(json()), "warm");
}

TEST(Premerge, QuickModeOfABenchReceipt) {
  // the field first (premerge writes a head bench with its own argv); then --quick in argv
  EXPECT_TRUE(bench_quick_mode(json{{"quick", true}, {"argv", {"tf-cuda-test", "premerge"}}}));
  EXPECT_FALSE(bench_quick_mode(json{{"quick", false}, {"argv", {"tf-cuda-test", "bench", "pack", "--quick"}}}));
  EXPECT_TRUE(bench_quick_mode(json{{"argv", {"tf-cuda-test", "bench", "compact", "--quick"}}}));
  EXPECT_FALSE(bench_quick_mode(json{{"argv", {"tf-cuda-test", "bench", "compact"}}}));
  EXPECT_FALSE(bench_quick_mode(json()));
  // the committed H200 receipts are full runs (premerge-written ones and bench pack's with the field)
  EXPECT_FALSE(bench_quick_mode(receipt("reports/h200/bench-attention.json")));
  EXPECT_FALSE(bench_quick_mode(receipt("reports/h200/bench-compact.json")));
  EXPECT_FALSE(bench_quick_mode(receipt("reports/h200/bench-pack.json")));
}

TEST(Premerge, RatioGroupsAreTheMeasuredTimes) {
  EXPECT_EQ(ratio_group("of_ceiling"), std::string());
  EXPECT_EQ(ratio_group("ours_over_sdpa_best"), std::string());
  EXPECT_EQ(ratio_group("pack_of_ceiling"), std::string("pack"));
  EXPECT_EQ(ratio_group("unpack_of_ceiling"), std::string("unpack"));
  EXPECT_EQ(ratio_group("fp8_over_bf16"), std::string("fp8"));
  EXPECT_FALSE(ratio_group("median_us").has_value());
  EXPECT_FALSE(ratio_group("_over_x").has_value());
}

TEST(Premerge, ATimeIsSlowerOnlyWhenEveryYardstickAndRunSaysSo) {
  PremergeOptions o;  // 1.05, 1.25 under 20 us
  const json base = {{"median_us", 50.0}, {"of_ceiling", 0.8}, {"ours_over_sdpa_best", 0.9},
                     {"pack_us", 10.0}, {"pack_of_ceiling", 0.9}, {"unpack_us", 30.0}, {"unpack_of_ceiling", 0.9}};
  auto one = [&](const json& head, const json* rerun, const std::string& g) {
    for (const TimeSlowdown& t : time_slowdowns(base, head, rerun, o))
      if (t.group == g) return t;
    ADD_FAILURE() << "no group '" << g << "'";
    return TimeSlowdown{};
  };
  json h = base;
  h["ours_over_sdpa_best"] = 1.0;  // SDPA's own time fell by 10 %, ours held: the ceiling's ratio says so
  TimeSlowdown t = one(h, nullptr, "");
  EXPECT_NEAR(t.slowdown, 1.0, 1e-12);
  EXPECT_EQ(t.slower_by_some, 1);
  EXPECT_EQ(t.limit, 1.05);
  h["of_ceiling"] = 0.7;  // now our time rose too: slower by both, the smaller slowdown reported
  t = one(h, nullptr, "");
  EXPECT_NEAR(t.slowdown, 1.0 / 0.9, 1e-12);
  EXPECT_EQ(t.field, "ours_over_sdpa_best");
  EXPECT_GT(t.slowdown, t.limit);
  json again = base;  // a re-run that does not confirm it
  t = one(h, &again, "");
  EXPECT_NEAR(t.slowdown, 1.0, 1e-12);
  EXPECT_EQ(t.slower_by_some, 2);
  // pack and unpack are two times of one row: one slower, the other not.
  h = base;
  h["pack_of_ceiling"] = 0.6;   // 1.5x, but 10 us: launch-bound, limit 1.25
  h["unpack_of_ceiling"] = 0.8;  // 1.125x at 30 us: limit 1.05
  t = one(h, nullptr, "pack");
  EXPECT_TRUE(t.launch_bound);
  EXPECT_EQ(t.limit, 1.25);
  EXPECT_GT(t.slowdown, t.limit);
  t = one(h, nullptr, "unpack");
  EXPECT_FALSE(t.launch_bound);
  EXPECT_GT(t.slowdown, t.limit);
  h["pack_of_ceiling"] = 0.8;  // 1.125x at 10 us: within the launch-bound limit
  EXPECT_LT(one(h, nullptr, "pack").slowdown, 1.25);
  h["pack_us"] = 25.0;  // the head's time is not launch-bound, but the base's is: still the short limit
  EXPECT_TRUE(one(h, nullptr, "pack").launch_bound);
  o.short_row_us = 0;  // no launch-bound rows
  EXPECT_FALSE(one(h, nullptr, "pack").launch_bound);
}

TEST(Premerge, TheSameCallAbFilterSelectsExactlyItsRows) {
  const json att = {{"config", "24q/4kv/d256/b8/ctx4096"}, {"format", "fp8"}, {"addressing", "window"}};
  const json att2 = {{"config", "32q/8kv/d128/b32/ctx131072"}, {"format", "bf16"}, {"addressing", "p16"}};
  const std::string f = ab_filter("attention", {att, att2});
  EXPECT_EQ(f, "^(24q/4kv/d256/b8/ctx4096/fp8/window|32q/8kv/d128/b32/ctx131072/bf16/p16)$");
  const std::regex rx(f, std::regex::ECMAScript);
  EXPECT_TRUE(std::regex_search("24q/4kv/d256/b8/ctx4096/fp8/window", rx));
  EXPECT_FALSE(std::regex_search("24q/4kv/d256/b8/ctx4096/fp8/p16", rx));        // another addressing
  EXPECT_FALSE(std::regex_search("24q/4kv/d256/b8/ctx40960/fp8/window", rx));    // anchored: no longer name
  const json mv = {{"config", "64MiB/fp8/p16"}, {"format", "fp8"}, {"addressing", "p16"}};
  EXPECT_EQ(ab_filter("rope-store", {mv}), "^(64MiB/fp8/p16)$");  // the config names format and addressing
  EXPECT_EQ(ab_filter("compact", {mv}), "^(64MiB/fp8/p16)$");
  EXPECT_EQ(ab_filter("pack", {mv}), "");  // bench pack has no --filter: the whole bench
  EXPECT_EQ(ab_filter("attention", {}), "");
  // Characters a regex would read: escaped.
  const std::string odd = ab_filter("compact", {json{{"config", "a.b+c(1)"}}});
  EXPECT_EQ(odd, "^(a\\.b\\+c\\(1\\))$");
  EXPECT_TRUE(std::regex_search("a.b+c(1)", std::regex(odd, std::regex::ECMAScript)));
  EXPECT_FALSE(std::regex_search("axb+c(1)", std::regex(odd, std::regex::ECMAScript)));
}

// Every row of bench attention (162, as the committed receipt has them) in filters within --filter's
// limit, which together select each row exactly once (session 63's audit: one filter of 5619
// bytes was refused, so the A/B of every row across cards timed nothing).
TEST(Premerge, TheSameCallAbFiltersFitTheLimitAndSelectEveryRowOnce) {
  std::ifstream in(std::string(KC_SOURCE_DIR) + "/reports/h200/bench-attention.json");
  const json r = json::parse(in);
  const std::vector<json> rows(r["rows"].begin(), r["rows"].end());
  ASSERT_GT(ab_filter("attention", rows).size(), kc::kMaxFilterBytes);
  const std::vector<std::string> fs = ab_filters("attention", rows, kc::kMaxFilterBytes);
  ASSERT_GT(fs.size(), 1u);
  std::map<std::string, int> hits;
  for (const std::string& f : fs) {
    EXPECT_LE(f.size(), kc::kMaxFilterBytes);
    const std::regex rx(f, std::regex::ECMAScript);
    for (const json& x : rows) {
      const std::string name = x["config"].get<std::string>() + "/" + x["format"].get<std::string>() + "/" +
                               x["addressing"].get<std::string>();
      hits[name] += std::regex_search(name, rx);
    }
  }
  EXPECT_EQ(hits.size(), rows.size());
  for (const auto& [name, n] : hits) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(ab_filters("attention", rows, 1u << 20), std::vector<std::string>{ab_filter("attention", rows)});
  EXPECT_EQ(ab_filters("pack", rows, 1000), std::vector<std::string>{""});
  EXPECT_EQ(ab_filters("attention", {}, 1000), std::vector<std::string>{""});
  // A row longer than the limit on its own still gets a filter (never an endless split).
  EXPECT_EQ(ab_filters("compact", {json{{"config", "a"}}, json{{"config", "b"}}}, 3).size(), 2u);
}

TEST(Premerge, ASameCallAbHoldsATimeUnlessEveryRoundIsSlower) {
  const json b1 = {{"median_us", 33.4}}, h1 = {{"median_us", 34.6}};  // 1.036x
  const json b2 = {{"median_us", 34.7}}, h2 = {{"median_us", 34.4}};  // faster
  AbTimes a = ab_times("", {{&b1, &h1}, {&b2, &h2}}, 1.05);
  EXPECT_EQ(a.rounds, 2);
  EXPECT_EQ(a.slower, 0);
  EXPECT_NE(a.detail.find("head 34.6 / base 33.4 us"), std::string::npos) << a.detail;
  const json h3 = {{"median_us", 40.0}};  // 1.20x and 1.15x: slower in every round
  a = ab_times("", {{&b1, &h3}, {&b2, &h3}}, 1.05);
  EXPECT_EQ(a.rounds, 2);
  EXPECT_EQ(a.slower, 2);
  a = ab_times("", {{&b1, &h3}, {&b2, &h2}}, 1.05);  // slower in one round only: the time held
  EXPECT_EQ(a.slower, 1);
  EXPECT_EQ(a.rounds, 2);
  EXPECT_EQ(ab_times("", {{&b1, &h3}}, 1.25).slower, 0);  // the launch-bound limit
  // A round without the row (either side), or without the time, is no round.
  EXPECT_EQ(ab_times("", {{nullptr, &h1}, {&b1, nullptr}}, 1.05).rounds, 0);
  const json pb = {{"pack_us", 10.0}, {"unpack_us", 30.0}}, ph = {{"pack_us", 13.0}, {"unpack_us", 30.0}};
  EXPECT_EQ(ab_times("pack", {{&pb, &ph}}, 1.25).slower, 1);
  EXPECT_EQ(ab_times("unpack", {{&pb, &ph}}, 1.05).slower, 0);
  EXPECT_EQ(ab_times("", {{&pb, &ph}}, 1.05).rounds, 0);  // no median_us
  const json zero = {{"median_us", 0.0}};
  EXPECT_EQ(ab_times("", {{&zero, &h1}}, 1.05).rounds, 0);
}

TEST(Premerge, BenchTimesOfTwoCardsDoNotCompare) {
  const json h200 = {{"device", {{"name", "NVIDIA H200"}}}}, h100 = {{"device", {{"name", "NVIDIA H100 80GB HBM3"}}}};
  EXPECT_EQ(receipt_card(h200), "NVIDIA H200");
  EXPECT_EQ(receipt_card(json{{"device", {{"name", 7}}}}), "");  // not a name
  EXPECT_EQ(receipt_card(json()), "");
  EXPECT_EQ(cross_card_why("NVIDIA H200", "NVIDIA H200"), "");
  EXPECT_EQ(cross_card_why(receipt_card(h200), receipt_card(h100)),
            "the base was timed on NVIDIA H200, the head on NVIDIA H100 80GB HBM3");
  EXPECT_EQ(cross_card_why("", "NVIDIA H100 80GB HBM3"), "");  // a receipt without a card: nothing to tell apart
  EXPECT_EQ(cross_card_why(receipt_card(receipt("reports/h200/bench-attention.json")), "NVIDIA H200"), "");
  // premerge running the head on another card without --base-bin: refused, naming the bench,
  // both cards and the way out.
  const std::map<std::string, json> benches = {{"attention", h200}, {"pack", json::object()}};
  EXPECT_EQ(cross_card_refusal(benches, "NVIDIA H200", "reports/h200"), "");
  EXPECT_EQ(cross_card_refusal({{"pack", json::object()}}, "NVIDIA H100 80GB HBM3", "b"), "");
  const std::string why = cross_card_refusal(benches, "NVIDIA H100 80GB HBM3", "reports/h200");
  EXPECT_EQ(why.rfind("bench attention: the base was timed on NVIDIA H200, the head on NVIDIA H100 80GB HBM3 "
                      "(reports/h200/bench-attention.json device.name)", 0), 0u) << why;
  EXPECT_NE(why.find("pass --base-bin"), std::string::npos) << why;
  EXPECT_NE(why.find("or run premerge on NVIDIA H200"), std::string::npos) << why;
  // The A/B's smallest head / base time, for the row table.
  const json b = {{"median_us", 100.0}}, h1 = {{"median_us", 110.0}}, h2 = {{"median_us", 104.0}};
  const AbTimes a = ab_times("", {{&b, &h1}, {&b, &h2}}, 1.05);
  EXPECT_NEAR(a.least, 1.04, 1e-12);
  EXPECT_EQ(a.head_us, 104.0);
  EXPECT_EQ(a.base_us, 100.0);
  EXPECT_EQ(a.slower, 1);
}

// A target met by the base and missed by the head's run sends the bench to premerge's re-run;
// one the base missed too, one the head did not measure, or one only the head has does not.
TEST(Premerge, TargetsTheBaseMetAndTheHeadMissedAreReRun) {
  auto t = [](const std::string& name, bool measured, bool met, double value) {
    return json{{"name", name}, {"measured", measured}, {"met", met}, {"value", value}, {"limit", 0.85}, {"at_least", true}};
  };
  const json base = {{"targets", {t("a", true, true, 0.8516), t("b", true, false, 0.8), t("c", true, true, 0.9),
                                  t("d", true, true, 0.9)}}};
  const json head = {{"targets", {t("a", true, false, 0.8416), t("b", true, false, 0.7), t("c", false, false, 0),
                                  t("d", true, true, 0.95), t("e", true, false, 0.5)}}};
  EXPECT_EQ(missed_targets(base, head), std::set<std::string>{"a"});
  EXPECT_EQ(missed_targets(base, base), std::set<std::string>{});
  ASSERT_NE(target_named(base, "b"), nullptr);
  EXPECT_EQ(target_named(base, "b")->at("value"), 0.8);
  EXPECT_EQ(target_named(base, "e"), nullptr);
  EXPECT_EQ(target_named(json(), "a"), nullptr);  // no re-run receipt
  // The committed H200 receipts against themselves: nothing to re-run.
  const json attn = receipt("reports/h200/bench-attention.json");
  EXPECT_EQ(missed_targets(attn, attn), std::set<std::string>{});
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Html, AttentionPlots) {
  const json r = receipt("reports/h200/bench-attention.json");
  const std::string p = receipt_plots(r);
  // Six panels (2 shapes x 3 batches) of achieved / ceiling, three ours / SDPA charts.
  EXPECT_EQ(count(p, "<svg"), 9);
  for (const char* panel : {"24q/4kv/d256/b1", "24q/4kv/d256/b32", "32q/8kv/d128/b8"})
    EXPECT_NE(p.find(std::string("<title>") + panel + "</title>"), std::string::npos) << panel;
  EXPECT_EQ(count(p, "<polyline"), 6 * 9);  // a line per format and addressing in each panel
  EXPECT_NE(p.find("bf16: ours / SDPA best"), std::string::npos);
  EXPECT_EQ(count(p, "=\"nan"), 0);
  EXPECT_EQ(count(p, "=\"-nan"), 0);
  EXPECT_EQ(count(p, "inf\""), 0);
}

TEST(Html, PackAndKvPlotsAndAPageThatFetchesNothing) {
  const json pack = receipt("reports/h200/bench-pack.json"), kv = receipt("reports/h200/kv-gate-long-q4.json"),
             c = receipt("reports/cpu/fp8-rows.json");
  EXPECT_EQ(count(receipt_plots(pack), "<svg"), 2);
  const std::string k = receipt_plots(kv);
  EXPECT_EQ(count(k, "<svg"), 1);
  EXPECT_NE(k.find("bar: mean 0.01"), std::string::npos);
  EXPECT_NE(k.find("bar: worst 0.1"), std::string::npos);  // both bars the receipt gives are drawn
  EXPECT_EQ(receipt_plots(c), "");
  const std::string page = render_html_page({pack, kv, c}, {"a <b>", "kv", "c"});
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("://"), std::string::npos);
  EXPECT_NE(page.find("a &lt;b&gt;"), std::string::npos);  // the path is escaped
  EXPECT_NE(page.find("<td class=\"bad\">fail</td>"), std::string::npos);
}

// The pack plots' copy ceiling is the median of the runs' ceilings at a blob size: of an even
// count, the mean of the two middle ones (host mutation sweep, round 18: the upper middle one
// was drawn and no test read the point). Each point carries its value as a tooltip.
TEST(Html, PackCeilingIsTheMedianOfItsRuns) {
  json r = {{"kind", "bench"}, {"name", "pack"}, {"rows", json::array()}};
  for (double ceiling : {1e12, 4e12, 3e12, 2e12})
    r["rows"].push_back({{"blob_mib", 64}, {"format", "fp8"}, {"addressing", "window"}, {"pack_bytes_per_s", 1e11},
                         {"unpack_bytes_per_s", 1e11}, {"ceiling_bytes_per_s", ceiling}});
  r["rows"].push_back({{"blob_mib", 256}, {"format", "fp8"}, {"addressing", "window"}, {"pack_bytes_per_s", 1e11},
                       {"ceiling_bytes_per_s", 5e12}});
  const std::string p = receipt_plots(r);
  EXPECT_EQ(count(p, "<title>copy ceiling (median): 64, 2.5</title>"), 2) << p;  // pack and unpack
  EXPECT_EQ(count(p, "<title>copy ceiling (median): 256, 5</title>"), 2) << p;
}

// The page's summary table marks a receipt of a dirty tree's build (its commit cell says so, as
// the receipt's own table does; round 18: a summary cell without the mark passed every test).
TEST(Html, SummaryMarksADirtyBuild) {
  json r = receipt("reports/cpu/fp8-rows.json");
  r["git"]["dirty"] = true;
  const std::string commit = r["git"]["commit"].get<std::string>().substr(0, 12);
  const std::string page = render_html_page({r}, {"r.json"});
  const std::string summary = page.substr(0, page.find("<section"));
  EXPECT_NE(summary.find("<td>" + commit + " (dirty)</td>"), std::string::npos) << summary;
  r["git"]["dirty"] = false;
  const std::string clean = render_html_page({r}, {"r.json"});
  EXPECT_EQ(clean.substr(0, clean.find("<section")).find("(dirty)"), std::string::npos);
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// The testsuites element's totals are each result's count over the suites (skipped= once
// counted the failed cases: junit-total-skipped-counts-failures; junit_check.sh checks each
// testsuite's own counts, not these).
TEST(Junit, TestsuitesTotalsCountEachResult) {
  const json ok = receipt("reports/cpu/fp8-rows.json");  // its device gates skipped
  json failed = ok;
  failed["controls"][1]["red"] = false;
  failed["verdict"] = "fail";
  const std::vector<JunitSuite> suites = {junit_suite(ok), junit_suite(failed)};
  int64_t tests = 0, failures = 0, skipped = 0;
  for (const JunitSuite& s : suites)
    for (const JunitCase& c : s.cases) {
      ++tests;
      failures += c.result == JunitCase::Result::failure;
      skipped += c.result == JunitCase::Result::skipped;
    }
  ASSERT_GT(skipped, 0);
  ASSERT_GT(failures, 0);
  ASSERT_NE(skipped, failures);
  const std::string xml = junit_xml("t", suites);
  const std::string want = "<testsuites name=\"t\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
                           std::to_string(failures) + "\" errors=\"0\" skipped=\"" + std::to_string(skipped) + "\"";
  EXPECT_NE(xml.find(want), std::string::npos) << want << "\n" << xml.substr(0, 300);
}

std::string property(const JunitSuite& s, const std::string& name) {
  for (const auto& [k, v] : s.properties)
    if (k == name) return v;
  return "(none)";
}

// The suite's commit property says when the receipt's tree was dirty (junit-commit-dirty-dropped),
// and a shard's suite names its shard (junit-shard-property-dropped).
TEST(Junit, CommitPropertySaysDirtyAndAShardIsNamed) {
  json r = receipt("reports/cpu/fp8-rows.json");
  const std::string commit = r["git"]["commit"];
  ASSERT_FALSE(r["git"]["dirty"].get<bool>());
  EXPECT_EQ(property(junit_suite(r), "commit"), commit);
  EXPECT_EQ(property(junit_suite(r), "shard"), "(none)");
  r["git"]["dirty"] = true;
  r["cases"]["shard"] = "2/3";
  const JunitSuite s = junit_suite(r);
  EXPECT_EQ(property(s, "commit"), commit + " (dirty)");
  EXPECT_EQ(property(s, "shard"), "2/3");
}

}  // namespace
}  // namespace kc
