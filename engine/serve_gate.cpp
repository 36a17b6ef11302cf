#include "engine/serve_gate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "contracts/framework.h"
#include "contracts/json_type.h"
#include "engine/files.h"
#include "engine/generate.h"
#include "engine/serve.h"

namespace kc::engine {

namespace {

// SHA-256 (FIPS 180-4), for the receipt's fixture_sha256.
struct Sha256 {
  std::array<uint32_t, 8> h = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const uint8_t* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
};

using Clock = std::chrono::steady_clock;

}  // namespace


nlohmann::json golden_for(const ServeFixture& f, const std::string& format, const std::string& backend) {
  if (!f.golden.is_object() || !f.golden.contains(format)) return nullptr;
  const nlohmann::json& g = f.golden[format];
  if (g.is_array()) return g;
  return g.contains(backend) ? g[backend] : nlohmann::json(nullptr);
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 s;
  std::string m = bytes;
  const uint64_t bits = uint64_t(bytes.size()) * 8;
  m.push_back(char(0x80));
  while (m.size() % 64 != 56) m.push_back(0);
  for (int i = 7; i >= 0; --i) m.push_back(char((bits >> (8 * i)) & 0xff));
  for (size_t i = 0; i < m.size(); i += 64) s.block(reinterpret_cast<const uint8_t*>(m.data()) + i);
  char buf[65];
  for (int i = 0; i < 8; ++i) std::snprintf(buf + 8 * i, 9, "%08x", s.h[i]);
  return std::string(buf, 64);
}

std::string token_hash(const std::vector<int32_t>& tokens) {
  uint64_t h = 14695981039346656037ull;
  for (int32_t t : tokens) {
    const uint8_t b[4] = {uint8_t(t), uint8_t(t >> 8), uint8_t(t >> 16), uint8_t(t >> 24)};
    h = fnv1a(b, 4, h);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

bool parse_serve_fixture(const nlohmann::json& j, const std::string& dir, ServeFixture* out, std::string* err) {
  const auto fail = [&](const std::string& field, const std::string& why) {
    *err = "field " + field + ": " + why;
    return false;
  };
  if (!j.is_object()) return fail("(top)", "the fixture must be a JSON object");
  static const char* known[] = {"$schema", "name", "model", "prompts", "new_tokens", "parallel", "pages", "pages_all",
                                "pool_pages", "context", "prefill_chunk", "cache_formats", "draft", "golden", "note"};
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find_if(std::begin(known), std::end(known), [&](const char* k) { return it.key() == k; }) == std::end(known))
      return fail(it.key(), "unknown field");
  for (const char* k : {"$schema", "note"})
    if (j.contains(k) && !j[k].is_string()) return fail(k, "must be a string");
  ServeFixture f;
  auto need = [&](const char* k) { return j.contains(k); };
  auto get_int = [&](const char* k, int lo, int hi, int* v) {
    if (!need(k)) return fail(k, "missing");
    long long x = 0;
    if (!json_integer(j[k], &x)) return fail(k, "must be an integer");
    if (x < lo || x > hi) return fail(k, "must be in " + std::to_string(lo) + ".." + std::to_string(hi));
    *v = int(x);
    return true;
  };
  if (!need("name")) return fail("name", "missing");
  if (!j["name"].is_string() || j["name"].get<std::string>().empty()) return fail("name", "must be a non-empty string");
  // The receipt's name: a file name (contracts/receipt.h), as every receipt's.
  if (!safe_file_name(j["name"].get<std::string>())) return fail("name", "must be a file name (not . or .., no /, \\ or NUL)");
  f.name = j["name"];
  if (!need("model")) return fail("model", "missing");
  if (!j["model"].is_string() || j["model"].get<std::string>().empty()) return fail("model", "must be a non-empty string");
  {
    std::filesystem::path p(j["model"].get<std::string>());
    if (p.is_relative()) p = std::filesystem::path(dir) / p;
    f.model_dir = p.lexically_normal().string();
  }
  if (!need("prompts")) return fail("prompts", "missing");
  if (!j["prompts"].is_array() || j["prompts"].empty()) return fail("prompts", "must be a non-empty array");
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    const auto& p = j["prompts"][i];
    if (!p.is_string() || p.get<std::string>().empty())
      return fail("prompts[" + std::to_string(i) + "]", "must be a non-empty string");
    f.prompts.push_back(p);
  }
  // At least 3: the first token comes from the prefill and a verify needs a drafted token and the
  // one after it, so with fewer no lane ever drafts and the drafted gates compare plain decodes.
  if (!get_int("new_tokens", 3, 4096, &f.new_tokens)) return false;
  if (!need("parallel")) return fail("parallel", "missing");
  {
    // One lane count, or a list of them (one set of concurrent arms per value).
    const auto& pj = j["parallel"];
    std::vector<std::pair<std::string, const nlohmann::json*>> vals;
    if (pj.is_array()) {
      if (pj.empty() || pj.size() > 8) return fail("parallel", "must be an integer or an array of 1 to 8 integers");
      for (size_t i = 0; i < pj.size(); ++i) vals.push_back({"parallel[" + std::to_string(i) + "]", &pj[i]});
    } else {
      vals.push_back({"parallel", &pj});
    }
    for (const auto& [fld, v] : vals) {
      long long x = 0;
      if (!json_integer(*v, &x)) return fail(fld, "must be an integer");
      // At least 2: one lane is a solo run (concurrent == solo would compare a run with itself),
      // and the controls run at the first value with a paged lane beside a window lane.
      if (x < 2 || x > 64) return fail(fld, "must be in 2..64 (one lane is not concurrent)");
      if (x >= int(f.prompts.size()))
        return fail(fld, "must be smaller than the number of prompts (" + std::to_string(f.prompts.size()) +
                             ") so that requests queue");
      if (std::find(f.parallel.begin(), f.parallel.end(), int(x)) != f.parallel.end()) return fail(fld, "repeats " + std::to_string(x));
      f.parallel.push_back(int(x));
    }
  }
  if (!need("pages")) return fail("pages", "missing");
  if (!j["pages"].is_array() || j["pages"].empty() || j["pages"].size() > 2)
    return fail("pages", "must be an array of one or two page sizes");
  for (size_t i = 0; i < j["pages"].size(); ++i) {
    long long x = 0;
    if (!json_integer(j["pages"][i], &x) || x < 1 || x > 65536)
      return fail("pages[" + std::to_string(i) + "]", "must be an integer in 1..65536");
    if (std::find(f.pages.begin(), f.pages.end(), int(x)) != f.pages.end())
      return fail("pages[" + std::to_string(i) + "]", "repeats " + std::to_string(x));
    f.pages.push_back(int(x));
  }
  if (need("pages_all")) {
    if (!j["pages_all"].is_boolean()) return fail("pages_all", "must be true or false");
    f.pages_all = j["pages_all"];
  }
  if (!get_int("pool_pages", 1, 1 << 20, &f.pool_pages)) return false;
  if (!get_int("context", 2, 1 << 20, &f.context)) return false;
  if (need("prefill_chunk") && !get_int("prefill_chunk", 1, 4096, &f.prefill_chunk)) return false;
  if (!need("cache_formats")) return fail("cache_formats", "missing");
  if (!j["cache_formats"].is_array() || j["cache_formats"].empty())
    return fail("cache_formats", "must be a non-empty array");
  for (size_t i = 0; i < j["cache_formats"].size(); ++i) {
    const auto& c = j["cache_formats"][i];
    const std::string fld = "cache_formats[" + std::to_string(i) + "]";
    if (!c.is_string() || (c != "bf16" && c != "fp8" && c != "q4" && c != "mxfp4"))
      return fail(fld, "must be bf16, fp8, q4 or mxfp4");
    if (std::find(f.formats.begin(), f.formats.end(), c.get<std::string>()) != f.formats.end())
      return fail(fld, "repeats " + c.get<std::string>());
    f.formats.push_back(c);
  }
  if (!need("draft")) return fail("draft", "missing");
  {
    const auto& d = j["draft"];
    if (!d.is_object()) return fail("draft", "must be an object {layers or model, tokens, tree}");
    for (auto it = d.begin(); it != d.end(); ++it)
      if (it.key() != "layers" && it.key() != "model" && it.key() != "tokens" && it.key() != "tree")
        return fail("draft." + it.key(), "unknown field");
    if (d.contains("layers") == d.contains("model"))
      return fail("draft", "give exactly one of layers (the target's first layers) and model (a draft checkpoint)");
    if (d.contains("layers")) {
      long long x = 0;
      if (!json_integer(d["layers"], &x) || x < 1 || x > 1024) return fail("draft.layers", "must be an integer in 1..1024");
      f.draft_layers = int(x);
    } else {
      if (!d["model"].is_string() || d["model"].get<std::string>().empty())
        return fail("draft.model", "must be a non-empty string");
      std::filesystem::path p(d["model"].get<std::string>());
      if (p.is_relative()) p = std::filesystem::path(dir) / p;
      f.draft_model_dir = p.lexically_normal().string();
    }
    if (!d.contains("tokens")) return fail("draft.tokens", "missing");
    long long tokens = 0;
    if (!json_integer(d["tokens"], &tokens) || tokens < 1 || tokens > 64) return fail("draft.tokens", "must be an integer in 1..64");
    f.draft_tokens = int(tokens);
    if (d.contains("tree")) {
      const auto& t = d["tree"];
      if (!t.is_array() || t.empty() || t.size() > 16) return fail("draft.tree", "must be an array of 1..16 branchings");
      for (size_t i = 0; i < t.size(); ++i) {
        long long x = 0;
        if (!json_integer(t[i], &x) || x < 1 || x > 8)
          return fail("draft.tree[" + std::to_string(i) + "]", "must be an integer in 1..8");
        f.draft_tree.push_back(int(x));
      }
      // A chain (every branching 1) is the plain draft: its node's ancestors are every node
      // before it, so the tree arm would repeat the drafted arm and tree-tails-all-nodes could
      // never go red.
      if (std::all_of(f.draft_tree.begin(), f.draft_tree.end(), [](int b) { return b == 1; }))
        return fail("draft.tree", "must branch somewhere (a branching above 1): a chain is the drafted arm's draft");
      if (const int nodes = draft_nodes(f.draft_tree, int(f.draft_tree.size())); nodes > 64)
        return fail("draft.tree", "holds " + (nodes == INT_MAX ? std::string("over 2^31") : std::to_string(nodes)) +
                                      " nodes, at most 64");
    } else {
      f.draft_tree.assign(size_t(f.draft_tokens), 1);
      f.draft_tree[0] = 2;
    }
  }
  if (need("golden")) {
    // Per format (any the engine serves: a golden may cover a format that only
    // --kv-cache selects): [hash per prompt] for every backend, or {cpu: [...], cuda: [...]}.
    const auto& g = j["golden"];
    if (!g.is_object()) return fail("golden", "must be an object {format: [hash per prompt] or {backend: [hash per prompt]}}");
    auto hashes = [&](const std::string& fld, const nlohmann::json& a) {
      if (!a.is_array() || a.size() != f.prompts.size())
        return fail(fld, "must be an array of " + std::to_string(f.prompts.size()) + " hashes (one per prompt)");
      for (size_t i = 0; i < a.size(); ++i) {
        const auto& h = a[i];
        if (!h.is_string() || h.get<std::string>().size() != 16 ||
            h.get<std::string>().find_first_not_of("0123456789abcdef") != std::string::npos)
          return fail(fld + "[" + std::to_string(i) + "]", "must be 16 lowercase hex digits");
      }
      return true;
    };
    for (auto it = g.begin(); it != g.end(); ++it) {
      const std::string fld = "golden." + it.key();
      if (it.key() != "bf16" && it.key() != "fp8" && it.key() != "q4" && it.key() != "mxfp4")
        return fail(fld, "not a cache format (bf16, fp8, q4, mxfp4)");
      if (it->is_object()) {
        if (it->empty()) return fail(fld, "must name at least one backend (cpu, cuda)");
        for (auto b = it->begin(); b != it->end(); ++b) {
          if (b.key() != "cpu" && b.key() != "cuda") return fail(fld + "." + b.key(), "not a backend (cpu, cuda)");
          if (!hashes(fld + "." + b.key(), *b)) return false;
        }
      } else if (!hashes(fld, *it)) {
        return false;
      }
    }
    f.golden = g;
  }
  const int longest = int(std::max_element(f.prompts.begin(), f.prompts.end(),
                                           [](const std::string& a, const std::string& b) { return a.size() < b.size(); })
                              ->size()) + 1;
  const int window = std::max(f.draft_tokens, draft_nodes(f.draft_tree, int(f.draft_tree.size())));
  if (longest + f.new_tokens + window + 1 > f.context)
    return fail("context", "must hold the longest prompt (" + std::to_string(longest) +
                               " tokens) + new_tokens + the larger draft (draft.tokens, draft.tree's nodes) + 1 = " +
                               std::to_string(longest + f.new_tokens + window + 1));
  // serve() refuses a request that a lane on pages alone cannot ever hold (it never queues it),
  // so the pool holds the longest prompt alone on every page size that runs pages-all: every
  // size where pages_all (the pages-all and resumed arms), and the first size always (the
  // control pages-released-before-drained runs pages-all there). A smaller pool would fail
  // those arms' gates, or turn that control red, for the refusal and not for what they test.
  for (size_t i = 0; i < f.pages.size() && (i == 0 || f.pages_all); ++i) {
    const int64_t P = f.pages[i], held = (int64_t(longest) + f.new_tokens + P - 1) / P;
    if (held > f.pool_pages)
      return fail("pool_pages", "must hold the longest prompt (" + std::to_string(longest) +
                                    " tokens) + new_tokens alone on pages of " + std::to_string(P) + ": " +
                                    std::to_string(held) + " pages" +
                                    (f.pages_all ? "" : " (control pages-released-before-drained runs pages-all there)"));
  }
  if (const std::string why = folder_problem(f.model_dir); !why.empty()) return fail("model", f.model_dir + " " + why);
  if (const std::string why = f.draft_model_dir.empty() ? "" : folder_problem(f.draft_model_dir); !why.empty())
    return fail("draft.model", f.draft_model_dir + " " + why);
  *out = std::move(f);
  return true;
}

namespace {

struct Arm {
  std::string name;
  std::string format;
  int parallel = 1;
  std::vector<ServeResult> res;  // by prompt index
  ServeStats stats;
  double wall_s = 0;
  // Time to first token of the arm's own config and requests, stopped after the round that
  // gave it: on the arm's fresh engine (unwarmed), then again on it (warmed). -1: not run.
  double ttft_unwarmed_s = -1, ttft_warmed_s = -1;
  nlohmann::json peak_device_bytes;   // process-wide peak during the arm's run; null on cpu
  nlohmann::json device_bytes_at_start;
  std::vector<int> admitted;  // prompt indices in the order the engine gave them a lane
};

nlohmann::json arm_json(const Arm& a) {
  nlohmann::json toks = nlohmann::json::array(), ttft = nlohmann::json::array();
  double ttft_sum = 0;
  int64_t n = 0, after_first = 0;  // after_first: tokens after each request's first (a request that
                                   // stopped at <|eos|> at once has none, not -1)
  for (const ServeResult& r : a.res) {
    toks.push_back(r.tokens);
    ttft.push_back(r.ttft_s);
    ttft_sum += r.ttft_s;
    n += int64_t(r.tokens.size());
    after_first += std::max<int64_t>(int64_t(r.tokens.size()) - 1, 0);
  }
  nlohmann::json j = {{"arm", a.name},
                      {"format", a.format},
                      {"parallel", a.parallel},
                      {"tokens", toks},
                      {"tokens_total", n},
                      {"wall_s", a.wall_s},
                      {"tok_s", a.wall_s > 0 ? double(n) / a.wall_s : 0.0},
                      // tokens after each request's first, over the time after the first token of the arm
                      // (approximate: later requests' prefills overlap that time)
                      {"decode_tok_s", a.wall_s > a.stats.first_token_s
                                           ? double(after_first) / (a.wall_s - a.stats.first_token_s)
                                           : 0.0},
                      {"time_to_first_token_s", a.stats.first_token_s},
                      {"time_to_first_token_unwarmed_s", a.ttft_unwarmed_s >= 0 ? nlohmann::json(a.ttft_unwarmed_s) : nlohmann::json(nullptr)},
                      {"time_to_first_token_warmed_s", a.ttft_warmed_s >= 0 ? nlohmann::json(a.ttft_warmed_s) : nlohmann::json(nullptr)},
                      {"time_to_first_token_per_request_s", ttft},
                      {"peak_device_memory_bytes", a.peak_device_bytes},
                      {"device_memory_at_start_bytes", a.device_bytes_at_start},
                      {"rounds", a.stats.rounds},
                      {"pages_taken", a.stats.peak_pages},
                      {"arena_bytes", a.stats.arena_bytes},
                      {"bytes_fixed_per_lane", a.stats.fixed_bytes_per_lane},
                      {"rounds_mixing_window_and_paged_lanes", a.stats.mixed_rounds},
                      // the prompts by index, in the order the engine gave them a lane (a reverse
                      // arm's queue starts at the last prompt: tests/tools/serve_arms_check.py)
                      {"admission_order", a.admitted},
                      {"rounds_with_requests_waiting_for_room", a.stats.admission_waits},
                      {"rounds_mixing_prefill_and_decode", a.stats.prefill_decode_rounds}};
  if (a.stats.drafted)
    j["draft"] = {{"drafted", a.stats.drafted},
                  {"accepted", a.stats.accepted},
                  {"verifies", a.stats.verifies},
                  {"draft_positions", a.stats.draft_depth},
                  // accepted draft tokens over draft positions proposed (a tree proposes one per depth per verify)
                  {"acceptance_rate", a.stats.draft_depth ? double(a.stats.accepted) / double(a.stats.draft_depth) : 0.0},
                  {"tokens_per_verify",
                   a.stats.verifies ? double(a.stats.accepted + a.stats.verifies) / double(a.stats.verifies) : 0.0}};
  return j;
}

// The first token where b differs from a (tokens or the logits digest behind them), -1 if none.
std::string compare(const ServeResult& a, const ServeResult& b, bool digests, int64_t* at) {
  if (!a.refused.empty() || !b.refused.empty()) {
    *at = 0;
    return "refused: " + (a.refused.empty() ? b.refused : a.refused);
  }
  const size_t n = std::max(a.tokens.size(), b.tokens.size());
  for (size_t i = 0; i < n; ++i) {
    const bool ha = i < a.tokens.size(), hb = i < b.tokens.size();
    if (!ha || !hb || a.tokens[i] != b.tokens[i]) {
      *at = int64_t(i);
      return "first differing token " + std::to_string(i) + ": " + (ha ? std::to_string(a.tokens[i]) : "end") + " vs " +
             (hb ? std::to_string(b.tokens[i]) : "end");
    }
    if (digests && a.digests[i] != b.digests[i]) {
      *at = int64_t(i);
      return "first differing token " + std::to_string(i) + ": same id " + std::to_string(a.tokens[i]) +
             ", logits bytes differ";
    }
  }
  // The row that chose <|eos|> is compared as well (a prompt that stops at once has only it).
  if (a.stopped_at_eos != b.stopped_at_eos) {
    *at = int64_t(n);
    return "after token " + std::to_string(n) + ": " + (a.stopped_at_eos ? "the first" : "the second") +
           " stopped at <|eos|>, the other did not";
  }
  if (digests && a.stopped_at_eos && a.eos_digest != b.eos_digest) {
    *at = int64_t(n);
    return "after token " + std::to_string(n) + ": both stopped at <|eos|>, the logits bytes of that row differ";
  }
  *at = -1;
  return "";
}

}  // namespace

// The first token where b differs from a (tokens or the logits digest behind them), -1 if none.
std::string compare_serve_results(const ServeResult& a, const ServeResult& b, bool digests, int64_t* at) {
  return compare(a, b, digests, at);
}

bool read_serve_fixture(const std::string& path, ServeFixture* out, std::string* text, std::string* why) {
  if (const std::string r = read_regular_file(path, text); !r.empty()) {  // a FIFO is refused, never opened
    *why = path + ": cannot be read (" + r + ")";
    return false;
  }
  nlohmann::json fj;
  if (std::string jwhy; !parse_json_strict(*text, &fj, &jwhy)) {
    *why = path + ": " + jwhy;
    return false;
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::string w;
  if (!parse_serve_fixture(fj, dir.empty() ? "." : dir, out, &w)) {
    *why = path + ": " + w;
    return false;
  }
  return true;
}

bool load_serve_models(const std::string& fixture, const ServeFixture& fx, ServeModels* out, std::string* why) {
  const auto fail = [&](const std::string& field, const std::string& reason) {
    *why = fixture + ": field " + field + ": " + reason;
    return false;
  };
  ServeModels& sm = *out;
  Qwen3Weights w;
  {
    const Status st = load_byte_level_checkpoint(fx.model_dir, &w);
    if (!st.ok) return fail("model", st.message);
  }
  Qwen3Weights dw;
  if (fx.draft_model_dir.empty()) {
    if (fx.draft_layers >= int(w.layers.size()))
      return fail("draft.layers", "must be below the model's " + std::to_string(w.layers.size()) + " layers");
    const Status st = make_draft_weights(w, fx.draft_layers, &dw);
    if (!st.ok) return fail("draft.layers", st.message);
    sm.draft_source = "the target's first " + std::to_string(fx.draft_layers) + (fx.draft_layers == 1 ? " layer" : " layers");
  } else {
    const Status st = load_qwen3_checkpoint(fx.draft_model_dir, &dw);
    if (!st.ok) return fail("draft.model", st.message);
    if (dw.config.vocab_size != w.config.vocab_size)
      return fail("draft.model", "vocab_size " + std::to_string(dw.config.vocab_size) + " is not the target's " +
                                     std::to_string(w.config.vocab_size));
    sm.draft_source = "checkpoint " + fx.draft_model_dir + " (" + std::to_string(dw.layers.size()) +
                      (dw.layers.size() == 1 ? " layer)" : " layers)");
  }
  const auto has_format = [&](const std::string& f) {
    return std::find(fx.formats.begin(), fx.formats.end(), f) != fx.formats.end();
  };
  // The controls' formats: bf16 when run, else the first; the restore control needs scale
  // planes: fp8 when run, else the first run format that has them, else fp8.
  sm.control_format = has_format("bf16") ? "bf16" : fx.formats[0];
  sm.restore_format = "fp8";
  if (!has_format("fp8"))
    for (const std::string& f : fx.formats)
      if (f != "bf16") {
        sm.restore_format = f;
        break;
      }
  for (const std::string& fmt : std::vector<std::string>{"bf16", "fp8", "q4", "mxfp4"}) {
    if (!has_format(fmt) && fmt != sm.control_format && fmt != sm.restore_format) continue;
    ModelOptions mo;
    mo.kv_format = fmt == "bf16" ? Format::bf16 : fmt == "fp8" ? Format::fp8 : fmt == "q4" ? Format::q4 : Format::mxfp4;
    Model m, d;
    Status st = Model::create(w, mo, &m);
    if (!st.ok) return fail("cache_formats", st.message);
    st = Model::create(dw, mo, &d);
    if (!st.ok) return fail(fx.draft_model_dir.empty() ? "cache_formats" : "draft.model", st.message);
    sm.targets.emplace(fmt, std::move(m));
    sm.drafts.emplace(fmt, std::move(d));
  }
  // The largest arena an arm takes (the pool on every page size, plus every lane's window and
  // draft cache, as the windows arm runs) must fit in this machine's memory: a pool of 2^20
  // pages passes the fixture's bounds, and its arena (zero-filled by every arm) would end the
  // run in an allocation failure with no receipt.
  {
    const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    const uint64_t phys = pages > 0 && psize > 0 ? uint64_t(pages) * uint64_t(psize) : 0;
    const int lanes = *std::max_element(fx.parallel.begin(), fx.parallel.end());
    for (const auto& [fmt, m] : sm.targets)
      for (int P : fx.pages) {
        ServeConfig cfg;
        cfg.parallel = lanes;
        cfg.page = P;
        cfg.all_windows = true;
        cfg.context = fx.context;
        cfg.pool_pages = fx.pool_pages;
        const KvLayout lay = m.kv_layout(), dlay = sm.drafts.at(fmt).kv_layout();
        const ServeArena plan = plan_serve_arena(cfg, lay, &dlay);
        if (phys > 0 && plan.arena_bytes > phys / 2) {
          // Name the part that takes most of it: the pool's pages, or the lanes' windows and
          // draft caches (context positions each).
          const uint64_t pool_bytes = uint64_t(fx.pool_pages) * plan.page_stride;
          return fail(pool_bytes >= plan.arena_bytes - pool_bytes ? "pool_pages" : "context",
                      std::to_string(fx.pool_pages) + " pages of " + std::to_string(P) + " positions (" + fmt +
                          ") and " + std::to_string(lanes) + " lanes' windows of " + std::to_string(fx.context) +
                          " positions take an arena of " + std::to_string(plan.arena_bytes >> 20) +
                          " MiB, more than half of this machine's " + std::to_string(phys >> 20) + " MiB of memory");
        }
      }
  }
  return true;
}

int serve_gate_command(const ServeGateCommand& cmd, std::ostream& out, std::ostream& err) {
  const auto bad = [&](const std::string& why) {
    err << "tf-cuda-test: error: serve-gate: " << why << "\n";
    return 2;
  };
  std::string text, why;
  ServeFixture fx;
  if (!read_serve_fixture(cmd.fixture, &fx, &text, &why)) return bad(why);
  if (cmd.backend != "cpu" && cmd.backend != "cuda" && cmd.backend != "auto")
    return bad("--backend " + cmd.backend + ": expected cpu, cuda or auto");
  if (!cmd.kv_cache.empty()) {
    // --kv-cache: the cache formats to run instead of the fixture's (its goldens still apply).
    std::vector<std::string> fs;
    const std::string& kc = cmd.kv_cache;
    if (kc.front() == ',' || kc.back() == ',' || kc.find(",,") != std::string::npos)
      return bad("--kv-cache " + kc + ": an empty item (expected a format or a comma list of them)");
    std::stringstream ss(cmd.kv_cache);
    for (std::string f; std::getline(ss, f, ',');) {
      if (f != "bf16" && f != "fp8" && f != "q4" && f != "mxfp4")
        return bad("--kv-cache " + cmd.kv_cache + ": '" + f + "' is not bf16, fp8, q4 or mxfp4");
      if (std::find(fs.begin(), fs.end(), f) != fs.end()) return bad("--kv-cache " + cmd.kv_cache + ": repeats " + f);
      fs.push_back(f);
    }
    if (fs.empty()) return bad("--kv-cache: empty");
    fx.formats = fs;
  }
  std::string target;
  if (!cmd.out_file.empty()) {
    const Status st = prepare_output(cmd.out_file, &target);
    if (!st.ok) return bad("--out " + st.message);
    if (same_output(cmd.out_file, cmd.fixture))
      return bad("--out " + cmd.out_file + " names the fixture " + cmd.fixture + ": the receipt would replace it");
  }
  for (const auto& [opt, file, thing] : {std::tuple<std::string, std::string, std::string>{"--out", cmd.out_file, "receipt"},
                                         {"--junit", cmd.junit_file, "JUnit XML"}})
    for (const auto& [what, dir] : {std::pair<std::string, std::string>{"the model's", fx.model_dir},
                                    {"the draft model's", fx.draft_model_dir}})
      if (const std::string f = file.empty() ? "" : output_replaces_file_in(file, dir); !f.empty())
        return bad(opt + " " + file + " names " + what + " file " + f + ": the " + thing + " would replace it");
  ServeModels sm;
  if (!load_serve_models(cmd.fixture, fx, &sm, &why)) return bad(why);
  Status bst;
  std::unique_ptr<Backend> be = select_backend(cmd.backend, &bst);
  if (!be) return bad(bst.message);

  const auto t_all = Clock::now();
  const std::string &cf = sm.control_format, &rf = sm.restore_format, &draft_source = sm.draft_source;
  std::map<std::string, Model>& targets = sm.targets;
  std::map<std::string, Model>& drafts = sm.drafts;
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& p : fx.prompts) prompts.push_back(encode_prompt(p));
  const int np = int(prompts.size());

  nlohmann::json arms = nlohmann::json::array();
  std::vector<std::string> errors;
  // An engine error inside a control is that control's error (not a catch: framework.h), so it
  // cannot turn the control red; elsewhere it is the run's.
  Run* in_control = nullptr;
  auto engine_error = [&](const std::string& e) {
    if (in_control) in_control->error("engine", e);
    else errors.push_back(e);
  };
  // Each arm runs on a fresh engine (a backend of its own: stream, uploaded weights,
  // scratch, arena), so its unwarmed time to first token is a fresh engine's and the device
  // memory it reports is its own (the counters are process-wide; the previous arm's engine
  // is gone by then).
  const std::string backend_name = be->name();
  auto fresh_backend = [&](const std::string& who) -> std::unique_ptr<Backend> {
    Status s;
    std::unique_ptr<Backend> b = select_backend(backend_name, &s);
    if (!b) engine_error(who + ": a fresh backend: " + s.message);
    return b;
  };
  auto requests = [&](const std::vector<int>& order, bool save, const std::vector<std::vector<uint8_t>>* restore) {
    std::vector<ServeRequest> reqs;
    for (int i : order) reqs.push_back(ServeRequest{prompts[i], fx.new_tokens, restore ? &(*restore)[i] : nullptr, save});
    return reqs;
  };
  auto full_config = [&](ServeConfig cfg) {
    cfg.context = fx.context;
    cfg.pool_pages = fx.pool_pages;
    cfg.prefill_chunk = fx.prefill_chunk;
    return cfg;
  };
  // Time to first token: the arm's config and requests, stopped after the round that gave
  // the first token, on the fresh engine (unwarmed) and again (warmed).
  auto time_first_token = [&](Backend& b, const std::string& name, const std::string& fmt, ServeConfig cfg,
                              const std::vector<ServeRequest>& reqs, Arm* a) {
    cfg.stop_after_first_token = true;
    for (int k = 0; k < 2; ++k) {
      std::vector<ServeResult> res;
      ServeStats st;
      const Status s = serve(targets.at(fmt), (cfg.draft_tokens > 0 || !cfg.draft_tree.empty()) ? &drafts.at(fmt) : nullptr, b, cfg, reqs, &res, &st);
      if (!s.ok) {
        engine_error(name + " (" + fmt + ") time to first token: " + s.message);
        return;
      }
      (k == 0 ? a->ttft_unwarmed_s : a->ttft_warmed_s) = st.first_token_s;
    }
  };
  auto memory_before = [&](Backend& b, Arm* a) {
    b.reset_peak_memory();
    const MemoryStats m = b.memory_stats();
    a->device_bytes_at_start = m.applicable ? nlohmann::json(m.current_bytes) : nlohmann::json(nullptr);
  };
  auto memory_after = [&](Backend& b, Arm* a) {
    const MemoryStats m = b.memory_stats();
    a->peak_device_bytes = m.applicable ? nlohmann::json(m.peak_bytes) : nlohmann::json(nullptr);
  };
  // Runs one arm: the prompts in `order`, results stored by prompt index. A recorded arm
  // also times its first token (unwarmed, warmed) and goes into the receipt.
  auto run_arm = [&](const std::string& name, const std::string& fmt, ServeConfig cfg, const std::vector<int>& order,
                     bool save, const std::vector<std::vector<uint8_t>>* restore, bool record, Arm* a) {
    *a = Arm();  // nothing of a previous arm (stats, times) carries over, even on an engine error
    a->name = name;
    a->format = fmt;
    a->parallel = cfg.parallel;
    a->res.assign(np, ServeResult());
    cfg = full_config(cfg);
    const std::vector<ServeRequest> reqs = requests(order, save, restore);
    std::unique_ptr<Backend> b = fresh_backend(name + " (" + fmt + ")");
    if (!b) {
      for (ServeResult& r : a->res) r.refused = "engine error: no backend";
      return;
    }
    if (record) time_first_token(*b, name, fmt, cfg, reqs, a);
    memory_before(*b, a);
    std::vector<ServeResult> res;
    const auto t0 = Clock::now();
    const bool drafting = cfg.draft_tokens > 0 || !cfg.draft_tree.empty();
    const Status st = serve(targets.at(fmt), drafting ? &drafts.at(fmt) : nullptr, *b, cfg, reqs, &res, &a->stats);
    a->wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    memory_after(*b, a);
    if (!st.ok) {
      engine_error(name + " (" + fmt + "): " + st.message);
      for (ServeResult& r : a->res) r.refused = "engine error: " + st.message;
      return;
    }
    for (size_t k = 0; k < order.size(); ++k) a->res[order[k]] = std::move(res[k]);
    for (int k : a->stats.admitted) a->admitted.push_back(order[size_t(k)]);
    if (record) arms.push_back(arm_json(*a));
  };
  // Solo: each prompt alone on a window lane (the reference of every gate), one engine for
  // the arm; its first token timed on the first prompt.
  auto run_solo = [&](const std::string& fmt, bool record, Arm* a) {
    a->name = "solo";
    a->format = fmt;
    a->parallel = 1;
    a->res.assign(np, ServeResult());
    ServeConfig cfg;
    cfg.parallel = 1;
    cfg.page = fx.pages[0];
    cfg = full_config(cfg);
    std::unique_ptr<Backend> b = fresh_backend("solo (" + fmt + ")");
    if (!b) {
      for (ServeResult& r : a->res) r.refused = "engine error: no backend";
      return;
    }
    if (record) time_first_token(*b, "solo", fmt, cfg, requests({0}, true, nullptr), a);
    memory_before(*b, a);
    ServeStats total;
    double wall = 0;
    for (int i = 0; i < np; ++i) {
      std::vector<ServeResult> res;
      ServeStats one;
      const auto t0 = Clock::now();
      const Status st = serve(targets.at(fmt), nullptr, *b, cfg, requests({i}, true, nullptr), &res, &one);
      wall += std::chrono::duration<double>(Clock::now() - t0).count();
      if (!st.ok) {
        engine_error("solo (" + fmt + ") prompt " + std::to_string(i) + ": " + st.message);
        a->res[i].refused = "engine error: " + st.message;
        continue;
      }
      a->res[i] = std::move(res[0]);
      a->admitted.push_back(i);
      total.tokens += one.tokens;
      total.rounds += one.rounds;
      total.peak_pages = std::max(total.peak_pages, one.peak_pages);
      total.arena_bytes = one.arena_bytes;
      total.fixed_bytes_per_lane = one.fixed_bytes_per_lane;
      if (i == 0) total.first_token_s = one.first_token_s;
      for (auto& v : one.pool_violations) total.pool_violations.push_back(v);
      for (auto& v : one.planning_errors) total.planning_errors.push_back(v);
    }
    memory_after(*b, a);
    a->stats = total;
    a->wall_s = wall;
    if (record) arms.push_back(arm_json(*a));
  };
  std::vector<int> fwd(np), rev(np);
  for (int i = 0; i < np; ++i) fwd[i] = i, rev[i] = np - 1 - i;
  const int Pfirst = fx.pages.front(), Plast = fx.pages.back();

  // Gate checks shared by the run and the controls.
  auto gate_pairs = [&](Run& run, const std::string& gate, const Arm& ref, const Arm& got, bool digests) {
    for (int i = 0; i < np; ++i) {
      int64_t at = -1;
      const std::string d = compare(ref.res[i], got.res[i], digests, &at);
      run.check(gate, at < 0, "prompt=" + std::to_string(i) + " format=" + got.format + " arm=" + got.name,
                d.empty() ? "" : d);
    }
  };
  // A drafted arm that never verified a draft compared plain decodes: vacuous, so it fails its
  // gate (a fixture whose prompts all stop at <|eos|> before a draft could be verified).
  // A drafted arm compares the accept path only when a drafted token was accepted: with none, every
  // verify keeps the root row alone, and a bug confined to accepted rows (their K/V moved to the
  // wrong slot, tokens emitted from the wrong row) left the gate green (session 63's audit: a
  // 1-layer random draft, 70 verifies, 0 accepted, the gate ok 6/6).
  auto gate_drafted = [&](Run& run, const std::string& gate, const Arm& a) {
    const bool exercised = a.stats.verifies > 0 && a.stats.accepted > 0;
    run.check(gate, exercised, "arm=" + a.name + " format=" + a.format,
              exercised ? ""
              : a.stats.verifies == 0
                  ? "the arm never verified a draft (0 verifies): its tokens are plain decodes, so nothing drafted was "
                    "compared"
                  : "the arm accepted no drafted token (" + std::to_string(a.stats.verifies) + " verifies, " +
                        std::to_string(a.stats.drafted) +
                        " drafted, 0 accepted): only root rows were kept, so the accept path was not compared; use a "
                        "draft that agrees with the target at times");
  };
  auto gate_pool = [&](Run& run, const Arm& a) {
    run.check("pool check", a.stats.pool_violations.empty(), "arm=" + a.name + " format=" + a.format,
              a.stats.pool_violations.empty() ? "" : a.stats.pool_violations.front());
    run.check("run planning", a.stats.planning_errors.empty(), "arm=" + a.name + " format=" + a.format,
              a.stats.planning_errors.empty() ? "" : a.stats.planning_errors.front());
    int refused = 0;
    std::string first;
    for (const ServeResult& r : a.res)
      if (!r.refused.empty() && refused++ == 0) first = r.refused;
    run.check("admitted", refused == 0, "arm=" + a.name + " format=" + a.format, first);
  };

  std::map<std::string, std::vector<std::vector<uint8_t>>> saved;  // per format: the solo arm's packed prompts
  auto gate_golden = [&](Run& run, const std::string& fmt, const nlohmann::json& g, const std::vector<ServeResult>& res) {
    for (int i = 0; i < np; ++i) {
      const std::string h = token_hash(res[size_t(i)].tokens);
      const std::string want = g[size_t(i)];
      run.check("golden", h == want, "prompt=" + std::to_string(i) + " format=" + fmt,
                h == want ? "" : "hash " + h + ", golden " + want);
    }
  };

  // The pages-all arm and the resumed arm with their gates, run by the main loop and by the
  // controls that plant a bug into them (pages-all-other-path, restore-without-scale-planes):
  // each control's verdict comes from the same arm and gate code as the run's, so an arm that
  // compared itself, or never restored, leaves its control green.
  auto pages_all_arm = [&](Run& run, const std::string& name, const std::string& fmt, const ServeConfig& pc,
                           const Arm& win, bool record) {
    Arm a;
    run_arm(name, fmt, pc, fwd, false, nullptr, record, &a);
    gate_pairs(run, "paged == contiguous", win, a, true);
    gate_pool(run, a);
  };
  auto resumed_arm = [&](Run& run, const std::string& name, const std::string& fmt, const ServeConfig& rc,
                         const Arm& fresh, bool record) {
    Arm a;
    run_arm(name, fmt, rc, rev, false, &saved[fmt], record, &a);
    gate_pairs(run, "resumed == fresh", fresh, a, true);
    gate_pool(run, a);
  };

  CaseSelection sel;
  Run run(*be, nullptr, 0, np, sel, cmd.quiet);
  // Progress lines (which arm runs), none with --quiet (kernel-contract's); errors still go to err.
  std::ostream nowhere(nullptr);
  std::ostream& progress = cmd.quiet ? nowhere : err;
  run.declare("concurrent == solo", "every prompt's tokens and logits bytes in the forward and reverse concurrent arms (queued, window and paged lanes mixed) equal the prompt alone");
  run.declare("paged == contiguous", "pages-all arm equals the all-windows (pool off) arm, token and logits bytes");
  run.declare("drafted == plain", "chain-drafted decoding (verify over tails, keep) equals plain greedy, token and logits bytes");
  run.declare("tree-drafted == plain", "tree-drafted decoding (top-k per depth; verify of every node as a tail row attending its ancestors, keep of the accepted path) equals plain greedy, token and logits bytes");
  run.declare("resumed == fresh", "restored from a packed prompt state (Backend::unpack into paged lanes of another page size) equals the fresh run");
  run.declare("golden", "each prompt's token hash equals the fixture's golden hash");
  run.declare("pool check", "no lane read a page it did not own (the pool's own check before every round)");
  run.declare("run planning", "every lane's run held its parts (no run refused at planning)");
  run.declare("admitted", "every request was admitted and served");

  std::map<std::string, Arm> solo;
  // The windows arm of each format at the first lane count: the reference of the control
  // pages-all-other-path (its pages-all arm against the same arm as the run's).
  std::map<std::string, Arm> windows_first;
  const bool many = fx.parallel.size() > 1;
  for (const std::string& fmt : fx.formats) {
    progress << "serve-gate: " << fmt << ": solo\n";
    Arm& s = solo[fmt];
    run_solo(fmt, true, &s);
    for (const ServeResult& r : s.res) saved[fmt].push_back(r.saved);
    gate_pool(run, s);
    const nlohmann::json g = golden_for(fx, fmt, backend_name);
    if (g.is_array()) {
      gate_golden(run, fmt, g, s.res);
    } else {
      run.skip("golden", "the fixture gives no golden hashes for " + fmt + " on " + backend_name, np);
    }
    for (int par : fx.parallel) {
      // With several lane counts, each arm's name says its own.
      const std::string sfx = many ? "-p" + std::to_string(par) : "";
      ServeConfig c;
      c.parallel = par;
      Arm a;
      progress << "serve-gate: " << fmt << ": parallel " << par << ": concurrent forward, reverse\n";
      c.page = Pfirst;
      run_arm("concurrent-forward" + sfx, fmt, c, fwd, false, nullptr, true, &a);
      gate_pairs(run, "concurrent == solo", s, a, true);
      gate_pool(run, a);
      c.page = Plast;
      run_arm("concurrent-reverse" + sfx, fmt, c, rev, false, nullptr, true, &a);
      gate_pairs(run, "concurrent == solo", s, a, true);
      gate_pool(run, a);
      progress << "serve-gate: " << fmt << ": parallel " << par << ": windows, pages-all\n";
      ServeConfig wc = c;
      wc.all_windows = true;
      Arm win;
      run_arm("windows" + sfx, fmt, wc, fwd, false, nullptr, true, &win);
      gate_pool(run, win);
      gate_pairs(run, "concurrent == solo", s, win, true);
      if (par == fx.parallel.front()) windows_first[fmt] = win;
      if (fx.pages_all) {
        for (int P : fx.pages) {
          ServeConfig pc = c;
          pc.pages_all = true;
          pc.page = P;
          pages_all_arm(run, "pages-all-" + std::to_string(P) + sfx, fmt, pc, win, true);
        }
      } else {
        run_arm("concurrent-forward" + sfx, fmt, c, fwd, false, nullptr, false, &a);
        gate_pairs(run, "paged == contiguous", win, a, true);
      }
      progress << "serve-gate: " << fmt << ": parallel " << par << ": drafted\n";
      ServeConfig dc = c;
      dc.page = Pfirst;
      dc.draft_tokens = fx.draft_tokens;
      run_arm("drafted" + sfx, fmt, dc, fwd, false, nullptr, true, &a);
      gate_pairs(run, "drafted == plain", s, a, true);
      gate_drafted(run, "drafted == plain", a);
      gate_pool(run, a);
      progress << "serve-gate: " << fmt << ": parallel " << par << ": drafted-tree\n";
      ServeConfig tc = dc;
      tc.draft_tree = fx.draft_tree;
      run_arm("drafted-tree" + sfx, fmt, tc, fwd, false, nullptr, true, &a);
      gate_pairs(run, "tree-drafted == plain", s, a, true);
      gate_drafted(run, "tree-drafted == plain", a);
      gate_pool(run, a);
      progress << "serve-gate: " << fmt << ": parallel " << par << ": resumed\n";
      ServeConfig rc = c;
      rc.pages_all = fx.pages_all;
      rc.page = Plast;
      resumed_arm(run, "resumed" + sfx, fmt, rc, s, true);
    }
  }

  // Controls: each plants one engine bug; its gate must turn red.
  auto solo_of = [&](const std::string& fmt) -> Arm& {
    if (!solo.count(fmt)) {
      run_solo(fmt, false, &solo[fmt]);
      for (const ServeResult& r : solo[fmt].res) saved[fmt].push_back(r.saved);
    }
    return solo[fmt];
  };
  nlohmann::json control_notes = nlohmann::json::object();
  // What the control's gates saw: n/m and the first miss of each gate that caught it.
  auto note_misses = [&](const std::string& name, const Run& sub) {
    for (const GateStat& g : sub.gates())
      if (g.failed)
        control_notes[name][g.name] = {{"failed", g.failed},
                                       {"total", g.passed + g.failed},
                                       {"first_miss", g.failures.empty() ? "" : g.failures.front()}};
  };
  auto control = [&](const std::string& name, const std::string& what, std::function<void(Run&)> body) {
    run.control(name, what, [&, body](Run& sub) {
      in_control = &sub;
      body(sub);
      in_control = nullptr;
    });
  };
  control("paged-batch-other-path",
              "a batch holding a paged lane routes every lane through attention chunk 4 (another split-K path)",
              [&](Run& sub) {
                ServeConfig c;
                c.parallel = fx.parallel.front();
                c.page = Pfirst;
                c.plant_paged_batch_chunk = true;
                Arm a;
                run_arm("control-paged-batch", cf, c, fwd, false, nullptr, false, &a);
                gate_pairs(sub, "concurrent == solo", solo_of(cf), a, true);
                note_misses("paged-batch-other-path", sub);
              });
  control("restore-without-scale-planes",
              "restore (" + rf + ": fp8 when run, else the first run format with scale planes) leaves every scale "
              "plane of the restored positions zero",
              [&](Run& sub) {
                ServeConfig c;
                c.parallel = fx.parallel.front();
                c.pages_all = fx.pages_all;
                c.page = Plast;
                c.plant_restore_without_scales = true;
                const Arm& s = solo_of(rf);  // also stores its packed prompts, which the arm restores
                resumed_arm(sub, "control-restore", rf, c, s, false);
                note_misses("restore-without-scale-planes", sub);
              });
  control("verify-skips-compaction", "verify accepts drafts but never moves the kept rows into place (no keep)",
              [&](Run& sub) {
                ServeConfig c;
                c.parallel = fx.parallel.front();
                c.page = Pfirst;
                c.draft_tokens = fx.draft_tokens;
                c.plant_skip_keep = true;
                Arm a;
                run_arm("control-skip-keep", cf, c, fwd, false, nullptr, false, &a);
                gate_pairs(sub, "drafted == plain", solo_of(cf), a, true);
                note_misses("verify-skips-compaction", sub);
              });
  control("tree-tails-all-nodes",
              "tree verify: every draft node attends all nodes numbered before it (the chain's tail rule), not only "
              "its ancestors",
              [&](Run& sub) {
                ServeConfig c;
                c.parallel = fx.parallel.front();
                c.page = Pfirst;
                c.draft_tokens = fx.draft_tokens;
                c.draft_tree = fx.draft_tree;
                c.plant_tree_chain_tails = true;
                Arm a;
                run_arm("control-tree-tails", cf, c, fwd, false, nullptr, false, &a);
                gate_pairs(sub, "tree-drafted == plain", solo_of(cf), a, true);
                note_misses("tree-tails-all-nodes", sub);
              });
  control("pages-released-before-drained",
              "a paged lane's pages go back to the pool (and are poisoned) one step before its last decode step",
              [&](Run& sub) {
                ServeConfig c;
                c.parallel = fx.parallel.front();
                c.page = Pfirst;
                c.pages_all = true;
                c.plant_early_release = true;
                Arm a;
                run_arm("control-early-release", cf, c, fwd, false, nullptr, false, &a);
                gate_pairs(sub, "concurrent == solo", solo_of(cf), a, true);
                gate_pool(sub, a);
                note_misses("pages-released-before-drained", sub);
              });
  control("pages-all-other-path",
          "a pages-all arm (every lane paged) whose batches route every lane through attention chunk 4 (another "
          "split-K path), against the run's windows arm of " + cf + " (every lane a window, pool off) at the first "
          "lane count, through the run's own pages-all arm and gate",
          [&](Run& sub) {
            ServeConfig c;
            c.parallel = fx.parallel.front();
            c.page = Pfirst;
            c.pages_all = true;
            c.plant_paged_batch_chunk = true;
            pages_all_arm(sub, "control-pages-all-other-path", cf, c, windows_first.at(cf), false);
            note_misses("pages-all-other-path", sub);
          });
  // The golden gate's control runs where the fixture has goldens for a run format on this
  // backend (a run with none has no golden check to prove: the gate is skipped there).
  std::string gf;
  for (const std::string& f : fx.formats)
    if (gf.empty() && golden_for(fx, f, backend_name).is_array()) gf = f;
  if (!gf.empty())
    control("golden-last-token-changed",
            "the solo arm of " + gf + " with the last token of its longest answer replaced by the next token id",
            [&](Run& sub) {
              std::vector<ServeResult> res = solo_of(gf).res;
              size_t at = 0;
              for (size_t i = 1; i < res.size(); ++i)
                if (res[i].tokens.size() > res[at].tokens.size()) at = i;
              if (res[at].tokens.empty()) return sub.error("engine", "the solo arm of " + gf + " gave no tokens");
              int32_t& t = res[at].tokens.back();
              t = (t + 1) % int32_t(targets.at(gf).config().vocab_size);
              gate_golden(sub, gf, golden_for(fx, gf, backend_name), res);
              note_misses("golden-last-token-changed", sub);
            });
  control("drafted-arm-never-drafted",
          "the solo arm (plain decoding, no draft verified) judged as a drafted arm: the drafted gates must refuse "
          "an arm that compared no draft",
          [&](Run& sub) {
            Arm a = solo_of(cf);
            a.name = "solo-as-drafted";
            gate_drafted(sub, "drafted == plain", a);
            note_misses("drafted-arm-never-drafted", sub);
          });
  control("arm-one-token-short",
          "a copy of the solo arm of " + cf + " with the last token of its longest answer dropped, judged as a "
          "concurrent arm: an answer that ends early with an equal prefix must not compare equal",
          [&](Run& sub) {
            Arm a = solo_of(cf);
            a.name = "solo-one-token-short";
            size_t at = 0;
            for (size_t i = 1; i < a.res.size(); ++i)
              if (a.res[i].tokens.size() > a.res[at].tokens.size()) at = i;
            if (a.res[at].tokens.empty()) return sub.error("engine", "the solo arm of " + cf + " gave no tokens");
            a.res[at].tokens.pop_back();
            if (a.res[at].digests.size() > a.res[at].tokens.size()) a.res[at].digests.pop_back();
            gate_pairs(sub, "concurrent == solo", solo_of(cf), a, true);
            note_misses("arm-one-token-short", sub);
          });
  control("run-one-part-short", "each lane's run is sized one part (the drafter's cache) short",
              [&](Run& sub) {
                ServeConfig c;
                c.parallel = fx.parallel.front();
                c.page = Pfirst;
                c.draft_tokens = fx.draft_tokens;
                c.plant_run_short = true;
                Arm a;
                run_arm("control-run-short", cf, c, fwd, false, nullptr, false, &a);
                gate_pool(sub, a);
                note_misses("run-one-part-short", sub);
              });
  for (const std::string& e : errors) run.error("engine", e);

  const double secs = std::chrono::duration<double>(Clock::now() - t_all).count();
  bool all_red = true;
  for (const ControlStat& k : run.controls()) all_red = all_red && k.red;
  int64_t checks = 0;
  for (const GateStat& g : run.gates()) checks += g.passed;
  const bool pass = !run.gates_failed() && all_red && !run.has_errors() && checks > 0;
  std::vector<std::string> reasons = gate_failure_reasons(run.gates());
  for (std::string& w : control_and_error_reasons(run.controls(), run.errors().size())) reasons.push_back(std::move(w));

  Receipt r(Receipt::Head{"serve-gate", fx.name, be->name(), device_json(be->device()), cmd.argv,
                          // deterministic (no generator); the report accepts null only for benches
                          nlohmann::json(uint64_t(0))});
  r.set_verdict(pass, reasons);
  r.set_cases(np, np, 0, "");  // a case = a prompt
  r["fixture"] = cmd.fixture;
  r["fixture_sha256"] = sha256_hex(text);
  r["model"] = fx.model_dir;
  r["draft"] = {{"source", draft_source}, {"chain_tokens", fx.draft_tokens}, {"tree", fx.draft_tree},
                {"tree_nodes", draft_nodes(fx.draft_tree, int(fx.draft_tree.size()))}};
  record_run(run, &r, control_notes);  // control_notes: per catching gate, n/m and the first miss
  nlohmann::json golden = nlohmann::json::object();
  for (auto& [fmt, s] : solo) {
    if (std::find(fx.formats.begin(), fx.formats.end(), fmt) == fx.formats.end()) continue;
    for (const ServeResult& x : s.res) golden[fmt].push_back(token_hash(x.tokens));
  }
  r["arms"] = arms;
  r["arm_fields"] = {
      {"time_to_first_token_unwarmed_s",
       "the arm's config and requests on a fresh engine (a backend of its own: stream, weights, scratch, arena), "
       "stopped after the round that gave the first token; the process (CUDA context) is already up"},
      {"time_to_first_token_warmed_s", "the same, again on that engine"},
      {"time_to_first_token_s", "the recorded run (warmed), run start to its first token"},
      {"peak_device_memory_bytes",
       "peak of the process's device bytes allocated (every cudaMalloc: weights, scratch, the held arena) during "
       "the arm's recorded run, the peak reset at its start; null on cpu (no device)"},
      {"device_memory_at_start_bytes", "device bytes allocated when the recorded run started (null on cpu)"}};
  nlohmann::json nums = {{"token_hashes", golden}};
  if (!arms.empty()) {
    // The first arm's (the first format's solo arm): the receipt's headline numbers.
    nums["time_to_first_token_unwarmed_s"] = arms[0]["time_to_first_token_unwarmed_s"];
    nums["time_to_first_token_warmed_s"] = arms[0]["time_to_first_token_warmed_s"];
  }
  for (const auto& a : arms) {
    const std::string k = a["format"].get<std::string>() + "." + a["arm"].get<std::string>();
    nums[k + ".decode_tok_s"] = a["decode_tok_s"];
    nums[k + ".time_to_first_token_unwarmed_s"] = a["time_to_first_token_unwarmed_s"];
    nums[k + ".time_to_first_token_warmed_s"] = a["time_to_first_token_warmed_s"];
    nums[k + ".peak_device_memory_bytes"] = a["peak_device_memory_bytes"];
    if (a.contains("draft"))
      nums[k + ".acceptance_rate"] = a["draft"]["acceptance_rate"];
  }
  r["numbers"] = nums;
  r.set_total_s(secs);
  // The receipt for --junit only once --out is written: a run that exits 2 writes no JUnit.
  std::vector<std::pair<std::string, std::string>> with;
  if (!cmd.junit_file.empty() && cmd.junit_text) with.push_back({cmd.junit_file, cmd.junit_text(r.doc())});
  if (const Status ws = print_and_write_receipt(r, cmd.out_file, out, with); !ws.ok)
    return bad((cmd.out_file.empty() ? "--junit " : "--out ") + ws.message);
  if (cmd.receipt) *cmd.receipt = r.doc();
  return pass ? 0 : 1;
}

}  // namespace kc::engine
