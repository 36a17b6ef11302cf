#include "tools/receipt_views.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace kc {
namespace {

using json = nlohmann::json;
// Benches: kind bench (attention, pack) and bench-engine; both carry rows and targets.
bool is_bench(const json& r) { return r["kind"] == "bench" || r["kind"] == "bench-engine"; }

// ---- Rendering helpers.
std::string num(double x) {
  if (std::isnan(x)) return "nan";
  std::ostringstream o;
  if (std::fabs(x) >= 1000 && std::fabs(x) < 1e9) o << std::fixed << std::setprecision(1) << x;
  else o << std::setprecision(4) << x;
  return o.str();
}
std::string scalar(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number()) return num(v.get<double>());
  if (v.is_null()) return "";
  return v.dump();
}
std::string ratio_of(const json& g) {
  if (!g.contains("worst") || !g["worst"].contains("ratio")) return "";
  const json& x = g["worst"]["ratio"];
  return x.is_number() ? format_ratio(x.get<double>()) : scalar(x);
}
std::string seed_of(const Receipt& r) {
  return r.is_bench() ? "none (a bench generates no cases)" : r.seed_text();
}
std::string joined(const json& a, const char* sep = ", ") {
  std::string s;
  for (const auto& x : a) s += (s.empty() ? "" : sep) + scalar(x);
  return s;
}
std::string argv_line(const json& r) {
  std::string s;
  for (const auto& a : r["argv"]) {
    s += (s.empty() ? "" : " ") + shell_quote(a.get<std::string>());
  }
  return s;
}
// Flattens nested objects to dotted keys; other values as scalars (arrays as JSON).
void flatten(const json& v, const std::string& prefix, std::vector<std::pair<std::string, json>>* out) {
  if (v.is_object() && !v.empty()) {
    for (auto it = v.begin(); it != v.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out->push_back({prefix, v});
  }
}

struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  // A result cell's colour class in HTML: failures red, passes green, skips grey.
  static std::string cell_class(const std::string& c) {
    if (c == "FAIL" || c == "REGRESSED" || c == "NOT met" || c.rfind("GREEN", 0) == 0 || c.rfind("FAIL:", 0) == 0)
      return " class=\"bad\"";
    if (c == "ok" || c == "red" || c == "met" || c == "pass") return " class=\"good\"";
    if (c == "skipped" || c == "not run" || c == "not measured") return " class=\"skip\"";
    return "";
  }
  std::string render(ViewFormat f) const {
    std::ostringstream o;
    if (f == ViewFormat::html) {
      o << "<table>\n<thead><tr>";
      for (const auto& c : head) o << "<th>" << html_escape(c) << "</th>";
      o << "</tr></thead>\n<tbody>\n";
      for (const auto& r : rows) {
        o << "<tr>";
        for (const auto& c : r) o << "<td" << cell_class(c) << ">" << html_escape(c) << "</td>";
        o << "</tr>\n";
      }
      o << "</tbody>\n</table>";
      return o.str();
    }
    if (f == ViewFormat::md) {
      auto line = [&](const std::vector<std::string>& r) {
        o << "|";
        for (const auto& c : r) o << " " << md_cell(c) << " |";
        o << "\n";
      };
      line(head);
      o << "|";
      for (size_t i = 0; i < head.size(); ++i) o << "---|";
      o << "\n";
      for (const auto& r : rows) line(r);
    } else {
      std::vector<size_t> w(head.size());
      for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
      for (const auto& r : rows)
        for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
      auto line = [&](const std::vector<std::string>& r) {
        std::string s;
        for (size_t i = 0; i < r.size(); ++i) {
          std::string c = r[i];
          if (i + 1 < r.size()) c.resize(w[i], ' ');
          s += c + (i + 1 < r.size() ? "  " : "");
        }
        while (!s.empty() && s.back() == ' ') s.pop_back();
        o << s << "\n";
      };
      line(head);
      for (const auto& r : rows) line(r);
    }
    return o.str();
  }
};

// A heading is one line in md and text: a line break in a name (a fixture's, a gate's) would end
// it and turn the rest into body text.
std::string one_line(std::string s) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}
}  // namespace

// Markdown text outside a table: one line, and a tag or comment opener (<script>, </x>, <!--, <?)
// written &lt; (a fixture named "ci <!--" hid the rest of a pasted report); "<=" stays.
std::string md_text(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const char nx = i + 1 < s.size() ? s[i + 1] : '\0';
    if (ch == '\n' || ch == '\r') o += ' ';
    else if (ch == '<' && (std::isalpha(static_cast<unsigned char>(nx)) || nx == '/' || nx == '!' || nx == '?')) o += "&lt;";
    else o += ch;
  }
  return o;
}

std::string md_cell(const std::string& s) {
  std::string o;
  for (const char ch : md_text(s)) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return o;
}

namespace {

std::string heading(const std::string& s, ViewFormat f) {
  if (f == ViewFormat::html) return "<h2>" + html_escape(s) + "</h2>\n";
  const std::string l = f == ViewFormat::md ? md_text(s) : one_line(s);
  return f == ViewFormat::md ? "### " + l + "\n\n" : l + "\n" + std::string(l.size(), '=') + "\n";
}
std::string subheading(const std::string& s, ViewFormat f) {
  if (f == ViewFormat::html) return "<h3>" + html_escape(s) + "</h3>\n";
  const std::string l = f == ViewFormat::md ? md_text(s) : one_line(s);
  return f == ViewFormat::md ? "**" + l + "**\n\n" : l + ":\n";
}
// A list: "- item" lines (md, text) or <ul> (html).
std::string bullets(const std::vector<std::string>& items, ViewFormat f) {
  std::string o;
  if (f == ViewFormat::html) {
    o = "<ul>\n";
    for (const auto& x : items) o += "<li>" + html_escape(x) + "</li>\n";
    return o + "</ul>\n";
  }
  for (const auto& x : items) o += "- " + (f == ViewFormat::md ? md_text(x) : x) + "\n";
  return o;
}
// A line of prose: a paragraph in html.
std::string para(const std::string& s, ViewFormat f) {
  return f == ViewFormat::html ? "<p>" + html_escape(s) + "</p>\n" : s + "\n\n";
}

// The bench row columns a reviewer reads: the row's names (string fields), then times
// (*_us), fractions of a ceiling (*of_ceiling), ratios (*_over_*) and verified flags.
bool shown_bench_field(const std::string& k, const json& v) {
  if (v.is_string()) return !bench_output_hash(k);
  if (k == "verified") return true;
  auto ends = [&](const std::string& suf) { return k.size() >= suf.size() && k.compare(k.size() - suf.size(), suf.size(), suf) == 0; };
  return v.is_number() && (ends("_us") || ends("of_ceiling") || ends("tok_s") || k.find("_over_") != std::string::npos);
}
// Row names in the order the bench prints them: config, format, addressing, then the rest.
int name_rank(const std::string& k) { return k == "config" ? 0 : k == "format" ? 1 : k == "addressing" ? 2 : 3; }
std::vector<std::string> bench_columns(const json& rows) {
  std::vector<std::string> strs, nums;
  std::set<std::string> seen;
  for (const auto& row : rows)
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (seen.count(it.key()) || !shown_bench_field(it.key(), it.value())) continue;
      seen.insert(it.key());
      (it.value().is_string() ? strs : nums).push_back(it.key());
    }
  std::stable_sort(strs.begin(), strs.end(), [](const std::string& a, const std::string& b) { return name_rank(a) < name_rank(b); });
  strs.insert(strs.end(), nums.begin(), nums.end());
  return strs;
}
// A row's identity: its string fields but results (bench_output_hash), config, format and
// addressing first.
std::string row_key(const json& row) {
  std::vector<std::string> keys;
  for (auto it = row.begin(); it != row.end(); ++it)
    // Not its results (output hashes), nor free text that says how it went (error, note): a row
    // that failed to run is its base row failed, never a row removed and another added.
    if (it.value().is_string() && !bench_output_hash(it.key()) && it.key() != "error" && it.key() != "note")
      keys.push_back(it.key());
  std::stable_sort(keys.begin(), keys.end(), [](const std::string& a, const std::string& b) { return name_rank(a) < name_rank(b); });
  std::string k;
  for (const auto& key : keys) {  // appended piece by piece: gcc 12's -O3 -Wrestrict misreads "a" + string
    if (!k.empty()) k += ' ';
    k += row[key].get<std::string>();
  }
  return k;
}
// A row's own timing fields (*_us), not its baselines (sdpa_*, ceiling_*), which repeat
// across rows and move with the machine rather than with the change under review.
bool compared_time(const std::string& k) {
  const bool us = k.size() > 3 && k.compare(k.size() - 3, 3, "_us") == 0;
  return us && k.rfind("sdpa_", 0) != 0 && k.rfind("ceiling", 0) != 0;
}
std::string target_state(const json& t) {
  if (!t["measured"].get<bool>()) return "not measured";
  return t["met"].get<bool>() ? "met" : "NOT met";
}

