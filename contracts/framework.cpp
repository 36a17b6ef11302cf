#include "contracts/framework.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <system_error>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>

#include "contracts/progress.h"
#include "contracts/signals.h"

namespace kc {

Run::Run(Backend& be_, Backend* twin_, uint64_t seed_, int cases_, CaseSelection selection, bool quiet)
    : Run(be_, twin_, seed_, cases_, quiet, false) {
  if (!selection.filter.empty()) filter_.emplace(selection.filter);
  selection_ = std::move(selection);
}

Run::Run(Backend& be_, Backend* twin_, uint64_t seed_, int cases_, bool quiet, bool in_control_)
    : be(be_), twin(twin_), seed(seed_), cases(cases_), in_control(in_control_),
      last_check_(std::chrono::steady_clock::now()), quiet_(quiet) {}


std::string CaseSelection::describe() const {
  if (case_line) return "--case " + shell_quote(*case_line);
  return "--filter " + shell_quote(filter);
}

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

void Run::device_gate(const std::string& name, const std::string& description, const std::string& skip_reason) {
  declare(name, description);
  if (!twin) skip(name, skip_reason);
}

bool Run::check(const std::string& name, bool ok, const std::string& case_vars, const std::string& detail) {
  GateStat& g = gate(name);
  const auto now = std::chrono::steady_clock::now();
  g.time_s += std::chrono::duration<double>(now - last_check_).count();
  last_check_ = now;
  if (ok) {
    ++g.passed;
  } else {
    ++g.failed;
    if (g.failures.size() < 8) g.failures.push_back(case_vars + (detail.empty() ? "" : ": " + detail));
    const std::string cl = case_of(case_vars);
    if (!in_control && !cl.empty() && failed_cases_.size() < 8 &&
        std::find(failed_cases_.begin(), failed_cases_.end(), cl) == failed_cases_.end())
      failed_cases_.push_back(cl);
    if (!in_control && g.failed <= 3) {
      progress::clear();
      std::cerr << "FAIL " << name << " " << case_vars << " seed=" << seed << (detail.empty() ? "" : ": ") << detail
                << "\n";
    }
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
  if (!in_control) {
    progress::clear();
    std::cerr << "ERROR " << case_vars << ": " << message << "\n";
  }
}

bool Run::selected(const std::string& case_vars) {
  const bool stop = gates_only_ && gates_failed();
  if (stop) ++cases_stopped_;
  bool in = !stop && (selection_.case_line ? case_vars == *selection_.case_line
                                           : !filter_ || filter_search(case_vars, *filter_, selection_.filter));
  if (in) ++cases_matched;
  last_out_by_shard_ = false;
  // Shards take the selected cases in turn: the k-th (from 0) is shard k mod n's, so shard i
  // holds a case whenever the selection has at least i (cases are drawn in one order for a seed).
  if (in && selection_.shards > 1 && (cases_matched - 1) % selection_.shards != selection_.shard - 1) {
    ++cases_other_shard;  // another shard's case
    last_out_by_shard_ = true;
    return false;
  }
  if (!in) {
    ++cases_filtered;
    return false;
  }
  ++cases_run;
  current_case_ = case_vars;
  return true;
}

std::string Run::case_of(const std::string& case_vars) const {
  if (current_case_.empty() || case_vars.compare(0, current_case_.size(), current_case_) != 0) return "";
  return current_case_;
}

void Run::progress(const std::string& line) const {
  if (!quiet_ && !in_control) progress::update(line);
}

bool Run::gates_failed() const {
  for (const GateStat& g : gates_)
    if (g.failed) return true;
  return false;
}

void Run::control(const std::string& name, const std::string& description,
                  const std::function<void(Run&)>& body) {
  if (gates_only_) {
    ++controls_skipped_;
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Run sub(be, twin, seed, cases, true, true);
  body(sub);
  ControlStat c;
  last_check_ = std::chrono::steady_clock::now();  // the control's time is its own, not the next gate's
  c.time_s = std::chrono::duration<double>(last_check_ - t0).count();
  c.name = name;
  c.description = description;
  for (const GateStat& g : sub.gates_)
    if (g.failed) c.caught_by.push_back(g.name);
  c.errors = sub.errors_;
  // Red means a gate caught the defect; a backend error is not a catch.
  c.red = !c.caught_by.empty() && c.errors.empty();
  if (!quiet_) {
    progress::clear();
    std::cerr << "  control " << name << ": " << (c.red ? "red (as it must be)" : "GREEN: the gates are blind")
              << "\n";
  }
  controls_.push_back(std::move(c));
}

void Run::cover_value(const std::string& dim, const std::string& value) {
  nlohmann::json& cov = numbers["coverage"];
  if (!cov.is_object()) cov = nlohmann::json{{"cases", 0}};
  nlohmann::json& n = cov[dim][value];
  n = n.is_null() ? 1 : n.get<int>() + 1;
}

void Run::cover_case(const std::vector<std::pair<std::string, std::string>>& values) {
  nlohmann::json& cov = numbers["coverage"];
  if (!cov.is_object()) cov = nlohmann::json{{"cases", 0}};
  cov["cases"] = cov.value("cases", 0) + 1;
  for (const auto& [dim, value] : values) cover_value(dim, value);
}

uint64_t mix_seed(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::unique_ptr<Backend> select_backend(const std::string& name, Status* st) {
  *st = Status::Ok();
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") {
    auto be = make_cuda_backend(st);
    if (!be) *st = Status::Error("--backend cuda: " + st->message);
    return be;
  }
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

}  // namespace

void record_run(const Run& run, Receipt* r, const nlohmann::json& seen) {
  r->add_gates(run.gates());
  r->add_controls(run.controls(), seen);
  r->set_errors(run.errors());
}

nlohmann::json device_json(const DeviceInfo& d) {
  nlohmann::json j = {{"name", d.name}};
  if (!d.compute.empty()) j["compute_capability"] = d.compute;
  if (!d.driver.empty()) j["driver"] = d.driver;
  return j;
}

RunResult run_contract(const ContractDef& c, Backend& be, const RunOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t seed = opts.seed.value_or(20261129);
  const int cases = opts.cases.value_or(c.default_cases);
  std::unique_ptr<Backend> twin;
  if (be.name() != "cpu") twin = make_cpu_backend();
  CaseSelection sel{opts.filter, opts.case_line, opts.shard, opts.shards};
  Run run(be, twin.get(), seed, cases, sel, opts.quiet);
  const std::string shard_text = std::to_string(opts.shard) + "/" + std::to_string(opts.shards);
  if (opts.gates_only) run.gates_only();
  if (!opts.quiet)
    std::cerr << c.name << ": backend " << be.name() << ", seed " << seed << ", cases " << cases
              << (opts.shards > 1 ? ", shard " + shard_text : std::string()) << "\n";
  if (!opts.quiet) progress::begin(opts.label.empty() ? c.name : opts.label);
  c.body(run);
  if (!opts.quiet) progress::end();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  bool all_red = true;
  for (const ControlStat& k : run.controls()) all_red = all_red && k.red;
  int64_t checks = 0;
  for (const GateStat& g : run.gates()) checks += g.passed;
  // A --filter or --case that selects no case fails: a replay that replays nothing must
  // never come back green on the strength of the case-independent gates.
  const bool selected_none = sel.any() && run.cases_matched == 0;
  // A shard that holds none of the selected cases ran only the case-independent gates: no
  // pass either (cases are dealt in turn, so that is a shard i of more than the cases selected).
  // (Refusal probes it ran are cases too, though uncounted: a shard of probes alone is no empty
  // shard; shards 6 and 7 of fp8-rows --cases 5 failed on correct code.)
  const bool empty_shard = opts.shards > 1 && run.cases_run == 0 && run.uncounted_run == 0 && run.cases_matched > 0;
  // A run of every case (the default count or more, no --filter, --case or shard) reaches every
  // gate it declares; a gate that checked nothing there is a gate that cannot fail.
  std::vector<std::string> never;
  if (!sel.any() && opts.shards == 1 && cases >= c.default_cases && !opts.gates_only)
    for (const GateStat& g : run.gates())
      if (g.passed + g.failed + g.skipped == 0) never.push_back(g.name);
  const bool pass = !run.gates_failed() && all_red && !run.has_errors() && checks > 0 && !run.controls().empty() &&
                    !selected_none && !empty_shard && run.controls_skipped() == 0 && never.empty();
  // Why a run fails, in words (the receipt's verdict_reasons; empty when it passes).
  std::vector<std::string> why = gate_failure_reasons(run.gates());
  for (std::string& w : control_and_error_reasons(run.controls(), run.errors().size())) why.push_back(std::move(w));
  const std::string none_selected =
      sel.describe() + " matched none of the " + std::to_string(cases) + " cases of seed " + std::to_string(seed);
  std::string shard_none;
  if (empty_shard) {
    // The selected cases, without the refusal probes a run of every case deals among the shards
    // too (matched_uncounted: not generated cases; counted, fp8-rows --cases 1 --shard 2/2 said
    // "none of the 35 cases ... only shards 1 to 2 of 2 hold one").
    const int64_t selected = run.cases_matched - run.matched_uncounted;
    shard_none = "shard " + shard_text + " holds none of the " + std::to_string(selected) +
                 (sel.any() ? " cases " + sel.describe() + " selected" : " cases") +
                 " (the selected cases are dealt to shards in turn, the k-th to shard k mod n + 1, so only shards 1 to " +
                 std::to_string(std::min<int64_t>(selected, opts.shards)) + " of " +
                 std::to_string(opts.shards) + " hold one)";
  }
  if (checks == 0) {
    std::string w = "no gate check passed";
    if (run.cases_run == 0) w += empty_shard ? ": " + shard_none : sel.any() ? ": " + none_selected : ": no case ran";
    why.push_back(w);
  } else if (selected_none) {
    why.push_back(none_selected + " (only case-independent gates ran)");
  } else if (empty_shard) {
    why.push_back(shard_none + ": only case-independent gates ran; use fewer shards");
  }
  for (const std::string& g : never)
    why.push_back("gate " + g + " checked nothing in a run of every case (" + std::to_string(cases) +
                  "): a gate that checks nothing cannot fail");
  if (run.controls_skipped() > 0)
    why.push_back("controls skipped (--gates-only): " + std::to_string(run.controls_skipped()) +
                  " not run; a run without its controls never passes" +
                  (run.cases_stopped() ? "; " + std::to_string(run.cases_stopped()) +
                                             " cases and probes left out after the first failing case"
                                       : std::string()));
  else if (run.controls().empty())
    why.push_back("no control ran");

  Receipt r(Receipt::Head{"contract", c.name, be.name(), device_json(be.device()), opts.argv, seed});
  r.set_verdict(pass, why);
  r["started_at"] = now_utc();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  r["host"] = host;
  r.set_cases(cases, run.cases_run, run.cases_filtered + run.cases_other_shard, opts.filter);
  if (opts.case_line) r["cases"]["case"] = *opts.case_line;
  if (opts.shards > 1) {
    // What report's merge needs to rebuild the whole run's counts and rules from the shards.
    r["cases"]["shard"] = shard_text;
    r["cases"]["matched"] = run.cases_matched - run.matched_uncounted;  // selected cases, in any shard
    r["cases"]["other_shards"] = run.cases_other_shard;  // of filtered_out: the other shards' cases
  }
  // Every receipt says whether it is a run of every case (shards: the merged run is), so that its
  // reader holds a pass to the rule above: every gate checked something (session 62's audit: an
  // edited receipt with a gate at total 0 read as a pass).
  r["cases"]["every_case"] = !sel.any() && cases >= c.default_cases && !opts.gates_only;
  // The contract's default count beside it, so that a reader holds every_case to the receipt's own
  // fields: an every_case edited to false once escaped the total-0 rule (session 62's gap).
  r["cases"]["default"] = c.default_cases;
  // A ready-to-run command for each failing case (the first few), and for the run. Each keeps
  // --gates-only: without it a --gates-only run's replay (no failing case: the run failed for its
  // skipped controls) ran the controls too and came back green.
  const std::string base_cmd = "tf-cuda-test " + c.name + " --backend " + be.name() + " --seed " +
                               std::to_string(seed) + " --cases " + std::to_string(cases) +
                               (opts.gates_only ? " --gates-only" : "");
  nlohmann::json replays = nlohmann::json::array();
  // A failing case's own line selects it alone, which shard 1 of any count holds: no --shard.
  for (const std::string& cl : run.failed_cases()) replays.push_back(base_cmd + " --case " + shell_quote(cl));
  // The run's command keeps its selection and its shard, --case included: `--case L --shard 2/2`
  // fails because shard 2 holds no case, and without --shard its replay ran the case and passed.
  if (!pass && replays.empty())
    replays.push_back(base_cmd + (opts.case_line ? " --case " + shell_quote(*opts.case_line)
                                                 : opts.filter.empty() ? "" : " --filter " + shell_quote(opts.filter)) +
                      (opts.shards > 1 ? " --shard " + shard_text : ""));
  r["replay"] = replays;
  record_run(run, &r);
  if (run.controls_skipped() > 0) r["controls_skipped"] = run.controls_skipped();
  r["numbers"] = run.numbers;
  r.set_total_s(secs);
  return {pass, std::move(r)};
}

Status print_and_write_receipt(const Receipt& r, const std::string& out_file, std::ostream& out,
                               const std::vector<std::pair<std::string, std::string>>& with) {
  out << summary_table(r);
  out.flush();
  std::vector<std::pair<std::string, std::string>> files;
  if (!out_file.empty()) files.push_back({out_file, json_file_text(r.doc())});
  files.insert(files.end(), with.begin(), with.end());
  if (files.empty()) return Status::Ok();
  KC_RETURN_IF_ERROR(write_files_atomic(files));
  if (!out_file.empty()) out << "receipt: " << out_file << "\n";
  return Status::Ok();
}

std::string summary_line(const Receipt& receipt) {
  const nlohmann::json& r = receipt.doc();
  std::map<std::string, int> by;
  for (const auto& g : r["gates"]) ++by[receipt_gate_status(g)];
  int red = 0, total = 0;
  for (const auto& k : r["controls"]) red += k.value("red", false), ++total;
  std::ostringstream o;
  o << r.value("name", "?") << ": " << r.value("verdict", "?") << " - " << by["ok"] << (by["ok"] == 1 ? " gate" : " gates")
    << " ok";
  if (by["FAIL"]) o << ", " << by["FAIL"] << " FAILED";
  if (by["skipped"]) o << ", " << by["skipped"] << " skipped";
  if (by["not run"]) o << ", " << by["not run"] << " not run";
  if (r.contains("controls_skipped"))
    o << "; " << r["controls_skipped"].dump() << " controls skipped (--gates-only); ";
  else
    o << "; " << red << " of " << total << " controls red; ";
  o << r["cases"].value("run", int64_t(0)) << (r["cases"].value("run", int64_t(0)) == 1 ? " case; " : " cases; ")
    << std::fixed << std::setprecision(1) << r["timings"].value("total_s", 0.0) << " s";
  return o.str();
}

std::string summary_table(const Receipt& receipt) {
  const nlohmann::json& r = receipt.doc();
  std::ostringstream o;
  o << r.value("name", "?") << " [" << r.value("backend", "?") << " on " << r["device"].value("name", "?")
    << "] seed " << receipt.seed_text() << ", cases run " << r["cases"].value("run", int64_t(0)) << "\n";
  o << std::left << std::setw(34) << "gate" << std::setw(9) << "result" << std::setw(10) << "passed" << std::setw(8)
    << "failed" << std::setw(9) << "skipped" << std::setw(10) << "time s" << "worst ratio\n";
  std::vector<std::string> skip_notes;
  for (const auto& g : r["gates"]) {
    std::string worst;
    if (g.contains("worst"))
      worst = g["worst"]["ratio"].is_number() ? format_ratio(g["worst"]["ratio"].get<double>()) : "nan";
    const std::string st = receipt_gate_status(g);
    std::ostringstream t;
    t << std::fixed << std::setprecision(2) << g.value("time_s", 0.0);
    o << std::left << std::setw(34) << g.value("name", "") << std::setw(9) << st << std::setw(10)
      << g.value("passed", int64_t(0)) << std::setw(8) << g.value("failed", int64_t(0)) << std::setw(9)
      << g.value("skipped", int64_t(0)) << std::setw(10) << t.str() << worst << "\n";
    if (g.contains("skip_reason")) skip_notes.push_back(g.value("name", "") + ": " + g.value("skip_reason", ""));
  }
  for (const auto& n : skip_notes) o << "  skipped " << n << "\n";
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
  if (r.contains("replay"))
    for (const auto& c : r["replay"]) o << "replay: " << c.get<std::string>() << "\n";
  o << summary_line(receipt) << "\n";
  return o.str();
}

namespace {
// The file a write to `path` replaces: a symbolic link (and a chain of them) followed to the name
// it gives; the link stays. An error: a loop, or a link that cannot be read.
Status written_path(const std::string& path, std::filesystem::path* out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40) return Status::Error(path + ": too many levels of symbolic links");
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return Status::Error(path + ": cannot read the symbolic link: " + ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  *out = p;
  return Status::Ok();
}
}  // namespace

Status prepare_output(const std::string& path, std::string* target) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return Status::Error("(empty path): expected a file name");
  fs::path p;
  KC_RETURN_IF_ERROR(written_path(path, &p));
  const fs::file_status st = fs::status(p, ec);
  // A name the system refuses to look up (too long, a folder on the way that is a file) is not
  // "a file that exists": say the system's reason.
  if (st.type() == fs::file_type::none && ec) return Status::Error(path + ": " + ec.message());
  const char* what = nullptr;
  switch (st.type()) {
    case fs::file_type::not_found:
    case fs::file_type::regular: break;
    case fs::file_type::directory: what = "a folder"; break;
    case fs::file_type::character: what = "a character device"; break;
    case fs::file_type::block: what = "a block device"; break;
    case fs::file_type::fifo: what = "a FIFO"; break;
    case fs::file_type::socket: what = "a socket"; break;
    default: what = "not a regular file"; break;
  }
  const std::string via = p.string() == path ? std::string() : " (the symbolic link points to " + p.string() + ")";
  if (what) return Status::Error(path + via + ": exists and is " + what + "; a receipt replaces only a regular file");
  if (!p.has_filename() || p.filename() == "." || p.filename() == "..")
    return Status::Error(path + ": expected a file name, not a folder");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  // An existing file that a rename may not replace: the write would fail after the whole run,
  // leaving the earlier receipt (a PASS) in place. Two causes the folder probe below does not
  // see: a sticky folder (/tmp-like) and a file owned by another user, and a file marked
  // immutable or append-only (chattr +i / +a).
  if (st.type() == fs::file_type::regular) {
    struct stat fst {}, dst {};
    if (::stat(p.c_str(), &fst) == 0 && ::stat(dir.c_str(), &dst) == 0 && (dst.st_mode & S_ISVTX) && ::geteuid() != 0 &&
        fst.st_uid != ::geteuid() && dst.st_uid != ::geteuid())
      return Status::Error(path + via + ": cannot be replaced: another user's file in a sticky folder (" + dir.string() +
                           ")");
    const int fd = ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      int flags = 0;
      const bool got = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
      ::close(fd);
      if (got && (flags & (FS_IMMUTABLE_FL | FS_APPEND_FL)))
        return Status::Error(path + via + ": cannot be replaced: the file is marked " +
                             ((flags & FS_IMMUTABLE_FL) ? "immutable" : "append-only") + " (chattr)");
    }
  }
  // Missing folders are created when the file is written (write_text_atomic, as mkdir -p would),
  // not here: a check that refuses leaves nothing behind. The nearest folder that exists must be
  // a writable folder.
  fs::path have = dir;
  for (;;) {
    const fs::file_status hs = fs::status(have, ec);
    if (hs.type() != fs::file_type::not_found) {
      if (hs.type() != fs::file_type::directory)
        return Status::Error(path + via + ": folder " + dir.string() + " does not exist and cannot be created (" +
                             have.string() + " is not a folder)");
      break;
    }
    const fs::path up = have.has_parent_path() ? have.parent_path() : fs::path(".");
    if (up == have) break;
    have = up;
  }
  {
    // A probe file made and removed in the nearest folder that exists, where the atomic write
    // makes its temporary file (or the first missing folder). Not access(): it answers from the
    // permission bits, and root passes it where no file can be made (procfs, sysfs, an
    // immutable folder, a root-squashed mount).
    std::string probe = (have / ".kc-write-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) {
      const std::string e = std::strerror(errno);
      return Status::Error(path + via + ": folder " + have.string() +
                           (have == dir ? " is not writable (" + e + ")"
                                        : " is not writable (" + e + "), so " + dir.string() + " cannot be created"));
    }
    ::close(fd);
    ::unlink(probe.c_str());
  }
  *target = p.string();
  return Status::Ok();
}

bool filter_search(const std::string& text, const std::regex& re, const std::string& pattern) {
  // The search may read the caller's text and regex: the caller waits for it, and past the
  // deadline ends the process without returning (a timed-out search runs on until then).
  std::future<bool> found;
  try {
    found = std::async(std::launch::async, [&text, &re] { return std::regex_search(text, re); });
  } catch (const std::system_error&) {  // no thread to be had (a process or thread limit): search here
    return std::regex_search(text, re);
  }
  if (found.wait_for(std::chrono::seconds(kFilterSearchSeconds)) == std::future_status::ready) return found.get();
  progress::clear();
  std::cerr << "tf-cuda-test: error: --filter '" << utf8_escaped(pattern) << "': searching '" << utf8_escaped(text)
            << "' took more than " << kFilterSearchSeconds
            << " s (std::regex backtracks: a repeated group whose branches can match the same text, such as "
               "(.|.)*X, takes time exponential in the line's length); simplify the pattern\n";
  std::cerr.flush();
  std::_Exit(2);
}

namespace {

// One file of a write: its temp file written and synced beside the target, not yet renamed.
struct StagedFile {
  std::string path, target;
  std::filesystem::path dir, tmp;
  std::vector<std::filesystem::path> made;  // the folders this write created, deepest first
  void undo_folders() const {
    std::error_code e2;
    for (const auto& d : made) std::filesystem::remove(d, e2);  // removes only an empty folder
  }
  void abandon() const {
    std::error_code e2;
    std::filesystem::remove(tmp, e2);
    undo_folders();
  }
};

Status stage_text(const std::string& path, const std::string& text, StagedFile* sf) {
  namespace fs = std::filesystem;
  sf->path = path;
  KC_RETURN_IF_ERROR(prepare_output(path, &sf->target));
  std::error_code ec;
  sf->dir = fs::path(sf->target).has_parent_path() ? fs::path(sf->target).parent_path() : fs::path(".");
  // The folders this write creates (deepest first): a write that fails removes them again, so a
  // refused or failed write leaves nothing (a full disk once left the new folders behind).
  for (fs::path d = sf->dir; !d.empty() && !fs::exists(fs::symlink_status(d, ec)); d = d.parent_path()) {
    sf->made.push_back(d);
    if (d == d.parent_path()) break;
  }
  fs::create_directories(sf->dir, ec);  // the missing folders prepare_output checked
  if (!fs::is_directory(sf->dir, ec)) {
    sf->undo_folders();
    return Status::Error(path + ": folder " + sf->dir.string() + " cannot be created" +
                         (ec ? " (" + ec.message() + ")" : std::string()));
  }
  sf->tmp = sf->target + ".tmp." + std::to_string(getpid());
  // The bytes reach the disk before the rename (fsync), so that a crash or power loss after
  // it leaves the earlier file or this one whole, never an empty or short receipt.
  const auto fail = [&](const std::string& what, int fd) {
    const std::string e = errno ? std::strerror(errno) : "no reason given";
    if (fd >= 0) ::close(fd);
    sf->abandon();
    return Status::Error(path + ": " + what + " (" + e + ")");
  };
  errno = 0;
  const int fd = ::open(sf->tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const std::string e = errno ? std::strerror(errno) : "no reason given";
    sf->undo_folders();
    return Status::Error(path + ": cannot open " + sf->tmp.string() + " for writing (" + e + ")");
  }
  for (size_t done = 0; done < text.size();) {
    errno = 0;
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail("write failed", fd);
    done += size_t(w);
  }
  // A file system that cannot sync a file (EINVAL, ENOTSUP: some FUSE and network mounts) keeps
  // the bytes written; only a failed sync (EIO, ENOSPC, EDQUOT) fails the write.
  errno = 0;
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) return fail("write failed: fsync", fd);
  errno = 0;
  if (::close(fd) != 0) return fail("write failed: close", -1);
  return Status::Ok();
}

// The rename over the target, then the folder synced so that the new name survives too (best
// effort: a file system that cannot sync a folder keeps the file, which is complete either way).
Status commit_staged(const StagedFile& sf) {
  std::error_code ec;
  std::filesystem::rename(sf.tmp, sf.target, ec);
  if (ec) {
    const std::string e = ec.message();
    sf.abandon();
    return Status::Error(sf.path + ": rename failed: " + e);
  }
  const int dfd = ::open(sf.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

// An exclusive flock on each folder a write renames into, taken in one order (device, inode), so
// that two runs writing the same receipt and junit at once rename their pairs one run after the
// other: the files left are one run's (they were renamed one at a time, and the pair could come
// from two runs). Best effort: a folder that cannot be opened or locked (some network file
// systems) is renamed into without the lock.
class FolderLocks {
 public:
  explicit FolderLocks(const std::vector<StagedFile>& staged) {
    std::vector<std::pair<std::pair<dev_t, ino_t>, std::string>> dirs;
    for (const StagedFile& sf : staged) {
      struct stat st {};
      if (::stat(sf.dir.c_str(), &st) == 0) dirs.push_back({{st.st_dev, st.st_ino}, sf.dir.string()});
    }
    std::sort(dirs.begin(), dirs.end());
    dirs.erase(std::unique(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
               dirs.end());
    for (const auto& d : dirs) {
      const int fd = ::open(d.second.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) continue;
      // Polled, not a blocking flock: a SIGINT or SIGTERM held off meanwhile (HoldSignals) must end
      // the wait, where a blocking flock restarted and waited for the other run (18 s, or for
      // ever behind a stopped one: session 63's review).
      int rc;
      while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && (errno == EWOULDBLOCK || errno == EINTR)) {
        if (HoldSignals::held()) {
          ::close(fd);
          interrupted_ = HoldSignals::held();
          return;
        }
        struct timespec t = {0, 5 * 1000 * 1000};
        ::nanosleep(&t, nullptr);
      }
      if (rc != 0) {
        ::close(fd);
        continue;
      }
      fds_.push_back(fd);
    }
  }
  // The signal that ended the wait for a lock, 0 when every lock was taken (or skipped).
  int interrupted() const { return interrupted_; }
  ~FolderLocks() {
    for (auto it = fds_.rbegin(); it != fds_.rend(); ++it) ::close(*it);  // closing releases the lock
  }
  FolderLocks(const FolderLocks&) = delete;
  FolderLocks& operator=(const FolderLocks&) = delete;

 private:
  std::vector<int> fds_;
  int interrupted_ = 0;
};

}  // namespace

Status write_text_atomic(const std::string& path, const std::string& text) { return write_files_atomic({{path, text}}); }

Status write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  static std::mutex one_write;  // the held signals' dispositions are the process's
  const std::lock_guard<std::mutex> lock(one_write);
  // Destroyed last: a signal that arrives while temp files exist is raised once the write is whole
  // or undone (a SIGTERM there left *.tmp.<pid> files and no receipt).
  const HoldSignals hold;
  std::vector<StagedFile> staged;
  staged.reserve(files.size());
  for (const auto& [path, text] : files) {
    StagedFile sf;
    if (const Status st = stage_text(path, text, &sf); !st.ok) {
      for (auto it = staged.rbegin(); it != staged.rend(); ++it) it->abandon();  // later folders first
      return st;
    }
    staged.push_back(std::move(sf));
  }
  const FolderLocks locks(staged);
  if (locks.interrupted()) {  // nothing renamed: the targets stay as they were, then the signal ends the run
    for (auto it = staged.rbegin(); it != staged.rend(); ++it) it->abandon();
    return Status::Error(files.front().first + ": write interrupted by signal " + std::to_string(locks.interrupted()) +
                         " while another run held its folder");
  }
  for (size_t i = 0; i < staged.size(); ++i)
    if (const Status st = commit_staged(staged[i]); !st.ok) {
      for (size_t k = staged.size(); k-- > i + 1;) staged[k].abandon();
      return st;
    }
  return Status::Ok();
}

std::filesystem::path path_key(const std::string& path) {
  // Absolute first: weakly_canonical of a relative path whose first folder does not exist yet
  // ("sub/../x.json", sub made by the write) stays relative and never equals an existing file's
  // absolute path; lexically_normal then folds the "sub/.." that no existing folder resolved.
  std::error_code ea, ec;
  return std::filesystem::weakly_canonical(std::filesystem::absolute(path, ea), ec).lexically_normal();
}

bool same_output(const std::string& a, const std::string& b) {
  // The names the writes would replace, without prepare_output's probe: b is often an input (a
  // fixture, a model's file), and its folder was written to (a .kc-write-probe-* file made and
  // removed) just to compare two names (session 63's audit).
  std::filesystem::path ta, tb;
  if (a.empty() || b.empty() || !written_path(a, &ta).ok || !written_path(b, &tb).ok) return false;
  return path_key(ta.string()) == path_key(tb.string());
}

std::string output_replaces_file_in(const std::string& out, const std::string& dir) {
  if (dir.empty() || out.empty()) return "";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, std::filesystem::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code fe;
    if (it->is_regular_file(fe) && same_output(out, it->path().string())) return it->path().string();
  }
  return "";
}

