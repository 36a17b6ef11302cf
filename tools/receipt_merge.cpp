#include "tools/receipt_merge.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "contracts/framework.h"
#include "contracts/json_type.h"
#include "contracts/receipt.h"
#include "tools/html_report.h"
#include "tools/junit.h"
#include "tools/receipt_views.h"

namespace kc {
namespace {

using json = nlohmann::json;

std::string shard_of(const json& r) {
  if (r["kind"] != "contract" || !r.contains("cases") || !r["cases"].is_object() || !r["cases"].contains("shard") ||
      !r["cases"]["shard"].is_string())
    return "";
  return r["cases"]["shard"].get<std::string>();
}

// The --shard option at argv[k]: its value in *v and the words it takes (2 for "--shard V", 1 for
// "--shard=V"), or 0 where argv[k] is another word. The merge reads and strips it with this.
size_t shard_option(const json& argv, size_t k, std::string* v) {
  if (!argv[k].is_string()) return 0;
  const std::string w = argv[k].get<std::string>();
  if (w == "--shard" && k + 1 < argv.size() && argv[k + 1].is_string()) return *v = argv[k + 1].get<std::string>(), 2;
  if (w.rfind("--shard=", 0) == 0) return *v = w.substr(8), 1;
  return 0;
}

// Sums the integer leaves of `from` into `into` (coverage counts).
void add_counts(json& into, const json& from) {
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (it.value().is_object()) {
      if (!into.contains(it.key()) || !into[it.key()].is_object()) into[it.key()] = json::object();
      add_counts(into[it.key()], it.value());
    } else if (it.value().is_number_integer()) {
      into[it.key()] = (into.contains(it.key()) && into[it.key()].is_number_integer() ? into[it.key()].get<int64_t>() : 0) +
                       it.value().get<int64_t>();
    }
  }
}

}  // namespace

bool parse_shard(const std::string& text, int* i, int* n, std::string* why) {
  const size_t slash = text.find('/');
  auto whole = [](const std::string& s, int* v) {
    // Decimal as --cases and --seed take it: no sign, no leading zero ("01/2" is refused).
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || (s.size() > 1 && s[0] == '0')) return false;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && p == s.data() + s.size();
  };
  if (slash == std::string::npos || !whole(text.substr(0, slash), i) || !whole(text.substr(slash + 1), n) || *n < 1 ||
      *n > 1024 || *i < 1 || *i > *n) {
    *why = "--shard '" + text + "': expected i/n with 1 <= i <= n <= 1024, decimal without leading zeros (e.g. 2/4: the second of four shards)";
    return false;
  }
  return true;
}

