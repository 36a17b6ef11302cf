// The pure part of premerge's bench comparison (tools/premerge.h): which same-run ratios
// measure one time of a row, and how much slower that time is by all of them. Linked into
// kc_receipt_views so that the unit tests reach it without the contracts.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "tools/premerge.h"
#include "tools/receipt_views.h"

namespace kc {

using json = nlohmann::json;

std::optional<std::string> ratio_group(const std::string& field) {
  static const std::string of = "of_ceiling", over = "_over_";
  if (field.size() >= of.size() && field.compare(field.size() - of.size(), of.size(), of) == 0) {
    std::string g = field.substr(0, field.size() - of.size());
    if (!g.empty() && g.back() == '_') g.pop_back();
    return g;
  }
  const size_t p = field.find(over);
  if (p != std::string::npos && p > 0) {
    const std::string g = field.substr(0, p);
    return g == "ours" ? std::string() : g;
  }
  return std::nullopt;
}

std::string bench_l2_policy(const json& receipt) {
  if (receipt.is_object() && receipt.contains("l2_policy") && receipt["l2_policy"].is_string())
    return receipt["l2_policy"].get<std::string>();
  return "warm";
}

bool bench_quick_mode(const json& receipt) {
  if (!receipt.is_object()) return false;
  if (receipt.contains("quick") && receipt["quick"].is_boolean()) return receipt["quick"].get<bool>();
  const json argv = receipt.contains("argv") && receipt["argv"].is_array() ? receipt["argv"] : json::array();
  return std::find(argv.begin(), argv.end(), json("--quick")) != argv.end();
}

std::vector<TimeSlowdown> time_slowdowns(const json& base_row, const json& head_row, const json* rerun_row,
                                         const PremergeOptions& o) {
  std::map<std::string, TimeSlowdown> groups;
  auto time_of = [](const json& row, const std::string& g) {
    const std::string f = g.empty() ? "median_us" : g + "_us";
    return row.contains(f) && row[f].is_number() ? row[f].get<double>() : std::nan("");
  };
  for (auto it = head_row.begin(); it != head_row.end(); ++it) {
    const std::string& fld = it.key();
    const std::optional<std::string> g = ratio_group(fld);
    if (!g || !it.value().is_number() || !base_row.contains(fld) || !base_row[fld].is_number()) continue;
    const double bv = base_row[fld].get<double>(), hv = it.value().get<double>();
    double s = same_run_slowdown(fld, bv, hv);
    if (s == 0) continue;
    auto [at, fresh] = groups.try_emplace(*g);
    TimeSlowdown& t = at->second;
    if (fresh) {
      t.group = *g;
      t.slowdown = std::numeric_limits<double>::infinity();
      const double bt = time_of(base_row, *g), ht = time_of(head_row, *g);
      t.launch_bound = std::min(bt, ht) < o.short_row_us;  // false when a time is missing (NaN)
      t.limit = t.launch_bound ? std::max(o.max_slowdown_short, o.max_slowdown) : o.max_slowdown;
    }
    std::string d = fld + " " + fmt_sig(bv) + " -> " + fmt_sig(hv) + " (" + fmt_sig(s, 3) + "x";
    if (s > t.limit) ++t.slower_by_some;
    double use = s, used = hv;
    if (rerun_row && rerun_row->contains(fld) && (*rerun_row)[fld].is_number()) {
      const double cv = (*rerun_row)[fld].get<double>(), cs = same_run_slowdown(fld, bv, cv);
      d += ", re-run " + fmt_sig(cv) + " " + fmt_sig(cs, 3) + "x";
      if (cs > t.limit) ++t.slower_by_some;
      if (cs > 0 && cs < use) use = cs, used = cv;
    }
    d += ")";
    t.detail += (t.detail.empty() ? "" : ", ") + d;
    if (use < t.slowdown) {
      t.slowdown = use;
      t.field = fld;
      t.base = bv;
      t.head = used;
    }
  }
  // A time the base measured (a positive same-run ratio) whose every ratio the head lacks, or
  // gives as 0, negative or not finite, escaped the comparison: it counts as slower than any
  // limit, never as skipped.
  for (auto it = base_row.begin(); it != base_row.end(); ++it) {
    const std::string& fld = it.key();
    const std::optional<std::string> g = ratio_group(fld);
    if (!g || groups.count(*g) || !it.value().is_number()) continue;
    const double bv = it.value().get<double>();
    if (!(bv > 0) || !std::isfinite(bv)) continue;
    TimeSlowdown& t = groups[*g];
    t.group = *g;
    t.slowdown = std::numeric_limits<double>::infinity();
    t.launch_bound = false;
    t.limit = o.max_slowdown;
    t.field = fld;
    t.base = bv;
    t.head = std::nan("");
    t.slower_by_some = 1;
    t.detail = fld + " " + fmt_sig(bv) + " -> " +
               (head_row.contains(fld) ? head_row[fld].dump() : std::string("missing")) +
               " (the head's ratio is missing or not a positive number: no time compared)";
  }
  std::vector<TimeSlowdown> out;
  for (auto& [g, t] : groups) out.push_back(std::move(t));
  return out;
}

const json* target_named(const json& bench, const std::string& name) {
  if (!bench.is_object() || !bench.contains("targets")) return nullptr;
  for (const auto& t : bench["targets"])
    if (t["name"] == name) return &t;
  return nullptr;
}

std::set<std::string> missed_targets(const json& base, const json& head) {
  std::set<std::string> out;
  for (const auto& t : head["targets"]) {
    const json* b = target_named(base, t["name"].get<std::string>());
    if (b && b->at("met").get<bool>() && t["measured"].get<bool>() && !t["met"].get<bool>())
      out.insert(t["name"].get<std::string>());
  }
  return out;
}

std::string receipt_card(const json& receipt) {
  if (!receipt.is_object() || !receipt.contains("device") || !receipt["device"].is_object()) return "";
  const json& d = receipt["device"];
  return d.contains("name") && d["name"].is_string() ? d["name"].get<std::string>() : "";
}

std::string cross_card_why(const std::string& base_card, const std::string& head_card) {
  if (base_card.empty() || head_card.empty() || base_card == head_card) return "";
  return "the base was timed on " + base_card + ", the head on " + head_card;
}

std::string cross_card_refusal(const std::map<std::string, json>& base_benches, const std::string& card,
                               const std::string& base_dir) {
  for (const auto& [n, r] : base_benches)
    if (const std::string why = cross_card_why(receipt_card(r), card); !why.empty())
      return "bench " + n + ": " + why + " (" + (std::filesystem::path(base_dir) / ("bench-" + n + ".json")).string() +
             " device.name): bench ratios of two cards do not compare; pass --base-bin with a tf-cuda-test "
             "built from the base's commit (every row is then timed against it in a same-call A/B on this card), "
             "or run premerge on " + receipt_card(r);
  return "";
}

std::string ab_filter(const std::string& what, const std::vector<json>& rows) {
  if (what == "pack" || rows.empty()) return "";
  auto escaped = [](const std::string& w) {
    std::string e;
    for (char c : w) {
      if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) e += '\\';
      e += c;
    }
    return e;
  };
  std::string alt;
  for (const json& r : rows) {
    std::string name = r.value("config", "");
    if (what == "attention") {  // the printed row name: config/format/addressing
      name += '/';
      name += r.value("format", "");
      name += '/';
      name += r.value("addressing", "");
    }
    if (!alt.empty()) alt += '|';
    alt += escaped(name);
  }
  std::string f = "^(";
  f += alt;
  f += ")$";
  return f;
}