// row(name, base entry or null, head entry or null) for every name of two arrays of named
// entries: head's order first, then the names only base has.
template <typename Row>
void each_by_name(const json& base, const json& head, Row row) {
  std::map<std::string, const json*> b, h;
  for (const auto& x : base) b[x["name"].get<std::string>()] = &x;
  for (const auto& x : head) h[x["name"].get<std::string>()] = &x;
  for (const auto& x : head) {
    const std::string n = x["name"].get<std::string>();
    row(n, b.count(n) ? b[n] : nullptr, &x);
  }
  for (const auto& x : base) {
    const std::string n = x["name"].get<std::string>();
    if (!h.count(n)) row(n, &x, nullptr);
  }
}

}  // namespace

std::string fmt_sig(double v, int digits) {
  std::ostringstream o;
  o << std::setprecision(digits) << v;
  return o.str();
}

std::string bench_row_key(const json& row) { return row_key(row); }
bool bench_output_hash(const std::string& k) {
  for (const std::string suf : {"_fnv1a", "_hash"})
    if (k.size() >= suf.size() && k.compare(k.size() - suf.size(), suf.size(), suf) == 0) return true;
  return false;
}

std::string control_free(const std::string& s) {
  std::string o = s;
  for (char& ch : o) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if ((u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f) ch = '?';
  }
  return o;
}

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if ((u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f) {  // not HTML text; an ESC or CR from a receipt
      o += '?';
      continue;
    }
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += ch;
    }
  }
  return o;
}

int report_command(const std::vector<std::string>& files, ViewFormat fmt, std::ostream& out, std::ostream& err) {
  std::vector<Receipt> recs(files.size());
  for (size_t i = 0; i < files.size(); ++i) {  // every file checked before anything is printed
    Status st = Receipt::load(files[i], &recs[i]);
    if (st.ok) st = check_known_contract(recs[i].doc(), files[i]);
    if (!st.ok) {
      err << "tf-cuda-test: error: " << st.message << "\n";
      return 2;
    }
  }
  std::string text;
  int rc = 0;
  for (size_t i = 0; i < recs.size(); ++i) {
    try {
      text += (i ? "\n" : "") + render_receipt(recs[i], files[i], fmt);
    } catch (const json::exception& e) {  // a field the checks let through and rendering could not read
      err << "tf-cuda-test: error: " << files[i] << ": unreadable field (" << e.what() << ")\n";
      return 2;
    }
    if (!recs[i].passed()) rc = 1;
  }
  out << (fmt == ViewFormat::html ? text : control_free(text));  // no terminal escape from a receipt's strings
  return rc;
}

int diff_command(const std::string& base_path, const std::string& head_path, std::ostream& out, std::ostream& err) {
  Receipt base, head;
  Status st = Receipt::load(base_path, &base);
  if (st.ok) st = check_known_contract(base.doc(), base_path);
  if (st.ok) st = Receipt::load(head_path, &head);
  if (st.ok) st = check_known_contract(head.doc(), head_path);
  ReceiptDiff d;
  if (st.ok) {
    try {
      st = diff_receipts(base, base_path, head, head_path, &d);
    } catch (const json::exception& e) {
      st = Status::Error(base_path + ", " + head_path + ": unreadable field (" + e.what() + ")");
    }
  }
  if (!st.ok) {
    err << "tf-cuda-test: error: " << st.message << "\n";
    return 2;
  }
  out << control_free(d.text);
  return d.regressions > 0 ? 1 : 0;
}

