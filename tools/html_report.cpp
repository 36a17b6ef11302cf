#include "tools/html_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "tools/receipt_views.h"

namespace kc {
namespace {

using json = nlohmann::json;

// ---- Charts: inline SVG, drawn from numbers alone.

struct Series {
  std::string name;
  std::string color;
  std::string dash;  // stroke-dasharray, empty for a solid line
  std::vector<std::pair<double, double>> points;
};

struct RefLine {  // a horizontal line at y (a target, a bar, parity)
  double y;
  std::string label;
};

struct LineChart {
  std::string title;
  std::string x_label, y_label;
  bool x_log = false, y_log = false;
  std::function<std::string(double)> x_tick = [](double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  };
  std::vector<Series> series;
  std::vector<RefLine> refs;
};

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

std::string px(double v) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(1) << v;
  return o.str();
}

// Linear ticks: about five "nice" steps (1, 2, 5 times a power of ten) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / 5;
  // Extreme values (a span past the largest double, or a step below the values' precision):
  // the two ends only, never an empty list or an endless loop.
  if (!std::isfinite(raw) || !(raw > 0) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo, hi};
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::floor(lo / step) * step; v <= hi + step * 1e-9 && t.size() < 64; v += step) {
    if (!t.empty() && !(v > t.back())) break;  // the step no longer moves v
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  }
  if (t.size() < 2) return {lo, hi};
  return t;
}

