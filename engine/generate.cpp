#include "engine/generate.h"

#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "contracts/framework.h"
#include "contracts/input_file.h"
#include "engine/kv_gate.h"  // checkpoint_sha256
#include "kernels/engine/engine_backend.h"

namespace kc::engine {

std::vector<int32_t> encode_prompt(const std::string& text) {
  std::vector<int32_t> t = {kTokEos};
  for (unsigned char ch : text) t.push_back(ch);
  return t;
}

std::string decode_bytes(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids)
    if (id >= 0 && id < 256) s.push_back(char(id));
  return s;
}

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

Status generate(const Model& model, Backend& be, const std::vector<GenerateRequest>& reqs, const GenerateOptions& opts,
                std::vector<GenerateResult>* out, GenerateStats* stats) {
  const Qwen3Config& c = model.config();
  const int lanes = int(reqs.size());
  if (opts.prefill_chunk < 1) return Status::Error("prefill chunk must be positive");
  std::vector<LaneSpec> specs(lanes);
  for (int l = 0; l < lanes; ++l) {
    const GenerateRequest& r = reqs[l];
    const std::string who = "request " + std::to_string(l) + ": ";
    if (r.prompt.empty()) return Status::Error(who + "empty prompt");
    if (r.max_tokens < 1) return Status::Error(who + "max_tokens must be at least 1");
    if (r.page < 0) return Status::Error(who + "page size must be positive");
    // A page holds `page` positions whatever the request uses of it: one larger than the model's
    // context holds positions no request can reach (--pages 1048576 held 2 GiB for a two-token
    // prompt), so it is refused before anything is allocated.
    if (r.page > c.max_position_embeddings)
      return Status::Error(who + "page size " + std::to_string(r.page) + " exceeds max_position_embeddings " +
                           std::to_string(c.max_position_embeddings) +
                           " (a page holds positions no request can reach; 0 is a window of the request's length)");
    for (int32_t t : r.prompt)
      if (t < 0 || t >= c.vocab_size) return Status::Error(who + "token " + std::to_string(t) + " out of the vocabulary");
    // Positions fed: the prompt and every generated token but the last (it is never fed back).
    const int64_t total = int64_t(r.prompt.size()) + r.max_tokens - 1;
    if (total > c.max_position_embeddings)
      return Status::Error(who + "prompt + max_tokens - 1 = " + std::to_string(total) +
                           " positions (the last token is not fed) exceeds max_position_embeddings " +
                           std::to_string(c.max_position_embeddings));
    specs[l] = {int32_t(total), r.page};
  }
  Cache cache;
  KC_RETURN_IF_ERROR(make_engine_cache(model.kv_layout(), specs, &cache));
  // The cache lives on the device for the whole run (cuda; a no-op on cpu): no step copies
  // it; its host image is brought back once, at the end.
  EngineBackend* eb = be.engine();
  if (eb) KC_RETURN_IF_ERROR(eb->hold(cache));
  struct Release {
    EngineBackend* eb;
    Cache& c;
    ~Release() {
      if (eb) (void)eb->release(c);
    }
  } release_at_exit{eb, cache};
  GenerateStats st;
  st.cache_bytes = cache.mem.size();
  std::vector<GenerateResult> res(lanes);
  std::vector<size_t> fed(lanes, 0);  // prompt tokens stored so far
  std::vector<bool> done(lanes, false);
  std::vector<float> logits;
  const int64_t V = c.vocab_size;

  auto take = [&](int l, const float* row) {
    const int32_t t = argmax(row, V);
    if (opts.keep_logits) res[l].logits.emplace_back(row, row + V);
    if (t == kTokEos && opts.stop_at_eos) {
      res[l].stopped_at_eos = true;
      done[l] = true;
      return;
    }
    res[l].tokens.push_back(t);
    if (int(res[l].tokens.size()) >= reqs[l].max_tokens) done[l] = true;
  };

  const auto t0 = Clock::now();
  for (bool more = true; more;) {
    more = false;
    std::vector<ForwardRow> rows;
    std::vector<int> owners;  // lane of each logits row
    for (int l = 0; l < lanes; ++l) {
      const size_t n = reqs[l].prompt.size();
      const size_t end = std::min(n, fed[l] + size_t(opts.prefill_chunk));
      for (size_t p = fed[l]; p < end; ++p) {
        rows.push_back({l, reqs[l].prompt[p], int32_t(p), p + 1 == n});
        if (p + 1 == n) owners.push_back(l);
      }
      fed[l] = end;
      if (end < n) more = true;
    }
    KC_RETURN_IF_ERROR(model.forward(be, cache, rows, &logits));
    for (size_t i = 0; i < owners.size(); ++i) take(owners[i], logits.data() + i * V);
  }
  st.prefill_s = seconds_since(t0);

  const auto t1 = Clock::now();
  for (;;) {
    std::vector<ForwardRow> rows;
    std::vector<int> owners;
    for (int l = 0; l < lanes; ++l) {
      if (done[l]) continue;
      const int32_t pos = int32_t(reqs[l].prompt.size() + res[l].tokens.size() - 1);
      rows.push_back({l, res[l].tokens.back(), pos, true});
      owners.push_back(l);
    }
    if (rows.empty()) break;
    KC_RETURN_IF_ERROR(model.forward(be, cache, rows, &logits));
    for (size_t i = 0; i < owners.size(); ++i) take(owners[i], logits.data() + i * V);
    st.decode_tokens += int64_t(owners.size());
    st.decode_steps += 1;
  }
  st.decode_s = seconds_since(t1);
  *out = std::move(res);
  if (stats) *stats = st;
  return Status::Ok();
}