// A kv-gate receipt's per-depth table, its top-token differences, recall and memory
// (fields checked by check_receipt).
static std::string render_kv(const json& r, ViewFormat f) {
  std::ostringstream o;
  const json& kv = r["kv"];
  const std::string q = kv["format"].get<std::string>();
  o << subheading("per depth: KL(bf16 || " + q + "), float64", f);
  if (kv.contains("training_context"))
    o << para("beyond training: depth + rows > " + scalar(kv["training_context"]["positions"]) + " positions (" +
                  kv["training_context"]["source"].get<std::string>() + ")",
              f);
  Table t{{"depth", "rows", "beyond training", "mean KL", "worst KL (pos)", "p99.9", "p99", "p95", "p90", "p50",
           "top-1 agree", "top-1 diffs", "ppl bf16", "ppl " + q, "decode tok/s bf16", "decode tok/s " + q, "verdict"},
          {}};
  for (const auto& d : kv["depths"]) {
    const json& p = d["kl_percentiles"];
    t.rows.push_back({scalar(d["depth"]), scalar(d["rows"]), d["beyond_training"].get<bool>() ? "yes" : "no",
                      num(d["mean_kl"].get<double>()),
                      num(d["worst_kl"].get<double>()) + " (" + scalar(d["worst_pos"]) + ")", num(p["p99.9"].get<double>()),
                      num(p["p99"].get<double>()), num(p["p95"].get<double>()), num(p["p90"].get<double>()),
                      num(p["p50"].get<double>()), num(d["top1_agreement"].get<double>()),
                      std::to_string(d["top1_differences"].size()), num(d["perplexity"]["bf16"].get<double>()),
                      num(d["perplexity"]["quant"].get<double>()), num(d["decode_tok_s"]["bf16"].get<double>()),
                      num(d["decode_tok_s"]["quant"].get<double>()),
                      d["verdict"] == "pass" ? "pass" : "FAIL: " + d["why"].get<std::string>()});
  }
  o << t.render(f) << "\n";
  Table diffs{{"depth", "pos", "target", "bf16 top", "bf16 margin", q + " top", q + " margin"}, {}};
  for (const auto& d : kv["depths"])
    for (const auto& x : d["top1_differences"])
      diffs.rows.push_back({scalar(d["depth"]), scalar(x["pos"]), scalar(x["target"]), scalar(x["bf16_top"]),
                            num(x["bf16_margin"].get<double>()), scalar(x["quant_top"]),
                            num(x["quant_margin"].get<double>())});
  if (!diffs.rows.empty()) {
    o << subheading("top-token differences (margin: top-1 minus top-2 log-prob)", f);
    o << diffs.render(f) << "\n";
  }
  if (!kv["recall"].empty()) {
    Table rt{{"probe", "depth", "bf16", q, "outcome"}, {}};
    auto said = [](const json& a) {
      return std::string(a["recalled"].get<bool>() ? "recalled" : "not recalled") +
             (a.contains("got") && a["got"].is_string() ? " ('" + a["got"].get<std::string>() + "')" : "");
    };
    for (const auto& x : kv["recall"])
      rt.rows.push_back({x["probe"].get<std::string>(), scalar(x["depth"]), said(x["bf16"]), said(x["quant"]),
                         x["outcome"].get<std::string>()});
    o << subheading("recall", f) << rt.render(f) << "\n";
  }
  if (kv.contains("recall_summary") && !kv["recall_summary"].empty()) {
    Table st{{"probe", "depth", "beyond training", "probes", "bf16 recalled", q + " recalled", "lost", "gained"}, {}};
    for (const auto& x : kv["recall_summary"]) {
      const int n = x["probes"].get<int>();
      auto frac = [&](const json& v) { return scalar(v) + "/" + std::to_string(n); };
      st.rows.push_back({x["group"].get<std::string>(), scalar(x["depth"]), x["beyond_training"].get<bool>() ? "yes" : "no",
                         std::to_string(n), frac(x["bf16_recalled"]), frac(x["quant_recalled"]), scalar(x["lost"]),
                         scalar(x["gained"])});
    }
    o << subheading("recall per depth (lost: bf16 recalls, " + q + " does not; a probe bf16 misses is uninformative)", f)
      << st.render(f) << "\n";
  }
  Table mt{{"format", "bytes per position (all layers)"}, {}};
  for (auto it = kv["memory"]["bytes_per_position"].begin(); it != kv["memory"]["bytes_per_position"].end(); ++it)
    mt.rows.push_back({it.key(), scalar(it.value())});
  o << subheading("memory", f) << mt.render(f) << "\n";
  return o.str();
}

// A serve-memory receipt's arms side by side, then each arm's lanes (fields checked by
// check_receipt; lanes' inner fields are optional and read with defaults).
static std::string render_memory(const json& r, ViewFormat f) {
  std::ostringstream o;
  const json& m = r["memory"];
  auto mib = [](const json& v) { return num(double(v.get<int64_t>()) / (1024.0 * 1024.0)) + " MiB"; };
  std::string shape = m.value("preset", std::string());
  if (m.contains("model") && m["model"].is_object()) shape += ", " + scalar(m["model"].value("layers", json())) + " layers";
  o << subheading("memory: " + shape + ", " + m.value("kv_cache", std::string()) + " cache, --parallel " +
                      scalar(m["parallel"]) + ", context " + scalar(m["context"]) + ", pages of " + scalar(m["page"]),
                  f);
  Table t{{"arm", "arena", "fixed per lane", "pages taken", "bytes in use", "free pages after", "admitted", "what"}, {}};
  for (const auto& a : m["arms"])
    t.rows.push_back({a["arm"].get<std::string>(), mib(a["arena_bytes"]), mib(a["bytes_fixed_per_lane"]),
                      scalar(a["pages_taken"]) + " x " + scalar(a["page_stride"]) + " B", mib(a["bytes_in_use"]),
                      scalar(a["free_pages_after"]), scalar(a["admitted"]), a.value("what", std::string())});
  o << t.render(f) << "\n";
  Table lt{{"arm", "lane", "kind", "request positions", "pages", "run parts (bytes at offset)"}, {}};
  for (const auto& a : m["arms"])
    for (const auto& l : a["lanes"]) {
      if (!l.is_object()) continue;
      std::string parts;
      if (l.contains("run") && l["run"].is_object() && l["run"].contains("parts"))
        for (const auto& p : l["run"]["parts"])
          parts += (parts.empty() ? "" : ", ") + p.value("name", std::string()) + " " + scalar(p.value("bytes", json())) +
                   " at " + scalar(p.value("offset", json()));
      const json req = l.value("request", json());
      const json pages = l.value("pages", json());
      lt.rows.push_back({a["arm"].get<std::string>(), scalar(l.value("lane", json())), l.value("kind", std::string()),
                         req.is_object() ? scalar(req.value("positions", json())) : "idle",
                         pages.is_object() ? scalar(pages.value("count", json())) : "", parts});
    }
  o << lt.render(f) << "\n";
  return o.str();
}

// A generate receipt: what was decoded and how fast (fields checked by check_receipt).
static std::string render_generate(const json& r, ViewFormat f) {
  const json& g = r["generate"];
  Table t{{"generate", "value"}, {}};
  t.rows.push_back({"model", g["model"].get<std::string>()});
  t.rows.push_back({"checkpoint sha256", g["checkpoint_sha256"].get<std::string>()});
  t.rows.push_back({"kv cache", g["kv_cache"].get<std::string>() + ", " +
                                    (g["pages"].get<int64_t>() ? "pages of " + scalar(g["pages"]) : std::string("window"))});
  t.rows.push_back({"prompt tokens", std::to_string(g["prompt_tokens"].size())});
  t.rows.push_back({"tokens", std::to_string(g["tokens"].size()) + (g["stopped_at_eos"].get<bool>() ? " (stopped at <|eos|>)" : "")});
  t.rows.push_back({"time to first token", num(g["time_to_first_token_s"].get<double>() * 1e3) + " ms"});
  t.rows.push_back({"decode", num(g["decode_tok_s"].get<double>()) + " tok/s (" + scalar(g["decode_tokens"]) + " tokens in " +
                                  num(g["decode_s"].get<double>() * 1e3) + " ms)"});
  t.rows.push_back({"cache bytes", scalar(g["cache_bytes"])});
  t.rows.push_back({"text", g["text"].get<std::string>()});
  return t.render(f) + "\n";
}

