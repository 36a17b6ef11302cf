#include "engine/make_draft.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/files.h"
#include "engine/make_model.h"  // prepare_checkpoint_dir
#include "engine/safetensors.h"
#include "engine/serve.h"        // make_draft_weights
#include "engine/serve_gate.h"   // sha256_hex

namespace kc::engine {
namespace {

namespace fs = std::filesystem;

// Every tensor of `w` by its Hugging Face name.
std::map<std::string, const HostTensor*> tensors_by_name(const Qwen3Weights& w) {
  std::map<std::string, const HostTensor*> m;
  m["model.embed_tokens.weight"] = &w.embed_tokens;
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Qwen3LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    m[p + "input_layernorm.weight"] = &l.input_layernorm;
    m[p + "self_attn.q_proj.weight"] = &l.q_proj;
    m[p + "self_attn.k_proj.weight"] = &l.k_proj;
    m[p + "self_attn.v_proj.weight"] = &l.v_proj;
    m[p + "self_attn.o_proj.weight"] = &l.o_proj;
    m[p + "self_attn.q_norm.weight"] = &l.q_norm;
    m[p + "self_attn.k_norm.weight"] = &l.k_norm;
    m[p + "post_attention_layernorm.weight"] = &l.post_attention_layernorm;
    m[p + "mlp.gate_proj.weight"] = &l.gate_proj;
    m[p + "mlp.up_proj.weight"] = &l.up_proj;
    m[p + "mlp.down_proj.weight"] = &l.down_proj;
  }
  m["model.norm.weight"] = &w.norm;
  if (!w.config.tie_word_embeddings) m["lm_head.weight"] = &w.lm_head;
  return m;
}

// sha256 over the source's tensor file(s): model.safetensors, or the index and each shard
// it names in name order.
Status source_digest(const std::string& dir, std::string* hex) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  std::string bytes;
  std::error_code ec;
  if (fs::exists(single, ec)) {
    KC_RETURN_IF_ERROR(read_input_file(single.string(), &bytes));
    *hex = sha256_hex(bytes);
    return Status::Ok();
  }
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  KC_RETURN_IF_ERROR(read_input_file(index.string(), &bytes));
  std::string all = sha256_hex(bytes);
  std::map<std::string, bool> shards;
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes);
    for (auto it = j.at("weight_map").begin(); it != j.at("weight_map").end(); ++it) shards[it.value().get<std::string>()] = true;
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(index.string() + ": weight_map: " + e.what());
  }
  for (const auto& [name, _] : shards) {
    std::string s;
    KC_RETURN_IF_ERROR(read_input_file((fs::path(dir) / name).string(), &s));
    all += sha256_hex(s);
  }
  *hex = sha256_hex(all);
  return Status::Ok();
}

}  // namespace

Status write_qwen3_checkpoint(const Qwen3Weights& w, const std::string& out_dir,
                              const std::map<std::string, std::string>& metadata) {
  const Qwen3Config& c = w.config;
  Dtype dtype;
  KC_RETURN_IF_ERROR(prepare_checkpoint_dir(c, out_dir, &dtype));
  const auto by_name = tensors_by_name(w);
  std::vector<TensorToWrite> tensors;
  for (const ExpectedTensor& e : qwen3_expected_tensors(c)) {
    auto it = by_name.find(e.name);
    if (it == by_name.end()) return Status::Error(out_dir + ": " + e.name + ": not in the weights");
    const HostTensor& t = *it->second;
    if (t.shape != e.shape) return Status::Error(out_dir + ": " + e.name + ": shape differs from the config's " + e.meaning);
    TensorToWrite x;
    x.name = e.name;
    x.dtype = dtype;
    x.shape = e.shape;
    x.values = t.data;
    tensors.push_back(std::move(x));
  }
  {
    const fs::path cfg = fs::path(out_dir) / "config.json";
    const fs::path tmp = cfg.string() + ".tmp";
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    os << qwen3_config_json(c);
    os.flush();
    if (!os) return Status::Error(cfg.string() + ": (file): write failed");
    os.close();
    std::error_code ec;
    fs::rename(tmp, cfg, ec);
    if (ec) return Status::Error(cfg.string() + ": (file): cannot rename: " + ec.message());
  }
  KC_RETURN_IF_ERROR(write_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors, metadata));
  // What was written reads back as a checkpoint of this config, value for value.
  Qwen3Weights back;
  KC_RETURN_IF_ERROR(load_qwen3_checkpoint(out_dir, &back));
  const auto back_by_name = tensors_by_name(back);
  for (const auto& [name, t] : by_name) {
    const HostTensor& b = *back_by_name.at(name);
    if (b.data.size() != t->data.size() ||
        std::memcmp(b.data.data(), t->data.data(), t->data.size() * sizeof(float)) != 0)
      return Status::Error(out_dir + ": " + name + ": reads back with other values (not exact in " + c.dtype + ")");
  }
  return Status::Ok();
}

