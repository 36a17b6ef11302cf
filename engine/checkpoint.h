// Qwen3 checkpoint: a model directory loaded into fp32 host tensors, every tensor checked
// against the config before any value is decoded.
//
// A model directory holds config.json and either model.safetensors or a sharded
// checkpoint: model.safetensors.index.json ({"weight_map": {tensor name -> shard file}})
// and the shard files beside it. Exactly one of the two layouts must be present.
//
// Tensors (Hugging Face names; linear weights are [out_features, in_features], row-major):
//   model.embed_tokens.weight                          [vocab_size, hidden_size]
//   model.layers.{i}.input_layernorm.weight            [hidden_size]
//   model.layers.{i}.self_attn.q_proj.weight           [num_attention_heads * head_dim, hidden_size]
//   model.layers.{i}.self_attn.k_proj.weight           [num_key_value_heads * head_dim, hidden_size]
//   model.layers.{i}.self_attn.v_proj.weight           [num_key_value_heads * head_dim, hidden_size]
//   model.layers.{i}.self_attn.o_proj.weight           [hidden_size, num_attention_heads * head_dim]
//   model.layers.{i}.self_attn.q_norm.weight           [head_dim]
//   model.layers.{i}.self_attn.k_norm.weight           [head_dim]
//   model.layers.{i}.post_attention_layernorm.weight   [hidden_size]
//   model.layers.{i}.mlp.gate_proj.weight              [intermediate_size, hidden_size]
//   model.layers.{i}.mlp.up_proj.weight                [intermediate_size, hidden_size]
//   model.layers.{i}.mlp.down_proj.weight              [hidden_size, intermediate_size]
//   model.norm.weight                                  [hidden_size]
//   lm_head.weight                                     [vocab_size, hidden_size], absent when
//                                                      tie_word_embeddings is true
// Every tensor's dtype must be the config's dtype (bfloat16 -> BF16, float16 -> F16,
// float32 -> F32). A missing tensor, an extra one (including lm_head.weight in a tied
// model), a wrong dtype or a wrong shape is refused as "file: tensor: reason"; so is a
// missing or malformed file (see safetensors.h and qwen3_config.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/qwen3_config.h"
#include "kernels/layout/status.h"

namespace kc::engine {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

struct Qwen3LayerWeights {
  HostTensor input_layernorm, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, post_attention_layernorm, gate_proj,
      up_proj, down_proj;
};

struct Qwen3Weights {
  Qwen3Config config;
  HostTensor embed_tokens;
  std::vector<Qwen3LayerWeights> layers;
  HostTensor norm;
  HostTensor lm_head;  // empty when config.tie_word_embeddings
  const HostTensor& output_head() const { return config.tie_word_embeddings ? embed_tokens : lm_head; }
};

// One tensor the config calls for: its name, shape and the shape's meaning in config
// terms (for messages), in a fixed order (embedding, layers in order, norm, head).
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string meaning;  // e.g. "[num_key_value_heads * head_dim, hidden_size]"
};
std::vector<ExpectedTensor> qwen3_expected_tensors(const Qwen3Config& c);

// Whether an index's weight_map value names a file in the model directory: non-empty, not "."
// or "..", no '/'. The loader refuses any other value; checkpoint_sha256 (kv_gate.h) hashes
// every shard that passes, so that what the loader reads is what the hash covers.
bool is_shard_file_name(const std::string& shard);

// The safetensors dtype name a config dtype calls for ("bfloat16" -> "BF16", ...).
std::string qwen3_tensor_dtype(const Qwen3Config& c);

// Reads config.json and every safetensors header in `dir` and checks names, dtypes and
// shapes; decodes nothing. `config` (optional) receives the parsed config.
Status check_qwen3_checkpoint(const std::string& dir, Qwen3Config* config = nullptr);

// check_qwen3_checkpoint, then decodes every tensor to fp32 into `out`; a NaN or infinite
// weight is refused naming the tensor and the element.
Status load_qwen3_checkpoint(const std::string& dir, Qwen3Weights* out);

// What the engine needs of a config beyond check_qwen3_config: head_dim 32, 64, 128 or 256 and at
// most 32 q heads per kv head (what the kernels take: kernels/backend/validate.cpp); at most
// 2^31 - 1 positions (max_position_embeddings, kept as int32). A refusal names `file` and the
// field. Model::create checks it too.
Status check_engine_config(const Qwen3Config& c, const std::string& file);
// DIR/config.json first, before any weight is decoded: the byte tokenizer's vocab of at least 258
// (the 256 bytes, <|bos|> 256, <|eos|> 257) and check_engine_config; then load_qwen3_checkpoint.
// generate, serve-gate and kv-gate load their models through it.
Status load_byte_level_checkpoint(const std::string& dir, Qwen3Weights* out);

}  // namespace kc::engine
