#include "engine/checkpoint.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "contracts/json_type.h"
#include "engine/safetensors.h"

namespace kc::engine {

bool is_shard_file_name(const std::string& shard) {
  return !shard.empty() && shard != "." && shard != ".." && shard.find('/') == std::string::npos;
}

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

struct Located {
  size_t file = 0;  // index into OpenCheckpoint::files
  TensorInfo info;
};

struct OpenCheckpoint {
  Qwen3Config config;
  std::vector<SafetensorsFile> files;
  std::map<std::string, Located> tensors;
  std::string listing;  // the file that lists the tensors (model.safetensors or the index)
};

Status open_sharded(const std::string& dir, const std::string& index_path, OpenCheckpoint* ck) {
  auto fail = [&](const std::string& field, const std::string& why) {
    return Status::Error(index_path + ": " + field + ": " + why);
  };
  std::string text;
  KC_RETURN_IF_ERROR(read_model_text(index_path, &text));
  json j;
  if (std::string jwhy, at, reason; !parse_json_strict(text, &j, &jwhy, &at, &reason)) return fail(at, reason);
  if (!j.is_object()) return fail("(top level)", "expected an object, got " + json_type_name(j));
  if (!j.contains("weight_map")) return fail("weight_map", "missing");
  const json& wm = j["weight_map"];
  if (!wm.is_object()) return fail("weight_map", "expected an object, got " + json_type_name(wm));
  if (wm.empty()) return fail("weight_map", "empty");
  std::map<std::string, size_t> shard_index;
  std::map<std::string, std::string> listed;  // tensor -> shard
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    const std::string field = "weight_map." + it.key();
    if (!it.value().is_string()) return fail(field, "expected a string, got " + json_type_name(it.value()));
    const std::string shard = it.value().get<std::string>();
    if (!is_shard_file_name(shard)) return fail(field, "'" + shard + "' is not a file name in the model directory");
    listed[it.key()] = shard;
    if (shard_index.count(shard) == 0) {
      SafetensorsFile f;
      KC_RETURN_IF_ERROR(SafetensorsFile::open((fs::path(dir) / shard).string(), &f));
      shard_index[shard] = ck->files.size();
      ck->files.push_back(std::move(f));
    }
  }
  // The map and the shards must say the same thing: every listed tensor in its shard,
  // every tensor of a shard listed, and under that shard.
  for (const auto& [name, shard] : listed) {
    const SafetensorsFile& f = ck->files[shard_index[shard]];
    const TensorInfo* t = f.find(name);
    if (t == nullptr) return fail("weight_map." + name, shard + " holds no such tensor");
    ck->tensors[name] = Located{shard_index[shard], *t};
  }
  for (const auto& [shard, idx] : shard_index)
    for (const TensorInfo& t : ck->files[idx].tensors()) {
      auto it = listed.find(t.name);
      if (it == listed.end())
        return Status::Error(ck->files[idx].path() + ": " + t.name + ": not listed in the weight_map of " + index_path);
      if (it->second != shard)
        return Status::Error(ck->files[idx].path() + ": " + t.name + ": the weight_map places it in " + it->second);
    }
  ck->listing = index_path;
  return Status::Ok();
}

Status open_checkpoint(const std::string& dir, OpenCheckpoint* ck) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status::Error(dir + ": (model directory): does not exist");
  if (!fs::is_directory(dir, ec)) return Status::Error(dir + ": (model directory): not a directory");
  KC_RETURN_IF_ERROR(read_qwen3_config((fs::path(dir) / "config.json").string(), &ck->config));
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  const bool have_single = fs::exists(single, ec), have_index = fs::exists(index, ec);
  if (have_single && have_index)
    return Status::Error(dir + ": (model directory): holds both model.safetensors and "
                               "model.safetensors.index.json; which one is the model is ambiguous");
  if (!have_single && !have_index)
    return Status::Error(dir + ": (model directory): neither model.safetensors nor model.safetensors.index.json exists");
  if (have_index) return open_sharded(dir, index, ck);
  SafetensorsFile f;
  KC_RETURN_IF_ERROR(SafetensorsFile::open(single, &f));
  for (const TensorInfo& t : f.tensors()) ck->tensors[t.name] = Located{0, t};
  ck->files.push_back(std::move(f));
  ck->listing = single;
  return Status::Ok();
}

