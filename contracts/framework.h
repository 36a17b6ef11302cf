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
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <regex>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contracts/receipt.h"
#include "kernels/backend/backend.h"
#include "kernels/layout/bits.h"  // fnv1a

namespace kc {

// Whether `ratio` replaces `worst` as the worst error/bound ratio seen so far: a larger
// ratio or a NaN (a NaN output) does, and once the worst is NaN nothing replaces it (a
// plain !(ratio <= worst) would let the next finite ratio hide the NaN).
inline bool worse_ratio(double ratio, double worst) { return !std::isnan(worst) && !(ratio <= worst); }

// A bound gate's ratio |err| / bound for one element: 0 where the error is 0 (whatever the
// bound: an exact result passes), +Inf where the bound is 0 and the error is not (an exact
// promise broken), NaN (the worst, see worse_ratio) where the error is NaN or the bound is NaN or
// negative (a reference that gives no bound cannot vouch for a nonzero error).
inline double bound_ratio(double err, double bound) {
  if (std::isnan(err)) return std::numeric_limits<double>::quiet_NaN();
  if (err == 0) return 0;
  if (!(bound >= 0)) return std::numeric_limits<double>::quiet_NaN();
  return err / bound;  // bound 0: +Inf
}

// Which generated cases a run checks: every case, those whose name(k=v,...) line
// matches a regex (--filter), or the one whose line equals a pasted line (--case).
struct CaseSelection {
  std::string filter;                    // ECMAScript regex, searched in the line; empty: no filter
  std::optional<std::string> case_line;  // exact, literal line
  // --shard i/n (shards > 1): the selected cases are dealt in turn, the k-th (from 0) to shard
  // k mod n + 1, and this run takes shard i's; the other shards' cases count as filtered out. Controls and checks outside the generated
  // cases run in every shard.
  int shard = 1, shards = 1;
  bool any() const { return !filter.empty() || case_line.has_value(); }
  std::string describe() const;          // "--filter 'x'", "--case '...'" (shell-quoted)
};

// shell_quote: contracts/receipt.h.

class Run {
 public:
  Run(Backend& be, Backend* twin, uint64_t seed, int cases, CaseSelection selection, bool quiet);

  Backend& be;
  Backend* twin;  // the cpu backend when `be` is cuda (host twin == device gates), else null
  const uint64_t seed;
  const int cases;  // cases to generate
  const bool in_control;

  // Declares a gate (so it is listed even if no case reaches it).
  void declare(const std::string& gate, const std::string& description);
  // Declares a gate that compares the device with the host twin: with no twin (cpu
  // backend) it is recorded as skipped with its reason, so cpu and cuda receipts list
  // the same gates.
  void device_gate(const std::string& gate, const std::string& description,
                   const std::string& skip_reason = "needs a CUDA device: compares the device kernels with the host twin");
  // Records one check of `gate` on the case `case_vars`.
  bool check(const std::string& gate, bool ok, const std::string& case_vars, const std::string& detail = "");
  // Records a bound check: ok when ratio <= 1 (NaN ratio fails); keeps the worst ratio.
  bool check_ratio(const std::string& gate, double ratio, const std::string& case_vars,
                   const std::string& detail = "");
  void skip(const std::string& gate, const std::string& reason, int64_t count = 1);
  // A backend or setup error: fails the run (never silently dropped).
  void error(const std::string& case_vars, const std::string& message);
  bool has_errors() const { return !errors_.empty(); }
  // True when the case passes --filter / --case (and it becomes the current case).
  bool selected(const std::string& case_vars);
  // True when --filter or --case narrowed the run.
  bool narrowed() const { return selection_.any(); }
  // The selected case a failing check belongs to: `case_vars` itself or the current case
  // when case_vars extends its line; empty for checks outside the generated cases.
  std::string case_of(const std::string& case_vars) const;
  // Case lines of failed checks (first few, distinct), in order; outside controls only.
  const std::vector<std::string>& failed_cases() const { return failed_cases_; }
  void progress(const std::string& line) const;
  // A control: body runs in a sub-run whose gates must catch the planted defect.
  void control(const std::string& name, const std::string& description,
               const std::function<void(Run&)>& body);
  // --gates-only (the mutant tests, which ask only whether a gate catches the build; the
  // contract's own test runs the controls): from here on control() counts its control as
  // skipped and runs nothing, and once a gate has failed selected() takes no further case
  // (counted as filtered out and in cases_stopped). A run that skipped a control never passes.
  void gates_only() { gates_only_ = true; }
  int controls_skipped() const { return controls_skipped_; }
  int64_t cases_stopped() const { return cases_stopped_; }

