// report / diff: receipts checked field by field, rendered, and compared.
#include "tools/receipt_views.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "contracts/json_type.h"

namespace kc {
namespace {

using json = nlohmann::json;

json contract_receipt() {
  return json{{"schema", "kernel-contracts/receipt/1"},
              {"kind", "contract"},
              {"name", "qwen-pages"},
              {"verdict", "pass"},
              {"backend", "cpu"},
              {"device", {{"name", "test cpu"}}},
              {"git", {{"commit", "0123456789abcdef"}, {"dirty", false}}},
              {"seed", 7},
              {"argv", {"tf-cuda-test", "qwen-pages", "--filter", "a|b"}},
              {"cases", {{"requested", 4}, {"run", 4}, {"filtered_out", 0}, {"filter", ""}}},
              {"gates",
               {{{"name", "paged==window"}, {"ok", true}, {"passed", 4}, {"failed", 0}, {"skipped", 0}, {"total", 4}},
                {{"name", "attention-bound"},
                 {"ok", true},
                 {"passed", 4},
                 {"failed", 0},
                 {"skipped", 0},
                 {"total", 4},
                 {"worst", {{"case", "qwen-pages(x=1)"}, {"detail", "row 0"}, {"ratio", 0.0116}}}}}},
              {"controls",
               {{{"name", "dropped-key"}, {"red", true}, {"caught_by", {"attention-bound"}}},
                {{"name", "planted-row"}, {"red", true}, {"caught_by", {"paged==window"}}}}},
              {"numbers", {{"worst", {{"fma", 0.0116}}}}},
              {"errors", json::array()},
              {"timings", {{"total_s", 1.5}}}};
}

json bench_receipt() {
  json r = contract_receipt();
  r["kind"] = "bench";
  r["name"] = "attention";
  r["gates"] = json::array();
  r["controls"] = json::array();
  r["rows"] = {{{"config", "b8"}, {"format", "bf16"}, {"addressing", "window"}, {"median_us", 300.0}, {"of_ceiling", 0.78}},
               {{"config", "b8"}, {"format", "fp8"}, {"addressing", "window"}, {"median_us", 230.0}, {"of_ceiling", 0.5}}};
  r["targets"] = {{{"name", "bf16 of ceiling"}, {"value", 0.81}, {"limit", 0.8}, {"met", true}, {"measured", true}, {"at_least", true}}};
  return r;
}

json generate_receipt() {
  json r = contract_receipt();
  r["kind"] = "generate";
  r["name"] = "stdlib-bytes-3m";
  r["seed"] = 0;
  r["gates"] = json::array();
  r["controls"] = json::array();
  r.erase("cases");
  r.erase("numbers");
  r["generate"] = {{"model", "fixtures/models/stdlib-bytes-3m"}, {"checkpoint_sha256", std::string(64, 'a')},
                   {"kv_cache", "bf16"}, {"pages", 16}, {"prompt_tokens", {257, 100}}, {"tokens", {40, 41}},
                   {"text", "()"}, {"stopped_at_eos", false}, {"time_to_first_token_s", 0.0125}, {"decode_s", 0.001},
                   {"decode_tokens", 1}, {"decode_steps", 1}, {"decode_tok_s", 1000.0}, {"cache_bytes", 4096}};
  return r;
}

json engine_bench_receipt() {
  json r = bench_receipt();
  r["kind"] = "bench-engine";
  r["name"] = "engine";
  r["seed"] = nullptr;
  r["rows"] = {{{"config", "m/p8"}, {"format", "bf16"}, {"addressing", "window"}, {"engine", "ours"}, {"step_us", 400.0},
                {"decode_tok_s", 20000.0}, {"ours_over_transformers", 8.0}},
               {{"config", "m/p8"}, {"format", "bf16"}, {"addressing", "p16"}, {"engine", "ours"}, {"step_us", 404.0},
                {"decode_tok_s", 19801.0}, {"paged_over_window", 1.01}},
               {{"config", "m/p8"}, {"format", "bf16"}, {"addressing", "static"}, {"engine", "transformers"},
                {"step_us", 3200.0}, {"decode_tok_s", 2500.0}}};
  r["targets"] = {{{"name", "m bf16 p8: paged(16) / window decode time"}, {"value", 1.01}, {"limit", 1.05}, {"met", true},
                   {"measured", true}, {"at_least", false}},
                  {{"name", "m p8: ours (bf16 window) / transformers tok/s"}, {"value", 8.0}, {"limit", 2.0}, {"met", true},
                   {"measured", true}, {"at_least", true}}};
  r["transformers"] = {{"torch", "2.11"}, {"transformers", "5.17.0"}, {"precision", "bf16 weights, bf16 compute"}};
  r["attention_share"] = {{"what", "preset, 32K"},
                          {"rows", {{{"parallel", 8}, {"context", 32768}, {"layers", 4}, {"step_us", 2000.0},
                                     {"attention_us_per_layer", 300.0}, {"share", 0.6}}}}};
  return r;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("kc-receipt-views-" + name);
  std::ofstream(p) << text;
  return p.string();
}

json committed(const std::string& rel) {
  std::ifstream f(std::string(KC_SOURCE_DIR) + "/" + rel);
  return json::parse(f);
}

// Into a Receipt or into the checked document (json).
template <class Out>
Status load_text(const std::string& name, const std::string& text, Out* out) {
  return Receipt::load(write_temp(name, text), out);
}

TEST(ReceiptViews, LoadsAValidReceipt) {
  Receipt r;
  ASSERT_TRUE(load_text("ok.json", contract_receipt().dump(), &r).ok);
  EXPECT_EQ(r["name"], "qwen-pages");
  ASSERT_TRUE(load_text("bench.json", bench_receipt().dump(), &r).ok);
}

// Receipt::check on an otherwise valid receipt with one contradiction planted: a gate's
// total that is not passed + failed + skipped (over or under), and a pass with one error.
// (Through text, as a file is read: the seed then parses as an unsigned integer.)
Status check_as_read(const json& r, const std::string& file) { return Receipt::check(json::parse(r.dump()), file); }

TEST(ReceiptViews, CheckRefusesAWrongTotalAndAPassWithOneError) {
  ASSERT_TRUE(check_as_read(contract_receipt(), "ok.json").ok) << check_as_read(contract_receipt(), "ok.json").message;
  for (int total : {5, 3}) {
    json bad = contract_receipt();
    bad["gates"][1]["total"] = total;  // passed 4, failed 0, skipped 0
    const Status st = check_as_read(bad, "t.json");
    EXPECT_FALSE(st.ok) << total;
    EXPECT_NE(st.message.find("t.json: gates[1].total: " + std::to_string(total) + " is not passed + failed + skipped (4)"),
              std::string::npos)
        << st.message;
  }
  // Counts each within 2^63 - 1 whose sum is not: refused for the sum's range, with no int64_t
  // overflow on the way. The sum used to be formed first, undefined behaviour that UBSan
  // reported under the fixture fuzz; this case shows it only in a KC_SANITIZE_HOST build (where
  // the sum wraps, to 0 here, the message is the same).
  {
    json big = contract_receipt();
    big["gates"][1]["passed"] = INT64_MAX;
    big["gates"][1]["failed"] = INT64_MAX;
    big["gates"][1]["skipped"] = 2;
    big["gates"][1]["ok"] = false;
    big["gates"][1]["total"] = 0;  // what the sum wraps to
    const Status st = check_as_read(big, "o.json");
    EXPECT_FALSE(st.ok);
    EXPECT_NE(st.message.find("o.json: gates[1].total: passed + failed + skipped is above 2^63 - 1"), std::string::npos)
        << st.message;
  }
  json bad = contract_receipt();
  bad["errors"] = {"qwen-pages(x=1): the backend refused"};
  Status st = check_as_read(bad, "e.json");
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("e.json: verdict: 'pass' contradicts 1 errors"), std::string::npos) << st.message;
  bad["verdict"] = "fail";  // the same error under a failing verdict is consistent
  bad["verdict_reasons"] = {"1 errors (listed in the receipt)"};
  st = check_as_read(bad, "e.json");
  EXPECT_TRUE(st.ok) << st.message;
}

// A receipt's name is a file name (report --merge-out writes DIR/<name>.json; "../../x" wrote
// outside DIR), a kv-gate's FIXTURE/FORMAT each part one; the compiled schema states the same.
TEST(ReceiptViews, CheckRefusesANameThatIsNoFileName) {
  for (const std::string& bad : std::vector<std::string>{"../../escaped", "..", ".", "", "a/b", "a\\b", std::string("a\0b", 3)}) {
    json r = contract_receipt();
    r["name"] = bad;
    const Status st = check_as_read(r, "n.json");
    EXPECT_FALSE(st.ok) << bad;
    EXPECT_EQ(st.message.rfind("n.json: name: ", 0), 0u) << st.message;
    EXPECT_NE(st.message.find("is not a file name"), std::string::npos) << st.message;
    r = bench_receipt();
    r["name"] = bad;
    EXPECT_FALSE(check_as_read(r, "b.json").ok) << bad;
  }
  json r = bench_receipt();
  r["name"] = "...";  // a name, if an odd one
  EXPECT_TRUE(check_as_read(r, "b.json").ok) << check_as_read(r, "b.json").message;
  // A kv-gate's is FIXTURE/FORMAT: the slash required, each side a file name.
  const json kv = committed("reports/h200/kv-gate-ci-q4-cuda.json");
  ASSERT_TRUE(check_as_read(kv, "kv.json").ok) << check_as_read(kv, "kv.json").message;
  for (const char* bad : {"kv-ci", "kv-ci/..", "kv-ci/", "kv-ci/a\\b", "../q4", "/q4", "kv-ci/q4/x"}) {
    json k = kv;
    k["name"] = bad;
    const Status st = check_as_read(k, "kv.json");
    EXPECT_NE(st.message.find("kv.json: name: "), std::string::npos) << bad << ": " << st.message;
    EXPECT_NE(st.message.find("is not FIXTURE/FORMAT, each part a file name"), std::string::npos) << bad << ": " << st.message;
  }
}

// started_at is a UTC time to the second with Z (the receipt schema's pattern), as every writer
// gives it: no local time, no offset, no fraction, no space for the T.
TEST(ReceiptViews, StartedAtIsUtcToTheSecondWithZ) {
  json r = contract_receipt();
  r["started_at"] = "2026-12-05T20:26:21Z";
  ASSERT_TRUE(check_as_read(r, "t.json").ok) << check_as_read(r, "t.json").message;
  for (const char* bad : {"yesterday", "2026-12-05T20:26:21", "2026-12-05T20:26:21+00:00", "2026-12-05 20:26:21Z",
                          "2026-12-05T20:26:21.5Z", "2026-12-05T20:26Z", "x2026-12-05T20:26:21Z", "2026-12-05T20:26:21Zx"}) {
    r["started_at"] = bad;
    const Status st = check_as_read(r, "t.json");
    EXPECT_FALSE(st.ok) << bad;
    EXPECT_EQ(st.message.rfind("t.json: started_at: ", 0), 0u) << bad << ": " << st.message;
  }
}

// report_command (the views' report) refuses a contract receipt of a contract this build does not
// register, as the command line's report does: exit 2, the file and the name said, nothing printed.
TEST(ReceiptViews, ReportCommandRefusesAnUnknownContract) {
  json r = contract_receipt();
  r["name"] = "no-such-contract";
  const std::string file = write_temp("unknown-contract.json", r.dump());
  std::ostringstream out, err;
  EXPECT_EQ(report_command({file}, ViewFormat::text, out, err), 2);
  EXPECT_EQ(out.str(), "");
  EXPECT_NE(err.str().find(file + ": name: 'no-such-contract' is not a known contract (known: "), std::string::npos)
      << err.str();
  r["name"] = "qwen-pages";
  const std::string known = write_temp("known-contract.json", r.dump());
  std::ostringstream out2, err2;
  EXPECT_EQ(report_command({known}, ViewFormat::text, out2, err2), 0) << err2.str();
}

// A contract run's pass needs a gate check that passed: every gate skipped (all red
// controls notwithstanding) is refused; the same counts under a failing verdict are not.
TEST(ReceiptViews, CheckRefusesARunnersPassWithNothingChecked) {
  json bad = contract_receipt();
  for (json& g : bad["gates"]) g["passed"] = 0, g["skipped"] = 4, g.erase("worst");
  Status st = check_as_read(bad, "n.json");
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("n.json: verdict: 'pass' with no gate check passed"), std::string::npos) << st.message;
  bad["verdict"] = "fail";
  bad["verdict_reasons"] = {"no gate check passed"};
  st = check_as_read(bad, "n.json");
  EXPECT_TRUE(st.ok) << st.message;
}

