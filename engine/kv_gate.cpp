#include "engine/kv_gate.h"
#include "kernels/engine/engine_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

#include "contracts/framework.h"
#include "contracts/json_type.h"
#include "engine/checkpoint.h"
#include "engine/files.h"
#include "engine/generate.h"
#include "engine/kv_plant_backend.h"
#include "engine/model.h"
#include "engine/serve_gate.h"  // sha256_hex

namespace kc::engine {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A regular file's bytes (a folder, a FIFO or a name the system refuses is not read: see
// read_regular_file for the reason).
bool read_file(const std::string& path, std::string* out) { return read_regular_file(path, out).empty(); }

std::string num_text(double x) {
  std::ostringstream o;
  o << std::setprecision(4) << x;
  return o.str();
}

}  // namespace

// ---------------------------------------------------------------- fixture

bool parse_kv_fixture(const nlohmann::json& j, const std::string& dir, KvFixture* out, std::string* err) {
  const auto fail = [&](const std::string& field, const std::string& why) {
    *err = "field " + field + ": " + why;
    return false;
  };
  if (!j.is_object()) return fail("(top)", "the fixture must be a JSON object");
  static const char* known[] = {"$schema", "name",          "note",          "model", "tokens", "depths",
                                "rows",    "decode_steps",  "prefill_chunk", "bar",   "recall", "control_depths"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return it.key() == k; }) == std::end(known))
      return fail(it.key(), "unknown field");
  for (const char* k : {"$schema", "note"})
    if (j.contains(k) && !j[k].is_string()) return fail(k, "must be a string");
  KvFixture f;
  const auto resolve = [&](const std::string& p) {
    fs::path x(p);
    if (x.is_relative()) x = fs::path(dir) / x;
    return x.lexically_normal().string();
  };
  const auto nonempty_string = [&](const nlohmann::json& o, const std::string& k, const std::string& fld, std::string* v) {
    if (!o.contains(k)) return fail(fld, "missing");
    if (!o[k].is_string() || o[k].get<std::string>().empty()) return fail(fld, "must be a non-empty string");
    *v = o[k].get<std::string>();
    return true;
  };
  const auto int_in = [&](const nlohmann::json& v, const std::string& fld, long long lo, long long hi, int* x) {
    long long n = 0;
    if (!json_integer(v, &n)) return fail(fld, "must be an integer");
    if (n < lo || n > hi) return fail(fld, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
    *x = int(n);
    return true;
  };
  if (!nonempty_string(j, "name", "name", &f.name)) return false;
  // The receipt's name is NAME/FORMAT, each part a file name (contracts/receipt.h).
  if (!safe_file_name(f.name)) return fail("name", "must be a file name (not . or .., no /, \\ or NUL)");
  std::string model;
  if (!nonempty_string(j, "model", "model", &model)) return false;
  f.model_dir = resolve(model);

  if (!j.contains("tokens")) return fail("tokens", "missing");
  const auto& t = j["tokens"];
  if (!t.is_object()) return fail("tokens", "must be an object {file, encoding, sha256, source, licence}");
  for (auto it = t.begin(); it != t.end(); ++it)
    if (it.key() != "file" && it.key() != "encoding" && it.key() != "sha256" && it.key() != "source" &&
        it.key() != "licence")
      return fail("tokens." + it.key(), "unknown field");
  std::string file, encoding;
  if (!nonempty_string(t, "file", "tokens.file", &file)) return false;
  if (!nonempty_string(t, "encoding", "tokens.encoding", &encoding)) return false;
  if (encoding != "bytes")
    return fail("tokens.encoding", "must be \"bytes\" (<|eos|> then the file's bytes, the byte tokenizer of the fixture models)");
  if (!nonempty_string(t, "sha256", "tokens.sha256", &f.tokens_sha256)) return false;
  if (f.tokens_sha256.size() != 64 || f.tokens_sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
    return fail("tokens.sha256", "must be 64 lowercase hex digits");
  if (!nonempty_string(t, "source", "tokens.source", &f.tokens_source)) return false;
  if (!nonempty_string(t, "licence", "tokens.licence", &f.tokens_licence)) return false;
  f.tokens_file = resolve(file);

  if (j.contains("rows") && !int_in(j["rows"], "rows", 1, 65536, &f.rows)) return false;
  if (j.contains("decode_steps") && !int_in(j["decode_steps"], "decode_steps", 0, 4096, &f.decode_steps)) return false;
  if (j.contains("prefill_chunk") && !int_in(j["prefill_chunk"], "prefill_chunk", 1, 65536, &f.prefill_chunk))
    return false;

  if (!j.contains("depths")) return fail("depths", "missing");
  if (!j["depths"].is_array() || j["depths"].empty()) return fail("depths", "must be a non-empty array of positions");
  for (size_t i = 0; i < j["depths"].size(); ++i) {
    const std::string fld = "depths[" + std::to_string(i) + "]";
    int d = 0;
    if (!int_in(j["depths"][i], fld, 1, (1 << 30), &d)) return false;
    if (i > 0 && d < f.depths.back() + f.rows + f.decode_steps)
      return fail(fld, "must be at least depths[" + std::to_string(i - 1) + "] + rows + decode_steps = " +
                           std::to_string(f.depths.back() + f.rows + f.decode_steps) +
                           " (depths ascend; a depth's scored and decode rows end before the next depth)");
    f.depths.push_back(d);
  }

  if (j.contains("bar")) {
    const auto& b = j["bar"];
    if (!b.is_object()) return fail("bar", "must be an object {mean_kl, worst_token_kl}");
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string fld = "bar." + it.key();
      if (it.key() != "mean_kl" && it.key() != "worst_token_kl") return fail(fld, "unknown field");
      if (!it->is_number() || !std::isfinite(it->get<double>()) || !(it->get<double>() > 0))
        return fail(fld, "must be a finite number > 0");
      (it.key() == "mean_kl" ? f.bar.mean_kl : f.bar.worst_token_kl) = it->get<double>();
    }
  }

  if (j.contains("recall")) {
    if (!j["recall"].is_array()) return fail("recall", "must be an array of probes");
    std::vector<std::string> groups;
    for (size_t i = 0; i < j["recall"].size(); ++i) {
      const std::string pre = "recall[" + std::to_string(i) + "]";
      const auto& p = j["recall"][i];
      if (!p.is_object())
        return fail(pre, "must be an object {name, passphrase or passphrases, plant, ask, depths}");
      for (auto it = p.begin(); it != p.end(); ++it)
        if (it.key() != "name" && it.key() != "passphrase" && it.key() != "passphrases" && it.key() != "plant" &&
            it.key() != "ask" && it.key() != "depths")
          return fail(pre + "." + it.key(), "unknown field");
      std::string name, plant, ask;
      if (!nonempty_string(p, "name", pre + ".name", &name)) return false;
      if (std::find(groups.begin(), groups.end(), name) != groups.end()) return fail(pre + ".name", "repeats " + name);
      if (name.find_first_of("#@") != std::string::npos) return fail(pre + ".name", "must not contain '#' or '@'");
      groups.push_back(name);
      // One passphrase (the plant holds it literally or as {passphrase}) or a list of them
      // (the plant holds {passphrase}): one probe per passphrase, named NAME#k.
      std::vector<std::string> phrases;
      const bool list = p.contains("passphrases");
      if (list == p.contains("passphrase")) return fail(pre + ".passphrase", "give either passphrase or passphrases");
      if (list) {
        const auto& a = p["passphrases"];
        if (!a.is_array() || a.empty() || a.size() > 1024)
          return fail(pre + ".passphrases", "must be an array of 1..1024 passphrases");
        for (size_t k = 0; k < a.size(); ++k) {
          const std::string fld = pre + ".passphrases[" + std::to_string(k) + "]";
          if (!a[k].is_string() || a[k].get<std::string>().empty()) return fail(fld, "must be a non-empty string");
          const std::string x = a[k].get<std::string>();
          if (std::find(phrases.begin(), phrases.end(), x) != phrases.end()) return fail(fld, "repeats " + x);
          phrases.push_back(x);
        }
      } else {
        std::string x;
        if (!nonempty_string(p, "passphrase", pre + ".passphrase", &x)) return false;
        phrases.push_back(x);
      }
      if (!nonempty_string(p, "plant", pre + ".plant", &plant)) return false;
      static const std::string kSlot = "{passphrase}";
      const size_t slot = plant.find(kSlot);
      if (slot != std::string::npos && plant.find(kSlot, slot + 1) != std::string::npos)
        return fail(pre + ".plant", "must hold {passphrase} once");
      if (slot == std::string::npos && (list || plant.find(phrases[0]) == std::string::npos))
        return fail(pre + ".plant", list ? "must contain {passphrase} (the place of each passphrase)"
                                         : "must contain the passphrase (or {passphrase})");
      if (!nonempty_string(p, "ask", pre + ".ask", &ask)) return false;
      if (ask.find(kSlot) != std::string::npos) return fail(pre + ".ask", "must not contain {passphrase}");
      for (const std::string& x : phrases)
        if (ask.find(x) != std::string::npos) return fail(pre + ".ask", "must not contain the passphrase " + x);
      if (!p.contains("depths")) return fail(pre + ".depths", "missing");
      if (!p["depths"].is_array() || p["depths"].empty()) return fail(pre + ".depths", "must be a non-empty array");
      std::vector<KvProbe> expanded;
      for (size_t k = 0; k < phrases.size(); ++k) {
        KvProbe pr;
        pr.group = name;
        pr.source = int(i);
        pr.name = list ? name + "#" + std::to_string(k) : name;
        pr.passphrase = phrases[k];
        pr.plant = slot == std::string::npos ? plant
                                             : plant.substr(0, slot) + phrases[k] + plant.substr(slot + kSlot.size());
        pr.ask = ask;
        expanded.push_back(std::move(pr));
      }
      for (size_t k = 0; k < p["depths"].size(); ++k) {
        const std::string fld = pre + ".depths[" + std::to_string(k) + "]";
        int d = 0;
        if (!int_in(p["depths"][k], fld, 1, (1 << 30), &d)) return false;
        // A probe is keyed by its name and depth: a repeat would be one probe counted twice.
        if (!expanded.empty() && std::find(expanded[0].depths.begin(), expanded[0].depths.end(), d) != expanded[0].depths.end())
          return fail(fld, "repeats " + std::to_string(d));
        for (KvProbe& pr : expanded) {
          const int need = 2 * int(pr.plant.size() + pr.ask.size() + pr.passphrase.size()) + 2;
          if (d < need)
            return fail(fld, "must be at least " + std::to_string(need) +
                                 " (twice the plant, ask and passphrase bytes, so the plant sits at half the depth)");
          pr.depths.push_back(d);
        }
      }
      for (KvProbe& pr : expanded) f.recall.push_back(std::move(pr));
    }
  }
  if (j.contains("control_depths")) {
    if (!j["control_depths"].is_array() || j["control_depths"].empty())
      return fail("control_depths", "must be a non-empty array of depths");
    for (size_t i = 0; i < j["control_depths"].size(); ++i) {
      const std::string fld = "control_depths[" + std::to_string(i) + "]";
      int d = 0;
      if (!int_in(j["control_depths"][i], fld, 1, (1 << 30), &d)) return false;
      if (std::find(f.depths.begin(), f.depths.end(), d) == f.depths.end()) return fail(fld, "must be one of depths");
      if (!f.control_depths.empty() && d <= f.control_depths.back()) return fail(fld, "must ascend");
      f.control_depths.push_back(d);
    }
  } else {
    f.control_depths = {f.depths.front()};
  }

  if (const std::string why = folder_problem(f.model_dir); !why.empty()) return fail("model", f.model_dir + " " + why);
  std::string bytes;
  if (const std::string why = read_regular_file(f.tokens_file, &bytes); !why.empty())
    return fail("tokens.file", f.tokens_file + ": cannot be read (" + why + ")");
  const std::string got = sha256_hex(bytes);
  if (got != f.tokens_sha256) return fail("tokens.sha256", f.tokens_file + " has sha256 " + got);
  f.tokens = encode_prompt(bytes);
  // The last scored row (position depth + rows - 1) predicts the token after it, so the stream
  // needs depth + rows + 1 tokens even with no decode steps; the decode steps feed tokens
  // depth + rows .. depth + rows + decode_steps - 1.
  const int64_t need = int64_t(f.depths.back()) + f.rows + std::max(f.decode_steps, 1);
  if (int64_t(f.tokens.size()) < need)
    return fail("depths", "the deepest depth needs " + std::to_string(need) +
                              " tokens (depth + rows + decode_steps, decode_steps counted as at least 1: the last "
                              "scored row's target); " +
                              f.tokens_file + " gives " + std::to_string(f.tokens.size()));
  // The main lane holds positions 0 .. depth + rows + decode_steps - 1 (run_arm): a probe forks
  // from it at half its depth, which must be a position the lane has fed (at most its end).
  const int64_t lane_end = int64_t(f.depths.back()) + f.rows + f.decode_steps;
  for (size_t i = 0; i < f.recall.size(); ++i)
    for (size_t k = 0; k < f.recall[i].depths.size(); ++k) {
      if (f.recall[i].depths[k] / 2 > lane_end)
        return fail("recall[" + std::to_string(f.recall[i].source) + "].depths[" + std::to_string(k) + "]",
                    "at most twice the main stream's end (" + std::to_string(lane_end) +
                        " = the deepest depth + rows + decode_steps): the probe is forked from the main lane at "
                        "half its depth");
      if (f.recall[i].depths[k] > int64_t(f.tokens.size()))
        return fail("recall[" + std::to_string(f.recall[i].source) + "].depths[" + std::to_string(k) + "]",
                    "deeper than the token file (" + std::to_string(f.tokens.size()) + " tokens)");
    }
  *out = std::move(f);
  return true;
}

