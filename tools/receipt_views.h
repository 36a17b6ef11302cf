// Reading receipts back: `tf-cuda-test report` (a receipt as the tables a reviewer pastes
// into a pull request) and `tf-cuda-test diff` (what changed between two receipts of the
// same contract or bench, and whether any of it is a regression).
#pragma once
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contracts/receipt.h"
#include "kernels/layout/status.h"

namespace kc {

// Both read receipts through Receipt::load (contracts/receipt.h), which checks every
// field they read.

enum class ViewFormat { md, text, html };

// One receipt as Markdown tables (md), aligned text or an HTML fragment (html: tables,
// headings and lists, every string escaped; report --format html wraps it in a page,
// tools/html_report.h): what ran where (commit, device,
// seed, cases, command), the gates with their worst cases, the controls and what caught
// each, errors; a bench's targets and rows. `path` is printed as the receipt's source.
std::string render_receipt(const Receipt& r, const std::string& path, ViewFormat fmt);

struct ReceiptDiff {
  std::string text;        // Markdown: what changed, regressions first
  int regressions = 0;     // a gate ok -> failed or gone, a control red -> green or gone,
                           // verdict pass -> fail, a target met -> not met or unmeasured
  int improvements = 0;
  std::vector<std::string> regression_list;  // each regression in words, as listed in text
};
// The command a serve-gate or kv-gate receipt stands for, as words after the program: its argv
// without --out, --junit and --bf16-cache (and their values). A serve-gate that kernel-contract
// wrote (argv[1] kernel-contract) stands for `serve-gate FIXTURE --backend B`, its fixture taken
// from the folder fixtures/ on when the recorded path holds one (so the command reads the same on
// every machine, relative to the repository root). Empty, with *why, when it is neither.
std::vector<std::string> gate_command(const nlohmann::json& r, std::string* why);
// A gate_command without its --backend option: what two runs of one gate on two backends share.
std::vector<std::string> gate_command_sans_backend(const std::vector<std::string>& cmd);
// What a gate_command means, however it was typed: its subcommand, the options that change the
// measurement (option -> its values in the order given, "--x v" and "--x=v" alike; --out, --junit,
// --quiet, --bf16-cache and --backend left out) and its other words in order (the fixture first).
// diff compares two gate receipts' commands by this, and their fixtures by fixture_sha256.
struct GateMeaning {
  std::string subcommand;
  std::map<std::string, std::vector<std::string>> options;  // a flag's value is ""
  std::vector<std::string> positional;
};
GateMeaning gate_meaning(const std::vector<std::string>& cmd);
// Whether a head's bench target is judged by a looser limit than its base's (another direction,
// or a limit past the base's): a head is judged by its own limits, so this would meet a target
// with the same value. diff and premerge count it as a regression.
bool target_limit_loosened(const nlohmann::json& base_target, const nlohmann::json& head_target);
// The replay of a base serve-gate / kv-gate receipt by premerge: gate_command with --out
// OUT_FILE and, for a kv-gate, --bf16-cache CACHE (a folder of the premerge run, emptied first,
// so the kv-gate's bf16 arm is this build's, shared by its formats). Empty, with *why, when the
// receipt stands for no such command.
std::vector<std::string> replay_args(const nlohmann::json& r, const std::string& out_file, const std::string& cache,
                                     std::string* why);

// BASE and HEAD must be the same kind and name (else an error naming both). For serve-gate and
// kv-gate receipts the diff also counts as regressions: another command (gate_meaning: another
// subcommand, a measuring option of another value, added or removed, another argument after the
// fixture; the fixture itself is compared by fixture_sha256, its path only noted), an ok gate that checks fewer on the same device, and for kv-gate a depth
// removed or worse (mean or worst-token KL above max(1.25 base, base + 0.1 bar), top-1
// agreement down by more than max(0.02, 2 / rows)) and a recall probe recalled -> lost,
// uninformative or removed. A changed fixture_sha256 is a note.
Status diff_receipts(const Receipt& base, const std::string& base_path, const Receipt& head,
                     const std::string& head_path, ReceiptDiff* out);

// `tf-cuda-test report FILES`: every file read and checked before anything is printed;
// returns 0 (every verdict pass), 1 (a verdict fail) or 2 (a file that is not a readable,
// consistent receipt; the message names the file, the field and the reason).
int report_command(const std::vector<std::string>& files, ViewFormat fmt, std::ostream& out, std::ostream& err);
// A bench row's identity: its string fields (config, format, addressing first) but its output
// hashes (bench_output_hash), joined by spaces; rows of two receipts with the same key are the
// same configuration.
std::string bench_row_key(const nlohmann::json& row);
// Whether a bench row's string field k is the hash of the row's output bytes, a result rather
// than part of its name: a field ending in _fnv1a (bench attention's out_fnv1a) or _hash (the
// move benches' out_hash).
bool bench_output_hash(const std::string& k);

// Markdown text outside a table cell: one line, a tag or comment opener (<script>, </x>, <!--, <?)
// written &lt; so that it is shown, never interpreted ("<=" stays).
std::string md_text(const std::string& s);
// A Markdown table cell: md_text, and | written \|.
std::string md_cell(const std::string& s);
// A number to `digits` significant digits, as report, premerge and the HTML page print it.
std::string fmt_sig(double v, int digits = 4);
// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(const std::string& s);
// s with every control byte but newline and tab (ESC, CR, NUL, DEL...) replaced by '?': report
// and diff print a receipt's strings (case lines, file names) to a terminal.
std::string control_free(const std::string& s);
// `tf-cuda-test diff BASE HEAD`: 0 (no regression), 1 (a regression) or 2 (unreadable or
// incomparable receipts).
int diff_command(const std::string& base, const std::string& head, std::ostream& out, std::ostream& err);

}  // namespace kc