int make_draft_command(const std::string& from_dir, int layers, const std::string& out_dir, std::ostream& out,
                       std::ostream& err) {
  CheckpointDirGuard* claimed = nullptr;  // set once the output folder is claimed
  const auto fail = [&](const std::string& why) {
    if (claimed) claimed->cleanup();  // whatever this run made or wrote there goes
    err << "tf-cuda-test: error: make-draft: " << why << "\n";
    return 2;
  };
  if (from_dir.empty()) return fail("--from: a checkpoint folder is required");
  if (out_dir.empty()) return fail("--out: a folder is required");
  std::error_code ec;
  // The folder claimed first (made, locked, empty): a failed run removes only what it wrote.
  CheckpointDirGuard guard(out_dir);
  Status st = guard.claim();
  if (!st.ok) return fail("--out: " + st.message);
  claimed = &guard;
  Qwen3Weights w, d;
  st = load_qwen3_checkpoint(from_dir, &w);
  if (!st.ok) return fail("--from: " + st.message);
  // The claim holds off SIGINT and SIGTERM (CheckpointDirGuard): one that came during the read of
  // the source stops the run here, and the write polls for the rest.
  if (const int sig = HoldSignals::held()) return fail("interrupted by signal " + std::to_string(sig));
  if (w.layers.size() < 2)
    return fail("--from: the source has 1 layer: a draft takes fewer of the target's layers, so the source needs at least 2");
  if (layers < 1 || layers >= int(w.layers.size()))
    return fail("--layers: " + std::to_string(layers) + " is not in 1.." + std::to_string(w.layers.size() - 1) +
                " (below the source's " + std::to_string(w.layers.size()) + " layers)");
  st = make_draft_weights(w, layers, &d);
  if (!st.ok) return fail("--layers: " + st.message);
  std::string digest;
  st = source_digest(from_dir, &digest);
  if (!st.ok) return fail("--from: " + st.message);
  // The source folder's own name, however --from spells it ("m", "m/", "." inside m, "../m"):
  // the files stay the same bytes (as generate names its model).
  fs::path from_abs = fs::absolute(from_dir, ec).lexically_normal();
  if (!from_abs.has_filename()) from_abs = from_abs.parent_path();
  const std::string source = from_abs.filename().string();
  st = write_qwen3_checkpoint(d, out_dir,
                              {{"format", "pt"},
                               {"kc_draft_from", source},
                               {"kc_draft_layers", std::to_string(layers)},
                               {"kc_source_sha256", digest}});
  if (!st.ok) return fail("--out: " + st.message);
  // A signal held off after the last tensor undoes the folder too (make_model_command).
  if (const int sig = HoldSignals::held()) return fail("interrupted by signal " + std::to_string(sig));
  claimed = nullptr;
  guard.release();
  const auto bytes = fs::file_size(fs::path(out_dir) / "model.safetensors", ec);
  if (ec) return fail(out_dir + "/model.safetensors: " + ec.message() + " after the write");
  out << "make-draft: wrote " << out_dir << " (the first " << layers << (layers == 1 ? " layer" : " layers") << " of "
      << source << " with its embedding, final norm and head; " << bytes << " bytes of " << qwen3_tensor_dtype(d.config)
      << "; source sha256 " << digest << ")\n";
  return 0;
}

}  // namespace kc::engine
