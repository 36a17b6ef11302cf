// The one receipt type: every writer (the contract runner, serve-gate, kv-gate, both
// benches, the oracle export's head) builds its receipt through `Receipt`, and every
// reader (report, diff) loads and checks it through `Receipt`. The JSON document it holds
// is the receipt as written (schema kernel-contracts/receipt/1,
// reports/schema/receipt.schema.json); what differs per kind is added with operator[].
//
// Also here: a gate's status in words and the way numbers compared with 1 are printed
// (console, report and diff print them alike).
#pragma once
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/layout/status.h"

namespace kc {

inline constexpr const char* kReceiptSchema = "kernel-contracts/receipt/1";

// A word as one shell argument: single-quoted when it holds anything but [A-Za-z0-9_./=:,+-@%]
// (an embedded ' as '\''), so a printed command line pastes back as the same argv.
std::string shell_quote(const std::string& word);

// A word that may stand as one file name in a folder: not empty, not "." or "..", and no '/',
// '\\' or NUL. A receipt's name is used as a file name (report --merge-out writes
// DIR/<contract>.json), so Receipt::check holds every name to it (a kv-gate's FIXTURE/FORMAT: each
// part).
bool safe_file_name(const std::string& word);

// The contracts this build registers (kc_add_contract, in their order; generated, as the
// registry is, so the receipt library needs no contract).
const std::vector<std::string>& registered_contract_names();
// report and diff: a receipt of kind contract must name a registered contract, or one of the two
// tools that write receipts of kind contract under names of their own: "oracle"
// (tools/oracle_torch.py) and "sanitize" (tools/sanitize.py). "FILE: name: 'x' is not a known
// contract (...)" otherwise. Not part of Receipt::check: premerge reads a base's receipt of a
// contract the head no longer runs (--allow-contract-changes lists it as removed).
Status check_known_contract(const nlohmann::json& doc, const std::string& file);

// The running executable's GNU build id (its ELF note, which the linker computes from the
// binary's contents) in lower-case hex, or "none" where it has none: a receipt's build.id.
// Two binaries of one commit differ in it when anything in their code does (a planted
// mutant, another compiler or its flags), so report's shard merge refuses shards of two
// binaries, which git.commit alone let through.
const std::string& executable_build_id();
// What Receipt::check accepts as build.id: "none", or 1 to 64 bytes in lower-case hex.
bool build_id_ok(const std::string& id);

// A contract-kind receipt written by the contract runner (argv[1] is the contract, kernel-contract
// or premerge), not by another tool that borrows the kind (tools/sanitize.py).
bool from_contract_run(const nlohmann::json& r);

// A gate's result in words (console, receipt, report, diff):
//   ok       at least one check passed and none failed;
//   FAIL     a check failed;
//   skipped  no check ran and some were skipped (skip_reason says why, e.g. no device);
//   not run  declared, but no selected case reached it.
inline const char* gate_status(int64_t passed, int64_t failed, int64_t skipped) {
  if (failed > 0) return "FAIL";
  if (passed > 0) return "ok";
  return skipped > 0 ? "skipped" : "not run";
}

// A receipt gate's status: its counts decide (a stored "status" must agree with them;
// Receipt::check makes sure).
inline std::string receipt_gate_status(const nlohmann::json& g) {
  auto count = [&](const char* k) {
    return g.contains(k) && g[k].is_number_integer() ? g[k].get<int64_t>() : int64_t(0);
  };
  return gate_status(count("passed"), count("failed"), count("skipped"));
}

// A target's value with 4 significant digits, or more where 4 would print it on the other side of
// its limit or equal to it (0.84996 against 0.85 prints as 0.84996, never as 0.85 "NOT met").
inline std::string format_target(double x, double limit) {
  if (std::isnan(x)) return "nan";
  for (int p = 4; p <= 17; ++p) {
    std::ostringstream o;
    o << std::setprecision(p) << x;
    double back = 0;
    std::istringstream(o.str()) >> back;
    if ((x < limit) == (back < limit) && (x > limit) == (back > limit)) return o.str();
  }
  std::ostringstream o;
  o << std::setprecision(17) << x;
  return o.str();
}

// A ratio with 4 significant digits, or more where 4 would round a value across 1
// (0.9999990 prints as 0.999999, never as 1).
inline std::string format_ratio(double x) { return format_target(x, 1.0); }

// One gate of a run, as the runner counts it and a receipt records it.
struct GateStat {
  std::string name;
  std::string description;
  int64_t passed = 0;
  int64_t failed = 0;
  int64_t skipped = 0;
  std::string skip_reason;
  double worst_ratio = -1;  // for bound gates: max |err| / bound
  std::string worst_case;
  std::string worst_detail;
  std::vector<std::string> failures;  // first few failing case lines
  double time_s = 0;  // wall time attributed to this gate: from the previous check of any gate to each of its checks
};

// One control of a run: red when a gate caught its planted defect.
struct ControlStat {
  std::string name;
  std::string description;
  bool red = false;
  std::vector<std::string> caught_by;
  std::vector<std::string> errors;
  double time_s = 0;
};

// Why a run fails, one line each (a receipt's verdict_reasons): each failed gate, ...
std::vector<std::string> gate_failure_reasons(const std::vector<GateStat>& gates);
// ... each control that stayed green, and the errors (counted, listed in the receipt).
std::vector<std::string> control_and_error_reasons(const std::vector<ControlStat>& controls, size_t errors);

class Receipt {
 public:
  // The fields every receipt opens with; git provenance is this build's.
  struct Head {
    std::string kind;  // contract, serve-gate, serve-memory, kv-gate, bench, bench-engine, generate
    std::string name;
    std::string backend;
    nlohmann::json device;  // name, compute_capability, driver
    std::vector<std::string> argv;
    nlohmann::json seed;  // an unsigned integer, or null (no generator: a bench)
  };

