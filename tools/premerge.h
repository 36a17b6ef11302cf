// `tf-cuda-test premerge`: the pre-merge gate of a change to the arithmetic. It runs every
// contract for the head (as kernel-contract does, with each base receipt's seed and case
// count) and, on the cuda backend, `bench attention` and `bench pack` (and rope-store and
// compact where the base has them), each in the mode of the base's receipt (full or
// --quick), once more when rows are slower (a row counts when both runs are), or
// reads the head's receipts from --head DIR; diffs every receipt against the base folder's;
// writes premerge.md (the comment a reviewer pastes: verdict, regressions, then tables) and
// exits 1 on any regression:
//   a gate ok -> FAIL or removed, a control red -> GREEN or removed, a verdict pass -> fail,
//   a bench target met -> not met (targets both runs measured), a bench row's time slower
//   than --max-slowdown (--max-slowdown-short under --short-row-us) by every same-run ratio
//   of it (achieved / ceiling and ours / SDPA: never absolute times from two machines), a receipt the base has and the head did not write, a new
//   contract (with --allow-contract-changes) that fails.
// With --base-bin PATH (a tf-cuda-test built from the base receipts' commit), rows slower in
// both runs are timed once more in a same-call A/B: two rounds, each the base build's bench and
// then the head's over those rows alone (--filter), on the same machine one after the other, so
// their absolute times compare. A time stays a regression only when the head is slower than the
// base build past its limit in every round; the A/B is not used (a note says why) when the base
// build's receipt names another commit than the base receipt's or a dirty tree.
// A bench whose base receipt names another card (receipt_card) than the head's: its ratios do
// not carry across cards, so premerge running the head refuses it without --base-bin and, with
// it, times every row in the same-call A/B; each time is compared there alone (a time no round
// timed is a regression) and the bench's targets and verdict are notes. --head folders likewise.
// The base folder holds receipts as kernel-contract --out-dir writes them (<contract>.json)
// and benches as bench-<name>.json; other files are listed as not compared. Refused with
// exit 2, naming the mismatch, before anything runs: a base of another backend, a base of
// another contract set (unless --allow-contract-changes), a base receipt that ran a subset
// of its cases (--filter, --case, --shard), no contract receipt in the base, an unreadable
// or inconsistent receipt (file, field, reason).
#pragma once
#include <cmath>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kc {

struct PremergeOptions {
  std::string base_dir;
  std::string head_dir;      // empty: run the head here
  std::string backend = "auto";
  bool backend_given = false;
  std::string out_dir = "premerge";
  std::string junit;         // --junit FILE
  double max_slowdown = 1.05;
  double max_slowdown_short = 1.25;  // for launch-bound rows (below short_row_us)
  double short_row_us = 20;
  bool allow_contract_changes = false;
  bool skip_gates = false;  // --skip-gates: do not replay the base's serve-gate / kv-gate receipts (a --head
                            // folder's gate receipts are compared all the same)
  std::vector<std::string> contracts;  // --contracts: only these (empty: every contract)
  std::string script_dir = "tools";    // bench attention's bench_sdpa.py
  std::string base_bin;                // --base-bin: tf-cuda-test built from the base receipts' commit
  bool quiet = false;
  std::vector<std::string> argv;
};

// Returns 0 (no regression), 1 (a regression, each named on `out` and in premerge.md) or 2
// (bad input or a mismatched base; the message names it, nothing is written).
int premerge_command(const PremergeOptions& o, std::ostream& out, std::ostream& err);

// Slowdown of a bench row's same-run ratio from base to head (> 1: slower): fields ending
// in "of_ceiling" are fractions of a ceiling (higher is faster: base / head); fields with
// "_over_" are time ratios (lower is faster: head / base). 0 for a field that is neither.
inline double same_run_slowdown(const std::string& field, double base, double head) {
  if (!(base > 0) || !(head > 0) || !std::isfinite(base) || !std::isfinite(head)) return 0;
  if (field.size() >= 10 && field.compare(field.size() - 10, 10, "of_ceiling") == 0) return base / head;
  if (field.find("_over_") != std::string::npos) return head / base;
  return 0;
}

// The same-run ratios of one measured time of a bench row: a row's own time (median_us) is
// measured against the ceiling (of_ceiling) and against SDPA (ours_over_sdpa_best); bench
// pack's rows have two times (pack_us, unpack_us), each with its own ratio. A time's ratios
// are its yardsticks, measured in the same run.
//   "of_ceiling", "ours_over_sdpa_best" -> ""   (time field median_us)
//   "pack_of_ceiling"                   -> "pack" (time field pack_us)
// Empty optional: not a same-run ratio.
std::optional<std::string> ratio_group(const std::string& field);