// argv says who wrote a receipt, and is as editable as the rest: a contract's receipt (a
// registered name) with argv emptied or naming another tool keeps the runner's rule (a control
// and a passed check), and any contract-kind pass, sanitize's included, needs a passed check.
// A pass with no gates and no controls once read as pass with argv [].
TEST(ReceiptViews, CheckKeepsTheRunnersRuleWhateverArgvSays) {
  for (const json& argv : {json::array(), json{"x", "sanitize"}, json{"tools/sanitize.py", "--bin"}}) {
    json r = contract_receipt();
    r["argv"] = argv;
    EXPECT_TRUE(check_as_read(r, "a.json").ok) << argv;
    r["controls"] = json::array();
    Status st = check_as_read(r, "a.json");
    EXPECT_NE(st.message.find("a.json: verdict: 'pass' with no control"), std::string::npos) << argv << st.message;
    r["gates"] = json::array();
    st = check_as_read(r, "a.json");
    EXPECT_FALSE(st.ok) << argv;
  }
  // sanitize's receipts judge their own runs (a receipt of extra runs has no controls), but a
  // pass still needs a check that passed.
  json s = contract_receipt();
  s["name"] = "sanitize";
  s["argv"] = {"tools/sanitize.py", "--bin", "b"};
  s["controls"] = json::array();
  EXPECT_TRUE(check_as_read(s, "s.json").ok) << check_as_read(s, "s.json").message;
  s["gates"] = json::array();
  const Status st = check_as_read(s, "s.json");
  EXPECT_NE(st.message.find("s.json: verdict: 'pass' with no gate check passed"), std::string::npos) << st.message;
}

// Smaller contradictions a tampered receipt once carried through report: a control's negative
// time, a gate named twice in caught_by, a contract run's pass with no case run, a serve-memory
// count of 2^64 - 1 (read as -1, under arena_bytes) or below 0, a generate receipt's negative
// count, time or token.
TEST(ReceiptViews, CheckRefusesNegativeCountsTimesAndRepeats) {
  auto refused = [](const json& r, const std::string& want) {
    const Status st = check_as_read(r, "m.json");
    EXPECT_NE(st.message.find(want), std::string::npos) << want << " / " << st.message;
  };
  json r = contract_receipt();
  r["controls"][0]["time_s"] = -1;
  refused(r, "m.json: controls[0].time_s: a time below 0");
  r = contract_receipt();
  r["controls"][0]["caught_by"] = {"attention-bound", "attention-bound"};
  refused(r, "m.json: controls[0].caught_by: \"attention-bound\" appears twice");
  r = contract_receipt();
  r["cases"]["run"] = 0;
  refused(r, "m.json: verdict: 'pass' with cases.run 0");

  const json mem = committed("reports/cpu-serve/serve-memory-qwen35-27b-attn-p4-c32768-fp8.json");
  ASSERT_TRUE(check_as_read(mem, "m.json").ok) << check_as_read(mem, "m.json").message;
  json m = mem;
  m["memory"]["arms"][0]["bytes_in_use"] = std::numeric_limits<uint64_t>::max();
  refused(m, "m.json: memory.arms[0].bytes_in_use: count 18446744073709551615 out of range");
  m = mem;
  m["memory"]["arms"][0]["admitted"] = -3;
  refused(m, "m.json: memory.arms[0].admitted: negative count -3");
  m = mem;
  m["memory"]["context"] = -1;
  refused(m, "m.json: memory.context: negative count -1");

  const json gen = committed("reports/h200/generate-fixture-cuda.json");
  ASSERT_TRUE(check_as_read(gen, "m.json").ok) << check_as_read(gen, "m.json").message;
  json g = gen;
  g["generate"]["cache_bytes"] = -5;
  refused(g, "m.json: generate.cache_bytes: negative count -5");
  g = gen;
  g["generate"]["decode_s"] = -0.5;
  refused(g, "m.json: generate.decode_s: below 0");
  g = gen;
  g["generate"]["tokens"][0] = -1;
  refused(g, "m.json: generate.tokens[0]: a token id below 0");
}