std::vector<std::string> ab_filters(const std::string& what, const std::vector<json>& rows, size_t max_bytes) {
  if (what == "pack" || rows.empty()) return {""};
  std::vector<std::string> out;
  std::vector<json> group;
  for (const json& r : rows) {
    group.push_back(r);
    if (group.size() > 1 && ab_filter(what, group).size() > max_bytes) {
      group.pop_back();
      out.push_back(ab_filter(what, group));
      group = {r};
    }
  }
  out.push_back(ab_filter(what, group));
  return out;
}

AbTimes ab_times(const std::string& group, const std::vector<std::pair<const json*, const json*>>& rounds, double limit) {
  const std::string f = group.empty() ? "median_us" : group + "_us";
  AbTimes a;
  for (const auto& [b, h] : rounds) {
    if (!b || !h || !b->contains(f) || !h->contains(f) || !(*b)[f].is_number() || !(*h)[f].is_number()) continue;
    const double bt = (*b)[f].get<double>(), ht = (*h)[f].get<double>();
    if (!(bt > 0) || !(ht > 0) || !std::isfinite(bt) || !std::isfinite(ht)) continue;
    ++a.rounds;
    if (ht / bt > limit) ++a.slower;
    if (a.rounds == 1 || ht / bt < a.least) a.least = ht / bt, a.base_us = bt, a.head_us = ht;
    a.detail += (a.detail.empty() ? "" : ", ") + std::string("head ") + fmt_sig(ht, 4) + " / base " + fmt_sig(bt, 4) +
                " us (" + fmt_sig(ht / bt, 3) + "x)";
  }
  return a;
}

}  // namespace kc