// ---------------------------------------------------------------- arithmetic

void log_softmax64(const float* logits, int vocab, std::vector<double>* out) {
  out->resize(vocab);
  double mx = -std::numeric_limits<double>::infinity();
  for (int v = 0; v < vocab; ++v) mx = std::max(mx, double(logits[v]));
  double s = 0;
  for (int v = 0; v < vocab; ++v) s += std::exp(double(logits[v]) - mx);
  const double lse = mx + std::log(s);
  for (int v = 0; v < vocab; ++v) (*out)[v] = double(logits[v]) - lse;
}

double kl64(const double* lp, const double* lq, int vocab) {
  double s = 0;
  for (int v = 0; v < vocab; ++v) {
    const double p = std::exp(lp[v]);
    if (p > 0) s += p * (lp[v] - lq[v]);  // a zero-probability reference term contributes 0
  }
  return s;
}

double percentile_nearest_rank(std::vector<double> v, double p) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end(), [](double a, double b) { return a < b || (std::isnan(b) && !std::isnan(a)); });
  const double n = double(v.size());
  int64_t rank = int64_t(std::ceil(p / 100.0 * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, int64_t(v.size()));
  return v[size_t(rank - 1)];
}

void top2(const double* lp, int vocab, int32_t* top, double* margin) {
  int32_t a = 0;
  for (int v = 1; v < vocab; ++v)
    if (lp[v] > lp[a]) a = v;
  double second = -std::numeric_limits<double>::infinity();
  for (int v = 0; v < vocab; ++v)
    if (v != a) second = std::max(second, lp[v]);
  *top = a;
  *margin = lp[a] - second;
}

void kv_refresh_summary(KvDepthStats* s) {
  double sum = 0;
  s->worst_kl = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < s->kl.size(); ++i) {
    sum += s->kl[i];
    if (worse_ratio(s->kl[i], s->worst_kl)) s->worst_kl = s->kl[i], s->worst_pos = s->depth + int32_t(i);
  }
  s->mean_kl = s->kl.empty() ? 0 : sum / double(s->kl.size());
  s->p999 = percentile_nearest_rank(s->kl, 99.9);
  s->p99 = percentile_nearest_rank(s->kl, 99);
  s->p95 = percentile_nearest_rank(s->kl, 95);
  s->p90 = percentile_nearest_rank(s->kl, 90);
  s->p50 = percentile_nearest_rank(s->kl, 50);
}

KvDepthStats kv_depth_stats(int depth, int rows, int vocab, const float* ref_logits, const float* q_logits,
                            const std::vector<int32_t>& tokens) {
  KvDepthStats s;
  s.depth = depth;
  s.rows = rows;
  std::vector<double> lp, lq;
  double nll_ref = 0, nll_q = 0;
  for (int r = 0; r < rows; ++r) {
    log_softmax64(ref_logits + size_t(r) * vocab, vocab, &lp);
    log_softmax64(q_logits + size_t(r) * vocab, vocab, &lq);
    s.kl.push_back(kl64(lp.data(), lq.data(), vocab));
    const int32_t pos = depth + r;
    const int32_t target = tokens[size_t(pos) + 1];
    nll_ref -= lp[target];
    nll_q -= lq[target];
    KvTopDiff d;
    top2(lp.data(), vocab, &d.ref_top, &d.ref_margin);
    top2(lq.data(), vocab, &d.q_top, &d.q_margin);
    if (d.ref_top == d.q_top) {
      ++s.agree;
    } else {
      d.pos = pos;
      d.target = target;
      s.diffs.push_back(d);
    }
  }
  s.ppl_ref = std::exp(nll_ref / rows);
  s.ppl_q = std::exp(nll_q / rows);
  kv_refresh_summary(&s);
  return s;
}