// build.id: the writer's GNU build id, hex or none; optional (older receipts, the Python
// tools' receipts have none).
TEST(ReceiptViews, BuildIdIsTheExecutablesAndChecked) {
  const std::string id = executable_build_id();
  EXPECT_TRUE(build_id_ok(id)) << id;
  EXPECT_NE(id, "none") << "this test binary was linked with a GNU build-id note (Debian's default, and the linker's "
                           "--build-id where CMake adds it)";
  EXPECT_EQ(id.size(), 40u) << id;  // sha1, the linker's default
  auto refused = [](const json& r, const std::string& want) {
    const Status st = check_as_read(r, "m.json");
    EXPECT_NE(st.message.find(want), std::string::npos) << want << " / " << st.message;
  };
  json r = contract_receipt();
  r["build"] = {{"id", id}};
  EXPECT_TRUE(check_as_read(r, "m.json").ok) << check_as_read(r, "m.json").message;
  r["build"]["id"] = "none";
  EXPECT_TRUE(check_as_read(r, "m.json").ok);
  r.erase("build");
  EXPECT_TRUE(check_as_read(r, "m.json").ok);
  r["build"] = "abc";
  refused(r, "m.json: build: expected an object, got a string");
  r["build"] = json::object();
  refused(r, "m.json: build.id: missing");
  for (const char* bad : {"", "ABCD", "abc", "xyz0", "none ", "0011\n"}) {
    r["build"] = {{"id", bad}};
    refused(r, "is not the executable's GNU build id");
  }
  r["build"] = {{"id", std::string(130, 'a')}};
  refused(r, "is not the executable's GNU build id");
}

// A receipt's strings (a case line from --case, a file name) reach a terminal, a Markdown
// comment and an HTML page: no control byte passes (ESC wrote terminal escapes, a lone CR split
// a Markdown table row), and no tag opener is live in Markdown or HTML.
TEST(ReceiptViews, ReportPrintsNoControlByteAndNoLiveTag) {
  json r = contract_receipt();
  r["gates"][1]["worst"]["case"] = std::string("qwen-pages(<script>x</script>\x1b[31m\r\x01|<!--)");
  const std::string file = write_temp("odd-strings.json", r.dump());
  for (const ViewFormat f : {ViewFormat::text, ViewFormat::md, ViewFormat::html}) {
    std::ostringstream out, err;
    ASSERT_EQ(report_command({file}, f, out, err), 0) << err.str();
    const std::string o = out.str();
    for (const char c : {'\x1b', '\r', '\x01'}) EXPECT_EQ(o.find(c), std::string::npos) << int(f) << ": " << int(c);
    if (f != ViewFormat::text) {
      EXPECT_EQ(o.find("<script>"), std::string::npos) << o;
      EXPECT_EQ(o.find("<!--"), std::string::npos) << o;
    }
    if (f == ViewFormat::md) EXPECT_NE(o.find("&lt;script>x&lt;/script>"), std::string::npos) << o;
  }
  EXPECT_EQ(control_free(std::string("a\x1b[1mb\r\n\tc\x7f", 11)), "a?[1mb?\n\tc?");
}