Status check_tensors(const OpenCheckpoint& ck, const std::vector<ExpectedTensor>& expected) {
  const std::string want_dtype = qwen3_tensor_dtype(ck.config);
  std::set<std::string> names;
  for (const ExpectedTensor& e : expected) {
    names.insert(e.name);
    auto it = ck.tensors.find(e.name);
    if (it == ck.tensors.end())
      return Status::Error(ck.listing + ": " + e.name + ": missing (config.json calls for " + e.meaning + " = " +
                           shape_text(e.shape) + ")");
  }
  for (const auto& [name, loc] : ck.tensors)
    if (names.count(name) == 0) {
      std::string why = "unexpected tensor (not part of a Qwen3ForCausalLM with " +
                        std::to_string(ck.config.num_hidden_layers) + " layers)";
      if (name == "lm_head.weight" && ck.config.tie_word_embeddings)
        why = "present, but config.json says tie_word_embeddings: true";
      return Status::Error(ck.files[loc.file].path() + ": " + name + ": " + why);
    }
  for (const ExpectedTensor& e : expected) {
    const Located& loc = ck.tensors.at(e.name);
    const std::string& file = ck.files[loc.file].path();
    if (dtype_name(loc.info.dtype) != want_dtype)
      return Status::Error(file + ": " + e.name + ": dtype " + dtype_name(loc.info.dtype) + ", but config.json says " +
                           ck.config.dtype + " (" + want_dtype + ")");
    if (loc.info.shape != e.shape)
      return Status::Error(file + ": " + e.name + ": shape " + shape_text(loc.info.shape) + ", but config.json calls for " +
                           e.meaning + " = " + shape_text(e.shape));
  }
  return Status::Ok();
}

}  // namespace

std::string qwen3_tensor_dtype(const Qwen3Config& c) {
  if (c.dtype == "bfloat16") return "BF16";
  if (c.dtype == "float16") return "F16";
  if (c.dtype == "float32") return "F32";
  return "?";
}

std::vector<ExpectedTensor> qwen3_expected_tensors(const Qwen3Config& c) {
  std::vector<ExpectedTensor> v;
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim;
  v.push_back({"model.embed_tokens.weight", {c.vocab_size, H}, "[vocab_size, hidden_size]"});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    v.push_back({p + "input_layernorm.weight", {H}, "[hidden_size]"});
    v.push_back({p + "self_attn.q_proj.weight", {Q, H}, "[num_attention_heads * head_dim, hidden_size]"});
    v.push_back({p + "self_attn.k_proj.weight", {KV, H}, "[num_key_value_heads * head_dim, hidden_size]"});
    v.push_back({p + "self_attn.v_proj.weight", {KV, H}, "[num_key_value_heads * head_dim, hidden_size]"});
    v.push_back({p + "self_attn.o_proj.weight", {H, Q}, "[hidden_size, num_attention_heads * head_dim]"});
    v.push_back({p + "self_attn.q_norm.weight", {D}, "[head_dim]"});
    v.push_back({p + "self_attn.k_norm.weight", {D}, "[head_dim]"});
    v.push_back({p + "post_attention_layernorm.weight", {H}, "[hidden_size]"});
    v.push_back({p + "mlp.gate_proj.weight", {I, H}, "[intermediate_size, hidden_size]"});
    v.push_back({p + "mlp.up_proj.weight", {I, H}, "[intermediate_size, hidden_size]"});
    v.push_back({p + "mlp.down_proj.weight", {H, I}, "[hidden_size, intermediate_size]"});
  }
  v.push_back({"model.norm.weight", {H}, "[hidden_size]"});
  if (!c.tie_word_embeddings) v.push_back({"lm_head.weight", {c.vocab_size, H}, "[vocab_size, hidden_size]"});
  return v;
}