std::string kv_bar_failure(const KvDepthStats& s, const KvBar& bar) {
  std::string why;
  if (!(s.mean_kl <= bar.mean_kl)) why += "mean KL " + num_text(s.mean_kl) + " > " + num_text(bar.mean_kl);
  if (!(s.worst_kl <= bar.worst_token_kl))
    why += std::string(why.empty() ? "" : "; ") + "worst-token KL " + num_text(s.worst_kl) + " > " +
           num_text(bar.worst_token_kl) + " at position " + std::to_string(s.worst_pos);
  return why;
}

KvDepthStats kv_control_judged(const KvDepthStats& planted, const KvDepthStats& unplanted, const KvBar& bar,
                               bool* unplanted_meets, KvDepthStats* excess) {
  KvDepthStats ex = planted;  // per row: the planted KL minus the unplanted KL
  for (size_t i = 0; i < ex.kl.size(); ++i) ex.kl[i] = planted.kl[i] - (i < unplanted.kl.size() ? unplanted.kl[i] : 0.0);
  kv_refresh_summary(&ex);
  const bool meets = kv_bar_failure(unplanted, bar).empty();
  if (unplanted_meets) *unplanted_meets = meets;
  if (excess) *excess = ex;
  return meets ? planted : ex;
}

// ---------------------------------------------------------------- arms

namespace {

// A probe of length `depth`: filler (the token stream) with the plant at depth / 2, the ask
// and the passphrase at the end. The passphrase's bytes are scored teacher-forced: it is
// recalled when every one is the arm's top token (what greedy decoding after the ask gives).
struct ProbeOut {
  bool recalled = false;
  int first_miss = -1;  // byte index of the passphrase, -1 if none
  std::string got;      // the arm's top tokens over the answer (bytes)
};

std::string probe_key(const KvProbe& p, int d) { return p.name + "@" + std::to_string(d); }

std::vector<int32_t> probe_tokens(const KvProbe& p, int depth, const std::vector<int32_t>& stream) {
  const size_t half = size_t(depth) / 2;
  const size_t tail = size_t(depth) - half - p.plant.size() - p.ask.size() - p.passphrase.size();
  std::vector<int32_t> t(stream.begin(), stream.begin() + half);
  for (unsigned char ch : p.plant) t.push_back(ch);
  t.insert(t.end(), stream.begin() + half, stream.begin() + half + tail);
  for (unsigned char ch : p.ask) t.push_back(ch);
  for (unsigned char ch : p.passphrase) t.push_back(ch);
  return t;
}

struct ArmOut {
  std::vector<std::vector<float>> logits;  // per depth: [rows][vocab]
  std::vector<double> decode_tok_s;        // per depth (0 when decode_steps is 0)
  std::map<std::string, ProbeOut> probes;  // probe_key
  double wall_s = 0;
  uint64_t lane_bytes = 0;                 // the main lane's cache bytes
};

// Feeds positions [from, to) of `toks` into `lane` in chunks; rows in [keep_from, keep_to)
// ask for logits, appended to *logits.
Status feed(const Model& m, Backend& be, Cache& c, int lane, const std::vector<int32_t>& toks, int64_t from, int64_t to,
            int chunk, int64_t keep_from, int64_t keep_to, std::vector<float>* logits) {
  std::vector<ForwardRow> rows;
  std::vector<float> lg;
  for (int64_t p = from; p < to; p += chunk) {
    rows.clear();
    for (int64_t q = p; q < std::min(to, p + chunk); ++q)
      rows.push_back({lane, toks[size_t(q)], int32_t(q), q >= keep_from && q < keep_to});
    KC_RETURN_IF_ERROR(m.forward(be, c, rows, &lg));
    if (logits) logits->insert(logits->end(), lg.begin(), lg.end());
  }
  return Status::Ok();
}

// A probe on lane 1, forked from the main lane: the probe's filler before its plant is the
// token stream's first depth/2 tokens, which the main lane holds once it has fed them, so
// they are copied (Backend::pack / unpack) instead of prefilled again; a row's bytes do not
// depend on how its cache was filled (model.h: batch invariance).
// The answer rows' logits of a probe on lane 1 of `c`, forked from lane 0 (which holds the
// stream's first depth/2 positions).
Status probe_logits_forked(const Model& m, Backend& be, Cache& c, const KvProbe& p, int depth,
                           const std::vector<int32_t>& stream, int chunk, std::vector<float>* lg) {
  const std::vector<int32_t> t = probe_tokens(p, depth, stream);
  const int64_t L = int64_t(t.size()), a = int64_t(p.passphrase.size()), h = depth / 2;
  if (h > 0) {
    std::vector<uint8_t> blob;
    KC_RETURN_IF_ERROR(be.pack(c, 0, 0, h, &blob));
    KC_RETURN_IF_ERROR(be.unpack(c, 1, 0, blob));
  }
  lg->clear();
  return feed(m, be, c, 1, t, h, L - 1, chunk, L - a - 1, L - 1, lg);
}

Status run_probe(const Model& m, Backend& be, Cache& c, const KvProbe& p, int depth, const std::vector<int32_t>& stream,
                 int chunk, ProbeOut* out) {
  std::vector<float> lg;
  KC_RETURN_IF_ERROR(probe_logits_forked(m, be, c, p, depth, stream, chunk, &lg));
  const std::vector<int32_t> t = probe_tokens(p, depth, stream);
  const int64_t L = int64_t(t.size()), a = int64_t(p.passphrase.size());
  const int V = int(m.config().vocab_size);
  out->recalled = true;
  out->first_miss = -1;
  out->got.clear();
  std::vector<double> lp;
  for (int64_t i = 0; i < a; ++i) {
    log_softmax64(lg.data() + size_t(i) * V, V, &lp);
    int32_t top = 0;
    double margin = 0;
    top2(lp.data(), V, &top, &margin);
    out->got.push_back(top >= 32 && top < 127 ? char(top) : '?');
    if (top != t[size_t(L - a + i)] && out->recalled) out->recalled = false, out->first_miss = int(i);
  }
  return Status::Ok();
}

}  // namespace

Status kv_probe_logits(const Model& m, Backend& be, const KvProbe& p, int depth, const std::vector<int32_t>& stream,
                       int chunk, bool forked, std::vector<float>* logits) {
  if (size_t(depth) - size_t(depth) / 2 < p.plant.size() + p.ask.size() + p.passphrase.size() ||
      size_t(depth) > stream.size())
    return Status::Error("probe " + p.name + ": depth " + std::to_string(depth) +
                         " cannot hold the plant at half depth, the ask and the passphrase");
  const std::vector<int32_t> t = probe_tokens(p, depth, stream);
  const int64_t L = int64_t(t.size()), a = int64_t(p.passphrase.size());
  Cache c;
  if (!forked) {
    KC_RETURN_IF_ERROR(make_engine_cache(m.kv_layout(), {LaneSpec{int32_t(L), 0}}, &c));
    logits->clear();
    return feed(m, be, c, 0, t, 0, L - 1, chunk, L - a - 1, L - 1, logits);
  }
  KC_RETURN_IF_ERROR(make_engine_cache(m.kv_layout(), {LaneSpec{int32_t(L), 0}, LaneSpec{int32_t(L), 0}}, &c));
  KC_RETURN_IF_ERROR(feed(m, be, c, 0, stream, 0, depth / 2, chunk, 0, 0, nullptr));
  return probe_logits_forked(m, be, c, p, depth, stream, chunk, logits);
}