TEST(ReceiptViews, BadInputNamesFileFieldAndReason) {
  Receipt r;
  Status st = Receipt::load("/nonexistent/r.json", &r);
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("/nonexistent/r.json: no such file"), std::string::npos) << st.message;

  st = load_text("broken.json", "{\"schema\": ", &r);
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("not JSON"), std::string::npos) << st.message;

  json bad = contract_receipt();
  bad["gates"][1]["passed"] = "4";
  st = load_text("bad-gate.json", bad.dump(), &r);
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("bad-gate.json: gates[1].passed: expected an integer, got a string"), std::string::npos)
      << st.message;

  bad = contract_receipt();
  bad["schema"] = "something/else";
  st = load_text("bad-schema.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("schema: 'something/else' is not kernel-contracts/receipt/1"), std::string::npos)
      << st.message;

  bad = contract_receipt();
  bad["controls"][0].erase("red");
  st = load_text("no-red.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("controls[0].red: missing"), std::string::npos) << st.message;

  bad = contract_receipt();
  bad["verdict"] = "maybe";
  st = load_text("verdict.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("verdict: 'maybe' is not one of pass, fail"), std::string::npos) << st.message;

  bad = bench_receipt();
  bad["targets"][0]["met"] = 1;
  st = load_text("target.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("targets[0].met: expected a boolean, got a number"), std::string::npos) << st.message;

  bad = contract_receipt();
  bad["verdict_reasons"] = {"gate x failed 1 of 4 checks", 3};
  st = load_text("reasons.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("verdict_reasons[1]: expected a string, got a number"), std::string::npos) << st.message;

  bad = bench_receipt();
  bad.erase("rows");
  st = load_text("rows.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("rows: missing"), std::string::npos) << st.message;

  // A bench passes on its targets, never on none (a --filter that left out every target row).
  bad = bench_receipt();
  bad["targets"] = json::array();
  st = load_text("no-target.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("no-target.json: verdict: 'pass' with no target measured"), std::string::npos)
      << st.message;
  bad["verdict"] = "fail";
  bad["verdict_reasons"] = {"no row of 64 MiB or more selected"};
  EXPECT_TRUE(load_text("no-target-fail.json", bad.dump(), &r).ok);

  // A row's time that diff / premerge could not compare is refused, not skipped.
  bad = bench_receipt();
  bad["rows"][0]["median_us"] = "fast";
  st = load_text("row-time.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("row-time.json: rows[0].median_us: expected a time in us (a number >= 0), got a string"),
            std::string::npos)
      << st.message;
  bad = bench_receipt();
  bad["rows"][0]["median_us"] = -1.0;
  st = load_text("row-time2.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("rows[0].median_us: a time below 0"), std::string::npos) << st.message;
  bad = bench_receipt();
  bad["rows"][0]["reference_us"] = nullptr;
  st = load_text("row-time3.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("rows[0].reference_us: expected a time in us (a number >= 0), got null"), std::string::npos)
      << st.message;
  bad = bench_receipt();
  bad["rows"][0]["sdpa_flash_us"] = nullptr;  // SDPA not timed: allowed
  EXPECT_TRUE(load_text("row-sdpa.json", bad.dump(), &r).ok);
}

TEST(ReceiptViews, GenerateAndEngineBenchReceipts) {
  json r;
  ASSERT_TRUE(load_text("gen.json", generate_receipt().dump(), &r).ok);
  const std::string g = render_receipt(Receipt(r), "gen.json", ViewFormat::md);
  EXPECT_NE(g.find("(generate): pass"), std::string::npos) << g;
  EXPECT_NE(g.find("| kv cache | bf16, pages of 16 |"), std::string::npos) << g;
  EXPECT_NE(g.find("| decode | 1000.0 tok/s (1 tokens in 1 ms) |"), std::string::npos) << g;
  EXPECT_NE(g.find("| time to first token | 12.5 ms |"), std::string::npos) << g;
  json bad = generate_receipt();
  bad["generate"]["tokens"][1] = "x";
  Status st = load_text("gen-bad.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("generate.tokens[1]: expected an integer, got a string"), std::string::npos) << st.message;
  bad = generate_receipt();
  bad["generate"].erase("checkpoint_sha256");
  st = load_text("gen-bad2.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("generate.checkpoint_sha256: missing"), std::string::npos) << st.message;
  bad = generate_receipt();
  bad["seed"] = nullptr;  // null only for a bench
  st = load_text("gen-bad3.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("seed: expected an integer, got null"), std::string::npos) << st.message;

  ASSERT_TRUE(load_text("eng.json", engine_bench_receipt().dump(), &r).ok);
  const std::string e = render_receipt(Receipt(r), "eng.json", ViewFormat::md);
  EXPECT_NE(e.find("| m p8: ours (bf16 window) / transformers tok/s | 8 | >= 2 | met |"), std::string::npos) << e;
  EXPECT_NE(e.find("| config | format | addressing | engine | decode_tok_s | ours_over_transformers | step_us | "
                   "paged_over_window |"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("| m/p8 | bf16 | static | transformers | 2500.0 |  | 3200.0 |  |"), std::string::npos) << e;
  EXPECT_NE(e.find("| 8 | 32768 | 2000.0 | 300 | 4 | 0.6 |"), std::string::npos) << e;
  EXPECT_NE(e.find("| transformers | 5.17.0 |"), std::string::npos) << e;
  bad = engine_bench_receipt();
  bad["targets"][1]["met"] = false;  // contradicts 8 >= 2
  st = load_text("eng-bad.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("targets[1].met: false contradicts value 8 >= 2"), std::string::npos) << st.message;
  bad = engine_bench_receipt();
  bad.erase("transformers");
  st = load_text("eng-bad2.json", bad.dump(), &r);
  EXPECT_NE(st.message.find("transformers: missing"), std::string::npos) << st.message;
  bad = engine_bench_receipt();
  bad["targets"][0]["met"] = false;
  bad["targets"][0]["value"] = 1.2;
  ReceiptDiff d;
  ASSERT_TRUE(diff_receipts(Receipt(engine_bench_receipt()), "a", Receipt(bad), "b", &d).ok);
  EXPECT_EQ(d.regressions, 1) << d.text;
}

TEST(ReceiptViews, RendersGatesControlsAndTargets) {
  json r = contract_receipt();
  r["controls"][1]["red"] = false;
  const std::string md = render_receipt(Receipt(r), "r.json", ViewFormat::md);
  EXPECT_NE(md.find("| paged==window | ok | 4 | 0 | 0 | 4 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| attention-bound | ok | 4 | 0 | 0 | 4 | 0.0116 | qwen-pages(x=1): row 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| planted-row | GREEN (not caught) | paged==window |"), std::string::npos) << md;
  EXPECT_NE(md.find("'a\\|b'"), std::string::npos) << "a | in a cell is escaped: " << md;
  EXPECT_NE(md.find("| worst.fma | 0.0116 |"), std::string::npos) << md;
  EXPECT_EQ(md.find("failed because"), std::string::npos) << md;
  r["verdict"] = "fail";
  r["verdict_reasons"] = {"control planted-row stayed green"};
  EXPECT_NE(render_receipt(Receipt(r), "r.json", ViewFormat::md).find("| failed because | control planted-row stayed green |"),
            std::string::npos);
  const std::string text = render_receipt(Receipt(r), "r.json", ViewFormat::text);
  EXPECT_EQ(text.find("| paged==window"), std::string::npos) << text;
  EXPECT_NE(text.find("paged==window"), std::string::npos) << text;

  const std::string b = render_receipt(Receipt(bench_receipt()), "b.json", ViewFormat::md);
  EXPECT_NE(b.find("| bf16 of ceiling | 0.81 | >= 0.8 | met |"), std::string::npos) << b;
  EXPECT_NE(b.find("| config | format | addressing | median_us | of_ceiling |"), std::string::npos) << b;
  EXPECT_NE(b.find("| b8 | fp8 | window | 230 | 0.5 |"), std::string::npos) << b;
}

TEST(ReceiptViews, ANameWithALineBreakStaysInItsHeading) {
  json r = contract_receipt();
  r["name"] = "two\nlines";
  const std::string md = render_receipt(Receipt(r), "r.json", ViewFormat::md);
  EXPECT_NE(md.find("### two lines ("), std::string::npos) << md;
  EXPECT_EQ(md.find("two\nlines"), std::string::npos) << md;
  const std::string text = render_receipt(Receipt(r), "r.json", ViewFormat::text);
  EXPECT_NE(text.find("two lines ("), std::string::npos) << text;
  EXPECT_EQ(text.find("two\nlines"), std::string::npos) << text;
}

TEST(ReceiptViews, DiffOfAReceiptWithItselfHasNoRegression) {
  ReceiptDiff d;
  ASSERT_TRUE(diff_receipts(Receipt(contract_receipt()), "a", Receipt(contract_receipt()), "b", &d).ok);
  EXPECT_EQ(d.regressions, 0);
  EXPECT_EQ(d.improvements, 0);
  ASSERT_TRUE(diff_receipts(Receipt(bench_receipt()), "a", Receipt(bench_receipt()), "b", &d).ok);
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_NE(d.text.find("0 faster, 0 slower"), std::string::npos) << d.text;
}

TEST(ReceiptViews, DiffFindsEachKindOfRegression) {
  ReceiptDiff d;
  json head = contract_receipt();
  head["gates"][0]["ok"] = false;
  head["gates"][0]["passed"] = 3;
  head["gates"][0]["failed"] = 1;
  head["verdict"] = "fail";
  ASSERT_TRUE(diff_receipts(Receipt(contract_receipt()), "a", Receipt(head), "b", &d).ok);
  EXPECT_EQ(d.regressions, 2) << d.text;  // the gate and the verdict
  EXPECT_NE(d.text.find("gate paged==window ok -> FAIL"), std::string::npos) << d.text;

  head = contract_receipt();
  head["controls"][0]["red"] = false;
  ASSERT_TRUE(diff_receipts(Receipt(contract_receipt()), "a", Receipt(head), "b", &d).ok);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_NE(d.text.find("control dropped-key red -> GREEN"), std::string::npos) << d.text;

  head = contract_receipt();
  head["controls"].erase(1);
  head["gates"].erase(0);
  ASSERT_TRUE(diff_receipts(Receipt(contract_receipt()), "a", Receipt(head), "b", &d).ok);
  EXPECT_EQ(d.regressions, 2) << d.text;
  EXPECT_NE(d.text.find("control planted-row removed"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("gate paged==window removed"), std::string::npos) << d.text;

  head = contract_receipt();
  head["gates"][1]["worst"]["ratio"] = 0.5;
  head["numbers"]["worst"]["fma"] = 0.5;
  ASSERT_TRUE(diff_receipts(Receipt(contract_receipt()), "a", Receipt(head), "b", &d).ok);
  EXPECT_EQ(d.regressions, 0);
  EXPECT_NE(d.text.find("0.0116 -> 0.5"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("| worst.fma | 0.0116 | 0.5 |"), std::string::npos) << d.text;

  json hb = bench_receipt();
  hb["targets"][0]["met"] = false;
  hb["targets"][0]["value"] = 0.79;
  hb["rows"][0]["median_us"] = 330.0;
  ASSERT_TRUE(diff_receipts(Receipt(bench_receipt()), "a", Receipt(hb), "b", &d).ok);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_NE(d.text.find("target bf16 of ceiling: met -> NOT met"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("0 faster, 1 slower"), std::string::npos) << d.text;
  EXPECT_NE(d.text.find("| b8 bf16 window | median_us | 300 | 330 | 1.1 |"), std::string::npos) << d.text;

  json gone = bench_receipt();
  gone["targets"] = json::array();
  ASSERT_TRUE(diff_receipts(Receipt(bench_receipt()), "a", Receipt(gone), "b", &d).ok);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_NE(d.text.find("target bf16 of ceiling: met -> removed"), std::string::npos) << d.text;

  // A row the base ran (verified), missing from the head: its check went with it (mutation
  // sweep round 7, rv-bench-row-removed-note).
  json fewer = bench_receipt();
  fewer["rows"].erase(1);
  ASSERT_TRUE(diff_receipts(Receipt(bench_receipt()), "a", Receipt(fewer), "b", &d).ok);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_NE(d.text.find("row b8 fp8 window removed"), std::string::npos) << d.text;

  // Improvements are counted but are not regressions.
  ASSERT_TRUE(diff_receipts(Receipt(hb), "a", Receipt(bench_receipt()), "b", &d).ok);
  EXPECT_EQ(d.regressions, 0);
  EXPECT_EQ(d.improvements, 1);
}

// format_ratio: 4 significant digits, more where 4 would round a ratio across 1 from either
// side, so a worst ratio just over its bound never reads as 1 (mutation sweep round 7,
// receipt-format-ratio-hides-above-one).
TEST(ReceiptViews, FormatRatioNeverRoundsAcrossOne) {
  EXPECT_EQ(format_ratio(0.25), "0.25");
  EXPECT_EQ(format_ratio(1.0), "1");
  EXPECT_EQ(format_ratio(0.999999), "0.999999");
  EXPECT_EQ(format_ratio(1.00001), "1.00001");
  EXPECT_EQ(format_ratio(1.0000000000000002), "1.0000000000000002");
  EXPECT_EQ(format_ratio(std::nan("")), "nan");
}

TEST(ReceiptViews, DiffRefusesDifferentContracts) {
  ReceiptDiff d;
  json other = contract_receipt();
  other["name"] = "fp8-rows";
  const Status st = diff_receipts(Receipt(contract_receipt()), "a.json", Receipt(other), "b.json", &d);
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("a.json is contract 'qwen-pages' but b.json is contract 'fp8-rows'"), std::string::npos)
      << st.message;
}

// What a writer builds through Receipt passes the reader's checks, and a verdict the
// tables contradict does not.
TEST(ReceiptViews, AWrittenReceiptReadsBackAndAContradictionIsRefused) {
  GateStat ok{"paged==window", "d", 4, 0, 0, "", -1, "", "", {}, 0.5};
  GateStat bound{"attention-bound", "d", 3, 1, 0, "", 1.5, "c(x=1)", "row 0", {"c(x=1): row 0"}, 0.25};
  ControlStat red{"dropped-key", "d", true, {"attention-bound"}, {}, 0.1};
  ControlStat green{"planted-row", "d", false, {}, {}, 0.1};
  Receipt r(Receipt::Head{"contract", "qwen-pages", "cpu", json{{"name", "test cpu"}}, {"tf-cuda-test"}, uint64_t(7)});
  r.set_cases(4, 4, 0, "");
  r.add_gates({ok, bound});
  r.add_controls({red, green}, json{{"dropped-key", "seen"}});
  r.set_errors({});
  r.set_total_s(1.0);
  std::vector<std::string> why = gate_failure_reasons({ok, bound});
  for (const std::string& w : control_and_error_reasons({red, green}, 0)) why.push_back(w);
  EXPECT_EQ(why, (std::vector<std::string>{"gate attention-bound failed 1 of 4 checks", "control planted-row stayed green"}));
  r.set_verdict(false, why);
  EXPECT_TRUE(Receipt::check(r.doc(), "w.json").ok) << Receipt::check(r.doc(), "w.json").message;
  EXPECT_EQ(r.doc()["gates"][1]["status"], "FAIL");
  EXPECT_EQ(r.doc()["gates"][1]["worst"]["ratio"], 1.5);
  EXPECT_EQ(r.doc()["controls"][0]["seen"], "seen");
  EXPECT_FALSE(r.doc()["controls"][1].contains("seen"));
  EXPECT_EQ(r.seed_text(), "7");
  r.set_verdict(true, {});
  const Status st = Receipt::check(r.doc(), "w.json");
  EXPECT_NE(st.message.find("w.json: verdict: 'pass' contradicts gates[1] (attention-bound) failed"), std::string::npos)
      << st.message;
  // A run that skipped its controls (--gates-only) never reads back as a pass.
  Receipt g(Receipt::Head{"contract", "fp8-rows", "cpu", json{{"name", "test cpu"}}, {"tf-cuda-test"}, uint64_t(7)});
  g.add_gates({ok});
  g.set_total_s(1.0);
  g["controls_skipped"] = 3;
  g.set_verdict(false, {"controls skipped (--gates-only): 3 not run"});
  EXPECT_TRUE(Receipt::check(g.doc(), "g.json").ok) << Receipt::check(g.doc(), "g.json").message;
  g.set_verdict(true, {});
  EXPECT_NE(Receipt::check(g.doc(), "g.json").message.find("g.json: verdict: 'pass' contradicts controls_skipped 3"),
            std::string::npos);
}

ReceiptDiff gate_diff(const json& b, const json& h) {
  ReceiptDiff d;
  const Status st = diff_receipts(Receipt(b), "base.json", Receipt(h), "head.json", &d);
  EXPECT_TRUE(st.ok) << st.message;
  return d;
}

bool says(const ReceiptDiff& d, const std::string& s) { return d.text.find(s) != std::string::npos; }

// kv-gate, per depth: mean and worst-token KL regress above max(1.25 x the base's, the base's
// + 0.1 of the bar), each limit tried on both sides (docs/design.md, "What counts").
TEST(ReceiptViews, GateDiffKlLimitIsTheLargerOfRatioAndBarFloor) {
  const json base = committed("reports/h200/kv-gate-ci-q4-cuda.json");  // bar: mean 0.01, worst-token 0.1
  ASSERT_EQ(gate_diff(base, base).regressions, 0);
  struct Edge { const char* key; const char* label; double bar; };
  for (const Edge e : {Edge{"mean_kl", "mean KL", 0.01}, Edge{"worst_kl", "worst-token KL", 0.1}}) {
    SCOPED_TRACE(e.key);
    auto with = [&](double vb, double vh) {
      json b = base, h = base;
      b["kv"]["depths"][0][e.key] = vb;
      h["kv"]["depths"][0][e.key] = vh;
      return gate_diff(b, h);
    };
    const std::string at = std::string("kv depth 32: ") + e.label + " ";
    // The ratio decides (vb = 1: 1.25 x is above vb + 0.1 bar).
    ReceiptDiff d = with(1.0, 1.24);
    EXPECT_EQ(d.regressions, 0) << d.text;
    d = with(1.0, 1.26);
    EXPECT_EQ(d.regressions, 1) << d.text;
    EXPECT_TRUE(says(d, at + "1 -> 1.26")) << d.text;
    // The bar floor decides (vb = 0.01 bar: 1.25 x is below vb + 0.1 bar): 5x the base is noise.
    const double vb = 0.01 * e.bar;
    d = with(vb, 5 * vb);
    EXPECT_EQ(d.regressions, 0) << d.text;
    d = with(vb, vb + 0.11 * e.bar);
    EXPECT_EQ(d.regressions, 1) << d.text;
    EXPECT_TRUE(says(d, at)) << d.text;
  }
}

// Top-1 agreement regresses when down by more than max(0.02, 2 / rows).
TEST(ReceiptViews, GateDiffTop1SlackIsTheLargerOf2PercentAnd2Rows) {
  auto with = [](json r, double drop) {
    json h = r;
    h["kv"]["depths"][0]["top1_agreement"] = r["kv"]["depths"][0]["top1_agreement"].get<double>() - drop;
    return gate_diff(r, h);
  };
  const json ci = committed("reports/h200/kv-gate-ci-q4-cuda.json");  // 32 rows: 2 / rows = 0.0625
  ASSERT_EQ(ci["kv"]["depths"][0]["rows"], 32);
  EXPECT_EQ(with(ci, 0.06).regressions, 0);
  ReceiptDiff d = with(ci, 0.07);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "kv depth 32: top-1 agreement")) << d.text;
  const json lg = committed("reports/h200/kv-gate-long-q4.json");  // 256 rows: 0.02 wins over 2 / rows
  ASSERT_EQ(lg["kv"]["depths"][0]["rows"], 256);
  EXPECT_EQ(with(lg, 0.019).regressions, 0);
  EXPECT_EQ(with(lg, 0.021).regressions, 1);
}

// A depth removed; a recall probe recalled -> uninformative, or removed.
TEST(ReceiptViews, GateDiffDepthAndProbeRemovedAndRecallLost) {
  const json ci = committed("reports/h200/kv-gate-ci-q4-cuda.json");
  json h = ci;
  h["kv"]["depths"].erase(1);
  ReceiptDiff d = gate_diff(ci, h);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "kv depth 160 removed")) << d.text;

  const json lg = committed("reports/h200/kv-gate-long-q4.json");
  ASSERT_EQ(lg["kv"]["recall"][0]["outcome"], "recalled");
  h = lg;
  h["kv"]["recall"][0]["outcome"] = "uninformative";
  h["kv"]["recall"][0]["bf16"]["recalled"] = false;
  h["kv"]["recall"][0]["quant"]["recalled"] = false;
  d = gate_diff(lg, h);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "recall probe passphrase#0@1024: recalled -> uninformative")) << d.text;
  h = lg;
  h["kv"]["recall"].erase(0);
  d = gate_diff(lg, h);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "recall probe passphrase#0@1024 removed (recalled in the base)")) << d.text;
  // Base and head are not interchangeable: lost -> recalled is an improvement, not a regression.
  d = gate_diff(h, lg);
  EXPECT_EQ(d.regressions, 0) << d.text;
}

// A recall probe's outcome follows from its two arms: bf16 recalled and the quantised arm
// not is "lost", never "uninformative" (that would hide the loss from diff).
TEST(ReceiptViews, RecallOutcomeFollowsFromBothArms) {
  const json lg = committed("reports/h200/kv-gate-long-q4.json");
  ASSERT_EQ(lg["kv"]["recall"][0]["outcome"], "recalled");
  json r = lg;
  r["kv"]["recall"][0]["quant"]["recalled"] = false;
  r["kv"]["recall"][0]["outcome"] = "lost";
  Status st = Receipt::check(r, "k.json");
  EXPECT_TRUE(st.ok) << st.message;
  r["kv"]["recall"][0]["outcome"] = "uninformative";
  st = Receipt::check(r, "k.json");
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("kv.recall[0].outcome: 'uninformative' contradicts bf16.recalled true and quant.recalled "
                            "false (which say 'lost')"),
            std::string::npos)
      << st.message;
}

// A kv-gate pass is checked against its own bar and recall: the bar is required (without it a
// depth of mean KL 50 read as pass), a lost probe contradicts a pass, and diff counts
// uninformative -> lost (the bf16 arm recalls it now, the cache does not) as a regression.
TEST(ReceiptViews, KvGatePassNeedsItsBarAndNoLostRecall) {
  const json ok = committed("reports/h200/audit-0420bd5/kv-ci-fp8-cuda.json");
  ASSERT_EQ(ok["verdict"], "pass");
  ASSERT_TRUE(Receipt::check(ok, "k.json").ok) << Receipt::check(ok, "k.json").message;
  json r = ok;
  r["kv"].erase("bar");
  Status st = Receipt::check(r, "k.json");
  EXPECT_NE(st.message.find("k.json: kv.bar: missing"), std::string::npos) << st.message;
  r = ok;
  r["kv"]["bar"]["mean_kl"] = "0.01";
  st = Receipt::check(r, "k.json");
  EXPECT_NE(st.message.find("k.json: kv.bar.mean_kl: expected a number"), std::string::npos) << st.message;
  r = ok;
  ASSERT_FALSE(r["kv"]["recall"].empty());
  json& p = r["kv"]["recall"][0];
  p["bf16"]["recalled"] = true;
  p["quant"]["recalled"] = false;
  p["outcome"] = "lost";
  st = Receipt::check(r, "k.json");
  EXPECT_NE(st.message.find("k.json: verdict: 'pass' contradicts kv.recall[0] (" + p["probe"].get<std::string>() + ") lost"),
            std::string::npos)
      << st.message;
  r["verdict"] = "fail";
  r["verdict_reasons"] = {"recall lost"};
  ASSERT_TRUE(Receipt::check(r, "k.json").ok) << Receipt::check(r, "k.json").message;
  json base = ok;
  base["kv"]["recall"][0]["bf16"]["recalled"] = false;
  base["kv"]["recall"][0]["quant"]["recalled"] = false;
  base["kv"]["recall"][0]["outcome"] = "uninformative";
  const ReceiptDiff d = gate_diff(base, r);
  EXPECT_TRUE(says(d, "recall probe " + p["probe"].get<std::string>() + "@" + p["depth"].dump() + ": uninformative -> lost"))
      << d.text;
}

// The backend is set aside when commands are compared; "checks fewer" counts on the same
// device only; a fixture's sha256 change is a note.
TEST(ReceiptViews, GateDiffCommandsChecksAndFixture) {
  const json cuda = committed("reports/h200/serve-ci.json");  // serve-gate fixtures/serve/ci.json --backend cuda
  json cpu = cuda;
  cpu["backend"] = "cpu";
  cpu["device"] = {{"name", "test cpu"}};
  cpu["argv"] = {"build-cpu/tools/tf-cuda-test", "serve-gate", "fixtures/serve/ci.json", "--backend", "cpu", "--out", "/tmp/s.json"};
  ReceiptDiff d = gate_diff(cuda, cpu);
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_FALSE(says(d, "another command")) << d.text;
  // ... but another flag is another command.
  json q4 = cpu;
  q4["argv"].push_back("--kv-cache");
  q4["argv"].push_back("q4");
  d = gate_diff(cpu, q4);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "another command")) << d.text;

  // An ok gate that checks fewer: a regression on the same device, said but not counted across backends.
  json fewer = cuda;
  fewer["gates"][0]["passed"] = 20;
  fewer["gates"][0]["total"] = 20;
  d = gate_diff(cuda, fewer);
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "gate concurrent == solo checks fewer: passed 30/30 -> 20/20")) << d.text;
  d = gate_diff(fewer, cuda);  // more checks: not a regression
  EXPECT_EQ(d.regressions, 0) << d.text;
  json fewer_cpu = cpu;
  fewer_cpu["gates"][0]["passed"] = 20;
  fewer_cpu["gates"][0]["total"] = 20;
  d = gate_diff(cuda, fewer_cpu);
  EXPECT_EQ(d.regressions, 0) << d.text;

  json other = cuda;
  other["fixture_sha256"] = std::string(64, '0');
  d = gate_diff(cuda, other);
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_TRUE(says(d, "the fixture changed (sha256 ")) << d.text;
}

// diff compares what two gate commands mean: the fixture by its content (fixture_sha256), however
// its path is spelled, and the options that change the measurement in any order; an option of
// another value (or one added) is still another command.
TEST(ReceiptViews, GateDiffComparesWhatTheCommandMeans) {
  const json base = committed("reports/h200/serve-ci-q4.json");
  auto with_argv = [&](const json& r, std::vector<std::string> words) {
    json x = r;
    x["argv"] = words;
    return x;
  };
  const json b = with_argv(base, {"tf-cuda-test", "serve-gate", "fixtures/serve/ci.json", "--backend", "cuda",
                                  "--kv-cache", "q4", "--out", "r.json"});
  // ./ and an absolute path: the same fixture (its sha256), named in a note.
  for (const char* spelled : {"./fixtures/serve/ci.json", "/home/ci/kc/fixtures/serve/ci.json"}) {
    SCOPED_TRACE(spelled);
    ReceiptDiff d = gate_diff(b, with_argv(base, {"tf-cuda-test", "serve-gate", spelled, "--backend", "cuda",
                                                  "--kv-cache", "q4"}));
    EXPECT_EQ(d.regressions, 0) << d.text;
    EXPECT_FALSE(says(d, "another command")) << d.text;
    EXPECT_TRUE(says(d, std::string("the fixture is spelled fixtures/serve/ci.json in the base and ") + spelled)) << d.text;
  }
  // Options in another order, "--x=v" for "--x v", --junit and --out anywhere.
  ReceiptDiff d = gate_diff(b, with_argv(base, {"tf-cuda-test", "serve-gate", "--junit", "j.xml", "--kv-cache=q4",
                                                "--backend", "cuda", "fixtures/serve/ci.json", "--out", "o.json"}));
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_FALSE(says(d, "another command")) << d.text;
  // Another value of a measuring option, or one dropped: another command, named.
  d = gate_diff(b, with_argv(base, {"tf-cuda-test", "serve-gate", "fixtures/serve/ci.json", "--kv-cache", "fp8",
                                    "--backend", "cuda"}));
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "another command: the base ran `serve-gate fixtures/serve/ci.json --backend cuda --kv-cache q4`, "
                      "the head `serve-gate fixtures/serve/ci.json --kv-cache fp8 --backend cuda` (--kv-cache q4 -> fp8)"))
      << d.text;
  d = gate_diff(b, with_argv(base, {"tf-cuda-test", "serve-gate", "./fixtures/serve/ci.json", "--backend", "cuda"}));
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "(--kv-cache q4 -> none)")) << d.text;
  // Spelled otherwise and of other content: the fixture changed, never "the same file content".
  json other = with_argv(base, {"tf-cuda-test", "serve-gate", "./fixtures/serve/ci.json", "--backend", "cuda",
                                "--kv-cache", "q4"});
  other["fixture_sha256"] = std::string(64, 'a');
  d = gate_diff(b, other);
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_TRUE(says(d, "the fixture changed (sha256 ")) << d.text;
  EXPECT_FALSE(says(d, "the same file content")) << d.text;

  // kv-gate: the reordering and the spelling of the reviewer's example; --format q4 against fp8.
  const json kv = committed("reports/h200/kv-gate-ci-q4-cuda.json");
  const json kb = with_argv(kv, {"tf-cuda-test", "kv-gate", "--backend", "cuda", "--format", "q4", "fixtures/kv/ci.json",
                                 "--bf16-cache", "c1"});
  d = gate_diff(kb, with_argv(kv, {"tf-cuda-test", "kv-gate", "./fixtures/kv/ci.json", "--format", "q4", "--backend",
                                   "cuda", "--bf16-cache=c2", "--out", "kv.json"}));
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_FALSE(says(d, "another command")) << d.text;
  d = gate_diff(kb, with_argv(kv, {"tf-cuda-test", "kv-gate", "fixtures/kv/ci.json", "--format", "fp8", "--backend",
                                   "cuda"}));
  EXPECT_EQ(d.regressions, 1) << d.text;
  EXPECT_TRUE(says(d, "(--format q4 -> fp8)")) << d.text;
  // The same path with another content stays a note (the fixture changed), not another command.
  json changed = kb;
  changed["fixture_sha256"] = std::string(64, 'a');
  d = gate_diff(kb, changed);
  EXPECT_EQ(d.regressions, 0) << d.text;
  EXPECT_TRUE(says(d, "the fixture changed (sha256 ")) << d.text;

  // What the words mean, option by option.
  const GateMeaning m = gate_meaning({"kv-gate", "--quiet", "a.json", "--format=q4", "--bf16-only", "--out", "x"});
  EXPECT_EQ(m.subcommand, "kv-gate");
  EXPECT_EQ(m.positional, std::vector<std::string>{"a.json"});
  EXPECT_EQ(m.options, (std::map<std::string, std::vector<std::string>>{{"--format", {"q4"}}, {"--bf16-only", {""}}}));
}

