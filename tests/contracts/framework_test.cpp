// The contract runner's verdict rules on a toy contract (cpu backend): a declared gate that
// checked nothing in a run of every case fails the run; a narrowed run may leave it unchecked.
#include "contracts/framework.h"

#include <gtest/gtest.h>

#include <optional>

#include <string>
#include <vector>

#include "contracts/contracts.h"
#include "kernels/backend/backend.h"

namespace kc {
namespace {

// Cases i = 0 .. cases - 1; gate "every" checks each, gate "rare" only case 7 (reached with
// 8 cases or more), gate "never" nothing. One control, red on "every".
ContractDef toy(bool declare_never) {
  return {"toy", "a toy contract", 8, [declare_never](Run& run) {
            run.declare("every", "checks every case");
            run.declare("rare", "checks case 7 only");
            if (declare_never) run.declare("never", "checks nothing");
            for (int i = 0; i < run.cases; ++i) {
              const std::string cv = "toy(i=" + std::to_string(i) + ")";
              if (!run.selected(cv)) continue;
              run.check("every", true, cv);
              if (i == 7) run.check("rare", true, cv);
            }
            run.control("planted", "a failing check", [](Run& sub) { sub.check("every", false, "planted"); });
          }};
}

// A contract run on cpu, quiet (cases: the contract's default when absent).
RunResult run_quiet(const ContractDef& def, std::optional<int> cases = std::nullopt, const std::string& filter = "") {
  Status st;
  auto be = select_backend("cpu", &st);
  RunOptions o;
  o.cases = cases;
  o.quiet = true;
  o.filter = filter;
  return run_contract(def, *be, o);
}

RunResult run_toy(bool declare_never, int cases, const std::string& filter = "") {
  return run_quiet(toy(declare_never), cases, filter);
}

bool has_reason(const RunResult& r, const std::string& text) {
  for (const auto& w : r.receipt["verdict_reasons"])
    if (w.get<std::string>().find(text) != std::string::npos) return true;
  return false;
}

TEST(Framework, AGateThatChecksNothingInAFullRunFailsIt) {
  EXPECT_TRUE(run_toy(false, 8).pass);
  const RunResult r = run_toy(true, 8);
  EXPECT_FALSE(r.pass);
  EXPECT_TRUE(has_reason(r, "gate never checked nothing in a run of every case (8)")) << r.receipt["verdict_reasons"];
  EXPECT_FALSE(has_reason(r, "gate rare")) << r.receipt["verdict_reasons"];
  EXPECT_FALSE(run_toy(true, 20).pass);  // more cases than the default: still every case
}

TEST(Framework, ANarrowedRunMayLeaveAGateUnchecked) {
  EXPECT_TRUE(run_toy(false, 4).pass);                   // fewer cases: "rare" is not reached
  EXPECT_TRUE(run_toy(false, 8, "i=[0-3]\\)").pass);  // a filter: likewise
}

// A run in which no gate check passed never passes, even with its controls red and no gate
// unreached: here the only gate is skipped (as a device gate is on cpu).
ContractDef toy_all_skipped() {
  return {"toy-skipped", "every check skipped", 2, [](Run& run) {
            run.declare("every", "skipped here");
            run.skip("every", "no device");
            run.control("planted", "a failing check", [](Run& sub) { sub.check("every", false, "planted"); });
          }};
}

TEST(Framework, ARunWithNoCheckPassedFailsEvenWithItsControlsRed) {
  const RunResult r = run_quiet(toy_all_skipped());
  ASSERT_EQ(r.receipt["controls"].size(), 1u);
  EXPECT_TRUE(r.receipt["controls"][0]["red"].get<bool>());
  EXPECT_FALSE(r.pass);
  EXPECT_TRUE(has_reason(r, "no gate check passed")) << r.receipt["verdict_reasons"];
}

// A control whose body erred is not red even when one of its gates also failed: an error
// is not a catch (the run fails, naming the control).
ContractDef toy_erred_control() {
  return {"toy-erred", "a control that fails a gate, then errs", 2, [](Run& run) {
            run.declare("every", "checks every case");
            for (int i = 0; i < run.cases; ++i) run.check("every", true, "toy(i=" + std::to_string(i) + ")");
            run.control("fails-then-errs", "a failing check, then a backend error", [](Run& sub) {
              sub.check("every", false, "planted");
              sub.error("planted", "the backend refused");
            });
          }};
}

TEST(Framework, AControlThatErredIsNotRedEvenIfAGateFailed) {
  const RunResult r = run_quiet(toy_erred_control());
  ASSERT_EQ(r.receipt["controls"].size(), 1u);
  EXPECT_FALSE(r.receipt["controls"][0]["red"].get<bool>()) << r.receipt["controls"][0];
  EXPECT_EQ(r.receipt["controls"][0]["caught_by"], nlohmann::json::array({"every"}));
  EXPECT_FALSE(r.pass);
  EXPECT_TRUE(has_reason(r, "control fails-then-errs stayed green")) << r.receipt["verdict_reasons"];
}

RunResult run_opts(const ContractDef& def, RunOptions o) {
  Status st;
  auto be = select_backend("cpu", &st);
  o.quiet = true;
  return run_contract(def, *be, o);
}

// Case i = 3 fails gate "every"; the control is red.
ContractDef toy_failing() {
  return {"toy", "a toy contract whose case 3 fails", 8, [](Run& run) {
            run.declare("every", "checks every case");
            for (int i = 0; i < run.cases; ++i) {
              const std::string cv = "toy(i=" + std::to_string(i) + ")";
              if (run.selected(cv)) run.check("every", i != 3, cv);
            }
            run.control("planted", "a failing check", [](Run& sub) { sub.check("every", false, "planted"); });
          }};
}

std::vector<std::string> replays(const RunResult& r) { return r.receipt["replay"].get<std::vector<std::string>>(); }

// A replay repeats the run as it ran: --gates-only kept (without it the replay of a --gates-only
// run, which fails for its skipped controls, ran the controls and passed), and the run's --shard
// kept, with --case too (`--case L --shard 2/2` holds no case; without --shard the case ran and
// passed). A failing case's own line needs no --shard.
TEST(Framework, AReplayRepeatsTheRunGatesOnlyAndShardKept) {
  const std::string head = "tf-cuda-test toy --backend cpu --seed 20261129 --cases 8";
  RunOptions go;
  go.gates_only = true;
  RunResult r = run_opts(toy(false), go);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(replays(r), std::vector<std::string>{head + " --gates-only"});
  r = run_opts(toy_failing(), go);
  EXPECT_EQ(replays(r), std::vector<std::string>{head + " --gates-only --case 'toy(i=3)'"});
  RunOptions sh = go;
  sh.shard = 2, sh.shards = 2;
  r = run_opts(toy(false), sh);
  EXPECT_EQ(replays(r), std::vector<std::string>{head + " --gates-only --shard 2/2"});
  RunOptions cs;
  cs.case_line = "toy(i=1)";
  cs.shard = 2, cs.shards = 2;
  r = run_opts(toy(false), cs);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(replays(r), std::vector<std::string>{head + " --case 'toy(i=1)' --shard 2/2"});
  r = run_opts(toy(false), RunOptions{});  // a passing run: nothing to replay
  EXPECT_TRUE(r.pass);
  EXPECT_TRUE(replays(r).empty());
}

// The receipt library's list of contracts (report and diff refuse a contract receipt of another
// name) is the registry's, in its order; each name is a file name (report --merge-out writes
// <contract>.json).
TEST(Framework, TheReceiptLibraryKnowsTheRegisteredContracts) {
  std::vector<std::string> names;
  for (const ContractDef& c : contracts()) names.push_back(c.name);
  EXPECT_EQ(registered_contract_names(), names);
  for (const std::string& n : names) {
    EXPECT_TRUE(safe_file_name(n)) << n;
    EXPECT_TRUE(check_known_contract(nlohmann::json{{"kind", "contract"}, {"name", n}}, "r.json").ok) << n;
  }
  for (const char* n : {"oracle", "sanitize"})
    EXPECT_TRUE(check_known_contract(nlohmann::json{{"kind", "contract"}, {"name", n}}, "r.json").ok) << n;
  const Status st = check_known_contract(nlohmann::json{{"kind", "contract"}, {"name", "toy"}}, "r.json");
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(st.message.rfind("r.json: name: 'toy' is not a known contract (known: fp8-rows, ", 0), 0u) << st.message;
  EXPECT_TRUE(check_known_contract(nlohmann::json{{"kind", "bench"}, {"name", "toy"}}, "r.json").ok);
  for (const char* bad : {"", ".", "..", "a/b", "a\\b", "../x"}) EXPECT_FALSE(safe_file_name(bad)) << bad;
  EXPECT_FALSE(safe_file_name(std::string("a\0b", 3)));
  EXPECT_TRUE(safe_file_name("..."));
}

}  // namespace
}  // namespace kc