namespace {

// One arm: one pass over the token stream on lane 0. Segment boundaries: every depth D,
// D + rows (scored rows end), D + rows + steps (timed single-row decode ends), and every
// probe's fork point depth/2, where the probe runs on lane 1 before the main lane goes on.
Status run_arm(const Model& m, Backend& be, const KvFixture& fx, const std::vector<int>& depths, int steps,
               const std::vector<KvProbe>& probes, ArmOut* out) {
  const auto t0 = Clock::now();
  const int rows = fx.rows, chunk = fx.prefill_chunk;
  const int64_t end = int64_t(depths.back()) + rows + steps;
  int probe_cap = 0;
  for (const KvProbe& p : probes)
    for (int d : p.depths) probe_cap = std::max(probe_cap, d);
  std::vector<LaneSpec> lanes = {LaneSpec{int32_t(end), 0}};
  if (probe_cap > 0) lanes.push_back(LaneSpec{int32_t(probe_cap), 0});
  Cache c;
  KC_RETURN_IF_ERROR(make_engine_cache(m.kv_layout(), lanes, &c));
  // The cache stays on the device for the whole arm (cuda; cpu holds nothing): no forward
  // copies it. A planting decorator (KvPlantBackend) plants on the real engine, so its arms
  // hold the cache too.
  EngineBackend* eb = be.engine();
  if (eb) KC_RETURN_IF_ERROR(eb->hold(c));
  struct Release {
    EngineBackend* eb;
    Cache& c;
    ~Release() {
      if (eb) (void)eb->release(c);
    }
  } release_at_exit{eb, c};
  out->lane_bytes = m.kv_layout().kv_bytes(uint64_t(end));
  out->logits.assign(depths.size(), {});
  out->decode_tok_s.assign(depths.size(), 0.0);
  std::vector<double> dec_s(depths.size(), 0.0);
  std::vector<int64_t> dec_n(depths.size(), 0);
  std::vector<int64_t> cuts = {0, end};
  for (int d : depths) cuts.insert(cuts.end(), {int64_t(d), int64_t(d) + rows, int64_t(d) + rows + steps});
  std::vector<std::pair<int64_t, std::pair<const KvProbe*, int>>> forks;
  for (const KvProbe& p : probes)
    for (int d : p.depths) {
      forks.push_back({d / 2, {&p, d}});
      cuts.push_back(d / 2);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 0; i < cuts.size(); ++i) {
    const int64_t a = cuts[i];
    for (const auto& [h, pd] : forks)
      if (h == a) {
        ProbeOut po;
        const Status st = run_probe(m, be, c, *pd.first, pd.second, fx.tokens, chunk, &po);
        if (!st.ok) return Status::Error("recall " + probe_key(*pd.first, pd.second) + ": " + st.message);
        out->probes[probe_key(*pd.first, pd.second)] = po;
      }
    if (i + 1 == cuts.size()) break;
    const int64_t b = cuts[i + 1];
    int scored = -1, decode = -1;
    for (size_t k = 0; k < depths.size(); ++k) {
      if (a >= depths[k] && a < int64_t(depths[k]) + rows) scored = int(k);
      if (a >= int64_t(depths[k]) + rows && a < int64_t(depths[k]) + rows + steps) decode = int(k);
    }
    if (scored >= 0) {
      KC_RETURN_IF_ERROR(feed(m, be, c, 0, fx.tokens, a, b, chunk, a, b, &out->logits[size_t(scored)]));
    } else if (decode >= 0) {
      const auto td = Clock::now();
      KC_RETURN_IF_ERROR(feed(m, be, c, 0, fx.tokens, a, b, 1, a, b, nullptr));
      dec_s[size_t(decode)] += std::chrono::duration<double>(Clock::now() - td).count();
      dec_n[size_t(decode)] += b - a;
    } else {
      KC_RETURN_IF_ERROR(feed(m, be, c, 0, fx.tokens, a, b, chunk, 0, 0, nullptr));
    }
  }
  for (size_t k = 0; k < depths.size(); ++k) out->decode_tok_s[k] = dec_s[k] > 0 ? double(dec_n[k]) / dec_s[k] : 0.0;
  out->wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return Status::Ok();
}

// ---- the bf16 arm's store: <dir>/<key>.json (metadata) + <key>.f32 (logits) ----

// --bf16-cache before anything runs: a folder (a symlink to one is followed), or a path whose
// nearest existing folder can hold it (store_bf16 creates the missing ones, as mkdir -p would).
// Returns what is wrong, or "" when nothing is. A path that exists and is not a folder, or lies
// under a file, can never hold the arm: *fatal. A folder that cannot be written (the arm may
// still be read from it): *fatal only when `must_write` (--bf16-only, whose one job is to store
// it). Checks only: nothing is created here.
std::string cache_folder_problem(const std::string& dir, bool must_write, bool* fatal) {
  std::error_code ec;
  *fatal = true;
  const fs::path p(dir);
  const fs::file_status st = fs::status(p, ec);
  fs::path have = p;
  if (st.type() == fs::file_type::none) return "cannot be read (" + ec.message() + ")";
  if (st.type() != fs::file_type::not_found) {
    if (st.type() != fs::file_type::directory) return "exists and is not a folder";
  } else {
    for (;;) {  // the nearest path that exists above it
      const fs::path up = have.has_parent_path() && have.parent_path() != have ? have.parent_path() : fs::path(".");
      have = up;
      const fs::file_status hs = fs::status(have, ec);
      if (hs.type() == fs::file_type::not_found && have != fs::path(".")) continue;
      if (hs.type() != fs::file_type::directory)
        return "cannot be created: " + have.string() + " is not a folder";
      break;
    }
  }
  if (::access(have.c_str(), W_OK | X_OK) != 0) {
    *fatal = must_write;
    return have == p ? "the folder is not writable" : "cannot be created: " + have.string() + " is not writable";
  }
  *fatal = false;
  return "";
}

// The part of the bf16 arm's metadata that the gate reads besides the logits, as one canonical
// text (nlohmann's dump: sorted keys, round-trip numbers); results_sha256 is its checksum.
std::string bf16_results_text(const nlohmann::json& meta) {
  return nlohmann::json{{"decode_tok_s", meta.at("decode_tok_s")},
                        {"lane_bytes", meta.at("lane_bytes")},
                        {"probes", meta.at("probes")},
                        {"wall_s", meta.at("wall_s")}}
      .dump();
}

struct Bf16Arm {
  ArmOut arm;
  bool from_cache = false;
  std::string file;
  std::string store_error;  // computed, but not stored (why); the receipt says so
};

bool load_bf16(const std::string& base, const std::string& key, const KvFixture& fx, int vocab, Bf16Arm* out,
               std::string* why) {
  std::string meta_text, bin;
  if (!read_file(base + ".json", &meta_text) || !read_file(base + ".f32", &bin)) {
    *why = "absent";
    return false;
  }
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(meta_text);
  } catch (const std::exception& e) {
    *why = std::string("unreadable metadata: ") + e.what();
    return false;
  }
  const size_t per = size_t(fx.rows) * vocab;
  // Any metadata that is not the object store_bf16 writes (an array, a key that is a number)
  // makes the copy unusable, never the run's end: it is computed again.
  if (!meta.is_object() || !meta.contains("key") || !meta["key"].is_string() || !meta.contains("f32_sha256") ||
      !meta["f32_sha256"].is_string()) {
    *why = "bad metadata: not an object with a string key and f32_sha256";
    return false;
  }
  if (meta["key"].get<std::string>() != key || bin.size() != fx.depths.size() * per * 4 ||
      meta["f32_sha256"].get<std::string>() != sha256_hex(bin)) {
    *why = "key, size or checksum differs";
    return false;
  }
  try {
    // The results the gate reads of the metadata (recall probes, rates) have their own
    // checksum: an edited "recalled" would turn a lost recall into an uninformative one.
    if (meta.at("results_sha256").get<std::string>() != sha256_hex(bf16_results_text(meta)))
      throw std::runtime_error("results_sha256 differs from the results' checksum");
    for (size_t i = 0; i < fx.depths.size(); ++i) {
      std::vector<float> lg(per);
      std::memcpy(lg.data(), bin.data() + i * per * 4, per * 4);
      out->arm.logits.push_back(std::move(lg));
    }
    out->arm.decode_tok_s = meta.at("decode_tok_s").get<std::vector<double>>();
    out->arm.wall_s = meta.at("wall_s").get<double>();
    out->arm.lane_bytes = meta.at("lane_bytes").get<uint64_t>();
    for (auto it = meta.at("probes").begin(); it != meta.at("probes").end(); ++it) {
      ProbeOut p;
      p.recalled = it->at("recalled").get<bool>();
      p.first_miss = it->at("first_miss").get<int>();
      p.got = it->at("got").get<std::string>();
      out->arm.probes[it.key()] = p;
    }
    // The checksum covers the logits alone: the metadata must hold what the gate reads of it,
    // a rate per depth and a result per recall probe of this fixture, or the arm is computed
    // again (a copy with fewer entries once ended the run in map::at or a read past the end).
    if (out->arm.decode_tok_s.size() != fx.depths.size())
      throw std::runtime_error("decode_tok_s holds " + std::to_string(out->arm.decode_tok_s.size()) + " rates, the fixture " +
                               std::to_string(fx.depths.size()) + " depths");
    size_t want = 0;
    for (const KvProbe& p : fx.recall)
      for (int d : p.depths) {
        ++want;
        if (!out->arm.probes.count(probe_key(p, d))) throw std::runtime_error("no result of recall probe " + probe_key(p, d));
      }
    if (out->arm.probes.size() != want)
      throw std::runtime_error("probes holds " + std::to_string(out->arm.probes.size()) + " results, the fixture " +
                               std::to_string(want) + " probes");
  } catch (const std::exception& e) {
    *why = std::string("bad metadata: ") + e.what();
    out->arm = ArmOut();
    return false;
  }
  out->from_cache = true;
  return true;
}