Status merge_shards(const std::vector<json>& shards, const std::vector<std::string>& paths, json* merged) {
  if (shards.empty()) return Status::Error("no shard receipts to merge");
  const json& first = shards[0];
  int n = 0;
  std::set<int> seen;
  for (size_t s = 0; s < shards.size(); ++s) {
    const json& r = shards[s];
    const std::string sh = shard_of(r);
    int i = 0, ni = 0;
    std::string why;
    if (sh.empty() || !parse_shard(sh, &i, &ni, &why))
      return Status::Error(paths[s] + ": cases.shard: " + (sh.empty() ? "missing (not a shard receipt)" : why));
    if (n == 0) n = ni;
    if (ni != n) return Status::Error(paths[s] + ": cases.shard: " + sh + ", but " + paths[0] + " is a shard of " + std::to_string(n));
    if (!seen.insert(i).second) return Status::Error(paths[s] + ": shard " + sh + " given twice");
    // Fields the merge reads that Receipt::check leaves to the writer: text where present.
    for (const char* f : {"host", "started_at"})
      if (r.contains(f) && !r[f].is_string())
        return Status::Error(paths[s] + ": field " + f + ": expected a string, found " + json_type_name(r[f]));
    auto same = [&](const json& a, const json& b, const std::string& field) -> Status {
      if (a != b)
        return Status::Error(paths[s] + ": " + field + " " + b.dump() + " differs from " + paths[0] + "'s " + a.dump() +
                             ": only shards of one run merge");
      return Status::Ok();
    };
    KC_RETURN_IF_ERROR(same(first["name"], r["name"], "name"));
    KC_RETURN_IF_ERROR(same(first["backend"], r["backend"], "backend"));
    KC_RETURN_IF_ERROR(same(first["git"]["commit"], r["git"]["commit"], "git.commit"));
    // One binary: two builds of one commit (a planted mutant, other compiler flags) have one
    // git.commit, and their shards merged into one receipt that no single binary earned.
    {
      const json a = first.contains("build") ? first["build"].value("id", json()) : json(),
                 b = r.contains("build") ? r["build"].value("id", json()) : json();
      if (a != b)
        return Status::Error(paths[s] + ": build.id " + (b.is_null() ? "missing" : b.dump()) + " differs from " + paths[0] +
                             "'s " + (a.is_null() ? "missing" : a.dump()) +
                             ": shards of two binaries do not merge (one commit built twice, or a mutant)");
    }
    // The command's own --shard is the shard the run dealt: a cases.shard edited to another
    // (1/2 relabelled 2/2) merged shard 1's cases twice and shard 2's never, and passed.
    // A command without --shard (argv edited, or missing) says no shard at all: the relabelled
    // copy with --shard taken out of its argv merged as above and passed (session 62's audit).
    bool ran_shard = false;
    if (r.contains("argv") && r["argv"].is_array()) {
      const json& a = r["argv"];
      for (size_t k = 0; k < a.size(); ++k) {
        std::string v;
        if (shard_option(a, k, &v) == 0) continue;
        if (v != sh)
          return Status::Error(paths[s] + ": cases.shard " + sh + " but its command ran --shard " + v +
                               ": the receipt does not say which shard it ran");
        ran_shard = true;
      }
    }
    if (!ran_shard)
      return Status::Error(paths[s] + ": cases.shard " + sh +
                           " but its command (argv) has no --shard: the receipt does not say which shard it ran");
    KC_RETURN_IF_ERROR(same(first["seed"], r["seed"], "seed"));
    KC_RETURN_IF_ERROR(same(first["cases"].value("requested", json()), r["cases"].value("requested", json()), "cases.requested"));
    KC_RETURN_IF_ERROR(same(first["cases"].value("filter", json("")), r["cases"].value("filter", json("")), "cases.filter"));
    KC_RETURN_IF_ERROR(same(first["cases"].value("case", json("")), r["cases"].value("case", json("")), "cases.case"));
  }
  std::string missing;
  for (int i = 1; i <= n; ++i)
    if (!seen.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(n);
  if (!missing.empty())
    return Status::Error(first["name"].get<std::string>() + ": shard " + missing + " missing (" + std::to_string(shards.size()) +
                         " of " + std::to_string(n) + " given)");

  json m = first;
  // The merged run's command: shard 1's without its --shard (report and JUnit printed a command
  // that runs one shard as the merged run's: session 63's audit). Its other words (--out, --junit)
  // stay shard 1's; merged_from names every shard's file.
  if (m.contains("argv") && m["argv"].is_array()) {
    json argv = json::array();
    const json& a = m["argv"];
    for (size_t i = 0; i < a.size(); ++i) {
      std::string v;
      if (const size_t words = shard_option(a, i, &v)) i += words - 1;  // the option and its value
      else argv.push_back(a[i]);
    }
    m["argv"] = std::move(argv);
  }
  m["git"]["dirty"] = false;
  m["gates"] = json::array();
  m["controls"] = json::array();
  m["errors"] = json::array();
  m["replay"] = json::array();
  m["verdict_reasons"] = json::array();
  m["numbers"] = json::object();
  std::vector<std::string> gate_order, control_order;
  std::map<std::string, json> gates, controls;
  int64_t run = 0, filtered = 0;
  double longest = 0, sum = 0;
  bool pass = true;
  std::string started = first.value("started_at", std::string()), host = first.value("host", std::string());
  json merged_from = json::array();
  std::map<std::string, std::vector<std::pair<std::string, json>>> by_shard;  // numbers, shard by shard
  for (size_t s = 0; s < shards.size(); ++s) {
    const json& r = shards[s];
    const std::string sh = shard_of(r);
    merged_from.push_back(paths[s]);
    if (r["git"]["dirty"].get<bool>()) m["git"]["dirty"] = true;
    pass = pass && r["verdict"] == "pass";
    for (const auto& w : r.value("verdict_reasons", json::array())) m["verdict_reasons"].push_back("shard " + sh + ": " + w.get<std::string>());
    for (const auto& e : r.value("errors", json::array())) m["errors"].push_back("shard " + sh + ": " + e.get<std::string>());
    for (const auto& x : r.value("replay", json::array())) m["replay"].push_back(x);
    run += r["cases"].value("run", int64_t(0));
    filtered += r["cases"].value("filtered_out", int64_t(0));
    longest = std::max(longest, r["timings"]["total_s"].get<double>());
    sum += r["timings"]["total_s"].get<double>();
    if (r.contains("started_at") && r["started_at"].is_string() && r["started_at"].get<std::string>() < started)
      started = r["started_at"].get<std::string>();
    if (r.value("host", std::string()) != host) host = "several";
    for (const auto& g : r["gates"]) {
      const std::string name = g["name"].get<std::string>();
      if (!gates.count(name)) {
        gate_order.push_back(name);
        json z = g;
        for (const char* k : {"passed", "failed", "skipped", "total"}) z[k] = 0;
        z["time_s"] = 0.0;
        z["failures"] = json::array();
        z.erase("worst");
        gates[name] = z;
      }
      json& m_g = gates[name];
      for (const char* k : {"passed", "failed", "skipped", "total"}) m_g[k] = m_g[k].get<int64_t>() + g[k].get<int64_t>();
      m_g["time_s"] = m_g["time_s"].get<double>() + g.value("time_s", 0.0);
      if (g.contains("skip_reason")) m_g["skip_reason"] = g["skip_reason"];
      for (const auto& f : g.value("failures", json::array()))
        if (m_g["failures"].size() < 8) m_g["failures"].push_back(f);
      if (g.contains("worst") && g["worst"].contains("ratio")) {
        const json& wr = g["worst"]["ratio"];
        const double v = wr.is_number() ? wr.get<double>() : std::nan("");
        bool replace = !m_g.contains("worst");
        if (!replace) {
          const json& cur = m_g["worst"]["ratio"];
          const double c = cur.is_number() ? cur.get<double>() : std::nan("");
          replace = worse_ratio(v, c);
        }
        if (replace) m_g["worst"] = g["worst"];
      }
    }
    for (const auto& k : r["controls"]) {
      const std::string name = k["name"].get<std::string>();
      if (!controls.count(name)) {
        control_order.push_back(name);
        json z = k;
        z["red"] = true;
        z["caught_by"] = json::array();
        z["time_s"] = 0.0;
        z.erase("errors");
        controls[name] = z;
      }
      json& m_k = controls[name];
      m_k["red"] = m_k["red"].get<bool>() && k["red"].get<bool>();
      for (const auto& c : k["caught_by"])
        if (std::find(m_k["caught_by"].begin(), m_k["caught_by"].end(), c) == m_k["caught_by"].end()) m_k["caught_by"].push_back(c);
      m_k["time_s"] = m_k["time_s"].get<double>() + k.value("time_s", 0.0);
      for (const auto& e : k.value("errors", json::array())) m_k["errors"].push_back("shard " + sh + ": " + e.get<std::string>());
    }
    // Numbers: coverage counts and the refusal probes (dealt to the shards like cases) summed; any
    // other number kept when every shard has the same, else each shard's under per_shard (shard 1's
    // kept alone passed for the run's: a worst ratio of one shard, 17 of fp8-rows' 34 probes).
    const json& nums = r.value("numbers", json::object());
    for (auto it = nums.begin(); it != nums.end(); ++it) {
      if (it.key() == "coverage" && it.value().is_object()) {
        if (!m["numbers"].contains("coverage")) m["numbers"]["coverage"] = json::object();
        add_counts(m["numbers"]["coverage"], it.value());
      } else if (it.key() == "refusal_probes" && it.value().is_number_integer()) {
        m["numbers"]["refusal_probes"] = m["numbers"].value("refusal_probes", int64_t(0)) + it.value().get<int64_t>();
      } else {
        by_shard[it.key()].push_back({sh, it.value()});
      }
    }
  }
  for (const auto& [key, values] : by_shard) {
    const bool same = values.size() == shards.size() &&
                      std::all_of(values.begin(), values.end(), [&](const auto& v) { return v.second == values.front().second; });
    if (same) m["numbers"][key] = values.front().second;
    else
      for (const auto& [sh, v] : values) m["numbers"]["per_shard"][key][sh] = v;
  }
  // The shards' own account of the selection (cases.matched, cases.other_shards, every_case;
  // receipts from before these fields merge by the older arithmetic below).
  const bool counted = std::all_of(shards.begin(), shards.end(), [](const json& r) {
    const json& c = r["cases"];
    return c.contains("matched") && c["matched"].is_number_integer() && c.contains("other_shards") &&
           c["other_shards"].is_number_integer() && c.contains("every_case") && c["every_case"].is_boolean();
  });
  int64_t matched = -1, by_selection = -1;
  bool every_case = counted;
  if (counted) {
    for (size_t s = 0; s < shards.size(); ++s) {
      const json& c = shards[s]["cases"];
      const int64_t ms = c["matched"].get<int64_t>(), fs = c.value("filtered_out", int64_t(0)) - c["other_shards"].get<int64_t>();
      if (s == 0) matched = ms, by_selection = fs;
      if (ms != matched || fs != by_selection)
        return Status::Error(paths[s] + ": cases.matched " + std::to_string(ms) + " and cases left out by the selection " +
                             std::to_string(fs) + " differ from " + paths[0] + "'s " + std::to_string(matched) + " and " +
                             std::to_string(by_selection) + ": only shards of one run merge");
      every_case = every_case && c["every_case"].get<bool>();
    }
    // The shards together ran every selected case exactly once (a shard stopped by --gates-only
    // after a failure runs fewer; it fails anyway).
    if (run != matched) {
      m["verdict_reasons"].push_back("the shards ran " + std::to_string(run) + " cases, but " + std::to_string(matched) +
                                     " were selected: the merge is not the run of every selected case");
      pass = false;
    }
  }
  // A shard that lacked a gate (none of its cases reached it) leaves the others' counts.
  for (const auto& name : gate_order) {
    json& g = gates[name];
    const int64_t p = g["passed"].get<int64_t>(), f = g["failed"].get<int64_t>(), sk = g["skipped"].get<int64_t>();
    g["ok"] = f == 0;
    g["status"] = gate_status(p, f, sk);
    if (g["failures"].empty()) g.erase("failures");
    // The shards of a run of every case (default count or more, no selection) are that run: a
    // gate none of them checked is a gate that cannot fail, as in the unsharded run.
    if (every_case && p + f + sk == 0) {
      m["verdict_reasons"].push_back("gate " + name + " checked nothing in a run of every case (" +
                                     std::to_string(first["cases"].value("requested", int64_t(0))) +
                                     ", merged from " + std::to_string(n) + " shards): a gate that checks nothing cannot fail");
      pass = false;
    }
    m["gates"].push_back(g);
  }
  for (const auto& name : control_order) {
    // A control every shard runs: red only when each shard saw it red.
    int present = 0;
    for (const auto& r : shards)
      for (const auto& k : r["controls"]) present += k["name"] == name;
    json& k = controls[name];
    if (present != int(shards.size())) {
      k["red"] = false;
      k["errors"].push_back("ran in " + std::to_string(present) + " of " + std::to_string(shards.size()) + " shards");
      m["verdict_reasons"].push_back("control " + name + " ran in " + std::to_string(present) + " of " +
                                     std::to_string(shards.size()) + " shards");
      pass = false;
    }
    m["controls"].push_back(k);
  }
  if (m["controls"].empty()) pass = false;
  m["verdict"] = pass ? "pass" : "fail";
  m["cases"].erase("shard");
  m["cases"]["run"] = run;
  m["cases"]["filtered_out"] = counted ? by_selection : (filtered - int64_t(n - 1) * run) / n;
  for (const char* k : {"matched", "other_shards", "every_case"}) m["cases"].erase(k);
  // The merged run's own every_case, as an unsharded run's receipt says it (report holds a pass
  // to it; diff compares the two runs' cases).
  if (counted) m["cases"]["every_case"] = every_case;
  m["cases"]["merged_shards"] = n;
  // Controls skipped (--gates-only) in any shard: the merged run did not run them (shard 1's count
  // alone was kept, and a full shard 1 beside a --gates-only shard 2 merged into a receipt that
  // contradicted itself: session 63's review). The count is the largest shard's, not the sum:
  // every shard holds the same controls, so two --gates-only shards of fp8-rows skipped its 13
  // controls, as the unsharded run says, not 26 (session 64).
  int64_t skipped_controls = 0;
  for (const auto& r : shards)
    if (r.contains("controls_skipped") && r["controls_skipped"].is_number_integer())
      skipped_controls = std::max(skipped_controls, r["controls_skipped"].get<int64_t>());
  if (skipped_controls > 0) m["controls_skipped"] = skipped_controls;  // (that shard failed: so does the merge)
  else m.erase("controls_skipped");
  m["timings"]["total_s"] = longest;
  m["timings"]["shards_total_s"] = sum;
  if (!started.empty()) m["started_at"] = started;
  if (!host.empty()) m["host"] = host;
  m["merged_from"] = merged_from;
  *merged = std::move(m);
  return Status::Ok();
}

int report_main(const std::vector<std::string>& files, const std::string& format, const std::string& merge_out,
                const std::string& junit, std::ostream& out, std::ostream& err) {
  auto fail = [&](const std::string& why) {
    err << "tf-cuda-test: error: " << why << "\n";
    return 2;
  };
  std::vector<json> recs(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    Status st = Receipt::load(files[i], &recs[i]);
    if (st.ok) st = check_known_contract(recs[i], files[i]);
    if (!st.ok) return fail(st.message);
  }
  // Shard receipts grouped by contract, in the order of their first file.
  std::map<std::string, std::vector<size_t>> groups;
  for (size_t i = 0; i < recs.size(); ++i)
    if (!shard_of(recs[i]).empty()) groups[recs[i]["name"].get<std::string>()].push_back(i);
  std::vector<json> shown;
  std::vector<std::string> shown_paths;
  std::vector<std::pair<std::string, json>> merged_out;
  std::set<std::string> done;
  for (size_t i = 0; i < recs.size(); ++i) {
    const std::string sh = shard_of(recs[i]);
    const std::string name = recs[i]["name"].get<std::string>();
    // A shard is shown merged with its siblings or not at all: one shard of two read alone passed
    // (a CI job that lost the other shard's receipt went green) where two of three were refused.
    if (sh.empty()) {
      shown.push_back(recs[i]);
      shown_paths.push_back(files[i]);
      continue;
    }
    if (done.count(name)) continue;
    done.insert(name);
    std::vector<json> part;
    std::vector<std::string> part_paths;
    for (size_t k : groups[name]) {
      part.push_back(recs[k]);
      part_paths.push_back(files[k]);
    }
    json m;
    Status st = Status::Ok();
    try {
      st = merge_shards(part, part_paths, &m);
    } catch (const json::exception& e) {  // a field of a type no check foresaw: refused, never a crash
      st = Status::Error("the shards of " + name + " (" + part_paths.front() + ", ...): a field of an unexpected type (" +
                         e.what() + ")");
    }
    if (!st.ok) return fail(st.message);
    // The merged receipt obeys the rules every reader applies (report, diff, premerge).
    const Status ck = Receipt::check(m, "the merge of " + name + "'s shards");
    if (!ck.ok) return fail(ck.message);
    shown.push_back(m);
    std::string label = "merged from";
    for (const auto& p : part_paths) label += " " + p;
    shown_paths.push_back(label);
    merged_out.push_back({name, m});
  }
  if (!merge_out.empty()) {
    if (merged_out.empty()) return fail("--merge-out " + merge_out + ": no shard receipts among the files");
    // The name becomes a file name in DIR: one file name, never a path (Receipt::check and
    // check_known_contract refused any other already; checked again where it is used).
    for (const auto& [name, m] : merged_out)
      if (!safe_file_name(name))
        return fail("--merge-out " + merge_out + ": the receipts' name '" + name + "' is not a file name");
    std::string target;
    // Nor a receipt read: the merge would replace a shard's receipt (kernel-contract --out-dir's
    // <contract>.json, merged into its own folder).
    for (const auto& [name, m] : merged_out)
      for (const std::string& f : files)
        if (same_output((std::filesystem::path(merge_out) / (name + ".json")).string(), f))
          return fail("--merge-out " + merge_out + " names the receipt " + f + " (as " + name +
                      ".json): the merged receipt would replace it");
    for (const auto& [name, m] : merged_out) {
      const Status st = prepare_output((std::filesystem::path(merge_out) / (name + ".json")).string(), &target);
      if (!st.ok) return fail("--merge-out " + st.message);
    }
  }
  if (!junit.empty()) {
    std::string why;
    if (!junit_writable(junit, &why)) return fail(why);
    // --junit naming a merged receipt's file: the XML would replace the receipt.
    for (const auto& [name, m] : merged_out) {
      const std::string path = (std::filesystem::path(merge_out) / (name + ".json")).string();
      if (!merge_out.empty() && same_output(path, junit))
        return fail("--junit " + junit + " and --merge-out name the same file (" + path +
                    "): the JUnit XML would replace the merged receipt");
    }
    // Nor one of the receipts read: the XML would replace it.
    for (const std::string& f : files)
      if (same_output(f, junit)) return fail("--junit " + junit + " names the receipt " + f + ": the JUnit XML would replace it");
  }
  std::string text;
  try {
    if (format == "html") {
      text = render_html_page(shown, shown_paths);
    } else {
      const ViewFormat f = format == "text" ? ViewFormat::text : ViewFormat::md;
      for (size_t i = 0; i < shown.size(); ++i) text += (i ? "\n" : "") + render_receipt(Receipt(shown[i]), shown_paths[i], f);
    }
  } catch (const json::exception& e) {
    // Name the file: the first receipt that does not render alone.
    std::string which = "a receipt";
    for (size_t i = 0; i < shown.size(); ++i) {
      try {
        (void)render_receipt(Receipt(shown[i]), shown_paths[i], ViewFormat::text);
        if (format == "html") (void)render_html_page({shown[i]}, {shown_paths[i]});
      } catch (const json::exception&) {
        which = shown_paths[i];
        break;
      }
    }
    return fail(which + ": unreadable field (" + std::string(e.what()) + ")");
  }
  // The merged receipts and --junit in one write: a failure leaves none of them (a JUnit that
  // could not be written once left the new merged receipts beside an exit 2).
  std::vector<std::pair<std::string, std::string>> outs;
  for (const auto& [name, m] : merged_out)
    if (!merge_out.empty()) outs.push_back({(std::filesystem::path(merge_out) / (name + ".json")).string(), json_file_text(m)});
  if (!junit.empty()) outs.push_back({junit, junit_text("tf-cuda-test report", shown)});
  if (const Status st = write_files_atomic(outs); !st.ok)
    return fail((outs.size() == 1 && !junit.empty() ? "--junit " : "") + st.message);
  out << text;
  for (const auto& r : shown)
    if (r["verdict"] != "pass") return 1;
  return 0;
}

}  // namespace kc