// The engine bench's transformers line and attention share at 32K (checked by check_receipt).
static std::string render_engine_bench(const json& r, ViewFormat f) {
  std::ostringstream o;
  Table t{{"transformers", "value"}, {}};
  std::vector<std::pair<std::string, json>> flat;
  flatten(r["transformers"], "", &flat);
  for (const auto& [k, v] : flat) t.rows.push_back({k, scalar(v)});
  o << t.render(f) << "\n";
  if (r.contains("attention_share")) {
    const json& a = r["attention_share"];
    o << subheading("attention's share of a decode step" +
                        (a.contains("what") && a["what"].is_string() ? ": " + a["what"].get<std::string>() : std::string()),
                    f);
    Table s{{"parallel", "context", "step us", "attention us per layer", "layers", "share"}, {}};
    for (const auto& x : a["rows"])
      s.rows.push_back({scalar(x["parallel"]), x.contains("context") ? scalar(x["context"]) : "",
                        num(x["step_us"].get<double>()), num(x["attention_us_per_layer"].get<double>()),
                        x.contains("layers") ? scalar(x["layers"]) : "", num(x["share"].get<double>())});
    o << s.render(f) << "\n";
    if (a.contains("error") && a["error"].is_string()) o << "- not measured: " << a["error"].get<std::string>() << "\n\n";
  }
  return o.str();
}

std::string render_receipt(const Receipt& receipt, const std::string& path, ViewFormat f) {
  const json& r = receipt.doc();
  std::ostringstream o;
  const bool bench = is_bench(r);
  o << heading(r["name"].get<std::string>() + " (" + r["kind"].get<std::string>() + "): " + r["verdict"].get<std::string>(), f);
  Table info{{"run", "value"}, {}};
  info.rows.push_back({"receipt", path});
  info.rows.push_back({"backend", receipt.device_line()});
  info.rows.push_back({"commit", receipt.short_commit()});
  if (r.contains("build"))  // checked: an object whose id is hex or none
    info.rows.push_back({"build id", r["build"]["id"].get<std::string>()});
  info.rows.push_back({"seed", seed_of(receipt)});
  if (r.contains("verdict_reasons"))  // checked: an array of strings
    for (const auto& w : r["verdict_reasons"]) info.rows.push_back({"failed because", w.get<std::string>()});
  if (r.contains("cases"))
    info.rows.push_back({"cases", scalar(r["cases"].value("run", json(0))) + " run of " +
                                      scalar(r["cases"].value("requested", json(0))) + " requested" +
                                      (r["cases"].value("filter", std::string()).empty()
                                           ? std::string()
                                           : ", filter " + r["cases"]["filter"].get<std::string>()) +
                                      (r["cases"].contains("case") ? ", case " + r["cases"]["case"].get<std::string>()
                                                                   : std::string())});
  if (r.contains("replay"))
    for (const auto& c : r["replay"]) info.rows.push_back({"replay", c.get<std::string>()});
  if (r.contains("fixture_sha256") && r["fixture_sha256"].is_string())
    info.rows.push_back({"fixture sha256", r["fixture_sha256"].get<std::string>()});
  for (const char* k : {"method", "chunk", "started_at"})
    if (r.contains(k) && !r[k].is_object() && !r[k].is_array()) info.rows.push_back({k, scalar(r[k])});
  if (r.contains("ceiling_bytes_per_s") && r["ceiling_bytes_per_s"].is_number())
    info.rows.push_back({"read ceiling", num(r["ceiling_bytes_per_s"].get<double>() / 1e12) + " TB/s"});
  info.rows.push_back({"command", argv_line(r)});
  if (r["timings"]["total_s"].get<double>() > 0) info.rows.push_back({"time", num(r["timings"]["total_s"].get<double>()) + " s"});
  o << info.render(f) << "\n";

  if (!r["gates"].empty()) {
    Table t{{"gate", "result", "passed", "failed", "skipped", "total", "worst ratio", "worst case"}, {}};
    for (const auto& g : r["gates"]) {
      std::string wc;
      if (g.contains("worst")) {
        wc = g["worst"].value("case", std::string());
        const std::string det = g["worst"].value("detail", std::string());
        if (!det.empty()) wc += (wc.empty() ? "" : ": ") + det;
      }
      t.rows.push_back({g["name"].get<std::string>(), receipt_gate_status(g), scalar(g["passed"]),
                        scalar(g["failed"]), scalar(g["skipped"]), scalar(g["total"]), ratio_of(g), wc});
    }
    o << t.render(f) << "\n";
    std::vector<std::string> skips;
    for (const auto& g : r["gates"])
      if (g.contains("skip_reason")) skips.push_back(g["name"].get<std::string>() + ": " + g["skip_reason"].get<std::string>());
    if (!skips.empty()) o << subheading("skipped checks", f) << bullets(skips, f) << (f == ViewFormat::html ? "" : "\n");
    for (const auto& g : r["gates"])
      if (g.contains("failures") && !g["failures"].empty()) {
        o << subheading("failures of " + g["name"].get<std::string>(), f);
        std::vector<std::string> items;
        for (const auto& x : g["failures"]) {
          if (items.size() == 5) break;
          items.push_back(x.get<std::string>());
        }
        // The rest counted from the gate's failed checks: the receipt keeps at most 8 lines, so
        // "... 3 more" once stood for 7 (session 63's audit).
        const int64_t failed = g["failed"].get<int64_t>();
        if (failed > int64_t(items.size()))
          items.push_back("... " + std::to_string(failed - int64_t(items.size())) + " more failed checks");
        o << bullets(items, f) << (f == ViewFormat::html ? "" : "\n");
      }
  }
  if (!r["controls"].empty()) {
    Table t{{"control", "result", "caught by", "what it plants"}, {}};
    for (const auto& k : r["controls"])
      t.rows.push_back({k["name"].get<std::string>(), k["red"].get<bool>() ? "red" : "GREEN (not caught)",
                        joined(k["caught_by"]), k.value("description", std::string())});
    o << t.render(f) << "\n";
  }
  if (bench) {
    if (!r["targets"].empty()) {
      Table t{{"target", "value", "limit", "result"}, {}};
      for (const auto& x : r["targets"])
        t.rows.push_back({x["name"].get<std::string>(),
                          x["measured"].get<bool>() ? format_target(x["value"].get<double>(), x["limit"].get<double>()) : "",
                          (x["at_least"].get<bool>() ? ">= " : "<= ") + num(x["limit"].get<double>()), target_state(x)});
      o << t.render(f) << "\n";
    }
    if (!r["rows"].empty()) {
      const std::vector<std::string> cols = bench_columns(r["rows"]);
      Table t{cols, {}};
      for (const auto& row : r["rows"]) {
        std::vector<std::string> cells;
        for (const auto& c : cols) cells.push_back(row.contains(c) ? scalar(row[c]) : "");
        t.rows.push_back(cells);
      }
      o << t.render(f) << "\n";
    }
  }
  if (r["kind"] == "kv-gate") o << render_kv(r, f);
  if (r["kind"] == "serve-memory") o << render_memory(r, f);
  if (r["kind"] == "generate") o << render_generate(r, f);
  if (r["kind"] == "bench-engine") o << render_engine_bench(r, f);
  if (r.contains("numbers") && !r["numbers"].empty()) {
    std::vector<std::pair<std::string, json>> flat;
    flatten(r["numbers"], "", &flat);
    Table t{{"number", "value"}, {}};
    for (const auto& [k, v] : flat) t.rows.push_back({k, scalar(v)});
    o << t.render(f) << "\n";
  }
  if (r.contains("errors") && !r["errors"].empty()) {
    std::vector<std::string> items;
    for (const auto& e : r["errors"]) items.push_back(e.get<std::string>());
    o << subheading("errors", f) << bullets(items, f) << (f == ViewFormat::html ? "" : "\n");
  }
  return o.str();
}