Status store_bf16(const std::string& base, const std::string& key, const nlohmann::json& provenance, const Bf16Arm& a) {
  std::string bin;
  for (const auto& lg : a.arm.logits) bin.append(reinterpret_cast<const char*>(lg.data()), lg.size() * 4);
  nlohmann::json probes = nlohmann::json::object();
  for (const auto& [k, p] : a.arm.probes) probes[k] = {{"recalled", p.recalled}, {"first_miss", p.first_miss}, {"got", p.got}};
  nlohmann::json meta = provenance;
  meta["key"] = key;
  meta["f32_sha256"] = sha256_hex(bin);
  meta["decode_tok_s"] = a.arm.decode_tok_s;
  meta["wall_s"] = a.arm.wall_s;
  meta["lane_bytes"] = a.arm.lane_bytes;
  meta["probes"] = probes;
  meta["results_sha256"] = sha256_hex(bf16_results_text(meta));
  std::error_code ec;
  fs::create_directories(fs::path(base).parent_path(), ec);
  if (ec) return Status::Error(fs::path(base).parent_path().string() + ": " + ec.message());
  // The logits and the metadata in one write (write_files_atomic: temp files named by the pid,
  // synced, then renamed, logits first): two runs sharing the cache once opened the same
  // BASE.f32.tmp, and one's rename failed. A reader needs both and checks the checksum.
  return write_files_atomic({{base + ".f32", bin}, {base + ".json", json_file_text(meta)}});
}

// Every gate check of the bar, one per depth (the run and the bar control share it).
void check_bar(Run& run, const std::vector<KvDepthStats>& stats, const KvBar& bar, const std::string& fmt) {
  for (const KvDepthStats& s : stats) {
    const std::string cs = "format=" + fmt + " depth=" + std::to_string(s.depth);
    run.check_ratio("mean KL", s.mean_kl / bar.mean_kl, cs, "mean KL " + num_text(s.mean_kl) + " over " +
                                                                std::to_string(s.rows) + " rows (bar " +
                                                                num_text(bar.mean_kl) + ")");
    run.check_ratio("worst-token KL", s.worst_kl / bar.worst_token_kl, cs,
                    "worst-token KL " + num_text(s.worst_kl) + " at position " + std::to_string(s.worst_pos) + " (bar " +
                        num_text(bar.worst_token_kl) + ")");
  }
}

// The recall gate's check of one probe at one depth (the run's, and the control
// recall-probe-attends-uniformly's on its planted arm, so that the control turns this
// check red): a probe the bf16 arm (rb) does not recall is uninformative (no check);
// otherwise the quantized arm (rq) must recall it. Returns the outcome: "uninformative",
// "recalled" or "lost".
std::string check_recall(Run& run, const std::string& cs, const ProbeOut& rb, const ProbeOut& rq) {
  if (!rb.recalled) return "uninformative";
  run.check("recall", rq.recalled, cs,
            rq.recalled ? "" : "first wrong byte " + std::to_string(rq.first_miss) + " (got '" + rq.got + "')");
  return rq.recalled ? "recalled" : "lost";
}

}  // namespace

nlohmann::json kv_depth_json(const KvDepthStats& s, const KvBar& bar, int64_t train_ctx, double ref_tok_s,
                             double q_tok_s) {
  nlohmann::json diffs = nlohmann::json::array();
  for (const KvTopDiff& d : s.diffs)
    diffs.push_back({{"pos", d.pos},
                     {"target", d.target},
                     {"bf16_top", d.ref_top},
                     {"bf16_margin", d.ref_margin},
                     {"quant_top", d.q_top},
                     {"quant_margin", d.q_margin}});
  const std::string why = kv_bar_failure(s, bar);
  return {{"depth", s.depth},
          {"rows", s.rows},
          {"positions", {s.depth, s.depth + s.rows - 1}},
          {"beyond_training", int64_t(s.depth) + s.rows > train_ctx},
          {"mean_kl", s.mean_kl},
          {"worst_kl", s.worst_kl},
          {"worst_pos", s.worst_pos},
          {"kl_percentiles", {{"p99.9", s.p999}, {"p99", s.p99}, {"p95", s.p95}, {"p90", s.p90}, {"p50", s.p50}}},
          {"top1_agreement", double(s.agree) / s.rows},
          {"top1_differences", diffs},
          {"perplexity", {{"bf16", s.ppl_ref}, {"quant", s.ppl_q}}},
          {"decode_tok_s", {{"bf16", ref_tok_s}, {"quant", q_tok_s}}},
          {"verdict", why.empty() ? "pass" : "fail"},
          {"why", why}};
}

std::string kv_bf16_arm_key(const std::string& fixture_sha, const std::string& tokens_sha, const std::string& ckpt_sha,
                            const std::string& engine_commit, const Backend* be) {
  return sha256_hex("kv-gate bf16 arm v1\nfixture " + fixture_sha + "\ntokens " + tokens_sha + "\ncheckpoint " +
                    ckpt_sha + "\nengine " + engine_commit + "\nbackend " + be->name() + "\n");
}

std::string checkpoint_sha256(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;  // entries that cannot be examined (a loop of symbolic links) are no checkpoint files
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    std::error_code fec;
    if (it->is_regular_file(fec) && (n.ends_with(".safetensors") || n == "config.json" || n.ends_with(".index.json")))
      names.insert(n);
  }
  // And every shard an index names, whatever its name: the loader reads weight_map's files (a
  // shard called shard.bin was read and never hashed, so a model whose weights changed kept its
  // hash and its stale bf16 arm: session 63's audit).
  for (const std::string& n : std::set<std::string>(names)) {
    if (!n.ends_with(".index.json")) continue;
    std::string text;
    if (!read_file((fs::path(dir) / n).string(), &text)) continue;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) continue;
    for (const auto& [tensor, shard] : j["weight_map"].items())
      if (shard.is_string() && is_shard_file_name(shard.get<std::string>())) names.insert(shard.get<std::string>());
  }
  std::string all;
  for (const std::string& n : names) {
    std::string b;
    read_file((fs::path(dir) / n).string(), &b);
    all += n + " " + sha256_hex(b) + "\n";
  }
  return sha256_hex(all);
}


// ---------------------------------------------------------------- training context

bool kv_training_context(const std::string& model_dir, int64_t max_position_embeddings, int64_t* positions,
                         std::string* source, std::string* err) {
  const std::string file = (fs::path(model_dir) / "fixture.json").string();
  std::error_code ec;
  if (fs::symlink_status(file, ec).type() == fs::file_type::not_found) {
    *positions = max_position_embeddings;
    *source = "config.json max_position_embeddings (the model folder has no fixture.json)";
    return true;
  }
  std::string text;
  if (const std::string why = read_regular_file(file, &text); !why.empty()) {
    *err = file + ": cannot be read (" + why + ")";
    return false;
  }
  nlohmann::json j;
  if (std::string jwhy; !parse_json_strict(text, &j, &jwhy)) {
    *err = file + ": " + jwhy;
    return false;
  }
  if (!j.is_object() || !j.contains("training") || !j["training"].is_object() || !j["training"].contains("seq")) {
    *err = file + ": field training.seq: missing (the sequence length the model trained at)";
    return false;
  }
  const auto& v = j["training"]["seq"];
  long long seq = 0;
  if (!json_integer(v, &seq) || seq < 1 || seq > (1LL << 40)) {
    *err = file + ": field training.seq: must be a positive integer";
    return false;
  }
  *positions = seq;
  *source = "fixture.json training.seq (the longest sequence the model trained on)";
  return true;
}