std::string render_line_chart(const LineChart& c) {
  const double W = 560, H = 300, L = 64, R = 12, T = 30, B = 48;
  const double legend_w = 150;
  std::vector<double> xs, ys;
  for (const auto& s : c.series)
    for (const auto& [x, y] : s.points)
      if (std::isfinite(x) && std::isfinite(y) && (!c.x_log || x > 0) && (!c.y_log || y > 0)) xs.push_back(x), ys.push_back(y);
  for (const auto& r : c.refs)
    if (std::isfinite(r.y) && (!c.y_log || r.y > 0)) ys.push_back(r.y);
  std::ostringstream o;
  o << "<figure class=\"plot\">\n<svg role=\"img\" width=\"" << W + legend_w << "\" height=\"" << H << "\" viewBox=\"0 0 "
    << W + legend_w << " " << H << "\">\n<title>" << html_escape(c.title) << "</title>\n";
  o << "<text x=\"" << L << "\" y=\"18\" class=\"ct\">" << html_escape(c.title) << "</text>\n";
  if (xs.empty()) {
    o << "<text x=\"" << L << "\" y=\"" << H / 2 << "\">no data</text>\n</svg>\n</figure>\n";
    return o.str();
  }
  auto tx = [&](double x) { return c.x_log ? std::log2(x) : x; };
  auto ty = [&](double y) { return c.y_log ? std::log10(y) : y; };
  double x0 = tx(*std::min_element(xs.begin(), xs.end())), x1 = tx(*std::max_element(xs.begin(), xs.end()));
  double y0 = ty(*std::min_element(ys.begin(), ys.end())), y1 = ty(*std::max_element(ys.begin(), ys.end()));
  if (x1 == x0) x0 -= 1, x1 += 1;
  std::vector<double> yt;
  if (c.y_log) {
    y0 = std::floor(y0), y1 = std::ceil(y1);
    if (y1 == y0) y1 += 1;
    for (double d = y0; d <= y1 + 1e-9; d += 1) yt.push_back(d);
  } else {
    if (y0 > 0) y0 = 0;  // fractions and throughputs read from zero
    yt = nice_ticks(y0, y1);
    y0 = yt.front(), y1 = std::max(yt.back(), y1);
  }
  const double pw = W - L - R, ph = H - T - B;
  const double pad = (x1 - x0) * 0.04;
  auto sx = [&](double x) { return L + (tx(x) - (x0 - pad)) / (x1 - x0 + 2 * pad) * pw; };
  auto sy = [&](double y) { return T + ph - (ty(y) - y0) / (y1 - y0) * ph; };
  auto sy_t = [&](double t) { return T + ph - (t - y0) / (y1 - y0) * ph; };
  // Axes, grid and ticks.
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph << "\" class=\"frame\"/>\n";
  for (double t : yt) {
    const double yy = sy_t(t);
    o << "<line x1=\"" << L << "\" x2=\"" << L + pw << "\" y1=\"" << px(yy) << "\" y2=\"" << px(yy) << "\" class=\"grid\"/>\n";
    o << "<text x=\"" << L - 6 << "\" y=\"" << px(yy + 4) << "\" text-anchor=\"end\" class=\"tick\">"
      << html_escape(c.y_log ? "1e" + fmt_sig(t) : fmt_sig(t)) << "</text>\n";
  }
  std::set<double> xt(xs.begin(), xs.end());
  for (double x : xt) {
    const double xx = sx(x);
    o << "<line x1=\"" << px(xx) << "\" x2=\"" << px(xx) << "\" y1=\"" << T << "\" y2=\"" << T + ph << "\" class=\"grid\"/>\n";
    o << "<text x=\"" << px(xx) << "\" y=\"" << T + ph + 16 << "\" text-anchor=\"middle\" class=\"tick\">"
      << html_escape(c.x_tick(x)) << "</text>\n";
  }
  o << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 8 << "\" text-anchor=\"middle\" class=\"al\">"
    << html_escape(c.x_label + (c.x_log ? " (log scale)" : "")) << "</text>\n";
  o << "<text transform=\"translate(14," << T + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\" class=\"al\">"
    << html_escape(c.y_label + (c.y_log ? " (log scale)" : "")) << "</text>\n";
  for (const auto& r : c.refs) {
    if (!std::isfinite(r.y) || (c.y_log && r.y <= 0)) continue;
    const double yy = sy(r.y);
    o << "<line x1=\"" << L << "\" x2=\"" << L + pw << "\" y1=\"" << px(yy) << "\" y2=\"" << px(yy)
      << "\" class=\"ref\"/>\n<text x=\"" << L + pw - 4 << "\" y=\"" << px(yy - 4) << "\" text-anchor=\"end\" class=\"reft\">"
      << html_escape(r.label) << "</text>\n";
  }
  // Lines, points (each with its value as a tooltip) and the legend.
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& s = c.series[i];
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : s.points)
      if (std::isfinite(p.first) && std::isfinite(p.second) && (!c.x_log || p.first > 0) && (!c.y_log || p.second > 0))
        pts.push_back(p);
    std::sort(pts.begin(), pts.end());
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.8\""
      << (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") << " points=\"";
    for (const auto& [x, y] : pts) o << px(sx(x)) << "," << px(sy(y)) << " ";
    o << "\"/>\n";
    for (const auto& [x, y] : pts)
      o << "<circle cx=\"" << px(sx(x)) << "\" cy=\"" << px(sy(y)) << "\" r=\"2.8\" fill=\"" << s.color << "\"><title>"
        << html_escape(s.name + ": " + c.x_tick(x) + ", " + fmt_sig(y)) << "</title></circle>\n";
    const double ly = T + 8 + 16 * double(i);
    o << "<line x1=\"" << W + 6 << "\" x2=\"" << W + 30 << "\" y1=\"" << ly << "\" y2=\"" << ly << "\" stroke=\"" << s.color
      << "\" stroke-width=\"2\"" << (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") << "/>\n";
    o << "<text x=\"" << W + 36 << "\" y=\"" << ly + 4 << "\" class=\"lg\">" << html_escape(s.name) << "</text>\n";
  }
  o << "</svg>\n</figure>\n";
  return o.str();
}

// Horizontal bars, one per labelled value, with reference lines (e.g. parity at 1).
struct BarChart {
  std::string title, x_label;
  std::vector<std::pair<std::string, double>> bars;
  std::vector<std::string> colors;  // per bar
  std::vector<RefLine> refs;
};