std::vector<std::string> gate_command(const json& r, std::string* why) {
  const std::string kind = r.value("kind", std::string());
  const json& argv = r.contains("argv") ? r["argv"] : json();
  bool strings = argv.is_array() && argv.size() >= 2;
  for (const auto& a : strings ? argv : json::array()) strings = strings && a.is_string();
  if (kind == "serve-gate" && strings && argv[1] == "kernel-contract") {
    if (!r.contains("fixture") || !r["fixture"].is_string() || !r.contains("backend") || !r["backend"].is_string()) {
      *why = "a serve-gate written by kernel-contract without its fixture or backend";
      return {};
    }
    std::string fx = r["fixture"].get<std::string>();
    if (const size_t at = fx.rfind("/fixtures/"); !fx.empty() && fx[0] == '/' && at != std::string::npos)
      fx = fx.substr(at + 1);
    return {"serve-gate", fx, "--backend", r["backend"].get<std::string>()};
  }
  if (!strings || argv[1] != kind) {
    *why = "its argv is not a " + kind + " command (argv[1] must be " + kind + ", or kernel-contract for a serve-gate)";
    return {};
  }
  std::vector<std::string> out;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string a = argv[i].get<std::string>();
    bool dropped = false;
    for (const std::string o : {"--out", "--junit", "--bf16-cache"})
      if (a == o || a.rfind(o + "=", 0) == 0) {
        if (a == o) ++i;  // its value
        dropped = true;
      }
    if (!dropped) out.push_back(a);
  }
  return out;
}

bool target_limit_loosened(const json& b, const json& h) {
  if (b["at_least"] != h["at_least"]) return true;
  const double lb = b["limit"].get<double>(), lh = h["limit"].get<double>();
  return h["at_least"].get<bool>() ? lh < lb : lh > lb;
}

std::vector<std::string> gate_command_sans_backend(const std::vector<std::string>& cmd) {
  std::vector<std::string> out;
  for (size_t i = 0; i < cmd.size(); ++i) {
    if (cmd[i] == "--backend") {
      ++i;
      continue;
    }
    if (cmd[i].rfind("--backend=", 0) == 0) continue;
    out.push_back(cmd[i]);
  }
  return out;
}

GateMeaning gate_meaning(const std::vector<std::string>& cmd) {
  // Options that take no value (a word after them is the next argument); every other option
  // takes one, as "--x v" or "--x=v".
  static const std::set<std::string> flags = {"--bf16-only", "--quiet"};
  // What does not change the measurement: the files a run writes, its progress lines, the store
  // of its bf16 arm, and the backend (compared by the device rules).
  static const std::set<std::string> ignored = {"--out", "--junit", "--quiet", "--bf16-cache", "--backend"};
  GateMeaning m;
  if (cmd.empty()) return m;
  m.subcommand = cmd[0];
  for (size_t i = 1; i < cmd.size(); ++i) {
    const std::string& a = cmd[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string name = a, value;
      if (const size_t eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
      } else if (!flags.count(a) && i + 1 < cmd.size()) {
        value = cmd[++i];
      }
      if (!ignored.count(name)) m.options[name].push_back(value);
    } else {
      m.positional.push_back(a);
    }
  }
  return m;
}

std::vector<std::string> replay_args(const json& r, const std::string& out_file, const std::string& cache,
                                     std::string* why) {
  std::vector<std::string> out = gate_command(r, why);
  if (out.empty()) return out;
  out.push_back("--out");
  out.push_back(out_file);
  if (r["kind"] == "kv-gate") {
    out.push_back("--bf16-cache");
    out.push_back(cache);
  }
  return out;
}

namespace {
// kv-gate: depths matched by depth, recall probes by (probe, depth). A depth or probe's numbers
// are compared whatever the gates say: a depth that failed its bar can fail it by far more.
void diff_kv(const json& b, const json& h, std::vector<std::string>* regress, std::vector<std::string>* improve) {
  const json bar = b.value("bar", json::object());
  const double bar_mean = bar.value("mean_kl", 0.0), bar_worst = bar.value("worst_token_kl", 0.0);
  // The bar a head is judged by is its own: a looser one would turn failing depths into passes
  // with the same KL.
  const json hbar = h.value("bar", json::object());
  for (const char* k : {"mean_kl", "worst_token_kl"})
    if (bar.contains(k) && bar[k].is_number() &&
        !(hbar.contains(k) && hbar[k].is_number() && hbar[k].get<double>() <= bar[k].get<double>()))
      regress->push_back(std::string("kv bar.") + k + " loosened: " + num(bar[k].get<double>()) + " -> " +
                         (hbar.contains(k) && hbar[k].is_number() ? num(hbar[k].get<double>()) : std::string("none")));
  std::map<int64_t, json> hd;  // copies: value() returns a temporary
  for (const auto& d : h.value("depths", json::array()))
    if (d.contains("depth") && d["depth"].is_number_integer()) hd[d["depth"].get<int64_t>()] = d;
  auto number = [](const json& d, const char* k) {
    return d.contains(k) && d[k].is_number() ? d[k].get<double>() : std::nan("");
  };
  for (const auto& bd : b.value("depths", json::array())) {
    if (!bd.contains("depth") || !bd["depth"].is_number_integer()) continue;
    const int64_t depth = bd["depth"].get<int64_t>();
    const std::string at = "kv depth " + std::to_string(depth);
    if (!hd.count(depth)) {
      regress->push_back(at + " removed");
      continue;
    }
    const json& hx = hd[depth];
    for (const auto& [key, bar_v, label] : {std::tuple<const char*, double, const char*>{"mean_kl", bar_mean, "mean KL"},
                                           {"worst_kl", bar_worst, "worst-token KL"}}) {
      const double vb = number(bd, key), vh = number(hx, key);
      if (std::isnan(vb) || std::isnan(vh)) continue;
      if (vh > std::max(1.25 * vb, vb + 0.1 * bar_v))
        regress->push_back(at + ": " + label + " " + num(vb) + " -> " + num(vh) + " (more than max(1.25 x, + 0.1 bar))");
      else if (vb > std::max(1.25 * vh, vh + 0.1 * bar_v))
        improve->push_back(at + ": " + label + " " + num(vb) + " -> " + num(vh));
    }
    // Fewer scored rows at a depth is a weaker check of the same depth.
    if (!std::isnan(number(bd, "rows")) && !std::isnan(number(hx, "rows")) && number(hx, "rows") < number(bd, "rows"))
      regress->push_back(at + ": scored rows " + num(number(bd, "rows")) + " -> " + num(number(hx, "rows")));
    const double tb = number(bd, "top1_agreement"), th = number(hx, "top1_agreement"), rows = number(bd, "rows");
    const double slack = std::max(0.02, rows > 0 ? 2.0 / rows : 0.02);
    if (!std::isnan(tb) && !std::isnan(th) && th < tb - slack)
      regress->push_back(at + ": top-1 agreement " + num(tb) + " -> " + num(th) + " (down by more than " + num(slack) + ")");
  }
  std::map<std::string, std::string> ho;
  auto probe_key = [](const json& p) {
    return p.value("probe", std::string("?")) + "@" + (p.contains("depth") ? p["depth"].dump() : std::string("?"));
  };
  for (const auto& p : h.value("recall", json::array())) ho[probe_key(p)] = p.value("outcome", std::string("?"));
  for (const auto& p : b.value("recall", json::array())) {
    const std::string k = probe_key(p), ob = p.value("outcome", std::string("?"));
    if (!ho.count(k)) {
      if (ob == "recalled" || ob == "lost") regress->push_back("recall probe " + k + " removed (" + ob + " in the base)");
      continue;
    }
    const std::string& oh = ho[k];
    if (ob == "recalled" && oh != "recalled")
      regress->push_back("recall probe " + k + ": recalled -> " + oh +
                         (oh == "uninformative" ? " (the bf16 arm no longer recalls it)" : ""));
    else if (ob != "lost" && oh == "lost")  // uninformative -> lost: the bf16 arm now recalls it, the cache does not
      regress->push_back("recall probe " + k + ": " + ob + " -> lost");
    else if (ob == "lost" && oh == "recalled")
      improve->push_back("recall probe " + k + ": lost -> recalled");
  }
}
}  // namespace