nlohmann::json kv_recall_summary(const nlohmann::json& recall) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& x : recall) {
    const std::string g = x.contains("group") ? x["group"].get<std::string>() : x["probe"].get<std::string>();
    const int d = x["depth"].get<int>();
    auto it = std::find_if(out.begin(), out.end(), [&](const nlohmann::json& e) { return e["group"] == g && e["depth"] == d; });
    if (it == out.end()) {
      out.push_back({{"group", g}, {"depth", d}, {"beyond_training", x.value("beyond_training", false)}, {"probes", 0},
                     {"bf16_recalled", 0}, {"quant_recalled", 0}, {"informative", 0}, {"kept", 0}, {"lost", 0},
                     {"gained", 0}});
      it = out.end() - 1;
    }
    const bool b = x["bf16"]["recalled"].get<bool>(), q = x["quant"]["recalled"].get<bool>();
    auto& e = *it;
    e["probes"] = e["probes"].get<int>() + 1;
    e["bf16_recalled"] = e["bf16_recalled"].get<int>() + b;
    e["quant_recalled"] = e["quant_recalled"].get<int>() + q;
    e["informative"] = e["informative"].get<int>() + b;
    e["kept"] = e["kept"].get<int>() + (b && q);
    e["lost"] = e["lost"].get<int>() + (b && !q);
    e["gained"] = e["gained"].get<int>() + (!b && q);
  }
  return out;
}

// ---------------------------------------------------------------- command