std::string render_bar_chart(const BarChart& c) {
  const double label_w = 300, W = 820, T = 30, B = 40, bar_h = 12, gap = 3;
  const double H = T + B + double(c.bars.size()) * (bar_h + gap);
  const double pw = W - label_w - 20;
  double hi = 0;
  for (const auto& b : c.bars)
    if (std::isfinite(b.second)) hi = std::max(hi, b.second);
  for (const auto& r : c.refs) hi = std::max(hi, r.y);
  const std::vector<double> ticks = nice_ticks(0, hi > 0 ? hi : 1);
  hi = std::max(hi, ticks.back());
  auto sx = [&](double v) { return label_w + v / hi * pw; };
  std::ostringstream o;
  o << "<figure class=\"plot\">\n<svg role=\"img\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W << " "
    << H << "\">\n<title>" << html_escape(c.title) << "</title>\n";
  o << "<text x=\"" << label_w << "\" y=\"18\" class=\"ct\">" << html_escape(c.title) << "</text>\n";
  const double bottom = H - B;
  for (double t : ticks) {
    o << "<line x1=\"" << px(sx(t)) << "\" x2=\"" << px(sx(t)) << "\" y1=\"" << T << "\" y2=\"" << bottom
      << "\" class=\"grid\"/>\n<text x=\"" << px(sx(t)) << "\" y=\"" << bottom + 14 << "\" text-anchor=\"middle\" class=\"tick\">"
      << fmt_sig(t) << "</text>\n";
  }
  o << "<text x=\"" << label_w + pw / 2 << "\" y=\"" << H - 6 << "\" text-anchor=\"middle\" class=\"al\">"
    << html_escape(c.x_label) << "</text>\n";
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const double y = T + double(i) * (bar_h + gap);
    const double v = c.bars[i].second;
    o << "<text x=\"" << label_w - 6 << "\" y=\"" << px(y + bar_h - 2) << "\" text-anchor=\"end\" class=\"bl\">"
      << html_escape(c.bars[i].first) << "</text>\n";
    if (std::isfinite(v) && v > 0)
      o << "<rect x=\"" << label_w << "\" y=\"" << px(y) << "\" width=\"" << px(sx(v) - label_w) << "\" height=\"" << bar_h
        << "\" fill=\"" << (i < c.colors.size() ? c.colors[i] : kPalette[0]) << "\"><title>"
        << html_escape(c.bars[i].first + ": " + fmt_sig(v)) << "</title></rect>\n";
    o << "<text x=\"" << px((std::isfinite(v) && v > 0 ? sx(v) : label_w) + 4) << "\" y=\"" << px(y + bar_h - 2)
      << "\" class=\"bv\">" << html_escape(std::isfinite(v) && v > 0 ? fmt_sig(v, 3) : "not measured") << "</text>\n";
  }
  for (const auto& r : c.refs) {
    o << "<line x1=\"" << px(sx(r.y)) << "\" x2=\"" << px(sx(r.y)) << "\" y1=\"" << T - 4 << "\" y2=\"" << bottom
      << "\" class=\"ref\"/>\n<text x=\"" << px(sx(r.y) + 4) << "\" y=\"" << T - 6 << "\" class=\"reft\">"
      << html_escape(r.label) << "</text>\n";
  }
  o << "</svg>\n</figure>\n";
  return o.str();
}

// ---- What the receipts say.

// "24q/4kv/d256/b8/ctx32768" -> panel "24q/4kv/d256/b8", context 32768 (0 when absent).
void split_config(const std::string& cfg, std::string* panel, double* ctx) {
  *ctx = 0;
  std::string p;
  std::stringstream ss(cfg);
  for (std::string part; std::getline(ss, part, '/');) {
    if (part.rfind("ctx", 0) == 0) {
      try {
        *ctx = std::stod(part.substr(3));
      } catch (...) {
        *ctx = 0;
      }
      continue;
    }
    p += (p.empty() ? "" : "/") + part;
  }
  *panel = p;
}

std::string context_tick(double x) {
  if (x >= 1024 && std::fmod(x, 1024) == 0) return fmt_sig(x / 1024) + "K";
  return fmt_sig(x);
}

const json* num_field(const json& row, const char* k) {
  return row.contains(k) && row[k].is_number() ? &row[k] : nullptr;
}
std::string str_field(const json& row, const char* k) {
  return row.contains(k) && row[k].is_string() ? row[k].get<std::string>() : std::string();
}

// Colour per format, dash per addressing: the same pairing in every panel.
struct Styles {
  std::map<std::string, std::string> color, dash;
  const char* const dashes[4] = {"", "6 3", "2 2", "8 2 2 2"};
  std::string color_of(const std::string& f) {
    if (!color.count(f)) color[f] = kPalette[color.size() % std::size(kPalette)];
    return color[f];
  }
  std::string dash_of(const std::string& a) {
    if (!dash.count(a)) dash[a] = dashes[dash.size() % 4];
    return dash[a];
  }
};