// One measured time of a row, base against head (and, when given, the head's re-run):
//   slowdown: the smallest slowdown over the time's yardsticks and runs, so a time is slower
//     only when every yardstick of the same run says so in every run (a baseline such as
//     SDPA whose own time moved between two sessions moves one ratio, not the ceiling's);
//   limit: max_slowdown, or max_slowdown_short when the base or head time is under
//     short_row_us (a launch-bound row, whose ratios move by more between two sessions).
struct TimeSlowdown {
  std::string group;               // "" (the row's time), "pack", ...
  std::string detail;              // "of_ceiling 0.8 -> 0.7 (1.14x), ours_over_sdpa_best ..."
  std::string field;               // the ratio that gives the smallest slowdown
  double base = 0, head = 0;       // that ratio's values
  double slowdown = 0, limit = 0;  // > limit: slower
  bool launch_bound = false;
  int slower_by_some = 0;          // yardstick/run pairs past the limit
};
// The L2 rule a bench receipt's runs were timed under (bench rope-store / compact --l2): its
// l2_policy ("flush", "warm"); "warm" for a receipt without one (every bench before the
// field ran back to back). Rows of two policies are not comparable: premerge runs a head's
// bench in its base receipt's policy, and refuses a --head folder whose policy differs.
std::string bench_l2_policy(const nlohmann::json& receipt);
// Whether a bench receipt timed the --quick set of rows: its `quick` field; for a receipt
// written before the field, `--quick` in its argv (one premerge wrote reads as full: the
// committed ones were).
bool bench_quick_mode(const nlohmann::json& receipt);

// The card a receipt was measured on: its device.name, "" when it records none. A bench's
// ratios to its ceiling and to SDPA are those of its card (an H100 and an H200 differ in
// bandwidth, clocks and caches), so premerge compares a head's bench times with its base's
// only on one card; across cards only the same-call A/B against the base build compares.
std::string receipt_card(const nlohmann::json& receipt);
// Why bench receipts timed on cards `base_card` and `head_card` (receipt_card) cannot be compared
// by their rows' ratios ("" when they can): both cards are named, and not the same one.
std::string cross_card_why(const std::string& base_card, const std::string& head_card);

// Why premerge running the head on `card` without --base-bin refuses a base of these bench
// receipts (name -> receipt), "" when it does not: the first bench timed on another card.
std::string cross_card_refusal(const std::map<std::string, nlohmann::json>& base_benches, const std::string& card,
                               const std::string& base_dir);

// The target named `name` of a bench receipt, or null (no receipt, or no such target).
const nlohmann::json* target_named(const nlohmann::json& bench, const std::string& name);
// The targets the base met that the head's run measured and missed (two receipts of one card):
// premerge runs that bench again, and counts such a target only when the re-run misses it too.
std::set<std::string> missed_targets(const nlohmann::json& base, const nlohmann::json& head);

// Times of a head row against its base row; `rerun` may be null.
std::vector<TimeSlowdown> time_slowdowns(const nlohmann::json& base_row, const nlohmann::json& head_row,
                                         const nlohmann::json* rerun_row, const PremergeOptions& o);

// The --filter regex that selects exactly these rows of bench `what` (rows of a receipt of it):
// attention's rows by config/format/addressing, rope-store's and compact's by config (their
// config names the format and addressing), anchored. Empty for pack (it has no --filter) and
// for no rows.
std::string ab_filter(const std::string& what, const std::vector<nlohmann::json>& rows);
// The same rows as several such filters, each at most max_bytes long (rows in their order, as
// many to a filter as fit): bench attention's 162 rows make one of 5619 bytes, which --filter
// refuses (kMaxFilterBytes), so an A/B of every row ran nothing. {""} for pack and for no rows.
// A row whose own filter is longer than max_bytes gets a filter of its own.
std::vector<std::string> ab_filters(const std::string& what, const std::vector<nlohmann::json>& rows, size_t max_bytes);

// One measured time of a row (group as in TimeSlowdown: "" median_us, "pack" pack_us, ...) in a
// same-call A/B: each round's base-build row and head row (either may be null: not in that
// round's receipt). rounds: rounds with both times; slower: rounds whose head time / base time
// is past limit; detail: "head 34.6 / base 33.4 us (1.04x), head ...".
struct AbTimes {
  int rounds = 0, slower = 0;
  std::string detail;
  double least = 0;                // the smallest head / base time of the rounds (0: no round)
  double base_us = 0, head_us = 0;  // that round's times
};
AbTimes ab_times(const std::string& group, const std::vector<std::pair<const nlohmann::json*, const nlohmann::json*>>& rounds,
                 double limit);

}  // namespace kc
