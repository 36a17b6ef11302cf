// The contract framework: gates, controls, the runner shared by the command line and by
// GoogleTest, and receipts.
//
// A contract body receives a Run. It draws cases (small structs with vars()), checks
// gates case by case (Run::check), and declares controls (Run::control): a control runs
// a deliberately broken setup through the same gates in a sub-run and *passes when it
// is red*. The runner turns the tables into a receipt and a verdict:
//   pass  every gate held on every case it ran, every control was red, no errors;
//   fail  otherwise (exit code 1).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend/backend.h"

namespace kc {

// Whether `ratio` replaces `worst` as the worst error/bound ratio seen so far: a larger
// ratio or a NaN (a NaN output) does, and once the worst is NaN nothing replaces it (a
// plain !(ratio <= worst) would let the next finite ratio hide the NaN).
inline bool worse_ratio(double ratio, double worst) { return !std::isnan(worst) && !(ratio <= worst); }

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
};

struct ControlStat {
  std::string name;
  std::string description;
  bool red = false;
  std::vector<std::string> caught_by;
  int64_t cases = 0;
  std::vector<std::string> errors;
};

class Run {
 public:
  Run(Backend& be, Backend* twin, uint64_t seed, int cases, std::string filter, bool quiet);

  Backend& be;
  Backend* twin;  // the cpu backend when `be` is cuda (host twin == device gates), else null
  const uint64_t seed;
  const int cases;  // cases to generate
  const bool in_control;

  // Declares a gate (so it is listed even if no case reaches it).
  void declare(const std::string& gate, const std::string& description);
  // Records one check of `gate` on the case `case_vars`.
  bool check(const std::string& gate, bool ok, const std::string& case_vars, const std::string& detail = "");
  // Records a bound check: ok when ratio <= 1 (NaN ratio fails); keeps the worst ratio.
  bool check_ratio(const std::string& gate, double ratio, const std::string& case_vars,
                   const std::string& detail = "");
  void skip(const std::string& gate, const std::string& reason, int64_t count = 1);
  // A backend or setup error: fails the run (never silently dropped).
  void error(const std::string& case_vars, const std::string& message);
  bool has_errors() const { return !errors_.empty(); }
  // True when the case passes --filter.
  bool selected(const std::string& case_vars);
  void progress(const std::string& line) const;
  // A control: body runs in a sub-run whose gates must catch the planted defect.
  void control(const std::string& name, const std::string& description,
               const std::function<void(Run&)>& body);

  nlohmann::json numbers = nlohmann::json::object();
  int64_t cases_run = 0;
  int64_t cases_filtered = 0;

  const std::vector<GateStat>& gates() const { return gates_; }
  const std::vector<ControlStat>& controls() const { return controls_; }
  const std::vector<std::string>& errors() const { return errors_; }
  bool gates_failed() const;

 private:
  Run(Backend& be, Backend* twin, uint64_t seed, int cases, bool quiet, bool in_control);
  GateStat& gate(const std::string& name);
  std::vector<GateStat> gates_;
  std::vector<ControlStat> controls_;
  std::vector<std::string> errors_;
  std::optional<std::regex> filter_;
  std::string filter_text_;
  bool quiet_;
};

struct ContractDef {
  std::string name;
  std::string summary;
  int default_cases;
  std::function<void(Run&)> body;
};

const std::vector<ContractDef>& contracts();
const ContractDef* find_contract(const std::string& name);

struct RunOptions {
  std::string backend = "auto";
  std::optional<uint64_t> seed;
  std::optional<int> cases;
  std::string filter;
  std::vector<std::string> argv;
  bool quiet = false;
};

struct RunResult {
  bool pass = false;
  nlohmann::json receipt;
};

// Picks the backend named by opts.backend ("auto" -> cuda when a device is present).
// Errors (unknown name, cuda without a device) come back in *st.
std::unique_ptr<Backend> select_backend(const std::string& name, Status* st);

RunResult run_contract(const ContractDef& c, Backend& be, const RunOptions& opts);
// Renders a receipt as the human summary table.
std::string summary_table(const nlohmann::json& receipt);
// Writes JSON atomically (temp file in the same folder, then rename).
Status write_json_atomic(const std::string& path, const nlohmann::json& j);

// Case helpers.
uint64_t mix_seed(uint64_t seed, uint64_t i);
uint64_t fnv1a(const void* p, size_t n, uint64_t h = 14695981039346656037ull);  // FNV-1a 64, standard basis

}  // namespace kc