std::string attention_plots(const json& r) {
  // achieved / ceiling against context: panel per shape and batch, line per format and addressing.
  std::map<std::string, std::map<std::string, Series>> panels;
  std::vector<std::string> panel_order;
  Styles st;
  for (const auto& row : r["rows"]) {
    const json* v = num_field(row, "of_ceiling");
    std::string panel;
    double ctx = 0;
    split_config(str_field(row, "config"), &panel, &ctx);
    if (!v || ctx <= 0) continue;
    const std::string f = str_field(row, "format"), a = str_field(row, "addressing");
    if (!panels.count(panel)) panel_order.push_back(panel);
    Series& s = panels[panel][f + " " + a];
    if (s.name.empty()) s = Series{f + " " + a, st.color_of(f), st.dash_of(a), {}};
    s.points.push_back({ctx, v->get<double>()});
  }
  std::ostringstream o;
  if (!panels.empty()) {
    o << "<h3>achieved / ceiling against context</h3>\n<p>Bytes the partial and merge read per second over the "
         "read-bandwidth ceiling measured in the same run; colour: format, dash: addressing.</p>\n<div class=\"grid\">\n";
    for (const auto& p : panel_order) {
      LineChart c;
      c.title = p;
      c.x_label = "context (positions)";
      c.y_label = "achieved / ceiling";
      c.x_log = true;
      c.x_tick = context_tick;
      for (auto& [k, s] : panels[p]) c.series.push_back(s);
      c.refs.push_back({1.0, "ceiling"});
      o << render_line_chart(c);
    }
    o << "</div>\n";
  }
  // ours / SDPA per row, one chart per format.
  std::map<std::string, BarChart> by_format;
  std::vector<std::string> formats;
  for (const auto& row : r["rows"]) {
    const json* v = num_field(row, "ours_over_sdpa_best");
    if (!v) continue;
    const std::string f = str_field(row, "format");
    if (!by_format.count(f)) formats.push_back(f);
    BarChart& b = by_format[f];
    b.bars.push_back({str_field(row, "config") + " " + str_field(row, "addressing"), v->get<double>()});
    b.colors.push_back(st.color_of(f));
  }
  if (!by_format.empty()) {
    o << "<h3>ours / SDPA per row</h3>\n<p>Our median time over the best of PyTorch SDPA's flash and cudnn kernels in "
         "the same run (below 1: ours is faster).</p>\n";
    for (const auto& f : formats) {
      BarChart& b = by_format[f];
      b.title = f + ": ours / SDPA best";
      b.x_label = "ours / SDPA best (time ratio)";
      b.refs.push_back({1.0, "parity"});
      o << render_bar_chart(b);
    }
  }
  return o.str();
}

std::string pack_plots(const json& r) {
  Styles st;
  std::map<std::string, Series> pack, unpack;
  std::map<double, std::vector<double>> ceiling;
  for (const auto& row : r["rows"]) {
    const json* mib = num_field(row, "blob_mib");
    if (!mib) continue;
    const double x = mib->get<double>();
    const std::string f = str_field(row, "format"), a = str_field(row, "addressing"), k = f + " " + a;
    for (auto [field, m] : {std::pair{"pack_bytes_per_s", &pack}, std::pair{"unpack_bytes_per_s", &unpack}}) {
      const json* v = num_field(row, field);
      if (!v) continue;
      Series& s = (*m)[k];
      if (s.name.empty()) s = Series{k, st.color_of(f), st.dash_of(a), {}};
      s.points.push_back({x, v->get<double>() / 1e12});
    }
    if (const json* c = num_field(row, "ceiling_bytes_per_s")) ceiling[x].push_back(c->get<double>() / 1e12);
  }
  if (pack.empty() && unpack.empty()) return "";
  Series ceil{"copy ceiling (median)", "#444444", "1 3", {}};
  for (auto& [x, v] : ceiling) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;  // an even count: the mean of the two middle values
    ceil.points.push_back({x, v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2});
  }
  std::ostringstream o;
  o << "<h3>pack throughput against blob size</h3>\n<p>Bytes of every field moved per second, against a 16-byte copy "
       "kernel over the same bytes in the same run; colour: format, dash: addressing.</p>\n<div class=\"grid\">\n";
  for (auto [title, m] : {std::pair{"pack", &pack}, std::pair{"unpack", &unpack}}) {
    LineChart c;
    c.title = title;
    c.x_label = "blob size (MiB)";
    c.y_label = "TB/s";
    c.x_log = true;
    for (auto& [k, s] : *m) c.series.push_back(s);
    if (!ceil.points.empty()) c.series.push_back(ceil);
    o << render_line_chart(c);
  }
  o << "</div>\n";
  return o.str();
}