// Receipt::check reads the fields that only gate receipts carry, as the writers write them
// (engine/serve_gate.cpp, engine/kv_gate.cpp): each mutation exits 2 naming the field.
TEST(ReceiptViews, GateReceiptFieldsAreChecked) {
  const json sg = committed("reports/h200/serve-ci.json");
  ASSERT_TRUE(Receipt::check(sg, "sg.json").ok) << Receipt::check(sg, "sg.json").message;
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"arms a string", [](json& r) { r["arms"] = "x"; }, "sg.json: arms: expected an array, got a string"},
      {"arms removed", [](json& r) { r.erase("arms"); }, "sg.json: arms: missing"},
      {"an arm's format", [](json& r) { r["arms"][0]["format"] = "fp7"; },
       "sg.json: arms[0].format: \"fp7\" is not one of bf16, fp8, q4, mxfp4 (receipt schema)"},
      {"decode_tok_s as text", [](json& r) { r["arms"][0]["decode_tok_s"] = "fast"; },
       "sg.json: arms[0].decode_tok_s: expected a number, got a string"},
      {"a token as text", [](json& r) { r["arms"][1]["tokens"][0][0] = "a"; },
       "sg.json: arms[1].tokens[0][0]: expected an integer, got a string"},
      {"a negative count", [](json& r) { r["arms"][0]["rounds"] = -3; }, "sg.json: arms[0].rounds: -3 is below the minimum 0 (receipt schema)"},
      {"a time below 0", [](json& r) { r["arms"][0]["wall_s"] = -1.0; }, "sg.json: arms[0].wall_s: -1.0 is below the minimum 0 (receipt schema)"},
      // serve-gate wrote -(requests) / time for arms whose requests stopped at <|eos|> at once
      // (unusual inputs round 3, fixed in c9ff7a4): a rate is never below 0.
      {"a decode rate below 0", [](json& r) { r["arms"][0]["decode_tok_s"] = -528.0; },
       "sg.json: arms[0].decode_tok_s: -528.0 is below the minimum 0 (receipt schema)"},
      {"a draft count", [](json& r) {
         for (auto& a : r["arms"])
           if (a.contains("draft")) {
             a["draft"]["accepted"] = 1.5;
             break;
           }
       },
       ".draft.accepted: expected an integer, got a number"},
      {"fixture a number", [](json& r) { r["fixture"] = 5; }, "sg.json: fixture: expected a string, got a number"},
      {"model a number", [](json& r) { r["model"] = 5; }, "sg.json: model: expected a string, got a number"},
      {"arm_fields a number", [](json& r) { r["arm_fields"] = 5; }, "sg.json: arm_fields: expected an object, got a number"},
      {"arm_fields of a number", [](json& r) { r["arm_fields"]["wall_s"] = 5; },
       "sg.json: arm_fields.wall_s: expected a string, got a number"},
      {"fixture_sha256 removed", [](json& r) { r.erase("fixture_sha256"); }, "sg.json: fixture_sha256: missing"},
      {"fixture_sha256 not a sha256", [](json& r) { r["fixture_sha256"] = "abc"; },
       "sg.json: fixture_sha256: expected 64 lowercase hex digits"},
      {"fixture_sha256 in upper case", [](json& r) { r["fixture_sha256"] = std::string(64, 'A'); },
       "sg.json: fixture_sha256: expected 64 lowercase hex digits"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    json bad = sg;
    k.edit(bad);
    const Status st = Receipt::check(bad, "sg.json");
    EXPECT_FALSE(st.ok);
    EXPECT_NE(st.message.find(k.says), std::string::npos) << st.message;
  }
  // What a cpu run writes: no device memory (null), no time to first token taken (null).
  json cpu = sg;
  cpu["arms"][0]["peak_device_memory_bytes"] = nullptr;
  cpu["arms"][0]["time_to_first_token_unwarmed_s"] = nullptr;
  EXPECT_TRUE(Receipt::check(cpu, "sg.json").ok) << Receipt::check(cpu, "sg.json").message;
  // A receipt from before the arms' later fields (reports/cpu-serve/serve-ci.json) still loads.
  const json old = committed("reports/cpu-serve/serve-ci.json");
  EXPECT_TRUE(Receipt::check(old, "old.json").ok) << Receipt::check(old, "old.json").message;

  const json kv = committed("reports/h200/kv-gate-ci-q4-cuda.json");
  for (const char* k : {"fixture", "model"}) {
    json bad = kv;
    bad[k] = 1;
    const Status st = Receipt::check(bad, "kv.json");
    EXPECT_NE(st.message.find(std::string("kv.json: ") + k + ": expected a string, got a number"), std::string::npos)
        << st.message;
  }
  json bad = kv;
  bad.erase("fixture_sha256");
  EXPECT_NE(Receipt::check(bad, "kv.json").message.find("kv.json: fixture_sha256: missing"), std::string::npos);
  // A depth's decode rates are never below 0 either.
  bad = kv;
  bad["kv"]["depths"][0]["decode_tok_s"]["quant"] = -1.0;
  EXPECT_NE(Receipt::check(bad, "kv.json").message.find("kv.json: kv.depths[0].decode_tok_s.quant: -1.0 is below the minimum 0"),
            std::string::npos)
      << Receipt::check(bad, "kv.json").message;
}