size_t utf8_length_at(const std::string& s, size_t i) {
  const auto at = [&](size_t k) { return k < s.size() ? uint8_t(s[k]) : uint8_t(0); };
  const auto cont = [&](size_t k, uint8_t lo, uint8_t hi) { return at(k) >= lo && at(k) <= hi; };
  const uint8_t b = at(i);
  if (i >= s.size()) return 0;
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(i + 1, 0x80, 0xBF) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    const uint8_t lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) ? 3 : 0;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    const uint8_t lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    return cont(i + 1, lo, hi) && cont(i + 2, 0x80, 0xBF) && cont(i + 3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

std::string utf8_escaped(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length_at(s, i);
    if (n) {
      out.append(s, i, n);
      i += n;
    } else {
      static const char* hex = "0123456789ABCDEF";
      const uint8_t b = uint8_t(s[i++]);
      out += "\\x";
      out += hex[b >> 4];
      out += hex[b & 15];
    }
  }
  return out;
}

nlohmann::json utf8_escaped(const nlohmann::json& j) {
  if (j.is_string()) return utf8_escaped(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& v : j) a.push_back(utf8_escaped(v));
    return a;
  }
  if (j.is_object()) {
    nlohmann::json o = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) o[utf8_escaped(it.key())] = utf8_escaped(it.value());
    return o;
  }
  return j;
}

std::string json_file_text(const nlohmann::json& j) { return utf8_escaped(j).dump(2) + "\n"; }

Status write_json_atomic(const std::string& path, const nlohmann::json& j) {
  return write_text_atomic(path, json_file_text(j));
}

}  // namespace kc
