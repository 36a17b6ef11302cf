#include "tools/premerge.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "contracts/contracts.h"
#include "contracts/framework.h"
#include "contracts/input_file.h"
#include "contracts/receipt.h"
#include "tools/bench_attention.h"
#include "tools/bench_moves.h"
#include "tools/bench_pack.h"
#include "tools/junit.h"
#include "tools/receipt_views.h"

namespace kc {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The receipts of a folder, as kernel-contract --out-dir (and premerge) write them.
struct Folder {
  std::string dir;
  std::map<std::string, json> contracts;  // contract name -> receipt (<name>.json)
  std::map<std::string, json> benches;    // bench name -> receipt (bench-<name>.json)
  std::map<std::string, json> reruns;     // bench name -> premerge's second run (bench-<name>-rerun.json)
  std::map<std::string, json> gates;      // file stem -> a serve-gate or kv-gate receipt (<stem>.json)
  std::vector<std::string> ignored;       // "file: why"
};

std::string file_of(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

Status read_folder(const std::string& dir, const std::string& role, Folder* f) {
  f->dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::Error(role + " " + dir + ": " + (fs::exists(dir, ec) ? "not a folder" : "no such folder") +
                         " (expected a folder of receipts, as kernel-contract --out-dir writes them)");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".json") continue;
    // Not fs::is_regular_file(path), which throws on a symlink loop (premerge aborted, exit
    // 134). A *.json that is no readable regular file (a loop, a dangling link, a folder, a
    // FIFO) is listed among the files not compared, never skipped without a word.
    std::error_code fe;
    const fs::file_status st = fs::status(it->path(), fe);
    if (st.type() == fs::file_type::regular) files.push_back(it->path());
    else
      f->ignored.push_back(it->path().filename().string() + ": not a regular file" +
                           (fe ? " (" + fe.message() + ")" : st.type() == fs::file_type::not_found ? " (a dangling link)" : ""));
  }
  if (ec) return Status::Error(role + " " + dir + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    const std::string path = p.string(), base = p.filename().string(), stem = p.stem().string();
    std::ifstream in(p, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      return Status::Error(role + " " + path + ": not JSON (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("schema") || j["schema"] != kReceiptSchema) {
      f->ignored.push_back(base + ": not a receipt (no schema " + std::string(kReceiptSchema) + ")");
      continue;
    }
    json r;
    KC_RETURN_IF_ERROR(Receipt::load(path, &r));
    const std::string kind = r["kind"].get<std::string>(), name = r["name"].get<std::string>();
    if (kind == "contract" && stem == name && from_contract_run(r)) {
      f->contracts[name] = std::move(r);
    } else if (kind == "bench" && stem == "bench-" + name) {
      f->benches[name] = std::move(r);
    } else if (kind == "bench" && stem == "bench-" + name + "-rerun") {
      f->reruns[name] = std::move(r);
    } else if (kind == "serve-gate" || kind == "kv-gate") {
      f->gates[stem] = std::move(r);
    } else {
      f->ignored.push_back(base + ": " + kind + " '" + name + "'" +
                           (kind == "contract" && stem == name ? ", not written by a contract run" : "") +
                           (kind == "contract" && stem != name ? ", not named <contract>.json" : "") +
                           (kind == "bench" && stem != "bench-" + name ? ", not named bench-<name>.json" : "") +
                           (kind != "contract" && kind != "bench" ? " (premerge compares contracts, benches, serve-gate and kv-gate receipts)" : ""));
    }
  }
  return Status::Ok();
}

// Why a base receipt cannot serve as one: it ran a subset of its cases.
std::string narrowed_why(const json& r) {
  if (!r.contains("cases")) return "";
  const json& c = r["cases"];
  if (c.contains("filter") && !c["filter"].get<std::string>().empty())
    return "ran with --filter " + shell_quote(c["filter"].get<std::string>());
  if (c.contains("case")) return "ran with --case (one case)";
  if (c.contains("shard") && c["shard"].is_string()) return "is shard " + c["shard"].get<std::string>() + " (merge shards with report --merge-out first)";
  return "";
}

std::string short_commit(const json& r) {
  return r["git"]["commit"].get<std::string>().substr(0, 12) + (r["git"]["dirty"].get<bool>() ? " (dirty)" : " (clean)");
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

struct RowChange {
  std::string row, field;
  double base, head, slowdown, limit;
  bool held_ab = false;  // past its limit in both runs, but not in every round of the same-call A/B
};

struct Compared {
  std::string label;  // "fp8-rows", "bench attention"
  std::string base_file, head_file;
  std::string base_verdict = "-", head_verdict = "-";
  std::vector<std::string> regressions, notes;
  int improvements = 0;
  std::string cross_card;  // a bench's cross_card_why: compared by its same-call A/B alone
  std::string detail;  // the diff, Markdown
};

// The keys of the head's rows with a measured time slower than its limit by every same-run ratio.
std::set<std::string> slow_rows(const json& base, const json& head, const PremergeOptions& o) {
  std::map<std::string, const json*> brows;
  for (const auto& r : base["rows"]) brows[bench_row_key(r)] = &r;
  std::set<std::string> out;
  for (const auto& r : head["rows"]) {
    const std::string k = bench_row_key(r);
    if (!brows.count(k)) continue;
    for (const TimeSlowdown& t : time_slowdowns(*brows[k], r, nullptr, o))
      if (t.slowdown > t.limit) out.insert(k);
  }
  return out;
}

// Bench: targets both runs measured, rows' same-run ratios, the verdict when a measured
// target explains it. `confirm` (or null): the head's second run of the bench, made when its
// first run found slower rows or missed a target the base met (a target counts as missed, and a
// verdict as failed, only when the second run says so too). A row's measured time counts as slower only when every same-run
// ratio of it, in both runs, is past its limit (time_slowdowns): one noisy measurement, or a
// baseline (SDPA) whose own time moved, is not a regression.
// `ab` (or null): the same-call A/B of the rows slower in both runs (--base-bin), an array of
// rounds {"base": the base build's receipt, "head": the head's}; a time it finds past its limit
// in fewer than all of its rounds held.
// Base and head timed on two cards (cross_card_why): their targets and verdicts are notes, and
// each time is compared in the same-call A/B alone, which must cover it (every row is timed
// there when premerge runs the head across cards); a time it does not cover is a regression.
void compare_bench(const json& base, const json& head, const json& confirm, const json& ab, const PremergeOptions& o,
                   Compared* c, std::vector<RowChange>* rows) {
  const std::string cross = cross_card_why(receipt_card(base), receipt_card(head));
  c->cross_card = cross;
  if (!cross.empty())
    c->notes.push_back(cross + ": two cards, so their ratios to the ceiling and to SDPA do not compare; each time is "
                       "compared in the same-call A/B against the base build on the head's card, and targets and "
                       "verdicts are not compared");
  std::map<std::string, const json*> bt;
  for (const auto& t : base["targets"]) bt[t["name"].get<std::string>()] = &t;
  // A head timed with --quick against a full base (a --head folder) measures fewer targets: those
  // it lacks are listed. Otherwise the head ran in the base's mode and lacks none.
  const bool quick_head = bench_quick_mode(head) && !bench_quick_mode(base);
  std::set<std::string> head_targets;
  for (const auto& t : head["targets"]) {
    const std::string n = t["name"].get<std::string>();
    head_targets.insert(n);
    const bool hm = t["measured"].get<bool>(), hmet = t["met"].get<bool>();
    if (!bt.count(n)) {
      if (hm && !hmet) c->regressions.push_back("target " + n + ": not met (" + format_target(t["value"].get<double>(), t["limit"].get<double>()) + "; new target)");
      continue;
    }
    const json& b = *bt[n];
    if (!hm) {  // the head runs in the base's mode: a target the base measured must be measured again
      if (b["measured"].get<bool>() && !quick_head)
        c->regressions.push_back("target " + n + ": measured -> not measured by the head");
      else
        c->notes.push_back("target " + n + " not measured by the head" +
                           (b["measured"].get<bool>() ? " (its --quick run leaves it out)" : " (nor by the base)"));
      continue;
    }
    if (target_limit_loosened(b, t))
      c->regressions.push_back("target " + n + ": limit loosened (" + fmt_sig(b["limit"].get<double>()) + " -> " +
                               fmt_sig(t["limit"].get<double>()) + ")");
    if (!cross.empty()) {
      if (b["met"].get<bool>() != hmet)
        c->notes.push_back("target " + n + ": " + (hmet ? "not met -> met" : "met -> not met") + " (" +
                           format_target(b["value"].get<double>(), b["limit"].get<double>()) + " -> " + format_target(t["value"].get<double>(), t["limit"].get<double>()) +
                           ") on another card: not compared");
    } else if (b["met"].get<bool>() && !hmet) {
      // A target met by the base and missed by the head's run is measured again (the re-run):
      // a target at its limit flips with the run's noise, so the head misses it only when both
      // runs do.
      const json* again = target_named(confirm, n);
      const bool again_measured = again && again->at("measured").get<bool>();
      const std::string what =
          "target " + n + ": met -> NOT met (" + format_target(b["value"].get<double>(), b["limit"].get<double>()) + " -> " +
          format_target(t["value"].get<double>(), t["limit"].get<double>()) +
          (!again ? std::string()
                  : " in the first run, " +
                        (again_measured ? format_target(again->at("value").get<double>(), again->at("limit").get<double>()) : std::string("not measured")) +
                        " in the re-run") +
          ", limit " + fmt_sig(t["limit"].get<double>()) + ")";
      if (again_measured && again->at("met").get<bool>()) c->notes.push_back(what + ": held, the re-run meets it");
      else c->regressions.push_back(what);
    } else if (!b["measured"].get<bool>() && !hmet) {
      // The base did not measure it; the head measures it and misses it: missed for the first
      // time, as a new target missed is (session 63's audit: no regression).
      c->regressions.push_back("target " + n + ": not measured -> NOT met (" +
                               format_target(t["value"].get<double>(), t["limit"].get<double>()) + ", limit " +
                               fmt_sig(t["limit"].get<double>()) + ")");
    } else if (!b["met"].get<bool>() && hmet)
      ++c->improvements;
  }
  // A head in the base's mode has every base target: one missing escaped the comparison (a
  // --quick head against a full base, read from --head, lists them instead).
  int unmeasured = 0;
  for (const auto& [n, t] : bt)
    if (!head_targets.count(n)) {
      if (quick_head) ++unmeasured;
      else c->regressions.push_back("target " + n + ": in the base, not in the head's receipt");
    }
  if (unmeasured)
    c->notes.push_back(std::to_string(unmeasured) + " base targets not in the head's receipt (--quick times fewer configurations)");
  // The bench's own verdict and its rows' verification, as diff reads them.
  // Across cards a verdict follows the card's targets: a note (rows that erred or lost their
  // verification are regressions row by row, below).
  // A verdict the re-run passes again held, as a target does.
  if (base["verdict"] == "pass" && head["verdict"] == "fail") {
    if (cross.empty() && confirm.is_object() && confirm["verdict"] == "pass")
      c->notes.push_back("verdict pass -> fail in the first run, pass in the re-run: held");
    else
      (cross.empty() ? c->regressions : c->notes)
          .push_back("verdict pass -> fail" + std::string(cross.empty() ? "" : " on another card") +
                     (head.contains("verdict_reasons") && !head["verdict_reasons"].empty()
                          ? ": " + head["verdict_reasons"][0].get<std::string>()
                          : std::string()));
  }
  std::map<std::string, const json*> brows, crows;
  for (const auto& r : base["rows"]) brows[bench_row_key(r)] = &r;
  if (confirm.is_object())
    for (const auto& r : confirm["rows"]) crows[bench_row_key(r)] = &r;
  // The A/B's rows by round: (base build's rows, head's rows), each by key.
  std::vector<std::pair<std::map<std::string, const json*>, std::map<std::string, const json*>>> ab_rows;
  if (ab.is_array())
    for (const auto& round : ab) {
      auto& [bm, hm] = ab_rows.emplace_back();
      auto rows_of = [&](const char* side, std::map<std::string, const json*>& m) {
        if (!round.contains(side) || !round[side].is_object() || !round[side].contains("rows")) return;
        if (!round[side]["rows"].is_array()) return;
        for (const auto& r : round[side]["rows"]) m[bench_row_key(r)] = &r;
      };
      rows_of("base", bm);
      rows_of("head", hm);
    }
  int compared = 0, slower = 0, one_yardstick = 0, short_rows = 0, unmatched = 0, other_bytes = 0, held_ab = 0;
  int no_ab = 0;  // across cards: times the same-call A/B did not cover
  std::set<std::string> hash_fields;  // the output hashes that differ somewhere
  // Row k's time in group g over the A/B's rounds (base build, head), limit `limit`.
  auto ab_of = [&](const std::string& k, const std::string& g, double limit) {
    std::vector<std::pair<const json*, const json*>> rounds;
    for (auto& [bm, hm] : ab_rows) rounds.emplace_back(bm.count(k) ? bm[k] : nullptr, hm.count(k) ? hm[k] : nullptr);
    return ab_times(g, rounds, limit);
  };
  for (const auto& r : head["rows"]) {
    const std::string k = bench_row_key(r);
    if (!brows.count(k)) {
      ++unmatched;
      continue;
    }
    const json* again = crows.count(k) ? crows[k] : nullptr;
    const json& b = *brows[k];
    const bool b_verified = b.contains("verified") && b["verified"] == true;
    if (r.contains("error"))
      c->regressions.push_back("row " + k + " failed to run: " + (r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump()));
    else if (b_verified && !(r.contains("verified") && r["verified"] == true))
      c->regressions.push_back("row " + k + " verified -> " + (r.contains("verified") ? "not verified" : "no verification recorded"));
    bool other = false;  // an output hash (bench_output_hash) both rows carry, and not the same
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it.value().is_string() && bench_output_hash(it.key()) && b.contains(it.key()) && b[it.key()] != it.value()) {
        other = true;
        hash_fields.insert(it.key());
      }
    other_bytes += other;
    for (const TimeSlowdown& t : time_slowdowns(*brows[k], r, again, o)) {
      const std::string what = head["name"].get<std::string>() + " " + k + (t.group.empty() ? "" : " (" + t.group + ")");
      if (!cross.empty()) {  // the time's group and limit from the ratios; its comparison from the A/B alone
        const AbTimes a = ab_of(k, t.group, t.limit);
        const std::string row = "row " + k + (t.group.empty() ? "" : " (" + t.group + ")");
        const std::string field = "same-call A/B, " + (t.group.empty() ? std::string("median_us") : t.group + "_us");
        if (a.rounds == 0) {
          ++no_ab;
          rows->push_back({what, field, std::nan(""), std::nan(""), std::numeric_limits<double>::infinity(), t.limit});
          c->regressions.push_back(row + ": not compared: " + cross + ", and no round of a same-call A/B against the " +
                                   "base build timed it (premerge --base-bin times every row when the cards differ)");
          continue;
        }
        ++compared;
        if (t.launch_bound) ++short_rows;
        rows->push_back({what, field, a.base_us, a.head_us, a.least, t.limit});
        if (a.slower == a.rounds) {
          ++slower;
          c->regressions.push_back(row + ": slower in every round of the same-call A/B against the base build (" +
                                   a.detail + "), limit " + fmt_sig(t.limit, 3) +
                                   (t.launch_bound ? " (launch-bound row)" : ""));
        }
        continue;
      }
      if (!std::isnan(t.head)) ++compared;  // a ratio the head lacks is a regression, not a comparison
      if (t.launch_bound) ++short_rows;
      rows->push_back({what, t.field, t.base, t.head, t.slowdown, t.limit});
      if (t.slowdown > t.limit) {
        const AbTimes a = ab_of(k, t.group, t.limit);
        const std::string row = "row " + k + (t.group.empty() ? "" : " (" + t.group + ")") + ": " + t.detail + ": " +
                                format_target(t.slowdown, t.limit) + "x slower by every same-run ratio" +
                                (again ? " in both runs" : "") + ", limit " + fmt_sig(t.limit, 3) +
                                (t.launch_bound ? " (launch-bound row)" : "");
        if (a.rounds > 0 && a.slower < a.rounds) {  // the same-call A/B says the time held
          ++held_ab;
          rows->back().held_ab = true;
          c->notes.push_back(row + "; held in the same-call A/B against the base build (" + a.detail + ")");
          continue;
        }
        ++slower;
        c->regressions.push_back(row + (a.rounds > 0 ? "; slower in every round of the same-call A/B against the base "
                                                       "build (" + a.detail + ")"
                                                     : std::string()));
      } else if (t.slower_by_some > 0) {
        ++one_yardstick;
      }
    }
  }
  if (!cross.empty())
    c->notes.push_back(std::to_string(compared) + " measured times of " + std::to_string(head["rows"].size()) +
                       " head rows compared in the same-call A/B against the base build (head / base time, every "
                       "round), " + std::to_string(slower) + " slower in every round; " + std::to_string(no_ab) +
                       " not timed there; " + std::to_string(short_rows) + " launch-bound (under " +
                       fmt_sig(o.short_row_us) + " us, limit " + fmt_sig(o.max_slowdown_short, 3) + ")");
  else
    c->notes.push_back(std::to_string(compared) + " measured times of " + std::to_string(head["rows"].size()) +
                       " head rows compared by their same-run ratios, " + std::to_string(slower) +
                       " slower by every ratio" + (confirm.is_object() ? " in both runs" : "") + "; " +
                       std::to_string(one_yardstick) +
                       " past the limit by some ratio or run only (another yardstick of the same run, or the re-run, "
                       "says the time held); " +
                       std::to_string(short_rows) + " launch-bound (under " + fmt_sig(o.short_row_us) + " us, limit " +
                       fmt_sig(o.max_slowdown_short, 3) + ")" +
                       (ab.is_array() ? "; " + std::to_string(held_ab) +
                                            " slower in both runs but held in the same-call A/B against the base build"
                                      : std::string()));
  // A head whose rows match none of the base's compared nothing: that is no pass.
  if (unmatched > 0 && unmatched == int(head["rows"].size()) && !base["rows"].empty())
    c->regressions.push_back("no head row has a base row of the same name (config, format, addressing, ...): " +
                             std::to_string(unmatched) + " rows, none compared");
  else if (unmatched > 0)
    c->notes.push_back(std::to_string(unmatched) + " head rows have no base row of the same name (not compared)");
  // Rows matched by name but with no same-run ratio both carry: nothing was timed against the
  // base, which is no pass either (whatever else the head holds).
  if (unmatched < int(head["rows"].size()) && compared == 0 && !head["rows"].empty() && !base["rows"].empty())
    c->regressions.push_back("no measured time compared: the " + std::to_string(head["rows"].size()) + " head rows " +
                             (cross.empty() ? "share no same-run ratio (of_ceiling, ours / SDPA, ...) with their base rows"
                                            : "have no time that a same-call A/B against the base build measured (" +
                                                  cross + ")"));
  // The head runs in the base's mode, so every base row must be timed again: a row the head
  // left out escaped the comparison.
  {
    std::set<std::string> head_keys;
    for (const auto& r : head["rows"]) head_keys.insert(bench_row_key(r));
    std::vector<std::string> missing;
    for (const auto& [k, r] : brows)
      if (!head_keys.count(k)) missing.push_back(k);
    if (!missing.empty())
      c->regressions.push_back(std::to_string(missing.size()) + " of " + std::to_string(brows.size()) +
                               " base rows are missing from the head (not timed, so not compared), first " +
                               missing.front());
  }
  std::string fields;
  for (const std::string& f : hash_fields) {
    if (!fields.empty()) fields += ", ";
    fields += f;
  }
  if (other_bytes > 0)
    c->notes.push_back("output bytes (" + fields + ") differ from the base's on " + std::to_string(other_bytes) + " of " +
                       std::to_string(head["rows"].size() - unmatched) +
                       " rows with a base row: the arithmetic or the inputs changed");
}

// Why a base build's bench receipt cannot stand for the base in a same-call A/B ("" when it
// can): no rows, or another commit than the base receipt's, or a dirty tree.
std::string ab_base_why(const json& b, const json& base_receipt) {
  if (!b.is_object() || !b.contains("rows") || !b["rows"].is_array()) return "it is not a bench receipt with rows";
  const std::string want = base_receipt.contains("git") && base_receipt["git"].is_object() ? base_receipt["git"].value("commit", "") : "";
  const std::string got = b.contains("git") && b["git"].is_object() ? b["git"].value("commit", "") : "";
  const bool dirty = !b.contains("git") || !b["git"].is_object() || b["git"].value("dirty", true);
  if (!want.empty() && got == want && !dirty) return "";
  return "its receipt names commit " + (got.empty() ? std::string("(none)") : got) + (dirty ? " (dirty tree)" : "") +
         ", the base receipt " + (want.empty() ? std::string("(none)") : want);
}

// A same-call A/B's file in folder dir (a head folder's ab/): bench-<what>-<side>-<round><ext>,
// side "base" (the base build's run) or "head".
std::string ab_file(const std::string& dir, const std::string& what, const char* side, int round, const char* ext) {
  return file_of(dir, "bench-" + what + "-" + side + "-" + std::to_string(round) + ext);
}

using RunBench = std::function<int(const std::string&, const BenchOptions&, Receipt*)>;

// The same-call A/B of bench `what` over `rows` (the head's rows slower in both of its runs, or
// every row when the base was timed on another card; `which` says which, for the note):
// two rounds, each the base build's run (o.base_bin, a process of its own) and then the head's,
// in bo's mode, over those rows alone. The receipts go to head_out/ab/. *ab gets the rounds, or
// null and a note when the A/B cannot be used (the base build wrote no receipt, or one of
// another commit than base_receipt's, or of a dirty tree). An error: a receipt not written.
Status same_call_ab(const std::string& what, const BenchOptions& bo, const std::vector<json>& rows,
                    const json& base_receipt, const std::string& head_out, const RunBench& run_bench,
                    const PremergeOptions& o, std::ostream& err, std::vector<std::string>* notes, json* ab,
                    const std::string& which) {
  *ab = json();
  // The rows as filters within --filter's limit (one for up to about 27 attention rows; every
  // row of 162 took 5619 bytes, refused, so the A/B across cards timed nothing).
  const std::vector<std::string> filters = ab_filters(what, rows, kMaxFilterBytes);
  const std::string want = base_receipt.contains("git") && base_receipt["git"].is_object() ? base_receipt["git"].value("commit", "") : "";
  const std::string dir = file_of(head_out, "ab");
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto not_used = [&](const std::string& why) {
    notes->push_back("bench " + what + ": the same-call A/B against the base build (" + o.base_bin + ") is not used: " +
                     why);
    *ab = json();
    return Status::Ok();
  };
  json rounds = json::array();
  for (int round = 1; round <= 2; ++round) {
    const std::string n = std::to_string(round);
    const std::string bfile = ab_file(dir, what, "base", round, ".json"), blog = ab_file(dir, what, "base", round, ".log");
    if (!o.quiet)
      err << "premerge: bench " << what << ": same-call A/B, round " << n << " of 2 over " << rows.size() << " rows"
          << (filters.size() > 1 ? " in " + std::to_string(filters.size()) + " parts" : std::string())
          << ": the base build, then the head\n";
    // Each part: the base build's run, then the head's, over the part's rows; a round's receipts
    // are the first part's with every part's rows.
    json b, hdoc;
    for (size_t part = 0; part < filters.size(); ++part) {
      const std::string& filter = filters[part];
      const std::string pfile = filters.size() > 1 ? ab_file(dir, what, "base", round, (".part" + std::to_string(part + 1) + ".json").c_str()) : bfile;
      const std::string plog = filters.size() > 1 ? ab_file(dir, what, "base", round, (".part" + std::to_string(part + 1) + ".log").c_str()) : blog;
      std::string cmd = shell_quote(o.base_bin) + " bench " + what;
      if (bo.quick) cmd += " --quick";
      if (what == "rope-store" || what == "compact") cmd += " --l2 " + shell_quote(bo.l2);
      if (what == "attention") cmd += " --script-dir " + shell_quote(bo.script_dir);
      if (!filter.empty()) cmd += " --filter " + shell_quote(filter);
      cmd += " --out " + shell_quote(pfile) + " > " + shell_quote(plog) + " 2>&1";
      fs::remove(pfile, ec);
      const int rc = std::system(cmd.c_str());
      json pb;
      std::string text;
      if (read_regular_file(pfile, &text).empty()) pb = json::parse(text, nullptr, false);
      if (!pb.is_object())
        return not_used("it wrote no receipt (exit " + std::to_string(rc) + ", " + plog + ")");
      if (const std::string why = ab_base_why(pb, base_receipt); !why.empty()) return not_used(why);
      BenchOptions hb = bo;
      hb.filter = filter;
      Receipt h;
      const int hrc = run_bench(what, hb, &h);
      if (h.doc().is_null()) return not_used("the head's run wrote no receipt (exit " + std::to_string(hrc) + ")");
      if (part == 0) {
        b = std::move(pb);
        hdoc = h.doc();
      } else {
        for (auto& r : pb["rows"]) b["rows"].push_back(r);
        for (const auto& r : h.doc().value("rows", json::array())) hdoc["rows"].push_back(r);
        fs::remove(pfile, ec);
      }
    }
    if (filters.size() > 1) {
      KC_RETURN_IF_ERROR(write_json_atomic(bfile, b));
      fs::remove(ab_file(dir, what, "base", round, ".part1.json"), ec);
    }
    KC_RETURN_IF_ERROR(write_json_atomic(ab_file(dir, what, "head", round, ".json"), hdoc));
    rounds.push_back({{"base", b}, {"head", hdoc}});
  }
  notes->push_back("bench " + what + ": " + std::to_string(rows.size()) + " " + which +
                   " timed in a same-call A/B against the base build " + o.base_bin +
                   " (commit " + want.substr(0, 12) + "), 2 rounds, base then head (head/ab/)");
  *ab = std::move(rounds);
  return Status::Ok();
}

// This process's executable (the head's tf-cuda-test), for the gates' replays.
std::string self_exe(const PremergeOptions& o) {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && !p.empty()) return p.string();
  return o.argv.empty() ? "tf-cuda-test" : o.argv[0];
}

