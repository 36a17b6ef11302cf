// `tf-cuda-test bench engine` (issue 16's speed part): the engine's greedy decode on the
// device against transformers' `generate` on the same models and batches, in one run, and
// attention's share of a decode step at 32K (issue 20 asks for it). See bench_engine.h.
//
// Ours: `generate` (engine/generate.h) with `parallel` lanes of the same prompt, each
// decoding exactly T tokens (no stop at <|eos|>); a decode step is one Model::forward of
// every lane's row plus the logits' download and the host argmax, as `generate` runs it.
// Decode time per step = decode seconds / decode steps; per configuration the median over
// reps runs, the three addressings (window, pages of 256, pages of 16) interleaved within
// each rep so that drift hits them alike.
#include "tools/bench_engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "bench/attention.h"
#include "contracts/framework.h"
#include "contracts/receipt.h"  // shell_quote
#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "engine/kv_gate.h"
#include "engine/make_model.h"
#include "engine/model.h"
#include "engine/ops.h"
#include "kernels/backend/backend.h"
#include "kernels/engine/engine_backend.h"
#include "tools/bench_attention.h"
#include "tools/scratch_dir.h"

namespace kc {

double bench_median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {
namespace fs = std::filesystem;
using engine::Model;
using Clock = std::chrono::steady_clock;

std::string addr_name(int page) {  // (appended, not "p" + to_string: gcc 12's -O3 -Wrestrict false positive)
  if (!page) return "window";
  std::string s = "p";
  s += std::to_string(page);
  return s;
}

struct BenchModel {
  std::string name, dir, origin;
  engine::Qwen3Weights w;
};

// One generate run: decode step time (us) and tok/s.
Status decode_once(const Model& m, Backend& be, int parallel, int page, const std::vector<int32_t>& prompt, int tokens,
                   double* step_us, double* ttft_s, uint64_t* cache_bytes) {
  std::vector<engine::GenerateRequest> reqs(size_t(parallel), engine::GenerateRequest{prompt, tokens, page});
  engine::GenerateOptions go;
  go.stop_at_eos = false;
  std::vector<engine::GenerateResult> res;
  engine::GenerateStats st;
  KC_RETURN_IF_ERROR(engine::generate(m, be, reqs, go, &res, &st));
  for (const auto& r : res)
    if (int(r.tokens.size()) != tokens) return Status::Error("bench engine: a lane decoded fewer tokens than asked");
  if (st.decode_steps < 1 || st.decode_s <= 0) return Status::Error("bench engine: no decode step was timed");
  *step_us = st.decode_s / double(st.decode_steps) * 1e6;
  *ttft_s = st.prefill_s;
  *cache_bytes = st.cache_bytes;
  return Status::Ok();
}

// One decode step of `parallel` lanes at position ctx - 1 on window lanes of ctx positions
// (positions 0 .. ctx - 2 hold zeros: the time of attention does not depend on the
// values), logits downloaded as generate does; median over reps steps after warm-up.
Status long_step(const Model& m, Backend& be, int parallel, int ctx, int reps, double* step_us) {
  Cache cache;
  std::vector<engine::LaneSpec> specs(size_t(parallel), engine::LaneSpec{ctx, 0});
  KC_RETURN_IF_ERROR(engine::make_engine_cache(m.kv_layout(), specs, &cache));
  EngineBackend* eb = be.engine();
  if (!eb) return Status::Error("bench engine: the backend has no engine");
  KC_RETURN_IF_ERROR(eb->hold(cache));
  std::vector<engine::ForwardRow> rows;
  for (int l = 0; l < parallel; ++l) rows.push_back({l, int32_t('a'), ctx - 1, true});
  std::vector<float> logits;
  std::vector<double> t;
  Status st;
  for (int i = 0; i < reps + 3 && st.ok; ++i) {
    const auto t0 = Clock::now();
    st = m.forward(be, cache, rows, &logits);
    if (i >= 3) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() * 1e6);
  }
  const Status rs = eb->release(cache);
  KC_RETURN_IF_ERROR(st);
  KC_RETURN_IF_ERROR(rs);
  *step_us = bench_median(t);
  return Status::Ok();
}

// ---- the timing option (--profile) ------------------------------------------------

// Decode steps as generate runs them (one forward of every lane's row, logits downloaded,
// host argmax), after a prefill of the prompt on every lane; the profile (if on) is taken
// over the decode steps only. step_us: wall time per decode step; logits: every decode
// step's logits, in order (for the legacy == current comparison).
Status decode_steps(const Model& m, Backend& be, int parallel, int page, const std::vector<int32_t>& prompt,
                    int tokens, double* step_us, std::vector<float>* all_logits, EngineBackend::Profile* prof) {
  EngineBackend* eb = be.engine();
  if (!eb) return Status::Error("bench engine: the backend has no engine");
  Cache cache;
  const int32_t cap = int32_t(prompt.size()) + tokens;
  std::vector<engine::LaneSpec> specs(size_t(parallel), engine::LaneSpec{cap, page});
  KC_RETURN_IF_ERROR(engine::make_engine_cache(m.kv_layout(), specs, &cache));
  KC_RETURN_IF_ERROR(eb->hold(cache));
  const int64_t V = m.config().vocab_size;
  std::vector<engine::ForwardRow> rows;
  for (int l = 0; l < parallel; ++l)
    for (size_t p = 0; p < prompt.size(); ++p)
      rows.push_back({l, prompt[p], int32_t(p), p + 1 == prompt.size()});
  std::vector<float> logits;
  Status st = m.forward(be, cache, rows, &logits);
  std::vector<int32_t> next_tok(static_cast<size_t>(parallel), 0);
  for (int l = 0; l < parallel && st.ok; ++l) next_tok[l] = engine::argmax(logits.data() + l * V, V);
  EngineBackend::Profile discard;
  if (st.ok && prof) st = eb->take_profile(&discard);  // the prefill is not a decode step
  if (all_logits) all_logits->clear();
  const auto t0 = Clock::now();
  for (int t = 1; t < tokens && st.ok; ++t) {
    rows.clear();
    for (int l = 0; l < parallel; ++l) rows.push_back({l, next_tok[l], int32_t(prompt.size()) + t - 1, true});
    st = m.forward(be, cache, rows, &logits);
    for (int l = 0; l < parallel && st.ok; ++l) next_tok[l] = engine::argmax(logits.data() + l * V, V);
    if (all_logits) all_logits->insert(all_logits->end(), logits.begin(), logits.end());
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (st.ok && prof) st = eb->take_profile(prof);
  const Status rs = eb->release(cache);
  KC_RETURN_IF_ERROR(st);
  KC_RETURN_IF_ERROR(rs);
  *step_us = s / double(tokens - 1) * 1e6;
  return Status::Ok();
}

// Bytes of weights one decode step reads: each layer's seven matrices and the head (bf16).
double weight_bytes_per_step(const engine::Qwen3Config& c) {
  const double H = double(c.hidden_size), I = double(c.intermediate_size), Q = double(c.num_attention_heads) * c.head_dim,
               K = double(c.num_key_value_heads) * c.head_dim;
  return 2.0 * (double(c.num_hidden_layers) * (H * Q + 2 * H * K + Q * H + 3 * H * I) + double(c.vocab_size) * H);
}

int profile_engine(const BenchOptions& o, Backend& be, const std::vector<BenchModel>& models,
                   const std::vector<int32_t>& prompt) {
  EngineBackend* eb = be.engine();
  const int tokens = o.engine_tokens > 0 ? o.engine_tokens : 64;
  const int reps = std::max(1, std::min(o.reps, 5));
  struct Cfg {
    size_t model;
    int parallel;
    Format fmt;
    const char* fname;
    int page;
  };
  const std::vector<Cfg> cfgs = {{1, 8, Format::bf16, "bf16", 0}, {1, 8, Format::bf16, "bf16", 256},
                                 {1, 4, Format::bf16, "bf16", 0}, {1, 1, Format::bf16, "bf16", 0},
                                 {1, 8, Format::fp8, "fp8", 0},   {0, 8, Format::bf16, "bf16", 0},
                                 {0, 8, Format::fp8, "fp8", 0},   {0, 8, Format::fp8, "fp8", 256},
                                 {0, 8, Format::fp8, "fp8", 16}};
  nlohmann::json out = {{"what", "bench engine --profile: per decode step (prefill excluded), " + std::to_string(tokens - 1) +
                                     " steps; step_us: wall time per step with the option off (median of " +
                                     std::to_string(reps) + " runs); with it on, every step is held on the device "
                                     "until the host enqueued it, so gpu_span_us is the step's device time back to "
                                     "back and kinds[].us the event time of each engine call (launch gaps between "
                                     "them are span - sum); legacy: the kernels before the staged product / RMSNorm"},
                        {"device", o.device},
                        {"rows", nlohmann::json::array()}};
  bool all_same = true;
  std::cout << std::fixed << std::setprecision(1);
  for (const Cfg& cf : cfgs) {
    const BenchModel& bm = models[cf.model];
    engine::ModelOptions mo;
    mo.kv_format = cf.fmt;
    Model model;
    Status st = Model::create(bm.w, mo, &model);
    std::vector<float> lg[2];
    const std::string cfg = bm.name + "/p" + std::to_string(cf.parallel) + "/" + cf.fname + "/" + addr_name(cf.page);
    for (int legacy = 1; legacy >= 0 && st.ok; --legacy) {
      double us = 0;
      std::vector<double> t;
      st = eb->set_debug({legacy == 1, false});
      if (st.ok) st = decode_steps(model, be, cf.parallel, cf.page, prompt, tokens, &us, &lg[legacy], nullptr);  // warm-up
      for (int r = 0; r < reps && st.ok; ++r) {
        st = decode_steps(model, be, cf.parallel, cf.page, prompt, tokens, &us, nullptr, nullptr);
        t.push_back(us);
      }
      EngineBackend::Profile pr;
      double pus = 0;
      if (st.ok) st = eb->set_debug({legacy == 1, true});
      if (st.ok) st = decode_steps(model, be, cf.parallel, cf.page, prompt, tokens, &pus, nullptr, &pr);
      const Status off = eb->set_debug({});
      if (st.ok) st = off;
      if (!st.ok) break;
      const double steps = double(std::max<int64_t>(1, pr.steps));
      double sum = 0, mm = 0;
      nlohmann::json kinds = nlohmann::json::array();
      for (const auto& k : pr.kinds) {
        sum += k.us;
        if (k.kind.rfind("matmul", 0) == 0 || k.kind.rfind("logits", 0) == 0) mm += k.us;
        kinds.push_back({{"kind", k.kind}, {"calls_per_step", double(k.calls) / steps}, {"us_per_step", k.us / steps}});
      }
      const double wb = weight_bytes_per_step(bm.w.config);
      nlohmann::json row = {{"config", cfg},
                            {"kernels", legacy ? "legacy" : "current"},
                            {"step_us", bench_median(t)},
                            {"steps_profiled", pr.steps},
                            {"gpu_span_us", pr.gpu_span_us / steps},
                            {"kernels_sum_us", sum / steps},
                            {"host_enqueue_us", pr.host_enqueue_us / steps},
                            {"matmul_us", mm / steps},
                            {"weight_bytes_per_step", wb},
                            {"weight_tb_s_over_matmul_time", mm > 0 ? wb / (mm / steps * 1e-6) / 1e12 : 0.0},
                            {"weight_tb_s_over_step", wb / (bench_median(t) * 1e-6) / 1e12},
                            {"kinds", kinds}};
      out["rows"].push_back(row);
      std::cout << "\n" << cfg << "  kernels " << (legacy ? "legacy" : "current") << ": step " << bench_median(t)
                << " us (wall), device span " << pr.gpu_span_us / steps << " us, kernels " << sum / steps
                << " us, host enqueue " << pr.host_enqueue_us / steps << " us; weights " << wb / 1e6 << " MB/step: "
                << std::setprecision(2) << wb / (bench_median(t) * 1e-6) / 1e12 << " TB/s over the step, "
                << (mm > 0 ? wb / (mm / steps * 1e-6) / 1e12 : 0.0) << " TB/s over the products' time"
                << std::setprecision(1) << "\n";
      for (const auto& k : pr.kinds)
        std::cout << "    " << std::left << std::setw(36) << k.kind << std::right << std::setw(9) << k.us / steps
                  << " us/step  " << std::setw(5) << double(k.calls) / steps << " calls/step\n";
    }
    if (!st.ok) {
      std::cerr << "tf-cuda-test: error: bench engine --profile: " << cfg << ": " << st.message << "\n";
      return 1;
    }
    const bool same = lg[0].size() == lg[1].size() && !lg[0].empty() &&
                      std::memcmp(lg[0].data(), lg[1].data(), lg[0].size() * sizeof(float)) == 0;
    all_same = all_same && same;
    out["rows"].back()["logits_bytes_equal_legacy"] = same;
    std::cout << cfg << ": decode logits bytes, current == legacy kernels: " << (same ? "yes" : "NO") << " ("
              << lg[1].size() << " floats)\n";
  }
  out["logits_bytes_equal_legacy_everywhere"] = all_same;
  const Status ws = write_json_atomic(o.engine_profile, out);
  if (!ws.ok) {
    std::cerr << "tf-cuda-test: error: bench: --profile " << ws.message << "\n";
    return 2;
  }
  std::cout << "profile: " << o.engine_profile << "\n";
  return all_same ? 0 : 1;
}

}  // namespace

int bench_engine_main(const BenchOptions& o, Backend& be, Receipt* receipt) {
  const auto t_start = Clock::now();
  const std::vector<int> parallels = {1, 4, 8};
  const std::vector<int> pages = {0, 256, 16};
  const std::vector<std::pair<std::string, Format>> formats = {{"bf16", Format::bf16}, {"fp8", Format::fp8}};
  const int tokens = o.engine_tokens > 0 ? o.engine_tokens : (o.quick ? 64 : 128);
  const int reps = o.reps;
  const std::vector<int32_t> prompt = engine::encode_prompt("def main(");
  constexpr double kPaged256 = 1.02, kPaged16 = 1.05, kOverTransformers = 2.0;
  constexpr int kLongCtx = 32768;
  const auto fail = [](const std::string& why) {
    std::cerr << "tf-cuda-test: error: bench engine: " << why << "\n";
    return 2;
  };
  if (tokens < 2) return fail("--tokens must be at least 2 (one decode step)");

  // The models: the trained fixture and the synthetic 27B-attention preset, written here.
  std::vector<BenchModel> models(2);
  models[0].name = fs::path(o.engine_model).lexically_normal().filename().string();
  if (models[0].name.empty()) models[0].name = o.engine_model;
  models[0].dir = o.engine_model;
  models[0].origin = "trained fixture";
  {
    const Status st = engine::load_qwen3_checkpoint(o.engine_model, &models[0].w);
    if (!st.ok) return fail("--engine-model " + st.message);
  }
  const ScratchDir scratch("kc-bench-engine");
  const fs::path& tmp = scratch.path();
  {
    engine::Qwen3Config c;
    Status st = engine::qwen3_preset("qwen35-27b-attn", o.engine_layers, &c);
    if (!st.ok) return fail(st.message);
    models[1].name = "qwen35-27b-attn-" + std::to_string(o.engine_layers) + "l";
    models[1].dir = (tmp / "qwen35-27b-attn").string();
    models[1].origin = "make-model --preset qwen35-27b-attn --layers " + std::to_string(o.engine_layers) + " --seed 1";
    std::cerr << "bench engine: writing " << models[1].origin << " into " << models[1].dir << "\n";
    st = engine::write_synthetic_checkpoint(c, 1, models[1].dir, "qwen35-27b-attn");
    if (st.ok) st = engine::load_qwen3_checkpoint(models[1].dir, &models[1].w);
    if (!st.ok) return fail(st.message);
  }

  if (!o.engine_profile.empty()) return profile_engine(o, be, models, prompt);

  Receipt r(Receipt::Head{"bench-engine", "engine", be.name(), o.device, o.argv, nullptr});  // seed null
  r["method"] =
      "ours: tf-cuda-test's engine on the cuda backend (bf16 weights, fp32 activations and fma accumulation, KV cache "
      "bf16 or fp8), generate() with `parallel` lanes of one prompt, each decoding exactly " +
      std::to_string(tokens) + " tokens (no stop at <|eos|>); a step = one forward of every lane's row + logits "
      "download + host argmax; step time = decode seconds / decode steps, median of " + std::to_string(reps) +
      " runs, window / pages of 256 / pages of 16 interleaved within each run; paged_over_window = median over the "
      "runs of paged / window within a run; transformers: see transformers.method";
  r["quick"] = o.quick;  // the mode premerge times a head in (argv may be premerge's own)
  r["tokens_per_lane"] = tokens;
  r["prompt"] = prompt;
  nlohmann::json mj = nlohmann::json::array();
  for (const BenchModel& m : models) {
    const auto& c = m.w.config;
    mj.push_back({{"name", m.name}, {"origin", m.origin}, {"checkpoint_sha256", engine::checkpoint_sha256(m.dir)},
                  {"layers", c.num_hidden_layers}, {"hidden", c.hidden_size}, {"intermediate", c.intermediate_size},
                  {"q_heads", c.num_attention_heads}, {"kv_heads", c.num_key_value_heads}, {"head_dim", c.head_dim},
                  {"vocab", c.vocab_size}});
  }
  r["models"] = mj;

  // transformers first (its process ends before ours measures: no sharing of the GPU).
  std::map<std::string, nlohmann::json> theirs;  // "model/pN" -> row
  {
    nlohmann::json tj = {{"python", o.transformers}};
    if (o.transformers == "none" || o.transformers.empty()) {
      tj["error"] = "not measured (--transformers none)";
    } else {
      nlohmann::json in = {{"models", nlohmann::json::array()}};
      for (const BenchModel& m : models)
        in["models"].push_back({{"name", m.name}, {"dir", m.dir}, {"parallel", parallels}, {"prompt", prompt},
                                {"new_tokens", tokens}, {"reps", std::max(2, std::min(reps, 3))}});
      const std::string fin = (tmp / "transformers_in.json").string(), fout = (tmp / "transformers_out.json").string();
      std::ofstream(fin) << in.dump();
      const std::string cmd = shell_quote(o.transformers) + " " + shell_quote(o.script_dir + "/transformers_decode_bench.py") +
                              " " + shell_quote(fin) + " " + shell_quote(fout);
      std::cerr << "bench engine: " << cmd << "\n";
      const int rc = std::system(cmd.c_str());
      nlohmann::json out;
      bool parsed = false;
      if (fs::exists(fout)) {
        try {
          out = nlohmann::json::parse(std::ifstream(fout));
          parsed = out.is_object();
        } catch (const nlohmann::json::exception&) {
        }
      }
      if (!parsed) {
        tj["error"] = "not measured: `" + cmd + "` exited " + std::to_string(rc) + " without a result";
      } else {
        for (const char* k : {"torch", "transformers", "device", "precision", "method", "error"})
          if (out.contains(k)) tj[k] = out[k];
        if (rc != 0 && !tj.contains("error")) tj["error"] = "exited " + std::to_string(rc);
        for (const auto& row : out.value("rows", nlohmann::json::array()))
          if (row.contains("model") && row.contains("parallel"))
            theirs[row["model"].get<std::string>() + "/p" + std::to_string(row["parallel"].get<int>())] = row;
          else if (row.contains("model") && row.contains("error"))
            for (int P : parallels) theirs[row["model"].get<std::string>() + "/p" + std::to_string(P)] = row;
      }
    }
    r["transformers"] = tj;
  }

  // Ours.
  nlohmann::json rows = nlohmann::json::array();
  std::map<std::string, double> step;  // model/pN/fmt/window -> median step us; .../pP -> paged / window
  std::cout << std::left << std::setw(28) << "model/parallel" << std::setw(7) << "cache" << std::setw(8) << "addr"
            << std::setw(12) << "step us" << std::setw(12) << "tok/s" << "paged/window\n";
  for (BenchModel& bm : models) {
    for (const auto& [fname, fmt] : formats) {
      engine::ModelOptions mo;
      mo.kv_format = fmt;
      Model model;
      Status st = Model::create(bm.w, mo, &model);
      if (!st.ok) return fail(bm.name + ": " + st.message);
      double us, ttft;
      uint64_t cbytes;
      st = decode_once(model, be, parallels.back(), 0, prompt, tokens, &us, &ttft, &cbytes);  // warm-up
      if (!st.ok) {
        std::cerr << "tf-cuda-test: error: bench engine: " << bm.name << ": " << st.message << "\n";
        return 1;
      }
      for (int P : parallels) {
        std::map<int, std::vector<double>> t;
        std::map<int, std::vector<double>> tt;
        std::map<int, uint64_t> cb;
        for (int rep = 0; rep < reps; ++rep)
          for (int page : pages) {
            st = decode_once(model, be, P, page, prompt, tokens, &us, &ttft, &cbytes);
            if (!st.ok) {
              std::cerr << "tf-cuda-test: error: bench engine: " << bm.name << ": " << st.message << "\n";
              return 1;
            }
            t[page].push_back(us);
            tt[page].push_back(ttft);
            cb[page] = cbytes;
          }
        const std::string cfg = bm.name + "/p" + std::to_string(P);
        for (int page : pages) {
          const double m = bench_median(t[page]);
          // paged / window: the median over runs of the ratio within a run (the two were
          // timed next to each other, so a slow drift of the host cancels).
          std::vector<double> ratio;
          for (size_t i = 0; i < t[page].size(); ++i) ratio.push_back(t[page][i] / t[0][i]);
          const double w = bench_median(ratio);
          step[cfg + "/" + fname + "/" + addr_name(page)] = page ? w : m;
          nlohmann::json row = {{"config", cfg},
                                {"format", fname},
                                {"addressing", addr_name(page)},
                                {"engine", "ours"},
                                {"step_us", m},
                                {"step_us_min", *std::min_element(t[page].begin(), t[page].end())},
                                {"step_us_max", *std::max_element(t[page].begin(), t[page].end())},
                                {"decode_tok_s", double(P) * 1e6 / m},
                                {"ttft_ms", bench_median(tt[page]) * 1e3},
                                {"cache_bytes", cb[page]},
                                {"runs", t[page].size()}};
          if (page) row["paged_over_window"] = w;
          rows.push_back(row);
          std::cout << std::left << std::setw(28) << cfg << std::setw(7) << fname << std::setw(8) << addr_name(page)
                    << std::setw(12) << std::setprecision(4) << m << std::setw(12) << double(P) * 1e6 / m
                    << (page ? std::to_string(w) : std::string("")) << "\n";
        }
      }
    }
  }
  // transformers' rows, and ours over theirs on our bf16 window rows.
  for (const BenchModel& bm : models)
    for (int P : parallels) {
      const std::string cfg = bm.name + "/p" + std::to_string(P);
      nlohmann::json row = {{"config", cfg}, {"format", "bf16"}, {"addressing", "static"}, {"engine", "transformers"}};
      const nlohmann::json* x = theirs.count(cfg) ? &theirs[cfg] : nullptr;
      const bool ok = x && (*x).contains("decode_tok_s") && (*x)["decode_tok_s"].is_number();
      if (ok) {
        if ((*x).contains("step_us") && (*x)["step_us"].is_number()) row["step_us"] = (*x)["step_us"];
        row["decode_tok_s"] = (*x)["decode_tok_s"];
        if ((*x).contains("note")) row["note"] = (*x)["note"];
        if ((*x).contains("compiled_forward")) row["compiled_forward"] = (*x)["compiled_forward"];
        for (auto& our : rows)
          if (our["config"] == cfg && our["format"] == "bf16" && our["addressing"] == "window")
            our["ours_over_transformers"] = our["decode_tok_s"].get<double>() / (*x)["decode_tok_s"].get<double>();
      } else {
        row["note"] = x && (*x).contains("error") ? "not measured: " + (*x)["error"].get<std::string>()
                                                    : std::string("not measured");
      }
      rows.push_back(row);
    }
  r["rows"] = rows;

  // Attention's share of a decode step at 32K (the 27B-attention preset, bf16 window).
  {
    nlohmann::json share = {{"what", models[1].name + ", bf16 window cache, context " + std::to_string(kLongCtx) +
                                         ": layers x (partial + merge, bench attention's timing of the same shape "
                                         "and chunk) / one decode step of the engine (its forward + logits download)"},
                            {"rows", nlohmann::json::array()}};
    engine::ModelOptions mo;
    Model model;
    Status st = Model::create(models[1].w, mo, &model);
    const auto& c = models[1].w.config;
    for (int P : {1, 8}) {
      if (!st.ok) break;
      double us = 0;
      st = long_step(model, be, P, kLongCtx, 10, &us);
      AttnBenchResult ar;
      if (st.ok)
        st = bench_attention_config({int(c.num_attention_heads), int(c.num_key_value_heads), int(c.head_dim), P, kLongCtx,
                                     Format::bf16, 0, mo.attn_chunk},
                                    3, 20, &ar);
      if (!st.ok) break;
      const double layers = double(c.num_hidden_layers);
      share["rows"].push_back({{"parallel", P}, {"context", kLongCtx}, {"layers", c.num_hidden_layers}, {"step_us", us},
                               {"attention_us_per_layer", ar.median_us}, {"share", layers * ar.median_us / us}});
      std::cout << "32K decode step, parallel " << P << ": " << us << " us, attention " << ar.median_us
                << " us per layer x " << c.num_hidden_layers << " = share " << layers * ar.median_us / us << "\n";
    }
    if (!st.ok) share["error"] = st.message;
    r["attention_share"] = share;
  }

  // Targets, each met or not.
  nlohmann::json targets = nlohmann::json::array();
  auto target = [&](const std::string& name, double value, double limit, bool at_least) {
    targets.push_back(bench_target(name, value, limit, at_least));  // bench attention's rule (bench_attention.h)
  };
  auto get = [&](const std::string& k) { return step.count(k) ? step[k] : 0.0; };
  for (const BenchModel& bm : models)
    for (const auto& f : formats) {
      const std::string k = bm.name + "/p8/" + f.first + "/";
      target(bm.name + " " + f.first + " p8: paged(256) / window decode time", get(k + "p256"), kPaged256, false);
      target(bm.name + " " + f.first + " p8: paged(16) / window decode time", get(k + "p16"), kPaged16, false);
    }
  for (const BenchModel& bm : models) {
    double ratio = 0;
    for (const auto& row : rows)
      if (row["config"] == bm.name + "/p8" && row.contains("ours_over_transformers"))
        ratio = row["ours_over_transformers"].get<double>();
    target(bm.name + " p8: ours (bf16 window) / transformers tok/s", ratio, kOverTransformers, true);
  }
  r["targets"] = targets;
  bool all = true;
  std::vector<std::string> why;
  std::cout << "\ntargets:\n";
  for (auto& tg : targets) {
    const bool met = tg["met"].get<bool>(), measured = tg["measured"].get<bool>(), at_least = tg["at_least"].get<bool>();
    const std::string name = tg["name"].get<std::string>();
    const double value = tg["value"].get<double>(), limit = tg["limit"].get<double>();
    all = all && met;
    std::cout << "  " << std::left << std::setw(64) << name << std::setw(10) << std::setprecision(4) << value
              << (at_least ? ">= " : "<= ") << limit << "  " << (met ? "met" : (measured ? "NOT met" : "not measured"))
              << "\n";
    if (!met) {
      std::ostringstream w;
      w << "target " << name << ": ";
      if (measured) w << std::setprecision(4) << value << (at_least ? " < " : " > ") << limit;
      else w << "not measured";
      why.push_back(w.str());
    }
  }
  r.set_verdict(all, why);
  r.set_total_s(std::chrono::duration<double>(Clock::now() - t_start).count());
  *receipt = std::move(r);
  return all ? 0 : 1;
}

}  // namespace kc