std::string kv_plots(const json& r) {
  const json& kv = r["kv"];
  Series mean{"mean KL", kPalette[0], "", {}}, worst{"worst-token KL", kPalette[1], "6 3", {}};
  for (const auto& d : kv["depths"]) {
    mean.points.push_back({d["depth"].get<double>(), d["mean_kl"].get<double>()});
    worst.points.push_back({d["depth"].get<double>(), d["worst_kl"].get<double>()});
  }
  if (mean.points.empty()) return "";
  LineChart c;
  c.title = "KL(bf16 || " + kv["format"].get<std::string>() + ") per depth";
  c.x_label = "depth (positions)";
  c.y_label = "KL (nats)";
  c.x_log = true;
  c.y_log = true;
  c.x_tick = context_tick;
  c.series = {mean, worst};
  if (kv.contains("bar") && kv["bar"].is_object()) {
    if (kv["bar"].contains("mean_kl") && kv["bar"]["mean_kl"].is_number())
      c.refs.push_back({kv["bar"]["mean_kl"].get<double>(), "bar: mean " + fmt_sig(kv["bar"]["mean_kl"].get<double>())});
    if (kv["bar"].contains("worst_token_kl") && kv["bar"]["worst_token_kl"].is_number())
      c.refs.push_back(
          {kv["bar"]["worst_token_kl"].get<double>(), "bar: worst " + fmt_sig(kv["bar"]["worst_token_kl"].get<double>())});
  }
  return "<h3>KL per depth</h3>\n<div class=\"grid\">\n" + render_line_chart(c) + "</div>\n";
}

const char* kStyle = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.good{background:#e3f4e3}td.bad{background:#f9d6d6;font-weight:bold}td.skip{color:#777}
.grid{display:flex;flex-wrap:wrap;gap:8px}figure.plot{margin:4px}
svg text{font-size:11px;fill:#222}svg .ct{font-size:13px;font-weight:bold}svg .tick{fill:#555}
svg .frame{fill:none;stroke:#999}svg .grid{stroke:#e4e4e4}svg .ref{stroke:#a31515;stroke-dasharray:4 3}
svg .reft{fill:#a31515}svg .bl{font-family:monospace;font-size:10px}svg .bv{font-size:10px;fill:#333}
)";

}  // namespace

std::string receipt_plots(const json& r) {
  const std::string kind = r.value("kind", "");
  if (kind == "bench" && r.contains("rows") && r["rows"].is_array()) {
    if (r.value("name", "") == "pack") return pack_plots(r);
    return attention_plots(r);
  }
  if (kind == "kv-gate" && r.contains("kv")) return kv_plots(r);
  return "";
}

std::string render_html_page(const std::vector<json>& recs, const std::vector<std::string>& paths) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>kernel-contracts report</title>\n"
    << "<style>\n" << kStyle << "</style>\n</head>\n<body>\n<h1>kernel-contracts report</h1>\n";
  o << "<table>\n<thead><tr><th>receipt</th><th>kind</th><th>verdict</th><th>backend</th><th>device</th><th>commit</th>"
       "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < recs.size(); ++i) {
    const json& r = recs[i];
    const bool pass = r["verdict"] == "pass";
    o << "<tr><td><a href=\"#r" << i << "\">" << html_escape(r["name"].get<std::string>()) << "</a></td><td>"
      << html_escape(r["kind"].get<std::string>()) << "</td><td class=\"" << (pass ? "good" : "bad") << "\">"
      << (pass ? "pass" : "fail") << "</td><td>" << html_escape(r["backend"].get<std::string>()) << "</td><td>"
      << html_escape(r["device"]["name"].get<std::string>()) << "</td><td>"
      << html_escape(r["git"]["commit"].get<std::string>().substr(0, 12) + (r["git"]["dirty"].get<bool>() ? " (dirty)" : ""))
      << "</td></tr>\n";
  }
  o << "</tbody>\n</table>\n";
  for (size_t i = 0; i < recs.size(); ++i) {
    o << "<section id=\"r" << i << "\">\n";
    const std::string body = render_receipt(Receipt(recs[i]), paths[i], ViewFormat::html);
    // The receipt's heading first, then its plots, then its tables.
    const size_t h_end = body.find("</h2>\n");
    if (h_end != std::string::npos) {
      o << body.substr(0, h_end + 6) << receipt_plots(recs[i]) << body.substr(h_end + 6);
    } else {
      o << receipt_plots(recs[i]) << body;
    }
    o << "</section>\n";
  }
  o << "</body>\n</html>\n";
  return o.str();
}

}  // namespace kc