std::string last_line_of(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

int premerge_command(const PremergeOptions& o, std::ostream& out, std::ostream& err) {
  auto refuse = [&](const std::string& why) {
    err << "tf-cuda-test: error: premerge: " << why << "\n";
    return 2;
  };
  if (!(o.max_slowdown >= 1.0) || !std::isfinite(o.max_slowdown))
    return refuse("--max-slowdown " + fmt_sig(o.max_slowdown) + ": expected a ratio of at least 1 (1.05: 5 % slower)");
  if (!(o.max_slowdown_short >= 1.0) || !std::isfinite(o.max_slowdown_short))
    return refuse("--max-slowdown-short " + fmt_sig(o.max_slowdown_short) + ": expected a ratio of at least 1");
  if (!(o.short_row_us >= 0) || !std::isfinite(o.short_row_us))
    return refuse("--short-row-us " + fmt_sig(o.short_row_us) + ": expected a time in microseconds, 0 or more");
  if (!o.base_bin.empty()) {
    if (!o.head_dir.empty())
      return refuse("--base-bin " + o.base_bin + " with --head " + o.head_dir +
                    ": the same-call A/B runs the base build beside the head's benches, and with --head nothing runs");
    std::error_code ec;
    if (!fs::is_regular_file(o.base_bin, ec) || ::access(o.base_bin.c_str(), X_OK) != 0)
      return refuse("--base-bin " + o.base_bin + ": not an executable file (a tf-cuda-test built from the base's commit)");
  }
  Folder base, head;
  Status st = read_folder(o.base_dir, "--base", &base);
  if (!st.ok) return refuse(st.message);
  if (base.contracts.empty())
    return refuse("--base " + o.base_dir + ": holds no contract receipt (<contract>.json written by kernel-contract or a "
                  "contract command); " + std::to_string(base.ignored.size()) + " other files");
  for (const auto& [name, r] : base.contracts) {
    const std::string why = narrowed_why(r);
    if (!why.empty())
      return refuse("base " + file_of(o.base_dir, name + ".json") + " " + why +
                    ": a base receipt must run every case (kernel-contract --out-dir)");
    // The head runs the base's case count: one --cases cannot give (4294967297 wrapped to 1 case).
    if (r.contains("cases") && r["cases"].contains("requested") &&
        (!r["cases"]["requested"].is_number_integer() || r["cases"]["requested"].get<int64_t>() < 1 ||
         r["cases"]["requested"].get<int64_t>() > std::numeric_limits<int>::max()))
      return refuse("base " + file_of(o.base_dir, name + ".json") + ": cases.requested " +
                    r["cases"]["requested"].dump() + ": expected 1 to " + std::to_string(std::numeric_limits<int>::max()) +
                    " (what --cases takes), the head runs the base's count");
  }
  // The base's backend: one for all its compared receipts.
  std::string base_backend;
  std::string base_backend_file;
  auto check_backend = [&](const json& r, const std::string& file) -> std::string {
    const std::string b = r["backend"].get<std::string>();
    if (base_backend.empty()) base_backend = b, base_backend_file = file;
    if (b != base_backend)
      return "backend mismatch inside the base: " + base_backend_file + " ran on " + base_backend + ", " + file + " on " + b;
    return "";
  };
  for (const auto& [n, r] : base.contracts)
    if (auto w = check_backend(r, file_of(o.base_dir, n + ".json")); !w.empty()) return refuse(w);
  for (const auto& [n, r] : base.benches)
    if (auto w = check_backend(r, file_of(o.base_dir, "bench-" + n + ".json")); !w.empty()) return refuse(w);
  for (const auto& [n, r] : base.gates)
    if (auto w = check_backend(r, file_of(o.base_dir, n + ".json")); !w.empty()) return refuse(w);

  // The head: a folder of receipts, or the contracts run here.
  std::set<std::string> registered;
  for (const ContractDef& c : contracts()) registered.insert(c.name);
  for (const auto& n : o.contracts)
    if (!registered.count(n)) {
      std::string known;
      for (const ContractDef& c : contracts()) known += (known.empty() ? "" : ", ") + c.name;
      return refuse("--contracts: unknown contract '" + n + "' (known: " + known + ")");
    }
  std::vector<std::string> head_set;  // in registry order
  std::string head_backend;
  std::unique_ptr<Backend> be;
  // A head that is the base folder compares every receipt with itself: a PASS with nothing
  // compared (session 62's audit; a CI job with the two variables swapped or equal).
  if (!o.head_dir.empty() &&
      path_key(file_of(o.base_dir, "premerge.md")) == path_key(file_of(o.head_dir, "premerge.md")))
    return refuse("--head " + o.head_dir + " is the --base folder " + o.base_dir +
                  ": every receipt would be compared with itself; give the head's own receipts");
  if (!o.head_dir.empty()) {
    st = read_folder(o.head_dir, "--head", &head);
    if (!st.ok) return refuse(st.message);
    if (head.contracts.empty()) return refuse("--head " + o.head_dir + ": holds no contract receipt");
    // A contract --contracts names must have its head receipt: one neither folder held was left
    // out of premerge.md, and the run passed (session 63's audit).
    for (const std::string& n : o.contracts)
      if (!head.contracts.count(n) && !base.contracts.count(n))
        return refuse("--contracts names " + n + ", but neither --base " + o.base_dir + " nor --head " + o.head_dir +
                      " holds a receipt of it");
    for (const auto& [n, r] : head.contracts) {
      if (!o.contracts.empty() && std::find(o.contracts.begin(), o.contracts.end(), n) == o.contracts.end()) continue;
      head_set.push_back(n);
      const std::string b = r["backend"].get<std::string>();
      if (head_backend.empty()) head_backend = b;
      if (b != head_backend)
        return refuse("backend mismatch inside the head: " + o.head_dir + " holds receipts of " + head_backend + " and " + b);
    }
    if (o.backend_given && o.backend != "auto" && o.backend != head_backend)
      return refuse("--backend " + o.backend + " but the head's receipts in " + o.head_dir + " ran on " + head_backend);
    // One head, one commit: a receipt of another commit in the head's folder (the base's own
    // receipt copied in) stood for the head and hid the head's regression (PASS).
    {
      std::string commit, first;
      std::vector<std::pair<std::string, const json*>> used;
      for (const std::string& n : head_set) used.push_back({file_of(o.head_dir, n + ".json"), &head.contracts[n]});
      for (const auto& [n, r] : head.benches) used.push_back({file_of(o.head_dir, "bench-" + n + ".json"), &r});
      for (const auto& [stem, r] : head.gates) used.push_back({file_of(o.head_dir, stem + ".json"), &r});
      // And one binary, where the receipts name theirs (build.id; older receipts do not): a
      // receipt of a mutant or of another build of the commit copied in stood for the head.
      std::string build, build_file;
      for (const auto& [file, r] : used) {
        const std::string c = (*r)["git"].value("commit", std::string());
        if (first.empty()) commit = c, first = file;
        else if (c != commit)
          return refuse("commit mismatch inside the head: " + first + " was built from " + commit + ", " + file + " from " +
                        c + " (a head folder holds one commit's receipts)");
        if (!r->contains("build")) continue;
        const std::string b = (*r)["build"].value("id", std::string());
        if (build_file.empty()) build = b, build_file = file;
        else if (b != build)
          return refuse("build mismatch inside the head: " + build_file + " was written by the binary of build id " + build +
                        ", " + file + " by " + b + " (a head folder holds one binary's receipts)");
      }
    }
    // A head receipt stands for the head only if it ran what its base ran: every case (no
    // --filter, --case or shard) and as many cases. A one-case run would pass the gate.
    for (const std::string& n : head_set) {
      const json& h = head.contracts[n];
      const std::string why = narrowed_why(h);
      if (!why.empty())
        return refuse("head " + file_of(o.head_dir, n + ".json") + " " + why +
                      ": a head receipt must run every case, as its base (kernel-contract --out-dir)");
      if (base.contracts.count(n) && base.contracts[n].contains("cases") && !h.contains("cases"))
        return refuse("head " + file_of(o.head_dir, n + ".json") + " records no cases (cases), its base " +
                      file_of(o.base_dir, n + ".json") + " does: a head receipt must say what it ran");
      if (base.contracts.count(n) && h.contains("cases") && base.contracts[n].contains("cases") &&
          h["cases"].value("requested", json()) != base.contracts[n]["cases"].value("requested", json()))
        return refuse("head " + file_of(o.head_dir, n + ".json") + " ran --cases " +
                      h["cases"].value("requested", json()).dump() + ", its base " +
                      file_of(o.base_dir, n + ".json") + " " + base.contracts[n]["cases"].value("requested", json()).dump() +
                      ": run the head with the base's --cases");
      // And the base's seed, as premerge runs a head itself: another seed draws other cases, and
      // the diff's rules that need the same cases (a gate that passes fewer checks) were off
      // (session 63's audit: checks turned into skips passed with the seed changed).
      if (base.contracts.count(n) && h["seed"] != base.contracts[n]["seed"])
        return refuse("head " + file_of(o.head_dir, n + ".json") + " ran --seed " + h["seed"].dump() + ", its base " +
                      file_of(o.base_dir, n + ".json") + " " + base.contracts[n]["seed"].dump() +
                      ": run the head with the base's --seed");
    }
    // A bench timed under another L2 rule than its base (l2_policy): its ratios to the
    // ceiling measure something else (a run that finds its previous run's lines in L2).
    for (const auto& [n, h] : head.benches)
      if (base.benches.count(n) && bench_l2_policy(base.benches[n]) != bench_l2_policy(h))
        return refuse("L2 policy mismatch: " + file_of(o.base_dir, "bench-" + n + ".json") + " was timed with l2_policy " +
                      bench_l2_policy(base.benches[n]) + ", " + file_of(o.head_dir, "bench-" + n + ".json") + " with " +
                      bench_l2_policy(h) + "; time the head with bench " + n + " --l2 " +
                      bench_l2_policy(base.benches[n]) + ", or let premerge run it (it takes the base's policy)");
    // Likewise the timing mode (events where absent): gated or graph times are not events times.
    for (const auto& [n, h] : head.benches) {
      if (!base.benches.count(n)) continue;
      const std::string tb = base.benches[n].value("timing", std::string("events")), th = h.value("timing", std::string("events"));
      if (tb != th)
        return refuse("timing mismatch: " + file_of(o.base_dir, "bench-" + n + ".json") + " was timed with --timing " + tb +
                      ", " + file_of(o.head_dir, "bench-" + n + ".json") + " with " + th + "; time the head with --timing " +
                      tb + ", or let premerge run it");
    }
  } else {
    for (const ContractDef& c : contracts())
      if (o.contracts.empty() || std::find(o.contracts.begin(), o.contracts.end(), c.name) != o.contracts.end())
        head_set.push_back(c.name);
    be = select_backend(o.backend, &st);
    if (!be) return refuse(st.message);
    head_backend = be->name();
  }
  if (head_set.empty()) return refuse("--head " + o.head_dir + ": holds none of the contracts named by --contracts");
  if (head_backend != base_backend)
    return refuse("backend mismatch: the base (" + base_backend_file + ") ran on " + base_backend + ", the head " +
                  (o.head_dir.empty() ? "runs" : "ran") + " on " + head_backend +
                  "; compare receipts of one backend (a base made with --backend " + head_backend +
                  (o.head_dir.empty() ? ", or --backend " + base_backend : "") + ")");
  // The contract set.
  std::set<std::string> base_set, hs(head_set.begin(), head_set.end());
  for (const auto& [n, r] : base.contracts)
    if (o.contracts.empty() || std::find(o.contracts.begin(), o.contracts.end(), n) != o.contracts.end())
      base_set.insert(n);
  std::vector<std::string> base_only, head_only;
  for (const auto& n : base_set)
    if (!hs.count(n)) base_only.push_back(n);
  for (const auto& n : head_set)
    if (!base_set.count(n)) head_only.push_back(n);
  if ((!base_only.empty() || !head_only.empty()) && !o.allow_contract_changes) {
    std::string why = "contract set mismatch:";
    if (!base_only.empty())
      why += " the base (" + o.base_dir + ") has receipts of " + joined(base_only) + ", which the head does not run" +
             (o.head_dir.empty() ? " (not registered in this build)" : "") + ";";
    if (!head_only.empty())
      why += " the head runs " + joined(head_only) + ", of which the base has no receipt;";
    why += " compare a base of the same contracts, or pass --allow-contract-changes when the change adds or removes contracts";
    return refuse(why);
  }
  // Benches run here against a base timed on another card: their ratios do not carry across
  // cards, so only a same-call A/B against the base build compares, and it needs --base-bin.
  if (o.head_dir.empty() && head_backend == "cuda" && o.base_bin.empty())
    if (const std::string why = cross_card_refusal(base.benches, be->device().name, o.base_dir); !why.empty())
      return refuse(why);
  // Outputs, checked before the run.
  // The head's receipts go to --out-dir's head/: a base that is that folder (the last premerge's
  // head/, as the next one's base) would have its receipts replaced by the head's.
  if (o.head_dir.empty() &&
      path_key(file_of(o.base_dir, "premerge.md")) == path_key(file_of(file_of(o.out_dir, "head"), "premerge.md")))
    return refuse("--base " + o.base_dir + " is --out-dir " + o.out_dir + "'s head/ (" + file_of(o.out_dir, "head") +
                  "), where the head's receipts are written: they would replace the base's; pass another --out-dir");
  const std::string md_path = file_of(o.out_dir, "premerge.md");
  std::string target;
  st = prepare_output(md_path, &target);
  if (!st.ok) return refuse("--out-dir " + st.message);
  if (!o.junit.empty()) {
    std::string why;
    if (!junit_writable(o.junit, &why)) return refuse(why);
    if (same_output(md_path, o.junit))
      return refuse("--junit " + o.junit + " names premerge.md (" + md_path + "): the JUnit XML would replace the report");
    // Nor a file among the receipts premerge reads or writes: a base or head receipt replaced by
    // XML would be read as "not JSON" by the next premerge.
    const auto inside = [](const std::string& file, const std::string& dir) {
      const fs::path rel = path_key(file).lexically_relative(path_key(dir));
      return !rel.empty() && *rel.begin() != "..";
    };
    const std::vector<std::pair<std::string, std::string>> dirs = {
        {"--base", o.base_dir}, {"--head", o.head_dir}, {"--out-dir " + o.out_dir + "'s head/", file_of(o.out_dir, "head")}};
    for (const auto& [what, dir] : dirs)
      if (!dir.empty() && inside(o.junit, dir))
        return refuse("--junit " + o.junit + " lies in the receipts' folder of " + what + " (" + dir +
                      "): the JUnit XML could replace a receipt");
  }

  // Run the head.
  std::vector<json> head_receipts;  // in order, for JUnit
  std::map<std::string, json> head_contracts, head_benches, head_confirm, head_ab;
  std::map<std::string, json> head_gates;             // file stem -> the head's serve-gate / kv-gate receipt
  std::map<std::string, std::string> gate_replay_why;  // file stem -> why the head has none
  std::vector<std::string> run_notes;
  const std::string head_out = file_of(o.out_dir, "head");
  if (o.head_dir.empty()) {
    size_t i = 0;
    for (const std::string& name : head_set) {
      ++i;
      const ContractDef* c = find_contract(name);
      RunOptions ro;
      ro.backend = head_backend;
      ro.quiet = o.quiet;
      ro.argv = o.argv;
      ro.label = name + " [" + std::to_string(i) + "/" + std::to_string(head_set.size()) + "]";
      if (base.contracts.count(name)) {  // the base's draw: the same seed and case count
        const json& b = base.contracts[name];
        ro.seed = b["seed"].get<uint64_t>();
        if (b.contains("cases") && b["cases"].contains("requested")) ro.cases = b["cases"]["requested"].get<int>();
      }
      const RunResult rr = run_contract(*c, *be, ro);
      out << summary_line(rr.receipt) << "\n" << std::flush;
      const std::string path = file_of(head_out, name + ".json");
      st = write_json_atomic(path, rr.receipt);
      if (!st.ok) return refuse(st.message);
      head_contracts[name] = rr.receipt.doc();
      head_receipts.push_back(rr.receipt.doc());
    }
    if (head_backend == "cuda") {
      // attention and pack, and every other bench the base has a receipt of; each in the
      // base receipt's mode (full, or --quick when the base ran --quick; --quick without a
      // base): ratios such as ours / SDPA depend on which rows a run times, so a quick head
      // against a full base differs by more than the limit with no change to the kernels.
      std::vector<std::string> whats = {"attention", "pack"};
      for (const auto& [n, b] : base.benches)
        if ((n == "rope-store" || n == "compact") && std::find(whats.begin(), whats.end(), n) == whats.end())
          whats.push_back(n);
      auto run_bench = [&](const std::string& what, const BenchOptions& bo, Receipt* r) {
        return what == "pack"         ? bench_pack_main(bo, r)
               : what == "rope-store" ? bench_rope_store_main(bo, r)
               : what == "compact"    ? bench_compact_main(bo, r)
                                      : bench_attention_main(bo, r);
      };
      for (const std::string& what : whats) {
        BenchOptions bo;
        bo.quick = true;
        if (base.benches.count(what)) bo.quick = bench_quick_mode(base.benches[what]);
        if (what == "rope-store" || what == "compact") {  // the base's L2 rule; flush without a base
          bo.l2 = base.benches.count(what) ? bench_l2_policy(base.benches[what]) : "flush";
          if (bo.l2 != "flush")
            run_notes.push_back("bench " + what + " ran with --l2 " + bo.l2 + ", the L2 policy of the base's receipt (" +
                                "warm: runs back to back; a receipt without l2_policy was timed so); its rows under the "
                                "default rule (flush) need a base timed with it");
        }
        bo.script_dir = o.script_dir;
        bo.device = device_json(be->device());
        bo.argv = o.argv;
        Receipt bench;
        if (!o.quiet)
          err << "premerge: bench " << what << (bo.quick ? " --quick" : "")
              << (what == "rope-store" || what == "compact" ? " --l2 " + bo.l2 : std::string()) << "\n";
        const int rc = run_bench(what, bo, &bench);
        const json rec = bench.doc();
        if (rec.is_null()) {
          run_notes.push_back("bench " + what + " wrote no receipt (exit " + std::to_string(rc) + ")");
          continue;
        }
        st = write_json_atomic(file_of(head_out, "bench-" + what + ".json"), rec);
        if (!st.ok) return refuse(st.message);
        head_benches[what] = rec;
        head_receipts.push_back(rec);
        if (!base.benches.count(what)) continue;
        // A base timed on another card: every row in the same-call A/B (its times alone compare;
        // --base-bin is required for this case before anything runs).
        if (const std::string cross = cross_card_why(receipt_card(base.benches[what]), receipt_card(rec)); !cross.empty()) {
          std::vector<json> all(rec["rows"].begin(), rec["rows"].end());
          st = same_call_ab(what, bo, all, base.benches[what], head_out, run_bench, o, err, &run_notes, &head_ab[what],
                            "rows (every row: " + cross + ")");
          if (!st.ok) return refuse(st.message);
          continue;
        }
        // When rows are slower than the limit, or targets the base met are missed, the bench
        // runs once more, in the same mode and over the same rows; compare_bench counts a row
        // (a target) only when both runs are slower (miss it).
        const std::set<std::string> slow = slow_rows(base.benches[what], rec, o);
        const std::set<std::string> missed = missed_targets(base.benches[what], rec);
        if (slow.empty() && missed.empty()) continue;
        if (!o.quiet)
          err << "premerge: bench " << what << ": " << slow.size() << " rows slower than their limit, " << missed.size()
              << " targets the base met missed; the bench runs again\n";
        Receipt second;
        const int rc2 = run_bench(what, bo, &second);
        if (second.doc().is_null()) {
          run_notes.push_back("bench " + what + ": the re-run for " + std::to_string(slow.size()) + " slower rows and " +
                              std::to_string(missed.size()) + " missed targets wrote no receipt (exit " +
                              std::to_string(rc2) + "); the first run stands");
          continue;
        }
        st = write_json_atomic(file_of(head_out, "bench-" + what + "-rerun.json"), second);
        if (!st.ok) return refuse(st.message);
        head_confirm[what] = second.doc();
        if (o.base_bin.empty()) continue;
        // Rows slower in both runs: the same-call A/B against the base build (--base-bin).
        const std::set<std::string> again = slow_rows(base.benches[what], second.doc(), o);
        std::vector<json> both;
        for (const auto& r : rec["rows"])
          if (slow.count(bench_row_key(r)) && again.count(bench_row_key(r))) both.push_back(r);
        if (both.empty()) continue;
        st = same_call_ab(what, bo, both, base.benches[what], head_out, run_bench, o, err, &run_notes, &head_ab[what],
                          "rows slower in both runs");
        if (!st.ok) return refuse(st.message);
      }
    } else {
      run_notes.push_back("benches not run: they need the cuda backend (the head ran on " + head_backend + ")");
    }
    // The base's serve-gate and kv-gate receipts: each command again, by this build.
    if (!o.skip_gates && !base.gates.empty()) {
      const std::string exe = self_exe(o), cache = file_of(head_out, "kv-bf16-cache");
      std::error_code rm_ec;
      fs::remove_all(cache, rm_ec);  // a reused --out-dir must not lend an earlier build's bf16 arm
      size_t i = 0;
      for (const auto& [stem, b] : base.gates) {
        ++i;
        const std::string hfile = file_of(head_out, stem + ".json"), log = file_of(head_out, stem + ".log");
        std::string why;
        const std::vector<std::string> args = replay_args(b, hfile, cache, &why);
        if (args.empty()) {
          gate_replay_why[stem] = "cannot replay " + file_of(o.base_dir, stem + ".json") + ": " + why;
          continue;
        }
        std::string cmd = shell_quote(exe);
        for (const auto& a : args) cmd += " " + shell_quote(a);
        if (!o.quiet) err << "premerge: " << b["kind"].get<std::string>() << " " << stem << " [" << i << "/" << base.gates.size() << "]: " << cmd << "\n";
        std::error_code ec;
        fs::create_directories(head_out, ec);
        fs::remove(hfile, ec);
        const int status = std::system((cmd + " > " + shell_quote(log) + " 2>&1").c_str());
        const int rc = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        json h;
        if (rc == 0 || rc == 1) {
          Status ls = Receipt::load(hfile, &h);
          if (!ls.ok) {
            h = json(), why = "wrote no readable receipt: " + ls.message;
          } else if (Receipt(h).what() != Receipt(b).what()) {  // a fixture renamed, say: no comparison
            why = "wrote " + Receipt(h).what() + ", not the base's " + Receipt(b).what();
            h = json();
          }
        }
        if (h.is_object()) {
          head_gates[stem] = h;
          head_receipts.push_back(h);
        } else {
          gate_replay_why[stem] = "the head's replay (" + log + ") " +
                                  (rc == 0 || rc == 1 ? why
                                                      : "exited " + std::to_string(rc) + ": " + last_line_of(log));
        }
      }
    }
  } else {
    for (const auto& n : head_set) {
      head_contracts[n] = head.contracts[n];
      head_receipts.push_back(head.contracts[n]);
    }
    for (const auto& [n, r] : head.benches) {
      // As the gate receipts below: a bench of another backend is no bench of this head (an
      // H200 bench in a cpu head folder was listed as not compared, silently).
      if (r["backend"].get<std::string>() != head_backend)
        return refuse("backend mismatch inside the head: " + file_of(o.head_dir, "bench-" + n + ".json") + " ran on " +
                      r["backend"].get<std::string>() + ", the head's contract receipts on " + head_backend);
      head_benches[n] = r;
      head_receipts.push_back(r);
    }
    for (const auto& [n, r] : head.gates) {
      if (r["backend"].get<std::string>() != head_backend)
        return refuse("backend mismatch inside the head: " + file_of(o.head_dir, n + ".json") + " ran on " +
                      r["backend"].get<std::string>() + ", the head's contract receipts on " + head_backend);
      head_gates[n] = r;
      head_receipts.push_back(r);
    }
    // A head folder that premerge wrote holds its second runs too, and its same-call A/B
    // (ab/bench-<name>-base-<round>.json, -head-<round>.json): the same verdict again.
    // A second run stands for the head only if the head's build made it, in the head's mode.
    auto commit_of = [](const json& r) {
      return r.contains("git") && r["git"].is_object() && r["git"].contains("commit") && r["git"]["commit"].is_string()
                 ? r["git"]["commit"].get<std::string>()
                 : std::string();
    };
    // The build (build.id, where both say one), the card and the mode (--quick, --l2, --timing)
    // of a run that is to stand for head receipt hb: "" when they are hb's, else what differs
    // (session 63's audit: a second run from an H100, --quick and another build held an H200
    // head's slower row).
    auto same_run_why = [&](const json& r, const json& hb) -> std::string {
      if (!r.is_object()) return "it is not a receipt";
      if (commit_of(r).empty() || commit_of(r) != commit_of(hb)) return "its commit is not the head receipt's";
      const auto build_of = [](const json& x) {
        return x.contains("build") && x["build"].is_object() ? x["build"].value("id", std::string()) : std::string();
      };
      if (!build_of(r).empty() && !build_of(hb).empty() && build_of(r) != build_of(hb))
        return "its binary (build.id " + build_of(r) + ") is not the head receipt's (" + build_of(hb) + ")";
      if (receipt_card(r) != receipt_card(hb))
        return "it was timed on " + (receipt_card(r).empty() ? std::string("no named card") : receipt_card(r)) +
               ", the head receipt on " + receipt_card(hb);
      if (bench_quick_mode(r) != bench_quick_mode(hb) || bench_l2_policy(r) != bench_l2_policy(hb) ||
          r.value("timing", std::string("events")) != hb.value("timing", std::string("events")))
        return "its mode (--quick, --l2, --timing) is not the head receipt's";
      return "";
    };
    for (const auto& [n, r] : head.reruns) {
      if (!head.benches.count(n)) continue;
      if (const std::string why = same_run_why(r, head.benches[n]); !why.empty()) {
        run_notes.push_back("bench " + n + ": the second run in " + o.head_dir + " is not used: " + why);
        continue;
      }
      head_confirm[n] = r;
    }
    for (const auto& [n, r] : head.benches) {
      json rounds = json::array();
      for (int round = 1;; ++round) {
        const std::string ab = file_of(o.head_dir, "ab");
        const std::string bf = ab_file(ab, n, "base", round, ".json"), hf = ab_file(ab, n, "head", round, ".json");
        // A name the system refuses (a loop of symbolic links) or a FIFO is a round not used, never
        // an abort (exit 134) or a read that blocks.
        std::error_code eb, eh;
        const bool bx = fs::exists(bf, eb), hx = fs::exists(hf, eh);
        std::string why;
        json b, h;
        if (!eb && !eh && (!bx || !hx)) break;
        std::string tb, th, at = bf;  // at: the file the reason is about
        if (eb || eh) why = (eb ? eb : eh).message(), at = eb ? bf : hf;
        else if (const std::string w = read_regular_file(bf, &tb); !w.empty()) why = w;
        else if (const std::string w2 = read_regular_file(hf, &th); !w2.empty()) why = w2, at = hf;
        if (why.empty()) {
          b = json::parse(tb, nullptr, false);
          h = json::parse(th, nullptr, false);
          if (b.is_discarded() || h.is_discarded()) return refuse(bf + ", " + hf + ": not JSON");
          why = base.benches.count(n) ? ab_base_why(b, base.benches[n]) : "the base has no bench " + n;
        }
        if (why.empty() && receipt_card(b) != receipt_card(r))
          why = "its base side was timed on " + (receipt_card(b).empty() ? std::string("no named card") : receipt_card(b)) +
                ", the head receipt on " + receipt_card(r);
        if (why.empty() && (bench_quick_mode(b) != bench_quick_mode(r) || bench_l2_policy(b) != bench_l2_policy(r) ||
                            b.value("timing", std::string("events")) != r.value("timing", std::string("events"))))
          why = "its base side's mode (--quick, --l2, --timing) is not the head receipt's";
        if (why.empty())
          if (const std::string w = same_run_why(h, r); !w.empty()) why = "its head side: " + w, at = hf;
        if (!why.empty()) {
          run_notes.push_back("bench " + n + ": the same-call A/B in " + file_of(o.head_dir, "ab") + " is not used: " + at +
                              ": " + why);
          rounds = json::array();
          break;
        }
        rounds.push_back({{"base", std::move(b)}, {"head", std::move(h)}});
      }
      // premerge writes two rounds: one alone is an interrupted A/B, and one round that held
      // decided (session 63's audit).
      if (rounds.size() == 1) {
        run_notes.push_back("bench " + n + ": the same-call A/B in " + file_of(o.head_dir, "ab") +
                            " is not used: it holds 1 round (premerge writes 2: an interrupted A/B)");
        rounds = json::array();
      }
      if (!rounds.empty()) head_ab[n] = std::move(rounds);
    }
  }

  // Compare. diff_of: the diff of a base and a head receipt; a field the checks let
  // through but the diff cannot read is an error naming both files.
  auto diff_of = [](const json& b, const json& h, const Compared& c, ReceiptDiff* d) {
    try {
      return diff_receipts(Receipt(b), c.base_file, Receipt(h), c.head_file, d);
    } catch (const json::exception& e) {
      return Status::Error(c.base_file + ", " + c.head_file + ": unreadable field (" + e.what() + ")");
    }
  };
  // compare_into: a contract's or gate's diff, its regressions and improvements into *c.
  auto compare_into = [&diff_of](const json& b, const json& h, Compared* c) {
    ReceiptDiff d;
    KC_RETURN_IF_ERROR(diff_of(b, h, *c, &d));
    c->regressions = d.regression_list;
    c->improvements = d.improvements;
    c->detail = d.text;
    if (c->head_verdict != "pass" && c->base_verdict != "pass") c->notes.push_back("the base failed too");
    return Status::Ok();
  };
  std::vector<Compared> all;
  std::vector<RowChange> row_changes;
  for (const std::string& name : head_set) {
    Compared c;
    c.label = name;
    c.head_file = o.head_dir.empty() ? file_of(head_out, name + ".json") : file_of(o.head_dir, name + ".json");
    const json& h = head_contracts[name];
    c.head_verdict = h["verdict"].get<std::string>();
    if (!base.contracts.count(name)) {
      c.notes.push_back("new contract: no base receipt");
      if (c.head_verdict != "pass") c.regressions.push_back("new contract " + name + ": verdict fail");
      all.push_back(c);
      continue;
    }
    const json& b = base.contracts[name];
    c.base_file = file_of(o.base_dir, name + ".json");
    c.base_verdict = b["verdict"].get<std::string>();
    if (st = compare_into(b, h, &c); !st.ok) return refuse(st.message);
    if (b["seed"] != h["seed"]) c.notes.push_back("seeds differ");
    all.push_back(c);
  }
  for (const auto& n : base_only) {
    Compared c;
    c.label = n;
    c.base_file = file_of(o.base_dir, n + ".json");
    c.base_verdict = base.contracts[n]["verdict"].get<std::string>();
    // A head folder without a receipt of a contract this build still registers lost the
    // receipt: the contract was not removed (it once passed as "removed").
    if (!o.head_dir.empty() && registered.count(n))
      c.regressions.push_back("the head folder " + o.head_dir + " has no receipt of it, but this build registers " + n +
                              " (a lost receipt, not a removed contract)");
    else
      c.notes.push_back("removed: the head does not run it (--allow-contract-changes)");
    all.push_back(c);
  }
  for (const auto& [n, b] : base.benches) {
    Compared c;
    c.label = "bench " + n;
    c.base_file = file_of(o.base_dir, "bench-" + n + ".json");
    c.base_verdict = b["verdict"].get<std::string>();
    if (!head_benches.count(n)) {
      if (head_backend == "cuda") c.regressions.push_back("the head wrote no receipt");
      else c.notes.push_back("not run on " + head_backend);
      all.push_back(c);
      continue;
    }
    const json& h = head_benches[n];
    c.head_file = o.head_dir.empty() ? file_of(head_out, "bench-" + n + ".json") : file_of(o.head_dir, "bench-" + n + ".json");
    c.head_verdict = h["verdict"].get<std::string>();
    compare_bench(b, h, head_confirm.count(n) ? head_confirm[n] : json(), head_ab.count(n) ? head_ab[n] : json(), o,
                  &c, &row_changes);
    ReceiptDiff d;
    if (st = diff_of(b, h, c, &d); !st.ok) return refuse(st.message);
    c.detail = d.text;
    all.push_back(c);
  }
  for (const auto& [n, h] : head_benches)
    if (!base.benches.count(n)) {
      Compared c;
      c.label = "bench " + n;
      c.head_file = o.head_dir.empty() ? file_of(head_out, "bench-" + n + ".json") : file_of(o.head_dir, "bench-" + n + ".json");
      c.head_verdict = h["verdict"].get<std::string>();
      c.notes.push_back("no base receipt: times and targets not compared");
      // Its rows' correctness needs no base: a row that erred or is not verified is a regression,
      // as a gate added failing is (session 63's audit: a pack whose unpack wrote wrong bytes passed
      // against a base without bench receipts). Targets missed are a card's speed: noted.
      for (const auto& r : h["rows"]) {
        const std::string k = bench_row_key(r);
        if (r.contains("error"))
          c.regressions.push_back("row " + k + " failed to run: " +
                                  (r["error"].is_string() ? r["error"].get<std::string>() : r["error"].dump()));
        else if (r.contains("verified") && r["verified"] != true)  // (attention rows carry none: the contracts verify them)
          c.regressions.push_back("row " + k + " not verified (a new bench, with no base receipt)");
      }
      all.push_back(c);
    }

  // serve-gate and kv-gate receipts: what diff calls a regression (a gate ok -> FAIL, a control
  // red -> GREEN, a failing gate failing more checks, ...), as for contracts.
  for (const auto& [stem, b] : base.gates) {
    Compared c;
    c.label = b["kind"].get<std::string>() + " " + stem;
    c.base_file = file_of(o.base_dir, stem + ".json");
    c.base_verdict = b["verdict"].get<std::string>();
    // --skip-gates replays nothing; a --head folder's receipt of the gate is compared all the
    // same (nothing was skipped there), and only a gate the folder lacks is not replayed.
    if (o.skip_gates && !head_gates.count(stem)) {
      c.notes.push_back("not replayed (--skip-gates)");
      all.push_back(c);
      continue;
    }
    if (!head_gates.count(stem)) {
      c.regressions.push_back(gate_replay_why.count(stem) ? gate_replay_why[stem]
                                                          : "the head folder " + o.head_dir + " has no " + stem + ".json");
      all.push_back(c);
      continue;
    }
    const json& h = head_gates[stem];
    c.head_file = o.head_dir.empty() ? file_of(head_out, stem + ".json") : file_of(o.head_dir, stem + ".json");
    c.head_verdict = h["verdict"].get<std::string>();
    if (st = compare_into(b, h, &c); !st.ok) return refuse(st.message);
    all.push_back(c);
  }

  for (const auto& [stem, h] : head_gates)
    if (!base.gates.count(stem)) {  // a --head folder's gate receipt the base has none of
      Compared c;
      c.label = h["kind"].get<std::string>() + " " + stem;
      c.head_file = file_of(o.head_dir, stem + ".json");
      c.head_verdict = h["verdict"].get<std::string>();
      c.notes.push_back("no base receipt: not compared");
      if (c.head_verdict != "pass") c.regressions.push_back("new " + c.label + ": verdict fail, with no base receipt");
      all.push_back(c);
    }

  // premerge.md: the verdict, the regressions, then the tables.
  std::vector<std::string> regressions;
  for (const auto& c : all)
    for (const auto& r : c.regressions) regressions.push_back(c.label + ": " + r);
  const json& any_head = head_receipts.front();
  std::ostringstream md;
  const std::string verdict =
      regressions.empty() ? "PASS - no regression"
                          : "FAIL - " + std::to_string(regressions.size()) + (regressions.size() == 1 ? " regression" : " regressions");
  md << "## premerge: " << verdict << "\n\n";
  md << "Head: commit " << short_commit(any_head) << ", " << head_backend << " on "
     << any_head["device"]["name"].get<std::string>() << (o.head_dir.empty() ? " (run by premerge)" : ", receipts " + o.head_dir)
     << ". Base: " << o.base_dir << ", commit " << short_commit(base.contracts.begin()->second) << ". Bench rows compared by "
     << "same-run ratios (a time is slower when every ratio of its run says so), limit " << fmt_sig(o.max_slowdown, 3)
     << "x slower, " << fmt_sig(o.max_slowdown_short, 3) << "x for launch-bound rows (under " << fmt_sig(o.short_row_us) << " us)";
  std::string cross_benches;  // benches timed on another card than their base: by the same-call A/B alone
  for (const auto& c : all)
    if (!c.cross_card.empty()) cross_benches += (cross_benches.empty() ? "" : ", ") + c.label;
  if (!cross_benches.empty())
    md << "; " << cross_benches << " on another card than the base's (device.name): each time by the same-call A/B "
       << "against the base build alone, head / base time past the limit in every round";
  md << ".\n\n";
  md << "### Regressions (" << regressions.size() << ")\n\n";
  for (const auto& r : regressions) md << "- " << md_text(r) << "\n";
  if (regressions.empty()) md << "- none\n";
  md << "\n### Receipts\n\n| receipt | verdict (base -> head) | regressions | improvements | notes |\n|---|---|---|---|---|\n";
  for (const auto& c : all)
    md << "| " << md_cell(c.label) << " | " << c.base_verdict << " -> " << c.head_verdict << " | " << c.regressions.size()
       << " | " << c.improvements << " | " << md_cell(joined(c.notes)) << " |\n";
  if (!row_changes.empty()) {
    std::stable_sort(row_changes.begin(), row_changes.end(),
                     [](const RowChange& a, const RowChange& b) { return a.slowdown > b.slowdown; });
    md << "\n### Bench rows: largest slowdowns (" << (cross_benches.empty() ? "same-run ratios" : "same-run ratios; across cards, the same-call A/B's times") << ")\n\n| row | ratio (the time's smallest slowdown) | base | head | slowdown |\n|---|---|---|---|---|\n";
    // The 12 largest, and every row past its own limit (a row past a limit of 1.05 sorts below
    // launch-bound rows within their 1.25, and was left out: session 63's audit).
    for (size_t i = 0; i < row_changes.size(); ++i) {
      const RowChange& r = row_changes[i];
      if (i >= 12 && !(r.slowdown > r.limit)) continue;
      md << "| " << r.row << " | " << r.field << " | " << fmt_sig(r.base) << " | " << fmt_sig(r.head) << " | "
         << (std::isfinite(r.slowdown) ? format_target(r.slowdown, r.limit) : fmt_sig(r.slowdown, 3))
         << "x" << (r.held_ab ? " (held in the same-call A/B)" : r.slowdown > r.limit ? " **SLOWER**" : "") << " (limit "
         << fmt_sig(r.limit, 3) << ") |\n";
    }
  }
  std::vector<std::string> not_compared = run_notes;
  // The base's contract receipts that --contracts left out: a PASS speaks for the named ones only.
  if (!o.contracts.empty())
    for (const auto& [n, r] : base.contracts)
      if (std::find(o.contracts.begin(), o.contracts.end(), n) == o.contracts.end())
        not_compared.push_back("base " + file_of(o.base_dir, n + ".json") + ": not among --contracts");
  for (const auto& x : base.ignored) not_compared.push_back("base " + x);
  for (const auto& x : head.ignored) not_compared.push_back("head " + x);
  if (!not_compared.empty()) {
    md << "\n### Not compared\n\n";
    for (const auto& x : not_compared) md << "- " << md_text(x) << "\n";
  }
  md << "\n### Diffs\n";
  for (const auto& c : all)
    if (!c.detail.empty())
      md << "\n<details><summary>" << md_text(c.label) << ": " << c.regressions.size() << " regressions, " << c.improvements
         << " improvements</summary>\n\n"
         << (c.label.rfind("bench ", 0) == 0
                 ? "Row times are judged above (same-run ratios, the Regressions list); the diff below compares the "
                   "receipts' own fields.\n\n"
                 : "")
         << c.detail << "\n</details>\n";

  // Diffs beside the comment, then the comment, then JUnit.
  for (const auto& c : all)
    if (!c.detail.empty()) {
      std::string fname = c.label;
      std::replace(fname.begin(), fname.end(), ' ', '-');
      st = write_text_atomic(file_of(file_of(o.out_dir, "diff"), fname + ".md"), c.detail);
      if (!st.ok) return refuse(st.message);
    }
  st = write_text_atomic(md_path, md.str());
  if (!st.ok) return refuse(st.message);
  if (!o.junit.empty()) {
    std::vector<JunitSuite> suites;
    for (const auto& r : head_receipts) suites.push_back(junit_suite(r));
    JunitSuite pm;
    pm.name = "premerge (against " + o.base_dir + ")";
    for (const auto& c : all) {
      JunitCase jc{c.label, "premerge", 0};
      if (!c.regressions.empty()) {
        jc.result = JunitCase::Result::failure;
        jc.message = std::to_string(c.regressions.size()) + " regressions";
        for (const auto& r : c.regressions) jc.text += r + "\n";
      } else if (c.head_file.empty() || c.base_file.empty()) {
        jc.result = JunitCase::Result::skipped;
        jc.message = joined(c.notes);
      }
      pm.cases.push_back(jc);
    }
    suites.push_back(pm);
    st = write_text_atomic(o.junit, junit_xml("tf-cuda-test premerge", suites));
    if (!st.ok) return refuse(st.message);
  }
  out << "\npremerge: " << verdict << " against " << o.base_dir << "\n";
  for (const auto& r : regressions) out << "  regression: " << r << "\n";
  out << "premerge.md: " << md_path << "\n";
  return regressions.empty() ? 0 : 1;
}

}  // namespace kc