// Receipt::check: a kv depth's verdict is its bar's, mean and worst-token KL at or under it.
TEST(ReceiptViews, KvDepthVerdictIsTheBars) {
  // reports/h200/kv-gate-long-fp8.json: depths 1024 and 8192 pass; 32768 fails on worst-token KL
  // alone (mean 0.007 <= 0.01, worst 0.144 > 0.1).
  const json r = committed("reports/h200/kv-gate-long-fp8.json");
  ASSERT_EQ(r["kv"]["depths"][2]["verdict"], "fail");
  ASSERT_LE(r["kv"]["depths"][2]["mean_kl"].get<double>(), 0.01);
  EXPECT_TRUE(Receipt::check(r, "k.json").ok) << Receipt::check(r, "k.json").message;
  json bad = r;
  bad["kv"]["depths"][0]["verdict"] = "fail";
  Status st = Receipt::check(bad, "k.json");
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("kv.depths[0].verdict: 'fail' contradicts mean_kl"), std::string::npos) << st.message;
  bad = r;
  bad["kv"]["depths"][2]["verdict"] = "pass";
  EXPECT_FALSE(Receipt::check(bad, "k.json").ok);
  // At the bar is under it.
  json at = r;
  at["kv"]["depths"][0]["mean_kl"] = 0.01;
  at["kv"]["depths"][0]["worst_kl"] = 0.1;
  st = Receipt::check(at, "k.json");
  EXPECT_TRUE(st.ok) << st.message;
}

