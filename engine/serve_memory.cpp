#include "engine/serve_memory.h"

#include <algorithm>
#include <chrono>

#include <nlohmann/json.hpp>

#include "contracts/framework.h"
#include "engine/make_model.h"
#include "engine/pool.h"
#include "engine/serve.h"

namespace kc::engine {

namespace {

using json = nlohmann::json;

struct ArmResult {
  json j;
  std::vector<std::string> refused;          // one line per request not admitted
  std::vector<std::string> why;              // per request: "" admitted, else why not
  std::vector<std::string> planning_errors;  // runs refused at planning
  int pages_taken = 0;
};

// Admits request i on lane i as serve() does at its first round and records the pool.
ArmResult measure_arm(const std::string& name, const std::string& what, const ServeConfig& cfg, const KvLayout& lay,
                      const KvLayout* dlay, const std::vector<int>& prompts, int max_tokens, bool plant_run_short) {
  ArmResult r;
  const ServeArena plan = plan_serve_arena(cfg, lay, dlay);
  Pool pool(plan.arena_bytes, plan.page_stride);
  const int P = cfg.page;
  json lanes = json::array();
  uint64_t run_bytes_claimed = 0;
  r.why.assign(prompts.size(), "");
  for (int l = 0; l < cfg.parallel; ++l) {
    json lj = {{"lane", l}, {"kind", plan.window[l] ? "window" : "paged"}};
    if (l >= int(prompts.size())) {
      lj["request"] = nullptr;
      lanes.push_back(lj);
      continue;
    }
    const int64_t positions = serve_positions(cfg, prompts[l], max_tokens);
    const int pages = plan.window[l] ? 0 : int((positions + P - 1) / P);
    lj["request"] = {{"prompt", prompts[l]}, {"max_tokens", max_tokens}, {"positions", positions}};
    const std::string who = "request " + std::to_string(l) + " (lane " + std::to_string(l) + ")";
    auto refuse = [&](int i, const std::string& why) {
      r.why[size_t(i)] = why;
      r.refused.push_back(why);
    };
    if (pages > pool.free_pages()) {
      refuse(l, who + ": needs " + std::to_string(pages) + " pages, " + std::to_string(pool.free_pages()) +
                          " free");
      lanes.push_back(lj);
      continue;
    }
    std::vector<RunPart> parts = plan.parts[l];
    uint64_t rb = run_bytes_for(parts);
    if (plant_run_short && !parts.empty()) rb = run_bytes_for(std::vector<RunPart>(parts.begin(), parts.end() - 1));
    uint64_t off = 0;
    if (!parts.empty()) {
      Status st = plan_run(&parts, rb);
      if (!st.ok) {
        r.planning_errors.push_back("lane " + std::to_string(l) + ": " + st.message);
        refuse(l, who + ": " + st.message);
        lanes.push_back(lj);
        continue;
      }
      st = pool.claim_run(l, parts, rb, &off);
      if (!st.ok) {
        refuse(l, who + ": " + st.message);
        lanes.push_back(lj);
        continue;
      }
      run_bytes_claimed += rb;
      json pj = json::array();
      for (const RunPart& p : parts) pj.push_back({{"name", p.name}, {"bytes", p.bytes}, {"offset", off + p.offset}});
      lj["run"] = {{"offset", off}, {"bytes", rb}, {"parts", pj}};
    }
    if (pages > 0) {
      std::vector<int32_t> taken;
      if (!pool.take_pages(l, pages, &taken)) {
        pool.release_run(l, 0);
        pool.retire(0);
        refuse(l, who + ": needs " + std::to_string(pages) + " pages below the runs, " +
                            std::to_string(pool.free_pages()) + " free");
        lanes.push_back(lj);
        continue;
      }
      lj["pages"] = {{"count", pages}, {"first", taken.front()}, {"last", taken.back()}};
    }
    lanes.push_back(lj);
  }
  r.pages_taken = pool.pages_in_use();
  const uint64_t page_bytes = uint64_t(r.pages_taken) * plan.page_stride;
  r.j = {{"arm", name},
         {"what", what},
         {"page", P},
         {"pool_pages", cfg.pool_pages},
         {"page_stride", plan.page_stride},
         {"arena_bytes", plan.arena_bytes},
         {"bytes_fixed_per_lane", plan.run_bytes},
         {"pages_taken", r.pages_taken},
         {"page_bytes_taken", page_bytes},
         {"run_bytes_claimed", run_bytes_claimed},
         {"bytes_in_use", page_bytes + run_bytes_claimed},
         {"free_pages_after", pool.free_pages()},
         {"admitted", int(prompts.size()) - int(r.refused.size())},
         {"refused", r.refused},
         {"lanes", lanes}};
  return r;
}

bool parse_format(const std::string& s, Format* f) {
  if (s == "bf16") *f = Format::bf16;
  else if (s == "fp8") *f = Format::fp8;
  else if (s == "q4") *f = Format::q4;
  else if (s == "mxfp4") *f = Format::mxfp4;
  else return false;
  return true;
}

}  // namespace

int serve_memory_command(const ServeMemoryCommand& cmd, std::ostream& out, std::ostream& err) {
  const auto bad = [&](const std::string& why) {
    err << "tf-cuda-test: error: serve-memory: " << why << "\n";
    return 2;
  };
  Qwen3Config c;
  {
    const Status st = qwen3_preset(cmd.preset, cmd.layers, &c);
    if (!st.ok) return bad(st.message);
  }
  Format fmt;
  if (!parse_format(cmd.kv_cache, &fmt)) return bad("--kv-cache " + cmd.kv_cache + ": expected bf16, fp8, q4 or mxfp4");
  if ((fmt == Format::q4 || fmt == Format::mxfp4) && c.head_dim % 32)
    return bad("--kv-cache " + cmd.kv_cache + ": head_dim is not a multiple of 32");
  if (cmd.pool_pages < 0)
    return bad("--pool-pages " + std::to_string(cmd.pool_pages) + ": must be at least 1 (leave it out for the default)");
  if (cmd.parallel < 1 || cmd.parallel > 64) return bad("--parallel " + std::to_string(cmd.parallel) + ": must be in 1..64");
  // The serve fixture's bounds: a lane of at most 2^20 positions, a pool of at most 64 such lanes.
  if (cmd.context < 2 || cmd.context > (1 << 20))
    return bad("--context " + std::to_string(cmd.context) + ": must be in 2..1048576 (2^20, the serve fixture's bound)");
  if (cmd.pool_pages > (1 << 26))
    return bad("--pool-pages " + std::to_string(cmd.pool_pages) + ": must be at most 67108864 (64 lanes of 2^20 pages)");
  if (cmd.page < 1 || cmd.page > 65536) return bad("--page " + std::to_string(cmd.page) + ": must be in 1..65536");
  if (cmd.max_tokens < 1) return bad("--max-tokens: must be at least 1");
  if (cmd.draft_tokens < 1 || cmd.draft_tokens > 64) return bad("--draft-tokens: must be in 1..64");
  if (c.num_hidden_layers < 2)
    return bad("--layers 1: the pool-with-runs arm needs a drafter of fewer layers than the target, so at least 2");
  if (cmd.draft_layers < 1 || cmd.draft_layers >= c.num_hidden_layers)
    return bad("--draft-layers " + std::to_string(cmd.draft_layers) + ": must be in 1.." +
               std::to_string(c.num_hidden_layers - 1) + " (below the model's " + std::to_string(c.num_hidden_layers) +
               " layers)");
  // Without --prompts, as many of the default lengths as there are lanes (--parallel 2 alone
  // used to be refused for a --prompts nobody gave).
  std::vector<int> prompts = cmd.prompts;
  if (!cmd.prompts_given && int(prompts.size()) > cmd.parallel) prompts.resize(size_t(cmd.parallel));
  const std::string which = cmd.prompts_given ? "" : " (the default --prompts; give --prompts lengths that fit)";
  if (prompts.empty() || int(prompts.size()) > cmd.parallel)
    return bad("--prompts: give 1.." + std::to_string(cmd.parallel) + " prompt lengths (one request per lane)");
  ServeConfig base;
  base.parallel = cmd.parallel;
  base.page = cmd.page;
  base.context = cmd.context;
  ServeConfig drafted = base;
  drafted.draft_tokens = cmd.draft_tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i] < 2) return bad("--prompts[" + std::to_string(i) + "]: a prompt holds at least 2 tokens");
    const int64_t need = serve_positions(drafted, prompts[i], cmd.max_tokens);
    if (need > cmd.context)
      return bad("--prompts[" + std::to_string(i) + "]: prompt " + std::to_string(prompts[i]) + " + max_tokens " +
                 std::to_string(cmd.max_tokens) + " + a draft window of " + std::to_string(cmd.draft_tokens + 1) +
                 " = " + std::to_string(need) + " positions, more than --context " + std::to_string(cmd.context) +
                 which);
  }
  const int pool_pages =
      cmd.pool_pages > 0 ? cmd.pool_pages : int(int64_t(cmd.parallel) * ((int64_t(cmd.context) + cmd.page - 1) / cmd.page));
  std::string target;
  if (!cmd.out_file.empty()) {
    const Status st = prepare_output(cmd.out_file, &target);
    if (!st.ok) return bad("--out " + st.message);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const KvLayout lay(int(c.num_hidden_layers), int(c.num_key_value_heads), int(c.head_dim), fmt);
  const KvLayout dlay(cmd.draft_layers, int(c.num_key_value_heads), int(c.head_dim), fmt);
  std::unique_ptr<Backend> be = make_cpu_backend();

  ServeConfig windows = base;
  windows.all_windows = true;
  ServeConfig pool = base;
  pool.pages_all = true;
  pool.pool_pages = pool_pages;
  ServeConfig runs = drafted;
  runs.pool_pages = pool_pages;
  const std::string w_what = "pool off: every lane a window of " + std::to_string(cmd.context) + " positions";
  const std::string p_what = "pages-all: every lane on pages of " + std::to_string(cmd.page) + ", no runs";
  const std::string r_what = "lane 0 a window, every lane's run holds its drafter's cache (the first " +
                             std::to_string(cmd.draft_layers) + (cmd.draft_layers == 1 ? " layer" : " layers") +
                             ", " + std::to_string(cmd.context) + " positions); requests hold a draft window of " +
                             std::to_string(cmd.draft_tokens + 1) + " more positions";

  CaseSelection sel;
  Run run(*be, nullptr, 0, int(prompts.size()), sel, true);
  run.declare("admitted", "every request admitted into its lane in every arm (the planned arena holds them)");
  run.declare("run planning", "every lane's run held its parts (none refused at planning)");
  json arms = json::array();
  auto gate = [&](Run& r, const ArmResult& a, const std::string& arm) {
    for (size_t i = 0; i < a.why.size(); ++i)
      r.check("admitted", a.why[i].empty(), "arm=" + arm + " request=" + std::to_string(i), a.why[i]);
    r.check("run planning", a.planning_errors.empty(), "arm=" + arm,
            a.planning_errors.empty() ? "" : a.planning_errors.front());
  };
  int pool_pages_taken = 0;
  for (const auto& [name, what, cfg, d] :
       std::vector<std::tuple<std::string, std::string, ServeConfig, const KvLayout*>>{
           {"windows", w_what, windows, nullptr}, {"pool", p_what, pool, nullptr}, {"pool-with-runs", r_what, runs, &dlay}}) {
    ArmResult a = measure_arm(name, what, cfg, lay, d, prompts, cmd.max_tokens, false);
    gate(run, a, name);
    if (name == "pool") pool_pages_taken = a.pages_taken;
    arms.push_back(a.j);
  }
  json seen = json::object();
  auto note = [&](const std::string& control, const Run& sub) {
    for (const GateStat& g : sub.gates())
      if (g.failed)
        seen[control][g.name] = {{"failed", g.failed},
                                 {"total", g.passed + g.failed},
                                 {"first_miss", g.failures.empty() ? "" : g.failures.front()}};
  };
  run.control("run-one-part-short", "each lane's run is sized one part short (pool-with-runs arm)", [&](Run& sub) {
    ArmResult a = measure_arm("control-run-short", r_what, runs, lay, &dlay, prompts, cmd.max_tokens, true);
    gate(sub, a, "control-run-short");
    note("run-one-part-short", sub);
  });
  run.control("pool-one-page-short", "the pool arm's pool is one page smaller than its requests take", [&](Run& sub) {
    ServeConfig p = pool;
    p.pool_pages = std::max(pool_pages_taken - 1, 0);
    ArmResult a = measure_arm("control-pool-short", p_what, p, lay, nullptr, prompts, cmd.max_tokens, false);
    gate(sub, a, "control-pool-short");
    note("pool-one-page-short", sub);
  });

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool all_red = true;
  for (const ControlStat& k : run.controls()) all_red = all_red && k.red;
  const bool pass = !run.gates_failed() && all_red && !run.has_errors();
  std::vector<std::string> reasons = gate_failure_reasons(run.gates());
  for (std::string& w : control_and_error_reasons(run.controls(), run.errors().size())) reasons.push_back(std::move(w));

  const std::string name = "serve-memory-" + cmd.preset + "-p" + std::to_string(cmd.parallel) + "-c" +
                           std::to_string(cmd.context) + "-" + cmd.kv_cache;
  Receipt r(Receipt::Head{"serve-memory", name, be->name(), device_json(be->device()), cmd.argv, json(uint64_t(0))});
  r.set_verdict(pass, reasons);
  r.set_cases(int64_t(prompts.size()), int64_t(prompts.size()), 0, "");
  record_run(run, &r, seen);
  r["memory"] = {
      {"method", "planned with plan_serve_arena and admitted into a Pool as serve() admits at its first round; no "
                 "forward runs, no device memory measured (the same numbers on every backend)"},
      {"preset", cmd.preset},
      {"model", {{"layers", c.num_hidden_layers}, {"hidden_size", c.hidden_size}, {"q_heads", c.num_attention_heads},
                 {"kv_heads", c.num_key_value_heads}, {"head_dim", c.head_dim}}},
      {"kv_cache", cmd.kv_cache},
      {"parallel", cmd.parallel},
      {"context", cmd.context},
      {"page", cmd.page},
      {"pool_pages", pool_pages},
      {"draft", {{"layers", cmd.draft_layers}, {"tokens", cmd.draft_tokens}}},
      {"bytes_per_position", {{"target", lay.kv_bytes(1)}, {"draft", dlay.kv_bytes(1)}}},
      {"arms", arms}};
  json nums = json::object();
  for (const json& a : arms)
    for (const char* k : {"arena_bytes", "bytes_fixed_per_lane", "pages_taken", "bytes_in_use"})
      nums[a["arm"].get<std::string>() + "." + k] = a[k];
  r["numbers"] = nums;
  r.set_total_s(secs);
  if (const Status ws = print_and_write_receipt(r, cmd.out_file, out); !ws.ok) return bad("--out " + ws.message);
  return pass ? 0 : 1;
}

}  // namespace kc::engine
