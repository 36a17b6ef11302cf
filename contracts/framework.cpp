#include "contracts/framework.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "kc_git_info.h"

namespace kc {

Run::Run(Backend& be_, Backend* twin_, uint64_t seed_, int cases_, std::string filter, bool quiet)
    : Run(be_, twin_, seed_, cases_, quiet, false) {
  if (!filter.empty()) {
    filter_text_ = filter;
    filter_.emplace(filter);
  }
}

Run::Run(Backend& be_, Backend* twin_, uint64_t seed_, int cases_, bool quiet, bool in_control_)
    : be(be_), twin(twin_), seed(seed_), cases(cases_), in_control(in_control_), quiet_(quiet) {}

GateStat& Run::gate(const std::string& name) {
  for (GateStat& g : gates_)
    if (g.name == name) return g;
  gates_.push_back(GateStat{});
  gates_.back().name = name;
  return gates_.back();
}

void Run::declare(const std::string& name, const std::string& description) {
  gate(name).description = description;
}

bool Run::check(const std::string& name, bool ok, const std::string& case_vars, const std::string& detail) {
  GateStat& g = gate(name);
  if (ok) {
    ++g.passed;
  } else {
    ++g.failed;
    if (g.failures.size() < 8) g.failures.push_back(case_vars + (detail.empty() ? "" : ": " + detail));
    if (!in_control && g.failed <= 3)
      std::cerr << "FAIL " << name << " " << case_vars << " seed=" << seed << (detail.empty() ? "" : ": ")
                << detail << "\n";
  }
  return ok;
}

bool Run::check_ratio(const std::string& name, double ratio, const std::string& case_vars,
                      const std::string& detail) {
  GateStat& g = gate(name);
  const bool ok = ratio <= 1.0;  // NaN compares false: fails
  if (worse_ratio(ratio, g.worst_ratio)) {
    g.worst_ratio = ratio;
    g.worst_case = case_vars;
    g.worst_detail = detail;
  }
  return check(name, ok, case_vars, detail);
}

void Run::skip(const std::string& name, const std::string& reason, int64_t count) {
  GateStat& g = gate(name);
  g.skipped += count;
  g.skip_reason = reason;
}

void Run::error(const std::string& case_vars, const std::string& message) {
  errors_.push_back(case_vars + ": " + message);
  if (!in_control) std::cerr << "ERROR " << case_vars << ": " << message << "\n";
}

bool Run::selected(const std::string& case_vars) {
  if (filter_ && !std::regex_search(case_vars, *filter_)) {
    ++cases_filtered;
    return false;
  }
  ++cases_run;
  return true;
}

void Run::progress(const std::string& line) const {
  if (!quiet_ && !in_control) std::cerr << "  .. " << line << "\n";
}

bool Run::gates_failed() const {
  for (const GateStat& g : gates_)
    if (g.failed) return true;
  return false;
}

void Run::control(const std::string& name, const std::string& description,
                  const std::function<void(Run&)>& body) {
  Run sub(be, twin, seed, cases, true, true);
  body(sub);
  ControlStat c;
  c.name = name;
  c.description = description;
  c.cases = sub.cases_run;
  for (const GateStat& g : sub.gates_)
    if (g.failed) c.caught_by.push_back(g.name);
  c.errors = sub.errors_;
  // Red means a gate caught the defect; a backend error is not a catch.
  c.red = !c.caught_by.empty() && c.errors.empty();
  if (!quiet_)
    std::cerr << "  control " << name << ": " << (c.red ? "red (as it must be)" : "GREEN: the gates are blind")
              << "\n";
  controls_.push_back(std::move(c));
}

uint64_t mix_seed(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const void* p, size_t n, uint64_t h) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

std::unique_ptr<Backend> select_backend(const std::string& name, Status* st) {
  *st = Status::Ok();
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend(st);
  if (name == "auto") {
    if (cuda_device_present()) {
      auto be = make_cuda_backend(st);
      if (be) return be;
    }
    *st = Status::Ok();
    return make_cpu_backend();
  }
  *st = Status::Error("--backend: unknown backend '" + name + "' (expected auto, cpu or cuda)");
  return nullptr;
}

namespace {

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json gate_json(const GateStat& g) {
  nlohmann::json j = {{"name", g.name},
                      {"description", g.description},
                      {"ok", g.failed == 0},
                      {"passed", g.passed},
                      {"failed", g.failed},
                      {"skipped", g.skipped},
                      {"total", g.passed + g.failed + g.skipped}};
  if (g.skipped) j["skip_reason"] = g.skip_reason;
  if (g.worst_ratio >= 0 || std::isnan(g.worst_ratio))
    j["worst"] = {{"case", g.worst_case},
                  {"ratio", std::isnan(g.worst_ratio) ? nlohmann::json("nan") : nlohmann::json(g.worst_ratio)},
                  {"detail", g.worst_detail}};
  if (!g.failures.empty()) j["failures"] = g.failures;
  return j;
}

}  // namespace

RunResult run_contract(const ContractDef& c, Backend& be, const RunOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t seed = opts.seed.value_or(20261129);
  const int cases = opts.cases.value_or(c.default_cases);
  std::unique_ptr<Backend> twin;
  if (be.name() != "cpu") twin = make_cpu_backend();
  Run run(be, twin.get(), seed, cases, opts.filter, opts.quiet);
  if (!opts.quiet)
    std::cerr << c.name << ": backend " << be.name() << ", seed " << seed << ", cases " << cases << "\n";
  c.body(run);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  bool all_red = true;
  for (const ControlStat& k : run.controls()) all_red = all_red && k.red;
  int64_t checks = 0;
  for (const GateStat& g : run.gates()) checks += g.passed;
  const bool pass = !run.gates_failed() && all_red && !run.has_errors() && checks > 0 && !run.controls().empty();
  // Why a run fails, in words (the receipt's verdict_reasons; empty when it passes).
  std::vector<std::string> why;
  for (const GateStat& g : run.gates())
    if (g.failed > 0)
      why.push_back("gate " + g.name + " failed " + std::to_string(g.failed) + " of " + std::to_string(g.passed + g.failed) +
                    " checks");
  for (const ControlStat& k : run.controls())
    if (!k.red) why.push_back("control " + k.name + " stayed green");
  if (run.has_errors()) why.push_back(std::to_string(run.errors().size()) + " errors (listed in the receipt)");
  if (checks == 0) {
    std::string w = "no gate check passed";
    if (run.cases_run == 0)
      w += opts.filter.empty() ? ": no case ran"
                               : ": --filter '" + opts.filter + "' matched none of the " + std::to_string(cases) + " cases";
    why.push_back(w);
  }
  if (run.controls().empty()) why.push_back("no control ran");

  nlohmann::json r;
  r["schema"] = "kernel-contracts/receipt/1";
  r["kind"] = "contract";
  r["name"] = c.name;
  r["verdict"] = pass ? "pass" : "fail";
  r["verdict_reasons"] = why;
  r["backend"] = be.name();
  const DeviceInfo d = be.device();
  r["device"] = {{"name", d.name}, {"compute_capability", d.compute}, {"driver", d.driver}};
  r["git"] = {{"commit", KC_GIT_COMMIT}, {"dirty", KC_GIT_DIRTY}};
  r["seed"] = seed;
  r["argv"] = opts.argv;
  r["started_at"] = now_utc();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  r["host"] = host;
  r["cases"] = {{"requested", cases}, {"run", run.cases_run}, {"filtered_out", run.cases_filtered},
                {"filter", opts.filter}};
  r["gates"] = nlohmann::json::array();
  for (const GateStat& g : run.gates()) r["gates"].push_back(gate_json(g));
  r["controls"] = nlohmann::json::array();
  for (const ControlStat& k : run.controls()) {
    nlohmann::json j = {{"name", k.name}, {"description", k.description}, {"red", k.red},
                        {"caught_by", k.caught_by}, {"cases", k.cases}};
    if (!k.errors.empty()) j["errors"] = k.errors;
    r["controls"].push_back(j);
  }
  r["errors"] = run.errors();
  r["numbers"] = run.numbers;
  r["timings"] = {{"total_s", secs}};
  return {pass, r};
}

std::string summary_table(const nlohmann::json& r) {
  std::ostringstream o;
  o << r.value("name", "?") << " [" << r.value("backend", "?") << " on " << r["device"].value("name", "?")
    << "] seed " << r.value("seed", 0) << ", cases run " << r["cases"].value("run", 0) << "\n";
  o << std::left << std::setw(34) << "gate" << std::setw(8) << "ok" << std::setw(10) << "passed" << std::setw(8)
    << "failed" << std::setw(9) << "skipped" << "worst ratio\n";
  for (const auto& g : r["gates"]) {
    std::string worst = "";
    if (g.contains("worst")) {
      std::ostringstream w;
      if (g["worst"]["ratio"].is_number()) w << std::setprecision(4) << g["worst"]["ratio"].get<double>();
      else w << "nan";
      worst = w.str();
    }
    o << std::left << std::setw(34) << g.value("name", "") << std::setw(8) << (g.value("ok", false) ? "ok" : "FAIL")
      << std::setw(10) << g.value("passed", 0) << std::setw(8) << g.value("failed", 0) << std::setw(9)
      << g.value("skipped", 0) << worst << "\n";
  }
  o << std::left << std::setw(34) << "control" << "colour   caught by\n";
  for (const auto& k : r["controls"]) {
    std::string by;
    for (const auto& s : k["caught_by"]) by += (by.empty() ? "" : ", ") + s.get<std::string>();
    o << std::left << std::setw(34) << k.value("name", "") << std::setw(9)
      << (k.value("red", false) ? "red" : "GREEN") << by << "\n";
  }
  for (const auto& e : r["errors"]) o << "error: " << e.get<std::string>() << "\n";
  o << "verdict: " << r.value("verdict", "?") << " (" << std::fixed << std::setprecision(2)
    << r["timings"].value("total_s", 0.0) << " s)\n";
  if (r.contains("verdict_reasons"))
    for (const auto& w : r["verdict_reasons"]) o << "  because " << w.get<std::string>() << "\n";
  return o.str();
}

Status write_json_atomic(const std::string& path, const nlohmann::json& j) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  const fs::path tmp = p.string() + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp);
    if (!f) return Status::Error(path + ": cannot open for writing");
    f << j.dump(2) << "\n";
    f.flush();
    if (!f) {
      fs::remove(tmp, ec);
      return Status::Error(path + ": write failed");
    }
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status::Error(path + ": rename failed: " + ec.message());
  }
  return Status::Ok();
}

}  // namespace kc