  nlohmann::json numbers = nlohmann::json::object();
  // numbers.coverage, what ran per dimension: cover_case counts one case and its value along
  // each dimension; cover_value counts one value alone (e.g. a planted value).
  void cover_case(const std::vector<std::pair<std::string, std::string>>& values);
  void cover_value(const std::string& dim, const std::string& value);
  int64_t cases_run = 0;
  int64_t cases_filtered = 0;
  int64_t cases_matched = 0;  // cases the --filter / --case selected, in any shard
  int64_t cases_other_shard = 0;  // selected cases of another shard (--shard)
  // Selected refusal probes that are not generated cases (a run with no --filter / --case: every
  // probe runs, in one shard or another, and counts in cases_matched for the dealing alone); the
  // receipt's cases.matched leaves them out, as cases.run does.
  int64_t matched_uncounted = 0;
  // Of those, the ones this shard ran (a shard that ran refusal probes alone ran cases: it is no
  // empty shard).
  int64_t uncounted_run = 0;
  // Whether the last selected() that returned false left the case to another shard.
  bool last_out_by_shard() const { return last_out_by_shard_; }

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
  CaseSelection selection_;
  std::string current_case_;
  std::vector<std::string> failed_cases_;
  std::chrono::steady_clock::time_point last_check_;
  bool quiet_;
  bool gates_only_ = false;
  bool last_out_by_shard_ = false;
  int controls_skipped_ = 0;
  int64_t cases_stopped_ = 0;
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
  std::optional<std::string> case_line;
  std::vector<std::string> argv;
  bool quiet = false;
  int shard = 1, shards = 1;  // --shard i/n (CaseSelection)
  std::string label;          // progress status prefix; default the contract's name
  // --gates-only: the gates alone, no control run, and no case after the first in which a
  // gate failed. The receipt says so (controls_skipped, verdict_reasons) and its verdict is
  // fail: exit 1 whether or not a gate failed (a mutant test looks for the failing gate,
  // "because gate ..." in the summary).
  bool gates_only = false;
};

struct RunResult {
  bool pass = false;
  Receipt receipt;
};

// The run's tables into its receipt: gates, controls (`seen`: per control, what the
// writer noted about its catch) and errors.
void record_run(const Run& run, Receipt* r, const nlohmann::json& seen = nlohmann::json::object());
// A device as receipts record it; empty fields (compute capability, driver on cpu) left out.
nlohmann::json device_json(const DeviceInfo& d);

// Picks the backend named by opts.backend ("auto" -> cuda when a device is present).
// Errors (unknown name, cuda without a device) come back in *st.
std::unique_ptr<Backend> select_backend(const std::string& name, Status* st);

RunResult run_contract(const ContractDef& c, Backend& be, const RunOptions& opts);
// Renders a receipt as the human summary table, ending with the one-line summary.
std::string summary_table(const Receipt& receipt);
// "fp8-rows: pass - 11 gates ok, 3 skipped; 13 of 13 controls red; 48 cases; 9.2 s"
std::string summary_line(const Receipt& receipt);
// Where a receipt may be written: missing parent folders may be missing (write_text_atomic
// creates them, mkdir -p) when the nearest folder that exists is writable; a path that exists
// and is not a regular file (a folder, a device node, a FIFO, a socket) is refused; a symlink
// is followed, so the file it points to is replaced and the link stays. Returns the path that
// will be replaced in *target. Nothing is written or created: a refused command leaves nothing.
Status prepare_output(const std::string& path, std::string* target);
// Whether two paths name one file (symlinks followed as prepare_output follows them, compared
// canonically): a write to a would replace b (--out and --junit, an --out naming an input).
// Writes nothing (no probe file in either folder: b is often an input's).
bool same_output(const std::string& a, const std::string& b);
// The regular file directly in folder `dir` (a checkpoint's config.json, its safetensors, ...)
// that writing `out` would replace, or "" when none would (or `dir` is empty or unreadable):
// a command refuses an --out that would overwrite the model it reads.
std::string output_replaces_file_in(const std::string& out, const std::string& dir);
// A path as same_output compares it: absolute, symlinks of its existing folders resolved, and
// "x/.." folded where x does not exist yet.
std::filesystem::path path_key(const std::string& path);
// --filter's search of one case line or bench row: std::regex_search, on a thread of its own
// under a deadline. std::regex backtracks, so a pattern such as (.|.)*X took exponential time
// on a 100-byte line and the command ran until stopped; a search that takes longer than
// kFilterSearchSeconds ends the process with exit 2, naming the pattern and the line. Nothing
// is written by then (receipts are written at the end).
inline constexpr int kFilterSearchSeconds = 10;
// The longest --filter taken. std::regex compiles a pattern by recursion: 20,000 nested groups
// overflowed the stack (exit 139). Case lines and bench rows are about 100 bytes; premerge's
// same-call A/B deals its rows into filters of at most this many bytes (ab_filters).
inline constexpr size_t kMaxFilterBytes = 1000;
bool filter_search(const std::string& text, const std::regex& re, const std::string& pattern);
// Writes text atomically through prepare_output: a temp file beside the target, synced to
// the disk (fsync), then renamed over it, and the folder synced (receipts, Markdown, JUnit
// XML): a crash leaves the earlier file or the new one, whole.
Status write_text_atomic(const std::string& path, const std::string& text);
// Several files as one write (a receipt and its --junit): every file is written and synced
// to its temp file first, and only when all of them are does any rename happen, so a write
// that fails (a full disk) leaves every target as it was. (A rename that fails after others
// took effect, which needs the folder to change under the run, is reported as the error.)
Status write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);
// The length of the well-formed UTF-8 sequence at s[i] (Unicode's Table 3-7: no overlong form,
// no surrogate, nothing past U+10FFFF), 0 where there is none.
size_t utf8_length_at(const std::string& s, size_t i);
// Text as valid UTF-8: every byte that is not part of a well-formed UTF-8 sequence becomes the
// four characters \xNN (hex, upper case). argv, file names and prompts hold raw bytes, and a
// JSON string must be UTF-8 (nlohmann::json's dump throws on an invalid byte).
std::string utf8_escaped(const std::string& s);
// A JSON value with every string and object key through utf8_escaped.
nlohmann::json utf8_escaped(const nlohmann::json& j);
// JSON, indented by 2, through write_text_atomic; strings through utf8_escaped, so any bytes
// given on the command line reach the file (never an exception after a run).
Status write_json_atomic(const std::string& path, const nlohmann::json& j);
// The bytes write_json_atomic writes (for write_files_atomic).
std::string json_file_text(const nlohmann::json& j);
inline Status write_json_atomic(const std::string& path, const Receipt& r) { return write_json_atomic(path, r.doc()); }
// The end of a command that writes a receipt (serve-gate, serve-memory, kv-gate): the
// summary table on `out`, then, when `out_file` is given, the receipt written there
// atomically and "receipt: FILE". `with`: more files (path, text: the --junit XML) written
// in the same write (write_files_atomic). An error is the write's (nothing written).
Status print_and_write_receipt(const Receipt& r, const std::string& out_file, std::ostream& out,
                               const std::vector<std::pair<std::string, std::string>>& with = {});

// Case helpers.
uint64_t mix_seed(uint64_t seed, uint64_t i);

}  // namespace kc