// An at-least target whose value equals its limit is met (and an at-most one too).
TEST(ReceiptViews, ATargetAtItsLimitIsMet) {
  json r = engine_bench_receipt();
  r["targets"][1]["value"] = 2.0;  // >= 2
  r["targets"][0]["value"] = 1.05;  // <= 1.05
  Status st = Receipt::check(r, "eng.json");
  EXPECT_TRUE(st.ok) << st.message;
  r["targets"][1]["met"] = false;
  st = Receipt::check(r, "eng.json");
  EXPECT_NE(st.message.find("targets[1].met: false contradicts value 2 >= 2"), std::string::npos) << st.message;
}

// Receipt::check: a kv depth given twice is refused wherever the two entries are, next to
// each other included.
TEST(ReceiptViews, KvDepthGivenTwiceIsRefusedEvenNextToItself) {
  const json r = committed("reports/h200/kv-gate-long-fp8.json");
  ASSERT_GE(r["kv"]["depths"].size(), 3u);
  for (size_t i : {size_t(1), size_t(2)}) {
    json bad = r;
    bad["kv"]["depths"][i]["depth"] = bad["kv"]["depths"][0]["depth"];
    const Status st = Receipt::check(bad, "k.json");
    EXPECT_FALSE(st.ok) << i;
    EXPECT_NE(st.message.find("kv.depths[" + std::to_string(i) + "].depth: 1024 appears twice"), std::string::npos)
        << st.message;
  }
}