  Receipt() = default;
  // A new receipt: the head, verdict "fail" until the writer decides, no gates or controls.
  explicit Receipt(const Head& h);
  // A document as it is, unchecked (Receipt::check / load check one).
  explicit Receipt(nlohmann::json doc) : doc_(std::move(doc)) {}

  // ---- writing ----
  void set_verdict(bool pass, const std::vector<std::string>& reasons);
  // cases: requested, run, filtered out, the --filter text.
  void set_cases(int64_t requested, int64_t run, int64_t filtered_out, const std::string& filter);
  // The run's tables: gates, controls (with `seen`: per control name, what a writer noted
  // about its catch, stored as the control's "seen"), errors.
  void add_gates(const std::vector<GateStat>& gates);
  void add_controls(const std::vector<ControlStat>& controls, const nlohmann::json& seen = nlohmann::json::object());
  void set_errors(const std::vector<std::string>& errors);
  void set_total_s(double seconds);
  // A field of this kind of receipt (fixture, kv, rows, targets, numbers...).
  nlohmann::json& operator[](const std::string& key) { return doc_[key]; }

  // ---- reading ----
  // Checks every field report and diff read (the required fields of
  // reports/schema/receipt.schema.json and their types, a bench's rows and targets, a
  // kv-gate's per-depth view) and that the receipt does not contradict itself; then every
  // other rule of that schema, compiled in (contracts/json_schema.h). The first problem comes
  // back as "FILE: FIELD: reason", e.g. "r.json: gates[2].passed: expected an integer, got a
  // string", or "r.json: host: expected a string, got a number (receipt schema)".
  static Status check(const nlohmann::json& doc, const std::string& file);
  // Reads FILE (a regular file, JSON) and checks it; *out is untouched on error.
  static Status load(const std::string& path, Receipt* out);
  // The same, for readers that work on the checked document itself (report's shard merge,
  // premerge, JUnit).
  static Status load(const std::string& path, nlohmann::json* out);

  const nlohmann::json& doc() const { return doc_; }
  nlohmann::json& doc() { return doc_; }
  const nlohmann::json& operator[](const std::string& key) const { return doc_.at(key); }
  bool has(const std::string& key) const { return doc_.contains(key); }
  std::string kind() const { return doc_.at("kind").get<std::string>(); }
  std::string name() const { return doc_.at("name").get<std::string>(); }
  // A bench (attention, pack: kind bench; the engine bench: bench-engine): rows, targets, seed null.
  bool is_bench() const { return kind() == "bench" || kind() == "bench-engine"; }
  bool passed() const { return doc_.at("verdict") == "pass"; }
  // "contract 'qwen-pages'": what a receipt is, for messages.
  std::string what() const { return kind() + " '" + name() + "'"; }
  // The seed as given (an unsigned 64-bit number), or "none" (seed null: no generator).
  std::string seed_text() const;
  // The commit, with "-dirty" when the tree was dirty.
  std::string commit_label() const;
  // "0123456789ab (clean)" / "(dirty)".
  std::string short_commit() const;
  // "cuda on NVIDIA H200 (compute 9.0, driver ...)": empty fields (cpu) left out.
  std::string device_line() const;

 private:
  nlohmann::json doc_;
};

}  // namespace kc
