// The fixture model and greedy decoding helpers that the engine's generate tests share
// (cpu and cuda) and the serving tests: the model loaded once (with its draft, per cache
// format), one request decoded alone, and byte equality of two results (token ids and every
// logits row's bytes). Test helper.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "engine/serve.h"

namespace kc::engine::test {

inline const std::string& fixture_dir() {
  static const std::string d = std::string(KC_SOURCE_DIR) + "/fixtures/models/stdlib-bytes-3m";
  return d;
}

// The fixture checkpoint as a Model with options mo (a failure to load fails the test).
inline Model load_fixture(const ModelOptions& mo) {
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(fixture_dir(), &w);
  EXPECT_TRUE(st.ok) << st.message;
  Model model;
  EXPECT_TRUE(Model::create(w, mo, &model).ok);
  return model;
}

// The fixture with default options, loaded once per test binary.
inline const Model& fixture_model() {
  static const Model m = load_fixture({});
  return m;
}

// The fixture model and its draft (its first layer, engine/serve.h make_draft_weights) with a
// KV cache of format f, loaded once per format and test binary.
struct FixtureWithDraft {
  Qwen3Weights w, dw;
  Model m, d;
};
inline const FixtureWithDraft& fixture_with_draft(Format f) {
  static std::map<Format, FixtureWithDraft> cache;
  auto it = cache.find(f);
  if (it != cache.end()) return it->second;
  FixtureWithDraft t;
  EXPECT_TRUE(load_qwen3_checkpoint(fixture_dir(), &t.w).ok);
  EXPECT_TRUE(make_draft_weights(t.w, 1, &t.dw).ok);
  ModelOptions mo;
  mo.kv_format = f;
  EXPECT_TRUE(Model::create(t.w, mo, &t.m).ok);
  EXPECT_TRUE(Model::create(t.dw, mo, &t.d).ok);
  return cache.emplace(f, std::move(t)).first->second;
}

inline bool same_bytes(const GenerateResult& a, const GenerateResult& b) {
  if (a.tokens != b.tokens || a.logits.size() != b.logits.size()) return false;
  for (size_t i = 0; i < a.logits.size(); ++i)
    if (a.logits[i].size() != b.logits[i].size() ||
        std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * 4) != 0)
      return false;
  return true;
}

// r decoded alone on be (logits kept), prefill in chunks of `chunk` tokens.
inline GenerateResult run_one(Backend& be, const GenerateRequest& r, int chunk) {
  std::vector<GenerateResult> out;
  GenerateOptions o;
  o.keep_logits = true;
  o.prefill_chunk = chunk;
  const Status st = generate(fixture_model(), be, {r}, o, &out);
  EXPECT_TRUE(st.ok) << st.message;
  return out.empty() ? GenerateResult{} : out[0];
}

}  // namespace kc::engine::test
