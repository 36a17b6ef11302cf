// Test glue: the engine's loaded weights as the reference's plain arrays. The two sides
// share only this copy of data, never code.
#pragma once
#include "engine/checkpoint.h"
#include "reference/qwen3_ref.h"

namespace kc::engine::test {

inline ref::Qwen3RefModel to_reference(const Qwen3Weights& w) {
  ref::Qwen3RefModel m;
  const Qwen3Config& c = w.config;
  m.dims.hidden = c.hidden_size;
  m.dims.intermediate = c.intermediate_size;
  m.dims.layers = c.num_hidden_layers;
  m.dims.heads = c.num_attention_heads;
  m.dims.kv_heads = c.num_key_value_heads;
  m.dims.head_dim = c.head_dim;
  m.dims.rotary_dim = c.rotary_dim;
  m.dims.vocab = c.vocab_size;
  m.dims.eps = c.rms_norm_eps;
  m.dims.rope_theta = c.rope_theta;
  m.dims.tied = c.tie_word_embeddings;
  m.embed = w.embed_tokens.data;
  for (const Qwen3LayerWeights& l : w.layers)
    m.layers.push_back({l.input_layernorm.data, l.q_proj.data, l.k_proj.data, l.v_proj.data, l.o_proj.data,
                        l.q_norm.data, l.k_norm.data, l.post_attention_layernorm.data, l.gate_proj.data,
                        l.up_proj.data, l.down_proj.data});
  m.final_norm = w.norm.data;
  m.lm_head = w.lm_head.data;
  return m;
}

}  // namespace kc::engine::test
