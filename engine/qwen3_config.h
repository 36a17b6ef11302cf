// Qwen3 model configuration: the Hugging Face `config.json` of a `Qwen3ForCausalLM`.
//
// Read fields (all required unless a default is given):
//   architectures            array of strings containing "Qwen3ForCausalLM"
//   model_type               "qwen3" when present
//   hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   num_key_value_heads, vocab_size, max_position_embeddings     positive integers
//   head_dim                 positive even integer; missing or null: hidden_size / num_attention_heads
//   rms_norm_eps             positive number
//   rope_theta               positive number, at the top level or under `rope_parameters`
//                            or `rope_scaling` (transformers 5 writes rope_parameters); where
//                            more than one is given they must agree. A rope_type / type other
//                            than "default" is refused (no scaled RoPE in this engine).
//   partial_rotary_factor    number in (0, 1], default 1.0, top level or under
//                            rope_parameters; rotary_dim = head_dim * factor must be an even
//                            integer
//   tie_word_embeddings      boolean
//   torch_dtype / dtype      "bfloat16", "float16" or "float32" (transformers 5 writes
//                            `dtype`); where both are given they must agree
// Refused as unsupported when present: hidden_act other than "silu", attention_bias true,
// use_sliding_window true, layer_types other than all "full_attention".
// Consistency: num_attention_heads divisible by num_key_value_heads; head_dim given
// explicitly or hidden_size divisible by num_attention_heads; every size small enough
// that the tensors' element counts fit in 2^40.
// Every refusal is "file: field: reason".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/layout/status.h"

namespace kc::engine {

struct Qwen3Config {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  double partial_rotary_factor = 1.0;
  int64_t rotary_dim = 0;  // head_dim * partial_rotary_factor (even)
  bool tie_word_embeddings = false;
  std::string dtype;  // "bfloat16", "float16" or "float32"

  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t group_size() const { return num_attention_heads / num_key_value_heads; }
};

// Parses and validates the text of a config.json; `file` names it in messages.
Status parse_qwen3_config(std::string_view text, const std::string& file, Qwen3Config* out);
// The whole of a model folder's text file (config.json, the shard index): a folder or another
// non-regular file (a FIFO would block) is refused naming `path`.
Status read_model_text(const std::string& path, std::string* out);
// Reads and parses `path`.
Status read_qwen3_config(const std::string& path, Qwen3Config* out);
// Validates an in-memory config (the same consistency rules as the parser); `file` names
// it in messages.
Status check_qwen3_config(const Qwen3Config& c, const std::string& file);
// config.json text for `c` as transformers writes it (architectures, model_type, the
// fields above, rope_theta at the top level and in rope_parameters, hidden_act "silu",
// attention_bias false), so that transformers can also load what make-model writes.
std::string qwen3_config_json(const Qwen3Config& c);

}  // namespace kc::engine