Status diff_receipts(const Receipt& base_receipt, const std::string& base_path, const Receipt& head_receipt,
                     const std::string& head_path, ReceiptDiff* out) {
  const json& base = base_receipt.doc();
  const json& head = head_receipt.doc();
  const std::string bk = base_receipt.what(), hk = head_receipt.what();
  if (bk != hk)
    return Status::Error(base_path + " is " + bk + " but " + head_path + " is " + hk + ": only receipts of the same "
                         "contract or bench compare");
  std::vector<std::string> regress, improve, notes;
  std::ostringstream o;
  o << "### diff " << md_text(hk) << ": " << base_receipt.short_commit() << " -> " << head_receipt.short_commit() << "\n\n";
  o << "- base: " << md_text(base_path) << ", " << base_receipt.device_line() << ", seed " << seed_of(base_receipt) << "\n";
  o << "- head: " << md_text(head_path) << ", " << head_receipt.device_line() << ", seed " << seed_of(head_receipt) << "\n";
  if (base_receipt.device_line() != head_receipt.device_line()) notes.push_back("the two ran on different backends or devices");
  // A receipt merged from shards (report --merge-out) counts each check outside the cases once per
  // shard: its cases are an unsharded run's, and only its gate totals differ.
  auto shards_of = [](const json& r) -> int64_t {
    const json c = r.value("cases", json::object());
    return c.is_object() && c.contains("merged_shards") && c["merged_shards"].is_number_integer()
               ? c["merged_shards"].get<int64_t>()
               : 1;
  };
  auto cases_sans_merge = [](const json& r) {
    json c = r.value("cases", json());
    // every_case and default: what the runner concludes from the counts and the contract's default
    // count (written since sessions 62 and 63; a base receipt from before has neither, and the
    // same seed and counts are the same cases).
    if (c.is_object()) c.erase("merged_shards"), c.erase("every_case"), c.erase("default");
    return c;
  };
  const int64_t base_shards = shards_of(base), head_shards = shards_of(head);
  if (!is_bench(head) && (base["seed"] != head["seed"] || cases_sans_merge(base) != cases_sans_merge(head)))
    notes.push_back("seeds or case counts differ, so the cases (and worst cases) differ too");
  if (base_shards != head_shards)
    notes.push_back("merged from " + std::to_string(base_shards) + " shard(s) -> " + std::to_string(head_shards) +
                    ": checks outside the cases count once per shard, so gate totals differ by design");
  const bool gate_kind = head["kind"] == "serve-gate" || head["kind"] == "kv-gate";
  // Kinds that run the same checks every time (their fixture's or options'): fewer is a check gone.
  const bool fixed_checks = gate_kind || head["kind"] == "serve-memory";
  // The rules that hold on one device (ok -> skipped, fewer checks) compare the backend and, on
  // cuda, the device's name: a driver update or another host's cpu does not turn them off.
  const bool same_device =
      base["backend"] == head["backend"] &&
      (head["backend"] == "cpu" || base["device"].value("name", std::string()) == head["device"].value("name", std::string()));
  if (gate_kind) {
    std::string wb, wh;
    const auto cb = gate_command(base, &wb), ch = gate_command(head, &wh);
    auto words = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
      return s;
    };
    const std::string fb = base.value("fixture_sha256", std::string()), fh = head.value("fixture_sha256", std::string());
    if (!cb.empty() && !ch.empty()) {
      // What the two commands mean, not how they were typed: the subcommand, the options that
      // change the measurement (option -> values, in any order; gate_meaning), the fixture by
      // its content (fixture_sha256, below) and any further argument word for word.
      const GateMeaning mb = gate_meaning(cb), mh = gate_meaning(ch);
      std::vector<std::string> diffs;
      if (mb.subcommand != mh.subcommand) diffs.push_back(mb.subcommand + " -> " + mh.subcommand);
      auto values = [](const std::map<std::string, std::vector<std::string>>& m, const std::string& k) {
        if (!m.count(k)) return std::string("none");
        std::string s;
        for (const auto& v : m.at(k)) s += (s.empty() ? "" : " ") + (v.empty() ? std::string("(set)") : v);
        return s;
      };
      std::set<std::string> names;
      for (const auto& [k, v] : mb.options) names.insert(k);
      for (const auto& [k, v] : mh.options) names.insert(k);
      for (const auto& k : names)
        if (!mb.options.count(k) || !mh.options.count(k) || mb.options.at(k) != mh.options.at(k))
          diffs.push_back(k + " " + values(mb.options, k) + " -> " + values(mh.options, k));
      const std::vector<std::string> rb(mb.positional.begin() + std::min<size_t>(1, mb.positional.size()),
                                        mb.positional.end()),
          rh(mh.positional.begin() + std::min<size_t>(1, mh.positional.size()), mh.positional.end());
      if (mb.positional.empty() != mh.positional.empty() || rb != rh) diffs.push_back("the arguments differ");
      if (!diffs.empty())
        regress.push_back("another command: the base ran `" + words(cb) + "`, the head `" + words(ch) + "` (" +
                          joined(json(diffs), "; ") + ")");
      else if (!mb.positional.empty() && mb.positional[0] != mh.positional[0] && fb == fh)
        notes.push_back("the fixture is spelled " + mb.positional[0] + " in the base and " + mh.positional[0] +
                        " in the head: the same file content (fixture_sha256)");
    } else if (!cb.empty() && ch.empty()) {  // a head whose command cannot be read could stand for any gate
      regress.push_back("the head's command cannot be read (" + wh + "); the base ran `" + words(cb) + "`");
    }
    if (fb != fh)
      notes.push_back("the fixture changed (sha256 " + (fb.empty() ? "-" : fb.substr(0, 12)) + " -> " +
                      (fh.empty() ? "-" : fh.substr(0, 12)) + "): the two measure different fixtures");
    if (head["kind"] == "kv-gate" && base.contains("kv") && head.contains("kv")) diff_kv(base["kv"], head["kv"], &regress, &improve);
  }
  const std::string bv = base["verdict"].get<std::string>(), hv = head["verdict"].get<std::string>();
  if (bv == "pass" && hv == "fail") regress.push_back("verdict pass -> fail");
  if (bv == "fail" && hv == "pass") improve.push_back("verdict fail -> pass");

  // A head that ran a subset of its cases (--filter, --case, a shard) or fewer cases than the base
  // (--cases 1 against a default run) may leave gates unchecked that the base reached.
  const json hc = head.value("cases", json::object()), bc = base.value("cases", json::object());
  const bool fewer = hc.is_object() && bc.is_object() && hc.contains("requested") && bc.contains("requested") &&
                     hc["requested"].is_number_integer() && bc["requested"].is_number_integer() &&
                     hc["requested"].get<int64_t>() < bc["requested"].get<int64_t>();
  const bool head_narrowed = hc.is_object() && ((hc.contains("filter") && hc["filter"].is_string() &&
                                                 !hc["filter"].get<std::string>().empty()) ||
                                                hc.contains("case") || hc.contains("shard") || fewer);
  // Fewer checks than a base merged from more shards is no check gone: the base counted each
  // check outside the cases once per shard (a head of as many shards or more counts them as often).
  const bool same_cases = head["kind"] == "contract" && !head_narrowed && base["seed"] == head["seed"] &&
                          bc.is_object() && hc.is_object() && bc.value("requested", json()) == hc.value("requested", json()) &&
                          !bc.value("requested", json()).is_null() && head_shards >= base_shards;
  Table gates{{"gate", "base", "head", "passed / total", "worst ratio", "change"}, {}};
  auto gate_row = [&](const std::string& name, const json* b, const json* h) {
    auto res = [](const json* g) { return g ? receipt_gate_status(*g) : std::string("-"); };
    auto pt = [](const json* g) { return g ? scalar((*g)["passed"]) + "/" + scalar((*g)["total"]) : "-"; };
    const std::string sb = res(b), sh = res(h);
    std::string change;
    if (!b && sh == "FAIL") change = "new, FAIL", regress.push_back("gate " + name + " added, and it fails");
    else if (!b) change = "new", improve.push_back("gate " + name + " added");
    else if (!h) change = "removed", regress.push_back("gate " + name + " removed");
    else if (sb != "FAIL" && sh == "FAIL") change = "REGRESSED", regress.push_back("gate " + name + " " + sb + " -> FAIL");
    else if (sb == "FAIL" && ((sh == "skipped" && same_device) || (sh == "not run" && !head_narrowed)))
      // A failing gate that no longer checks is not fixed (session 63's audit: read as "fixed").
      change = "REGRESSED", regress.push_back("gate " + name + " FAIL -> " + sh +
                                              (sh == "skipped" ? " on the same backend and device" : " in the head's full run") +
                                              ": the failing check no longer runs");
    else if (sb == "FAIL" && sh != "FAIL") change = "fixed", improve.push_back("gate " + name + " FAIL -> " + sh);
    else if (sb == "FAIL" && sh == "FAIL" && (*h)["failed"].is_number_integer() && (*b)["failed"].is_number_integer() &&
             (*h)["failed"].get<int64_t>() > (*b)["failed"].get<int64_t>())
      // Failing already, and failing more checks (a depth or a probe more): still a regression.
      change = "REGRESSED", regress.push_back("gate " + name + " fails more: " + scalar((*b)["failed"]) + " -> " +
                                              scalar((*h)["failed"]) + " failed checks");
    else if (sb == "ok" && sh == "not run" && !head_narrowed)  // a gate that stopped checking anything
      change = "REGRESSED", regress.push_back("gate " + name + " ok -> not run (no check in the head's full run)");
    else if (sb == "ok" && sh == "skipped" && same_device)
      // The same backend and device: a gate that checked and now skips has stopped checking.
      change = "REGRESSED", regress.push_back("gate " + name + " ok -> skipped on the same backend and device" +
                                              (h->contains("skip_reason") && (*h)["skip_reason"].is_string()
                                                   ? ": " + (*h)["skip_reason"].get<std::string>()
                                                   : std::string()));
    else if ((fixed_checks || same_cases) && sb == "ok" && sh == "ok" && same_device &&
             ((*h)["total"].get<int64_t>() < (*b)["total"].get<int64_t>() ||
              (*h)["passed"].get<int64_t>() < (*b)["passed"].get<int64_t>()))
      // A serve or KV gate runs its fixture's checks, all of them every time, and a contract run
      // of the same seed and cases draws the same cases: fewer is a check gone. Fewer passed at
      // the same total is checks turned into skips (session 63's audit: 128/128 -> 2/128 with
      // 126 skipped read as no change).
      change = "REGRESSED", regress.push_back("gate " + name + " checks fewer: passed " + pt(b) + " -> " + pt(h));
    else if (sb != sh) change = sb + " -> " + sh;  // ok <-> skipped across backends (a device gate on cpu): said, not a regression
    const std::string rb = b ? ratio_of(*b) : "", rh = h ? ratio_of(*h) : "";
    const std::string ratio = rb == rh ? rh : (rb.empty() ? "-" : rb) + " -> " + (rh.empty() ? "-" : rh);
    gates.rows.push_back({name, sb, sh, pt(b) == pt(h) ? pt(h) : pt(b) + " -> " + pt(h), ratio, change});
  };
  each_by_name(base["gates"], head["gates"], gate_row);

  Table controls{{"control", "base", "head", "caught by (head)", "change"}, {}};
  auto control_row = [&](const std::string& name, const json* b, const json* h) {
    auto res = [](const json* k) { return k ? ((*k)["red"].get<bool>() ? "red" : "GREEN") : "-"; };
    std::string change;
    if (!b && !(*h)["red"].get<bool>())
      change = "new, GREEN", regress.push_back("control " + name + " added, and GREEN (its plant not caught)");
    else if (!b) change = "new", improve.push_back("control " + name + " added");
    else if (!h) change = "removed", regress.push_back("control " + name + " removed");
    else if ((*b)["red"].get<bool>() && !(*h)["red"].get<bool>())
      change = "REGRESSED", regress.push_back("control " + name + " red -> GREEN (no longer caught)");
    else if (!(*b)["red"].get<bool>() && (*h)["red"].get<bool>()) change = "fixed", improve.push_back("control " + name + " GREEN -> red");
    else if ((*b)["caught_by"] != (*h)["caught_by"]) change = "caught by " + joined((*b)["caught_by"]) + " before";
    controls.rows.push_back({name, res(b), res(h), h ? joined((*h)["caught_by"]) : "", change});
  };
  each_by_name(base["controls"], head["controls"], control_row);

  Table targets{{"target", "base", "head", "limit", "change"}, {}};
  Table rows{{"row", "field", "base", "head", "head / base"}, {}};
  int faster = 0, slower = 0, same = 0, only_one = 0;
  if (is_bench(head)) {
    each_by_name(base["targets"], head["targets"], [&](const std::string& n, const json* b, const json* h) {
      auto val = [](const json* x) {
        return x ? ((*x)["measured"].get<bool>() ? format_target((*x)["value"].get<double>(), (*x)["limit"].get<double>())
                                                 : "not measured")
                 : "-";
      };
      const json& t = h ? *h : *b;
      const std::string sb = b ? target_state(*b) : "-", sh = h ? target_state(*h) : "removed";
      std::string change = sh;
      // The limit a head is judged by is its own: a looser one (or the other direction) would
      // meet a target with the same value.
      if (b && h && target_limit_loosened(*b, *h))
        change = "REGRESSED", regress.push_back("target " + n + ": limit loosened (" +
                                                ((*b)["at_least"].get<bool>() ? ">= " : "<= ") + num((*b)["limit"].get<double>()) +
                                                " -> " + ((*h)["at_least"].get<bool>() ? ">= " : "<= ") +
                                                num((*h)["limit"].get<double>()) + ")");
      else if (sb == "met" && sh != "met") change = "REGRESSED", regress.push_back("target " + n + ": met -> " + sh);
      else if ((sb == "-" || sb == "not measured") && sh == "NOT met")
        // Measured now and missed: a target the base never judged is missed for the first time.
        change = "REGRESSED", regress.push_back("target " + n + ": " + (b ? "not measured" : "new") + " -> NOT met");
      else if (sb != "met" && sh == "met") change = "now met", improve.push_back("target " + n + ": " + sb + " -> met");
      targets.rows.push_back({n, val(b), val(h), (t["at_least"].get<bool>() ? ">= " : "<= ") + num(t["limit"].get<double>()), change});
    });
    // Rows by identity; their own timings compared (compared_time), the largest changes listed,
    // only where both were timed under one rule (the L2 policy, warm where the field is absent,
    // and the timing mode, events where absent): rows of two rules are not compared.
    const std::string lb = base.value("l2_policy", std::string("warm")), lh = head.value("l2_policy", std::string("warm"));
    const std::string tb = base.value("timing", std::string("events")), th = head.value("timing", std::string("events"));
    const bool compare_times = lb == lh && tb == th;
    if (!compare_times)
      notes.push_back("the rows were timed under different rules (" +
                      (lb != lh ? "l2_policy " + lb + " -> " + lh : "timing " + tb + " -> " + th) +
                      "): their times are not compared");
    std::map<std::string, json> brows;
    for (const auto& r : base["rows"]) brows[row_key(r)] = r;
    // A row that ran and was verified (rows without the field: unless an error).
    auto row_ok = [](const json& r) { return !r.contains("error") && !(r.contains("verified") && r["verified"] == false); };
    struct Change { double ratio; std::vector<std::string> cells; };
    std::vector<Change> changes;
    std::set<std::string> head_keys;
    for (const auto& r : head["rows"]) {
      const std::string k = row_key(r);
      head_keys.insert(k);
      if (!brows.count(k)) {
        ++only_one;
        continue;
      }
      const json& b = brows[k];
      // A row that was verified and is no longer (its output differs, or it failed to run).
      if (row_ok(b) && !row_ok(r))
        regress.push_back("row " + k + (r.contains("error") ? " failed to run: " + scalar(r["error"]) : " verified -> not verified"));
      else if (b.contains("verified") && b["verified"] == true && !r.contains("verified"))
        regress.push_back("row " + k + " verified -> no verification recorded");
      int row_verdict = -1;  // -1: no time compared; 0 within 3 %, 1 faster, 2 slower
      for (auto it = r.begin(); compare_times && it != r.end(); ++it) {
        const std::string& fld = it.key();
        if (!compared_time(fld) || !it.value().is_number()) continue;
        if (!b.contains(fld) || !b[fld].is_number()) continue;
        const double hb = it.value().get<double>(), bb = b[fld].get<double>();
        if (!(bb > 0) || !(hb > 0)) continue;
        const double q = hb / bb;
        // One count per row (a row of several times, bench pack's pack_us and unpack_us, counts
        // once: slower if any time is, else faster if any is).
        if (fld == "median_us" || (fld != "median_us" && !r.contains("median_us"))) {
          const int v = q > 1.03 ? 2 : q < 0.97 ? 1 : 0;
          row_verdict = std::max(row_verdict, v);
        }
        changes.push_back({q, {k, fld, num(bb), num(hb), num(q)}});
      }
      if (row_verdict == 2) ++slower;
      else if (row_verdict == 1) ++faster;
      else if (row_verdict == 0) ++same;
    }
    for (const auto& [k, r] : brows)
      if (!head_keys.count(k)) {
        ++only_one;
        // A row the base measured and verified, gone from the head: its check went with it.
        if (row_ok(r)) regress.push_back("row " + k + " removed");
      }
    std::stable_sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
      return std::fabs(std::log(a.ratio)) > std::fabs(std::log(b.ratio));
    });
    for (size_t i = 0; i < changes.size() && i < 12; ++i) rows.rows.push_back(changes[i].cells);
  }

  // Numbers (contract receipts' measured quantities): the ones that changed.
  Table numbers{{"number", "base", "head"}, {}};
  {
    std::vector<std::pair<std::string, json>> fb, fh;
    flatten(base.value("numbers", json::object()), "", &fb);
    flatten(head.value("numbers", json::object()), "", &fh);
    std::map<std::string, json> mb(fb.begin(), fb.end());
    std::set<std::string> seen;
    for (const auto& [k, v] : fh) {
      seen.insert(k);
      const std::string before = mb.count(k) ? scalar(mb[k]) : "-";
      if (before != scalar(v)) numbers.rows.push_back({k, before, scalar(v)});
    }
    for (const auto& [k, v] : mb)
      if (!seen.count(k)) numbers.rows.push_back({k, scalar(v), "-"});
  }

  o << "- verdict: " << bv << " -> " << hv << "\n";
  for (const auto& n : notes) o << "- note: " << md_text(n) << "\n";
  o << "\n";
  o << "**Regressions (" << regress.size() << ")**\n\n";
  for (const auto& x : regress) o << "- " << md_text(x) << "\n";
  if (regress.empty()) o << "- none\n";
  o << "\n**Improvements (" << improve.size() << ")**\n\n";
  for (const auto& x : improve) o << "- " << md_text(x) << "\n";
  if (improve.empty()) o << "- none\n";
  o << "\n";
  if (!gates.rows.empty()) o << gates.render(ViewFormat::md) << "\n";
  if (!controls.rows.empty()) o << controls.render(ViewFormat::md) << "\n";
  if (!targets.rows.empty()) o << targets.render(ViewFormat::md) << "\n";
  if (is_bench(head)) {
    o << "Rows: " << faster << " faster, " << slower << " slower (beyond 3 %), " << same << " within 3 %, " << only_one
      << " in one receipt only (their own times; baselines such as sdpa_* and ceiling_* left out). Largest "
         "changes:\n\n";
    if (!rows.rows.empty()) o << rows.render(ViewFormat::md) << "\n";
  }
  if (!numbers.rows.empty()) o << numbers.render(ViewFormat::md) << "\n";
  out->text = o.str();
  out->regressions = int(regress.size());
  out->regression_list = regress;
  out->improvements = int(improve.size());
  return Status::Ok();
}

}  // namespace kc