int kv_gate_command(const KvGateCommand& cmd, std::ostream& out, std::ostream& err) {
  const auto bad = [&](const std::string& why) {
    err << "tf-cuda-test: error: kv-gate: " << why << "\n";
    return 2;
  };
  // Progress lines (which arm or control runs), none with --quiet; errors and warnings still go to err.
  std::ostream nowhere(nullptr);
  std::ostream& progress = cmd.quiet ? nowhere : err;
  const auto t_all = Clock::now();
  std::string text;
  if (const std::string why = read_regular_file(cmd.fixture, &text); !why.empty())
    return bad(cmd.fixture + ": cannot be read (" + why + ")");
  nlohmann::json fj;
  if (std::string jwhy; !parse_json_strict(text, &fj, &jwhy)) return bad(cmd.fixture + ": " + jwhy);
  KvFixture fx;
  std::string why;
  const std::string dir = fs::path(cmd.fixture).parent_path().string();
  if (!parse_kv_fixture(fj, dir.empty() ? "." : dir, &fx, &why)) return bad(cmd.fixture + ": " + why);

  static const std::pair<const char*, Format> formats[] = {
      {"fp8", Format::fp8}, {"q4", Format::q4}, {"mxfp4", Format::mxfp4}};
  Format qf = Format::bf16;
  bool known = false;
  for (const auto& [n, f] : formats)
    if (cmd.format == n) qf = f, known = true;
  if (cmd.format.empty() && !cmd.bf16_only) return bad("--format: required (fp8, q4 or mxfp4)");
  if (!known && !cmd.format.empty()) return bad("--format " + cmd.format + ": expected fp8, q4 or mxfp4");
  if (cmd.backend != "cpu" && cmd.backend != "cuda" && cmd.backend != "auto")
    return bad("--backend " + cmd.backend + ": expected cpu, cuda or auto");
  if (cmd.bf16_cache.empty()) return bad("--bf16-cache: must name a folder");
  if (cmd.bf16_only && !cmd.out_file.empty()) return bad("--out: --bf16-only writes no receipt");
  // The bf16 arm's folder, before any arm runs: --bf16-only that cannot store the arm did nothing
  // (it once computed it, warned, printed "computed and stored" and exited 0).
  bool cache_fatal = false;
  if (const std::string p = cache_folder_problem(cmd.bf16_cache, cmd.bf16_only, &cache_fatal); !p.empty()) {
    if (cache_fatal)
      return bad("--bf16-cache " + cmd.bf16_cache + ": " + p +
                 (cmd.bf16_only ? " (--bf16-only stores the bf16 arm there)" : " (the bf16 arm is stored there)"));
    err << "kv-gate: warning: --bf16-cache " << cmd.bf16_cache << ": " << p << "; the bf16 arm will not be stored\n";
  }
  if (!cmd.out_file.empty()) {
    std::string target;
    const Status st = prepare_output(cmd.out_file, &target);
    if (!st.ok) return bad("--out " + st.message);
    // The receipt would replace an input the run reads (and the next run needs).
    for (const auto& [what, path] : {std::pair<std::string, std::string>{"the fixture", cmd.fixture},
                                     {"the token file", fx.tokens_file}})
      if (same_output(cmd.out_file, path))
        return bad("--out " + cmd.out_file + " names " + what + " " + path + ": the receipt would replace it");
    if (const std::string f = output_replaces_file_in(cmd.out_file, fx.model_dir); !f.empty())
      return bad("--out " + cmd.out_file + " names the model's file " + f + ": the receipt would replace it");
  }

  Qwen3Weights w;
  {
    const Status st = load_byte_level_checkpoint(fx.model_dir, &w);
    if (!st.ok) return bad(cmd.fixture + ": field model: " + st.message);
  }
  const int V = int(w.config.vocab_size);
  const int max_pos = int(w.config.max_position_embeddings);
  int64_t train_ctx = 0;
  std::string ctx_source;
  if (!kv_training_context(fx.model_dir, max_pos, &train_ctx, &ctx_source, &why))
    return bad(cmd.fixture + ": field model: " + why);
  auto make = [&](Format f, Model* m) {
    ModelOptions mo;
    mo.kv_format = f;
    return Model::create(w, mo, m);
  };
  Model ref, quant;
  {
    Status st = make(Format::bf16, &ref);
    if (!st.ok) return bad(cmd.fixture + ": field model: " + st.message);
    st = cmd.format.empty() ? Status::Ok() : make(qf, &quant);
    if (!st.ok) return bad("--format " + cmd.format + ": the engine refuses this cache format: " + st.message);
  }
  Status bst;
  std::unique_ptr<Backend> be = select_backend(cmd.backend, &bst);
  if (!be) return bad(bst.message);

  Receipt r(Receipt::Head{"kv-gate", fx.name + "/" + cmd.format, be->name(), device_json(be->device()), cmd.argv,
                          nlohmann::json(uint64_t(0))});  // deterministic: no generator
  const std::string fixture_sha = sha256_hex(text);
  const std::string ckpt_sha = checkpoint_sha256(fx.model_dir);
  const std::string engine_commit = r.commit_label();
  const std::string key = kv_bf16_arm_key(fixture_sha, fx.tokens_sha256, ckpt_sha, engine_commit, be.get());
  const std::string base = (fs::path(cmd.bf16_cache) / ("kv-bf16-" + key.substr(0, 32))).string();

  // ---- the bf16 arm: stored, or computed and stored ----
  Bf16Arm b16;
  std::string miss;
  b16.file = base + ".json";
  if (!load_bf16(base, key, fx, V, &b16, &miss)) {
    progress << "kv-gate: bf16 arm (" << (miss == "absent" ? "not stored yet" : "stored copy not used: " + miss) << ")\n";
    const Status st = run_arm(ref, *be, fx, fx.depths, fx.decode_steps, fx.recall, &b16.arm);
    if (!st.ok) {
      err << "tf-cuda-test: error: kv-gate: bf16 arm: " << st.message << "\n";
      return 1;
    }
    const Status ws = store_bf16(base, key,
                                 {{"fixture", cmd.fixture}, {"fixture_sha256", fixture_sha},
                                  {"checkpoint_sha256", ckpt_sha}, {"engine_commit", engine_commit},
                                  {"backend", be->name()}, {"depths", fx.depths}, {"rows", fx.rows}},
                                 b16);
    if (!ws.ok) {
      // --bf16-only exists to store the arm: not stored is its failure, never "stored".
      if (cmd.bf16_only) return bad("--bf16-cache " + cmd.bf16_cache + ": the bf16 arm was not stored: " + ws.message);
      err << "kv-gate: warning: the bf16 arm was not stored: " << ws.message << "\n";
      b16.store_error = ws.message;
    }
  } else {
    progress << "kv-gate: bf16 arm read from " << b16.file << "\n";
    if (r["git"]["dirty"].get<bool>())
      err << "kv-gate: warning: the tree is dirty; the stored bf16 arm is keyed by commit " << engine_commit
          << " and may predate uncommitted engine changes (use another --bf16-cache to recompute)\n";
  }

  if (cmd.bf16_only) {
    out << "kv-gate: bf16 arm of " << fx.name << " " << (b16.from_cache ? "already stored" : "computed and stored")
        << " in " << b16.file << " (" << b16.arm.wall_s << " s)\n";
    return 0;
  }

  // ---- the quantized arm ----
  progress << "kv-gate: " << cmd.format << " arm\n";
  ArmOut qa;
  be->reset_peak_memory();  // the peak below is the quantized arm's (process-wide counters)
  {
    const Status st = run_arm(quant, *be, fx, fx.depths, fx.decode_steps, fx.recall, &qa);
    if (!st.ok) {
      err << "tf-cuda-test: error: kv-gate: " << cmd.format << " arm: " << st.message << "\n";
      return 1;
    }
  }
  const MemoryStats qmem = be->memory_stats();
  std::vector<KvDepthStats> stats;
  for (size_t i = 0; i < fx.depths.size(); ++i)
    stats.push_back(kv_depth_stats(fx.depths[i], fx.rows, V, b16.arm.logits[i].data(), qa.logits[i].data(), fx.tokens));

  CaseSelection sel;
  Run run(*be, nullptr, 0, int(fx.depths.size()), sel, cmd.quiet);
  run.declare("mean KL", "per depth: mean over the scored rows of KL(bf16 || quantized) <= bar.mean_kl");
  run.declare("worst-token KL", "per depth: the largest KL(bf16 || quantized) of a scored row <= bar.worst_token_kl");
  run.declare("recall", "a passphrase the bf16 arm recalls (planted at half the depth, asked at the end) is recalled "
                        "by the quantized arm; a probe the bf16 arm fails is uninformative (skipped)");
  check_bar(run, stats, fx.bar, cmd.format);

  // ---- recall ----
  nlohmann::json recall = nlohmann::json::array();
  int uninformative = 0;
  for (const KvProbe& p : fx.recall)
    for (int d : p.depths) {
      const ProbeOut& rb = b16.arm.probes.at(probe_key(p, d));
      const ProbeOut& rq = qa.probes.at(probe_key(p, d));
      const std::string cs = "probe=" + p.name + " depth=" + std::to_string(d);
      const std::string outcome = check_recall(run, cs, rb, rq);
      if (outcome == "uninformative") ++uninformative;
      recall.push_back({{"probe", p.name},
                        {"depth", d},
                        {"group", p.group},
                        // The deepest row fed and scored sits at depth - 2 (the answer's last
                        // byte, at depth - 1, is only a target): as the depths' rule, a row at or
                        // past the training context (513 of a 512-position context was marked).
                        {"beyond_training", d - 1 > train_ctx},
                        {"passphrase", p.passphrase},
                        {"bf16", {{"recalled", rb.recalled}, {"first_miss", rb.first_miss}, {"got", rb.got}}},
                        {"quant", {{"recalled", rq.recalled}, {"first_miss", rq.first_miss}, {"got", rq.got}}},
                        {"outcome", outcome}});
    }
  if (uninformative) run.skip("recall", std::to_string(uninformative) + " probe(s) the bf16 arm does not recall (uninformative)",
                              uninformative);

  // ---- controls ----
  std::vector<int> cidx;
  for (int d : fx.control_depths)
    cidx.push_back(int(std::find(fx.depths.begin(), fx.depths.end(), d) - fx.depths.begin()));
  nlohmann::json control_notes = nlohmann::json::object();
  // A control is evidence only where its plant is what breaks the bar. So each control depth
  // is judged against the same format unplanted (the gate's own arm when the format is
  // --format's, else an unplanted arm run here at the control depths):
  // - where the unplanted arm meets the bar, the planted arm must fail the bar itself;
  // - where the unplanted arm already fails it (q4 on the ci fixture), the bar is applied to the
  //   plant's excess: per row the planted KL minus the unplanted KL (mean and worst row), so a
  //   plant that changes nothing, or less than the bar, stays green there.
  std::map<Format, std::vector<KvDepthStats>> unplanted_at;  // per format, at the control depths
  auto unplanted = [&](Run& sub, const std::string& name, Format f) -> const std::vector<KvDepthStats>* {
    auto it = unplanted_at.find(f);
    if (it != unplanted_at.end()) return &it->second;
    std::vector<KvDepthStats> u;
    if (f == qf) {
      for (int k : cidx) u.push_back(stats[size_t(k)]);
    } else {
      Model m;
      Status st = make(f, &m);
      if (st.ok) {
        ArmOut a;
        st = run_arm(m, *be, fx, fx.control_depths, 0, {}, &a);
        if (st.ok)
          for (size_t k = 0; k < cidx.size(); ++k)
            u.push_back(kv_depth_stats(fx.control_depths[k], fx.rows, V, b16.arm.logits[size_t(cidx[k])].data(),
                                       a.logits[k].data(), fx.tokens));
      }
      if (!st.ok) {
        sub.error(name, std::string("the unplanted ") + format_name(f) + " arm: " + st.message);
        return nullptr;
      }
    }
    return &(unplanted_at[f] = std::move(u));
  };
  auto planted_arm = [&](Run& sub, const std::string& name, Format f, KvPlant plant) {
    progress << "kv-gate: control " << name << " (a planted " << format_name(f) << " arm)\n";  // progress: a long run's slowest part
    Model m;
    Status st = make(f, &m);
    if (!st.ok) return sub.error(name, st.message);
    KvPlantBackend pb(*be, plant);
    ArmOut a;
    st = run_arm(m, pb, fx, fx.control_depths, 0, {}, &a);
    if (!st.ok) return sub.error(name, st.message);
    if (pb.planted() == 0) return sub.error(name, "the plant never acted");
    const std::vector<KvDepthStats>* u = unplanted(sub, name, f);
    if (!u) return;
    for (size_t k = 0; k < cidx.size(); ++k) {
      const KvDepthStats s = kv_depth_stats(fx.control_depths[k], fx.rows, V, b16.arm.logits[size_t(cidx[k])].data(),
                                            a.logits[k].data(), fx.tokens);
      const KvDepthStats& b = (*u)[k];
      bool base_meets = false;
      KvDepthStats ex;
      const KvDepthStats judged = kv_control_judged(s, b, fx.bar, &base_meets, &ex);
      check_bar(sub, {judged}, fx.bar, std::string(format_name(f)) + (base_meets ? "" : " excess-over-unplanted"));
      control_notes[name].push_back(
          {{"depth", s.depth},
           {"mean_kl", s.mean_kl},
           {"worst_kl", s.worst_kl},
           {"top1_agreement", double(s.agree) / s.rows},
           {"unplanted", {{"mean_kl", b.mean_kl}, {"worst_kl", b.worst_kl}, {"meets_bar", base_meets}}},
           {"judged_on", base_meets ? "the planted arm (the unplanted arm meets the bar)"
                                    : "the planted arm's excess KL over the unplanted arm (which fails the bar)"},
           {"excess", {{"mean_kl", ex.mean_kl}, {"worst_row_kl", ex.worst_kl}, {"worst_row_pos", ex.worst_pos}}},
           {"why", kv_bar_failure(judged, fx.bar)}});
    }
  };
  run.control("q4-query-not-rotated",
              "q4 arm whose attention scores the query unrotated against the Hadamard-rotated keys (the query is "
              "pre-rotated at the backend boundary so that the kernel's own rotation undoes it)",
              [&](Run& sub) { planted_arm(sub, "q4-query-not-rotated", Format::q4, KvPlant::q4_query_unrotated); });
  run.control("fp8-scales-from-neighbouring-row",
              "fp8 arm in which every committed row is decoded with the scale of the next row (each rope store "
              "copies the stored row's scale over the previous row's)",
              [&](Run& sub) {
                planted_arm(sub, "fp8-scales-from-neighbouring-row", Format::fp8, KvPlant::scales_from_neighbour_row);
              });
  // The recall gate's control: the probe lane attends uniformly (a zero query), on the gate's
  // own format, for one probe that both arms recall unplanted (the one forked earliest), so a
  // loss is the plant's. Only where such a probe exists: without one the recall gate has
  // nothing it checked and passed.
  const KvProbe* rp = nullptr;
  int rd = 0;
  for (const KvProbe& p : fx.recall)
    for (int d : p.depths) {
      const std::string k = probe_key(p, d);
      if (b16.arm.probes.at(k).recalled && qa.probes.at(k).recalled && (!rp || d < rd)) rp = &p, rd = d;
    }
  if (rp) {
    run.control("recall-probe-attends-uniformly",
                "the " + cmd.format + " arm's recall probe lane scores a zero query in every attention (each key "
                "weighs the same), for probe " + probe_key(*rp, rd) + ", which both arms recall unplanted",
                [&](Run& sub) {
                  Model m;
                  Status st = make(qf, &m);
                  if (!st.ok) return sub.error("recall-probe-attends-uniformly", st.message);
                  // The main stream up to the first depth whose scored rows reach the fork point.
                  std::vector<int> ds;
                  for (int d : fx.depths) {
                    ds.push_back(d);
                    if (int64_t(d) + fx.rows >= rd / 2) break;
                  }
                  const int steps = int64_t(ds.back()) + fx.rows >= rd / 2 ? 0 : fx.decode_steps;
                  progress << "kv-gate: control recall-probe-attends-uniformly (a planted " << cmd.format << " arm)\n";
                  KvPlantBackend pb(*be, KvPlant::probe_query_zeroed);
                  KvProbe one = *rp;
                  one.depths = {rd};
                  ArmOut a;
                  st = run_arm(m, pb, fx, ds, steps, {one}, &a);
                  if (!st.ok) return sub.error("recall-probe-attends-uniformly", st.message);
                  if (pb.planted() == 0) return sub.error("recall-probe-attends-uniformly", "the plant never acted");
                  const ProbeOut& r = a.probes.at(probe_key(one, rd));
                  // The gate's own check, with the bf16 arm's outcome of that probe (recalled).
                  check_recall(sub, "probe=" + rp->name + " depth=" + std::to_string(rd),
                               b16.arm.probes.at(probe_key(*rp, rd)), r);
                  control_notes["recall-probe-attends-uniformly"] = {
                      {"probe", rp->name}, {"depth", rd}, {"recalled", r.recalled}, {"first_miss", r.first_miss},
                      {"got", r.got}};
                });
  }
  // The bar control plants on a clean baseline (every row's KL 0, i.e. an arm equal to
  // bf16), so it shows the bar check catching a bad row whatever the real arm measured: one
  // bad row at every depth, each at another row, so a check that skipped a depth or looked at
  // one row only would miss some; each depth must fail once, naming that depth.
  run.control("bar-one-bad-depth",
              "every row at KL 0 except one row per depth (a different row at each) at twice the worst-token bar: "
              "the bar must be checked at every depth and on every row, and fail each depth once, naming it",
              [&](Run& sub) {
                std::vector<KvDepthStats> planted = stats;
                nlohmann::json notes = nlohmann::json::array();
                for (size_t d = 0; d < planted.size(); ++d) {
                  KvDepthStats& s = planted[d];
                  std::fill(s.kl.begin(), s.kl.end(), 0.0);
                  if (!s.kl.empty()) s.kl[(d * 7 + s.kl.size() / 2) % s.kl.size()] = 2 * fx.bar.worst_token_kl;
                  kv_refresh_summary(&s);
                  notes.push_back({{"depth", s.depth}, {"why", kv_bar_failure(s, fx.bar)}});
                }
                check_bar(sub, planted, fx.bar, cmd.format);
                for (const GateStat& g : sub.gates()) {
                  if (g.name != "worst-token KL") continue;
                  // One check per depth: every depth must have failed, and each failure (the
                  // receipt keeps the first few) names its own depth, in order.
                  if (g.failed != int64_t(planted.size()))
                    sub.error("bar-one-bad-depth", "the worst-token bar failed " + std::to_string(g.failed) + " of " +
                                                       std::to_string(planted.size()) + " depths, each with a bad row");
                  for (size_t i = 0; i < g.failures.size() && i < planted.size(); ++i)
                    if (g.failures[i].find("depth=" + std::to_string(planted[i].depth) + ":") == std::string::npos)
                      sub.error("bar-one-bad-depth", "failure " + std::to_string(i) + " does not name depth " +
                                                         std::to_string(planted[i].depth) + ": " + g.failures[i]);
                }
                control_notes["bar-one-bad-depth"] = notes;
              });

  // ---- verdict and receipt ----
  bool all_red = true;
  for (const ControlStat& k : run.controls()) all_red = all_red && k.red;
  const bool pass = !run.gates_failed() && all_red && !run.has_errors();
  std::vector<std::string> reasons;
  for (size_t i = 0; i < stats.size(); ++i) {
    const std::string w2 = kv_bar_failure(stats[i], fx.bar);
    if (!w2.empty()) reasons.push_back("depth " + std::to_string(stats[i].depth) + ": " + w2);
  }
  for (const auto& x : recall)
    if (x["outcome"] == "lost")
      reasons.push_back("recall " + x["probe"].get<std::string>() + " at depth " + std::to_string(x["depth"].get<int>()) +
                        ": bf16 recalls it, " + cmd.format + " does not");
  for (std::string& w2 : control_and_error_reasons(run.controls(), run.errors().size())) reasons.push_back(std::move(w2));

  r.set_verdict(pass, reasons);
  r.set_cases(int(fx.depths.size()), int(fx.depths.size()), 0, "");
  r["fixture"] = cmd.fixture;
  r["fixture_sha256"] = fixture_sha;
  r["model"] = fx.model_dir;
  record_run(run, &r, control_notes);

  nlohmann::json depths = nlohmann::json::array();
  for (size_t i = 0; i < stats.size(); ++i)
    depths.push_back(kv_depth_json(stats[i], fx.bar, train_ctx, b16.arm.decode_tok_s[i], qa.decode_tok_s[i]));
  nlohmann::json bpp = nlohmann::json::object();
  const auto& c = w.config;
  for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4})
    bpp[format_name(f)] = KvLayout(int(c.num_hidden_layers), int(c.num_key_value_heads), int(c.head_dim), f).pos_bytes;
  r["kv"] = {
      {"format", cmd.format},
      {"bar", {{"mean_kl", fx.bar.mean_kl}, {"worst_token_kl", fx.bar.worst_token_kl}}},
      {"kl", "KL(bf16 || quantized) per scored row, float64 from the fp32 logits; percentiles by nearest rank"},
      {"model_max_position_embeddings", max_pos},
      {"training_context", {{"positions", train_ctx}, {"source", ctx_source}}},
      {"tokens", {{"file", fx.tokens_file}, {"sha256", fx.tokens_sha256}, {"source", fx.tokens_source},
                  {"licence", fx.tokens_licence}, {"count", fx.tokens.size()}}},
      {"rows_per_depth", fx.rows},
      {"decode_steps", fx.decode_steps},
      {"depths", depths},
      {"recall", recall},
      {"recall_summary", kv_recall_summary(recall)},
      {"memory",
       {{"bytes_per_position", bpp},
        {"lane_bytes_at_deepest", {{"bf16", b16.arm.lane_bytes}, {cmd.format, qa.lane_bytes}}},
        {"peak_device_memory", qmem.applicable ? nlohmann::json(qmem.peak_bytes) : nlohmann::json(nullptr)},
        {"peak_device_memory_note",
         qmem.applicable ? "bytes: the process's peak of device memory allocated during the " + cmd.format +
                               " arm (Backend::memory_stats: weights, scratch, the held cache; what the bf16 arm "
                               "left allocated counts too)"
                         : std::string("null: the backend has no device memory (cpu)")}}},
      {"bf16_arm",
       {{"from_cache", b16.from_cache}, {"file", b16.file}, {"stored", b16.store_error.empty()}, {"key", key},
        {"checkpoint_sha256", ckpt_sha}, {"engine_commit", engine_commit}, {"wall_s", b16.arm.wall_s}}},
      {"quant_arm", {{"wall_s", qa.wall_s}}},
      {"control_depths", fx.control_depths}};
  if (!b16.store_error.empty()) r["kv"]["bf16_arm"]["store_error"] = b16.store_error;  // `file` was not written
  nlohmann::json nums = nlohmann::json::object();
  for (const KvDepthStats& s : stats) {
    const std::string k = "depth " + std::to_string(s.depth);
    nums[k] = {{"mean_kl", s.mean_kl},
               {"worst_kl", s.worst_kl},
               {"top1_agreement", double(s.agree) / s.rows},
               {"perplexity_bf16", s.ppl_ref},
               {"perplexity_" + cmd.format, s.ppl_q}};
  }
  nums["bytes_per_position"] = bpp;
  r["numbers"] = nums;
  r.set_total_s(std::chrono::duration<double>(Clock::now() - t_all).count());
  if (const Status ws = print_and_write_receipt(r, cmd.out_file, out); !ws.ok) return bad("--out " + ws.message);
  return pass ? 0 : 1;
}

}  // namespace kc::engine