Status check_qwen3_checkpoint(const std::string& dir, Qwen3Config* config) {
  OpenCheckpoint ck;
  KC_RETURN_IF_ERROR(open_checkpoint(dir, &ck));
  KC_RETURN_IF_ERROR(check_tensors(ck, qwen3_expected_tensors(ck.config)));
  if (config != nullptr) *config = ck.config;
  return Status::Ok();
}

Status load_qwen3_checkpoint(const std::string& dir, Qwen3Weights* out) {
  OpenCheckpoint ck;
  KC_RETURN_IF_ERROR(open_checkpoint(dir, &ck));
  const std::vector<ExpectedTensor> expected = qwen3_expected_tensors(ck.config);
  KC_RETURN_IF_ERROR(check_tensors(ck, expected));

  Qwen3Weights w;
  w.config = ck.config;
  w.layers.resize(static_cast<size_t>(ck.config.num_hidden_layers));
  // Slots in the order of qwen3_expected_tensors.
  std::vector<HostTensor*> slots;
  slots.push_back(&w.embed_tokens);
  for (Qwen3LayerWeights& l : w.layers)
    for (HostTensor* t : {&l.input_layernorm, &l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.q_norm, &l.k_norm,
                          &l.post_attention_layernorm, &l.gate_proj, &l.up_proj, &l.down_proj})
      slots.push_back(t);
  slots.push_back(&w.norm);
  if (!ck.config.tie_word_embeddings) slots.push_back(&w.lm_head);
  if (slots.size() != expected.size())
    return Status::Error(dir + ": internal: " + std::to_string(slots.size()) + " slots for " +
                         std::to_string(expected.size()) + " tensors");
  for (size_t i = 0; i < expected.size(); ++i) {
    const Located& loc = ck.tensors.at(expected[i].name);
    slots[i]->shape = expected[i].shape;
    slots[i]->data.resize(loc.info.numel());
    KC_RETURN_IF_ERROR(ck.files[loc.file].read_f32(loc.info, slots[i]->data.data(), slots[i]->data.size()));
    // A NaN or infinite weight would poison every logit downstream; name it here instead.
    for (size_t k = 0; k < slots[i]->data.size(); ++k)
      if (!std::isfinite(slots[i]->data[k]))
        return Status::Error(ck.files[loc.file].path() + ": " + expected[i].name + ": element " + std::to_string(k) +
                             " is " + (std::isnan(slots[i]->data[k]) ? "NaN" : "infinite") +
                             " (weights must be finite)");
  }
  *out = std::move(w);
  return Status::Ok();
}

Status check_engine_config(const Qwen3Config& c, const std::string& file) {
  const std::string at = file + ": ";
  if (c.head_dim != 32 && c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256)
    return Status::Error(at + "head_dim: " + std::to_string(c.head_dim) +
                         " is not supported by the engine's kernels (32, 64, 128 or 256)");
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0 ||
      c.num_attention_heads / c.num_key_value_heads > 32)
    return Status::Error(at + "num_attention_heads: " + std::to_string(c.num_attention_heads) + " over " +
                         std::to_string(c.num_key_value_heads) +
                         " kv heads is not supported by the engine's kernels (a multiple, at most 32 q heads per kv head)");
  if (c.max_position_embeddings > std::numeric_limits<int32_t>::max())
    return Status::Error(at + "max_position_embeddings: " + std::to_string(c.max_position_embeddings) +
                         " is more positions than the engine addresses (at most 2^31 - 1)");
  return Status::Ok();
}

Status load_byte_level_checkpoint(const std::string& dir, Qwen3Weights* out) {
  // The config first: a model the engine cannot run is refused before its weights are decoded.
  const std::string cfg = (fs::path(dir) / "config.json").string();
  Qwen3Config c;
  KC_RETURN_IF_ERROR(read_qwen3_config(cfg, &c));
  if (c.vocab_size < 258)
    return Status::Error(cfg + ": vocab_size: " + std::to_string(c.vocab_size) +
                         " is not a byte-level model (256 bytes, <|bos|> 256, <|eos|> 257)");
  KC_RETURN_IF_ERROR(check_engine_config(c, cfg));
  return load_qwen3_checkpoint(dir, out);
}

}  // namespace kc::engine