int generate_command(const GenerateCommand& cmd, std::ostream& out, std::ostream& err) {
  const auto t_all = Clock::now();
  const auto bad = [&](const std::string& why) {
    err << "tf-cuda-test: error: generate: " << why << "\n";
    return 2;
  };
  if (cmd.prompt_given == !cmd.prompt_file.empty())
    return bad("give exactly one of --prompt TEXT and --prompt-file FILE");
  std::string text = cmd.prompt;
  if (!cmd.prompt_file.empty()) {
    // A FIFO is refused, never opened for a blocking read (it waited for a writer forever).
    if (const std::string why = read_regular_file(cmd.prompt_file, &text); !why.empty())
      return bad("--prompt-file " + cmd.prompt_file + ": cannot be read (" + why + ")");
  }
  if (cmd.max_tokens < 1) return bad("--max-tokens must be at least 1");
  ModelOptions mo;
  if (cmd.kv_cache == "bf16") mo.kv_format = Format::bf16;
  else if (cmd.kv_cache == "fp8") mo.kv_format = Format::fp8;
  else if (cmd.kv_cache == "q4") mo.kv_format = Format::q4;
  else if (cmd.kv_cache == "mxfp4") mo.kv_format = Format::mxfp4;
  else return bad("--kv-cache " + cmd.kv_cache + ": expected bf16, fp8, q4 or mxfp4");
  if (cmd.pages < 0) return bad("--pages must be 0 (a window) or a positive page size");
  if (cmd.backend != "cpu" && cmd.backend != "cuda") return bad("--backend " + cmd.backend + ": expected cpu or cuda");
  std::string target;
  if (!cmd.out_file.empty()) {
    const Status st = prepare_output(cmd.out_file, &target);
    if (!st.ok) return bad("--out " + st.message);
    if (!cmd.prompt_file.empty() && same_output(cmd.out_file, cmd.prompt_file))
      return bad("--out " + cmd.out_file + " names the prompt file " + cmd.prompt_file + ": the receipt would replace it");
  }
  if (cmd.model_dir.empty()) return bad("--model: missing");
  if (const std::string f = output_replaces_file_in(cmd.out_file, cmd.model_dir); !f.empty())
    return bad("--out " + cmd.out_file + " names the model's file " + f + ": the receipt would replace it");
  Qwen3Weights w;
  {
    const Status st = load_byte_level_checkpoint(cmd.model_dir, &w);
    if (!st.ok) return bad("--model " + st.message);
  }
  Model model;
  {
    const Status st = Model::create(w, mo, &model);
    if (!st.ok) return bad(st.message);
  }
  Status bst;
  std::unique_ptr<Backend> be = select_backend(cmd.backend, &bst);
  if (!be) return bad(bst.message);

  GenerateRequest req{encode_prompt(text), cmd.max_tokens, cmd.pages};
  std::vector<GenerateResult> res;
  GenerateStats stats;
  const Status gs = generate(model, *be, {req}, {}, &res, &stats);
  if (!gs.ok) {
    const bool input = gs.message.find("request 0:") == 0;
    err << "tf-cuda-test: error: generate: " << gs.message << "\n";
    return input ? 2 : 1;
  }
  const std::string cont = decode_bytes(res[0].tokens);
  out << cont;
  if (!cont.empty() && cont.back() != '\n') out << "\n";
  out.flush();
  err << "generate: " << res[0].tokens.size() << " tokens" << (res[0].stopped_at_eos ? " (stopped at <|eos|>)" : "")
      << ", prompt " << req.prompt.size() << " tokens, time to first token " << stats.prefill_s * 1e3 << " ms, decode "
      << stats.decode_tok_s() << " tok/s, kv cache " << cmd.kv_cache << " " << stats.cache_bytes << " bytes on "
      << be->name() << "\n";
  if (!cmd.out_file.empty()) {
    // The receipt (reports/schema/receipt.schema.json, kind generate): nothing is random
    // (seed 0), no gates or controls; verdict pass once the tokens are out.
    // Its name is the model folder's name, a file name as every receipt's (contracts/receipt.h):
    // "m/", "." and "m/.." name their folder (the path itself, "m/", was once the name).
    std::filesystem::path model = std::filesystem::absolute(cmd.model_dir).lexically_normal();
    if (!model.has_filename() && model.has_parent_path()) model = model.parent_path();
    std::string model_name = model.filename().string();
    if (!safe_file_name(model_name)) model_name = "model";
    Receipt j(Receipt::Head{"generate", model_name, be->name(), device_json(be->device()), cmd.argv, uint64_t(0)});
    j.set_verdict(true, {});
    nlohmann::json g;
    g["model"] = cmd.model_dir;
    g["checkpoint_sha256"] = checkpoint_sha256(cmd.model_dir);
    g["kv_cache"] = cmd.kv_cache;
    g["pages"] = cmd.pages;
    g["prompt_tokens"] = req.prompt;
    g["tokens"] = res[0].tokens;
    // The continuation may end inside a UTF-8 sequence: invalid bytes become U+FFFD here
    // (the exact bytes are in "tokens").
    g["text"] = nlohmann::json::parse(nlohmann::json(cont).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    g["stopped_at_eos"] = res[0].stopped_at_eos;
    g["time_to_first_token_s"] = stats.prefill_s;
    g["decode_s"] = stats.decode_s;
    g["decode_tokens"] = stats.decode_tokens;
    g["decode_steps"] = stats.decode_steps;
    g["decode_tok_s"] = stats.decode_tok_s();
    g["cache_bytes"] = stats.cache_bytes;
    j["generate"] = g;
    j.set_total_s(seconds_since(t_all));
    const Status ws = write_json_atomic(cmd.out_file, j);
    if (!ws.ok) return bad("--out " + ws.message);
    out << "receipt: " << cmd.out_file << "\n";
  }
  return 0;
}

}  // namespace kc::engine