// cases.shard is i/n as --shard writes it: no shard 0 and no leading zero.
TEST(ReceiptViews, ShardFieldHasNoZeroOrLeadingZero) {
  json r = committed("reports/cpu/rows-invariant.json");
  r["cases"]["shard"] = "1/2";
  Status st = Receipt::check(r, "s.json");
  EXPECT_TRUE(st.ok) << st.message;
  for (const char* bad : {"0/2", "02/4", "1/04", "1/0"}) {
    r["cases"]["shard"] = bad;
    st = Receipt::check(r, "s.json");
    EXPECT_NE(st.message.find("cases.shard: expected a string i/n"), std::string::npos) << bad << ": " << st.message;
  }
}

// The command premerge replays for a gate receipt: its argv less the files it wrote (--out,
// --junit, --bf16-cache, spelled "--x v" or "--x=v"); a serve-gate that kernel-contract wrote
// stands for `serve-gate FIXTURE --backend B`, the fixture relative to the repository.
TEST(ReceiptViews, GateCommandDropsWrittenFilesAndMapsKernelContract) {
  using V = std::vector<std::string>;
  std::string why;
  json kv = {{"kind", "kv-gate"},
             {"argv", {"build/tools/tf-cuda-test", "kv-gate", "fixtures/kv/ci.json", "--junit", "j.xml", "--backend",
                       "cuda", "--out=r.json", "--bf16-cache", "c", "--junit=k.xml", "--depths", "64"}}};
  EXPECT_EQ(gate_command(kv, &why), (V{"kv-gate", "fixtures/kv/ci.json", "--backend", "cuda", "--depths", "64"})) << why;
  EXPECT_EQ(gate_command_sans_backend(gate_command(kv, &why)), (V{"kv-gate", "fixtures/kv/ci.json", "--depths", "64"}));
  // What premerge runs: the replay writes its own receipt, and a kv-gate its own bf16 arm.
  EXPECT_EQ(replay_args(kv, "h/kv.json", "h/cache", &why),
            (V{"kv-gate", "fixtures/kv/ci.json", "--backend", "cuda", "--depths", "64", "--out", "h/kv.json",
               "--bf16-cache", "h/cache"}))
      << why;
  json sg = {{"kind", "serve-gate"},
             {"argv", {"tf-cuda-test", "kernel-contract", "--out-dir", "r", "--junit", "j.xml"}},
             {"fixture", "/home/ci/kc/fixtures/serve/ci.json"},
             {"backend", "cpu"}};
  EXPECT_EQ(gate_command(sg, &why), (V{"serve-gate", "fixtures/serve/ci.json", "--backend", "cpu"})) << why;
  EXPECT_EQ(replay_args(sg, "h/serve-gate.json", "h/cache", &why),
            (V{"serve-gate", "fixtures/serve/ci.json", "--backend", "cpu", "--out", "h/serve-gate.json"}));
  sg.erase("fixture");
  why.clear();
  EXPECT_TRUE(gate_command(sg, &why).empty());
  EXPECT_NE(why.find("without its fixture"), std::string::npos) << why;
  // Another command under a gate's kind is no gate command.
  json other = {{"kind", "kv-gate"}, {"argv", {"tf-cuda-test", "serve-gate", "fixtures/serve/ci.json"}}};
  why.clear();
  EXPECT_TRUE(gate_command(other, &why).empty());
  EXPECT_NE(why.find("argv[1] must be kv-gate"), std::string::npos) << why;
}

// What an error message calls each JSON type (contracts/json_type.h), and a receipt field that
// is null where a string belongs is named as null, not as an object.
TEST(ReceiptViews, JsonTypesAreNamedAsTheyAre) {
  EXPECT_EQ(json_type_name(json()), "null");
  EXPECT_EQ(json_type_name(json(true)), "a boolean");
  EXPECT_EQ(json_type_name(json(1.5)), "a number");
  EXPECT_EQ(json_type_name(json(3)), "a number");
  EXPECT_EQ(json_type_name(json("x")), "a string");
  EXPECT_EQ(json_type_name(json::array()), "an array");
  EXPECT_EQ(json_type_name(json::object()), "an object");
  json r = contract_receipt();
  r["name"] = nullptr;
  const Status st = Receipt::check(r, "n.json");
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("got null"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace kc
