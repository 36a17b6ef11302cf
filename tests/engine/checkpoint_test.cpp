// engine/checkpoint: a model directory checked tensor by tensor against its config, and
// every bad-directory class refused as "file: tensor or field: reason".
#include "engine/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <cmath>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "engine/safetensors.h"
#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

using json = nlohmann::json;
using test::TempDir;

Qwen3Config small_config(bool tied) {
  Qwen3Config c;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 11;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e4;
  c.rotary_dim = 8;
  c.tie_word_embeddings = tied;
  c.dtype = "bfloat16";
  return c;
}

// Every tensor the config calls for, value k of tensor t = bf16-exact small numbers.
std::vector<TensorToWrite> tensors_for(const Qwen3Config& c) {
  std::vector<TensorToWrite> v;
  int t = 0;
  for (const ExpectedTensor& e : qwen3_expected_tensors(c)) {
    TensorToWrite w{e.name, Dtype::bf16, e.shape, {}, {}};
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    for (int64_t k = 0; k < n; ++k) w.values.push_back(static_cast<float>((k * 7 + t) % 19 - 9) / 16.0f);
    v.push_back(std::move(w));
    ++t;
  }
  return v;
}

void write_model(const std::string& dir, const json& config, const std::vector<TensorToWrite>& tensors) {
  std::filesystem::create_directories(dir);
  test::write_bytes(dir + "/config.json", config.dump());
  ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}}).ok);
}

json config_json(const Qwen3Config& c) { return json::parse(qwen3_config_json(c)); }

TEST(Checkpoint, ExpectedTensorsFollowTheConfig) {
  const Qwen3Config c = small_config(false);
  const auto e = qwen3_expected_tensors(c);
  ASSERT_EQ(e.size(), 1 + 11 * 2 + 2u);
  EXPECT_EQ(e.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(e.front().shape, (std::vector<int64_t>{11, 16}));
  EXPECT_EQ(e[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(e[2].shape, (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(e[3].shape, (std::vector<int64_t>{16, 16}));  // k_proj: 2 kv heads x 8
  EXPECT_EQ(e[5].shape, (std::vector<int64_t>{16, 32}));  // o_proj
  EXPECT_EQ(e[6].shape, (std::vector<int64_t>{8}));       // q_norm
  EXPECT_EQ(e[11].shape, (std::vector<int64_t>{16, 24}));  // down_proj
  EXPECT_EQ(e.back().name, "lm_head.weight");
  EXPECT_EQ(qwen3_expected_tensors(small_config(true)).back().name, "model.norm.weight");
}

TEST(Checkpoint, LoadsEveryTensorIntoItsSlot) {
  for (bool tied : {true, false}) {
    TempDir dir;
    const Qwen3Config c = small_config(tied);
    const auto ts = tensors_for(c);
    write_model(dir.str(), config_json(c), ts);
    Qwen3Weights w;
    const Status st = load_qwen3_checkpoint(dir.str(), &w);
    ASSERT_TRUE(st.ok) << st.message;
    EXPECT_EQ(w.config.hidden_size, 16);
    ASSERT_EQ(w.layers.size(), 2u);
    auto same = [&](const HostTensor& h, const std::string& name) {
      for (const auto& t : ts)
        if (t.name == name) {
          EXPECT_EQ(h.shape, t.shape) << name;
          EXPECT_EQ(h.data, t.values) << name;
          return;
        }
      ADD_FAILURE() << "no tensor " << name;
    };
    same(w.embed_tokens, "model.embed_tokens.weight");
    same(w.layers[1].q_proj, "model.layers.1.self_attn.q_proj.weight");
    same(w.layers[1].k_norm, "model.layers.1.self_attn.k_norm.weight");
    same(w.layers[0].down_proj, "model.layers.0.mlp.down_proj.weight");
    same(w.layers[0].post_attention_layernorm, "model.layers.0.post_attention_layernorm.weight");
    same(w.norm, "model.norm.weight");
    if (tied) {
      EXPECT_TRUE(w.lm_head.data.empty());
      EXPECT_EQ(&w.output_head(), &w.embed_tokens);
    } else {
      same(w.lm_head, "lm_head.weight");
      EXPECT_EQ(&w.output_head(), &w.lm_head);
    }
  }
}

TEST(Checkpoint, ByteLevelLoadRefusesAVocabTooSmallForTheByteTokenizer) {
  TempDir dir;
  Qwen3Config c = small_config(true);  // vocab 11
  write_model(dir.file("v11"), config_json(c), tensors_for(c));
  Qwen3Weights w;
  EXPECT_TRUE(load_qwen3_checkpoint(dir.file("v11"), &w).ok);  // a valid Qwen3 checkpoint ...
  Status st = load_byte_level_checkpoint(dir.file("v11"), &w);  // ... but not one the engine can tokenize for
  EXPECT_FALSE(st.ok);
  EXPECT_EQ(st.message,
            dir.file("v11") + "/config.json: vocab_size: 11 is not a byte-level model (256 bytes, <|bos|> 256, <|eos|> 257)");
  c.head_dim = c.rotary_dim = 32;  // what the kernels take
  for (int64_t v : {257, 258}) {
    c.vocab_size = v;
    const std::string d = dir.file("v" + std::to_string(v));
    write_model(d, config_json(c), tensors_for(c));
    st = load_byte_level_checkpoint(d, &w);
    EXPECT_EQ(st.ok, v >= 258) << v << ": " << st.message;
  }
  st = load_byte_level_checkpoint(dir.file("nope"), &w);  // load_qwen3_checkpoint's refusals pass through
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find(dir.file("nope")), std::string::npos) << st.message;
}

// Valid Qwen3 configs that the engine's kernels cannot run are refused at load, naming
// config.json and the field, before any weight is decoded (they used to load and then fail at
// the first forward as a backend error).
TEST(Checkpoint, ByteLevelLoadRefusesConfigsTheKernelsCannotRun) {
  TempDir dir;
  Qwen3Config ok = small_config(false);
  ok.vocab_size = 258;
  ok.head_dim = ok.rotary_dim = 32;
  struct Bad {
    std::string name, want;
    std::function<void(Qwen3Config&)> edit;
  };
  const std::vector<Bad> bad = {
      {"hd16", "head_dim: 16 is not supported by the engine's kernels (32, 64, 128 or 256)",
       [](Qwen3Config& c) { c.head_dim = c.rotary_dim = 16; }},
      {"hd48", "head_dim: 48 is not supported", [](Qwen3Config& c) { c.head_dim = c.rotary_dim = 48; }},
      {"gqa64", "num_attention_heads: 64 over 1 kv heads is not supported by the engine's kernels",
       [](Qwen3Config& c) {
         c.num_attention_heads = 64;
         c.num_key_value_heads = 1;
       }},
      {"gqa33", "num_attention_heads: 33 over 1 kv heads is not supported by the engine's kernels",  // the limit + 1
       [](Qwen3Config& c) {
         c.num_attention_heads = 33;
         c.num_key_value_heads = 1;
       }},
      {"pos2g", "max_position_embeddings: 2147483648 is more positions than the engine addresses",
       [](Qwen3Config& c) { c.max_position_embeddings = int64_t(1) << 31; }},
  };
  for (const Bad& b : bad) {
    Qwen3Config c = ok;
    b.edit(c);
    const std::string d = dir.file(b.name);
    write_model(d, config_json(c), tensors_for(c));
    Qwen3Weights w;
    EXPECT_TRUE(load_qwen3_checkpoint(d, &w).ok) << b.name;  // a valid Qwen3 checkpoint
    const Status st = load_byte_level_checkpoint(d, &w);
    EXPECT_FALSE(st.ok) << b.name;
    EXPECT_EQ(st.message.rfind(d + "/config.json: " + b.want, 0), 0u) << st.message;
    Model m;  // weights that bypass the loader meet the same check
    const Status mc = Model::create(w, ModelOptions{}, &m);
    EXPECT_FALSE(mc.ok) << b.name;
    EXPECT_NE(mc.message.find(b.want), std::string::npos) << mc.message;
  }
  for (int64_t hd : {32, 64, 128, 256}) {  // each supported head_dim loads, and 32 q heads per kv head
    Qwen3Config c = ok;
    c.head_dim = c.rotary_dim = hd;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 1;
    const std::string d = dir.file("hd" + std::to_string(hd));
    write_model(d, config_json(c), tensors_for(c));
    Qwen3Weights w;
    EXPECT_TRUE(load_byte_level_checkpoint(d, &w).ok) << hd;
  }
}

// The engine addresses positions up to 2^31 - 1: that many is taken, one more refused.
TEST(Checkpoint, EngineConfigTakesPositionsUpTo2To31Minus1) {
  Qwen3Config c = small_config(false);
  c.vocab_size = 258;
  c.head_dim = c.rotary_dim = 32;
  c.max_position_embeddings = std::numeric_limits<int32_t>::max();
  const Status ok = check_engine_config(c, "m/config.json");
  EXPECT_TRUE(ok.ok) << ok.message;
  c.max_position_embeddings += 1;
  const Status st = check_engine_config(c, "m/config.json");
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("max_position_embeddings: 2147483648 is more positions"), std::string::npos) << st.message;
}

TEST(Checkpoint, ShardedCheckpointLoadsTheSameWeights) {
  TempDir one, two;
  const Qwen3Config c = small_config(false);
  const auto ts = tensors_for(c);
  write_model(one.str(), config_json(c), ts);
  test::write_bytes(two.file("config.json"), config_json(c).dump());
  const size_t half = ts.size() / 2;
  std::vector<TensorToWrite> a(ts.begin(), ts.begin() + static_cast<long>(half)), b(ts.begin() + static_cast<long>(half), ts.end());
  ASSERT_TRUE(write_safetensors(two.file("model-00001-of-00002.safetensors"), a).ok);
  ASSERT_TRUE(write_safetensors(two.file("model-00002-of-00002.safetensors"), b).ok);
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (const auto& t : a) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  test::write_bytes(two.file("model.safetensors.index.json"), index.dump());
  Qwen3Weights w1, w2;
  ASSERT_TRUE(load_qwen3_checkpoint(one.str(), &w1).ok);
  const Status st = load_qwen3_checkpoint(two.str(), &w2);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(w1.embed_tokens.data, w2.embed_tokens.data);
  EXPECT_EQ(w1.layers[1].down_proj.data, w2.layers[1].down_proj.data);
  EXPECT_EQ(w1.lm_head.data, w2.lm_head.data);
}

// ---- Refusals.

struct BadModel {
  const char* what;
  std::function<void(json& config, std::vector<TensorToWrite>& tensors)> edit;
  std::string file;    // the file the message must start with, relative to the model dir
  std::string expect;  // what follows "file: "
};

TensorToWrite* find(std::vector<TensorToWrite>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(Checkpoint, RefusesEveryBadTensorAndConfigClassNamingFileTensorAndReason) {
  const std::vector<BadModel> cases = {
      {"wrong shape",
       [](json&, std::vector<TensorToWrite>& ts) {
         auto* t = find(ts, "model.layers.1.self_attn.q_proj.weight");
         t->shape = {16, 32};
       },
       "model.safetensors",
       "model.layers.1.self_attn.q_proj.weight: shape [16, 32], but config.json calls for "
       "[num_attention_heads * head_dim, hidden_size] = [32, 16]"},
      {"wrong rank",
       [](json&, std::vector<TensorToWrite>& ts) {
         auto* t = find(ts, "model.norm.weight");
         t->shape = {1, 16};
       },
       "model.safetensors", "model.norm.weight: shape [1, 16], but config.json calls for [hidden_size] = [16]"},
      {"missing tensor",
       [](json&, std::vector<TensorToWrite>& ts) {
         std::erase_if(ts, [](const TensorToWrite& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
       },
       "model.safetensors",
       "model.layers.1.mlp.up_proj.weight: missing (config.json calls for [intermediate_size, hidden_size] = [24, 16])"},
      {"missing lm_head when untied",
       [](json&, std::vector<TensorToWrite>& ts) {
         std::erase_if(ts, [](const TensorToWrite& t) { return t.name == "lm_head.weight"; });
       },
       "model.safetensors", "lm_head.weight: missing"},
      {"extra tensor",
       [](json&, std::vector<TensorToWrite>& ts) {
         ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", Dtype::bf16, {4}, {1, 2, 3, 4}, {}});
       },
       "model.safetensors",
       "model.layers.0.self_attn.rotary_emb.inv_freq: unexpected tensor (not part of a Qwen3ForCausalLM with 2 layers)"},
      {"extra layer",
       [](json& c, std::vector<TensorToWrite>&) { c["num_hidden_layers"] = 1; },
       "model.safetensors", "model.layers.1.input_layernorm.weight: unexpected tensor (not part of a Qwen3ForCausalLM with 1 layers)"},
      {"too few layers",
       [](json& c, std::vector<TensorToWrite>&) { c["num_hidden_layers"] = 3; },
       "model.safetensors", "model.layers.2.input_layernorm.weight: missing"},
      {"lm_head in a tied model",
       [](json& c, std::vector<TensorToWrite>&) { c["tie_word_embeddings"] = true; },
       "model.safetensors", "lm_head.weight: present, but config.json says tie_word_embeddings: true"},
      {"wrong dtype",
       [](json&, std::vector<TensorToWrite>& ts) { find(ts, "model.layers.0.self_attn.k_norm.weight")->dtype = Dtype::f32; },
       "model.safetensors", "model.layers.0.self_attn.k_norm.weight: dtype F32, but config.json says bfloat16 (BF16)"},
      // The last tensor expected (lm_head in an untied model) is checked as every other
      // (mutation sweep round 19, ckpt-last-tensor-unchecked: a transposed or F32 lm_head loaded).
      {"wrong lm_head dtype",
       [](json&, std::vector<TensorToWrite>& ts) { find(ts, "lm_head.weight")->dtype = Dtype::f32; },
       "model.safetensors", "lm_head.weight: dtype F32, but config.json says bfloat16 (BF16)"},
      {"transposed lm_head",
       [](json&, std::vector<TensorToWrite>& ts) { find(ts, "lm_head.weight")->shape = {16, 11}; },
       "model.safetensors", "lm_head.weight: shape [16, 11], but config.json calls for [vocab_size, hidden_size] = [11, 16]"},
      {"config dtype differs from every tensor",
       [](json& c, std::vector<TensorToWrite>&) {
         c["torch_dtype"] = "float16";
         c["dtype"] = "float16";
       },
       "model.safetensors", "model.embed_tokens.weight: dtype BF16, but config.json says float16 (F16)"},
      {"hidden_size disagrees with tensors",
       [](json& c, std::vector<TensorToWrite>&) { c["vocab_size"] = 12; },
       "model.safetensors", "model.embed_tokens.weight: shape [11, 16], but config.json calls for [vocab_size, hidden_size] = [12, 16]"},
      {"config field missing", [](json& c, std::vector<TensorToWrite>&) { c.erase("num_key_value_heads"); }, "config.json",
       "num_key_value_heads: missing"},
      {"config field ill-typed", [](json& c, std::vector<TensorToWrite>&) { c["rms_norm_eps"] = "small"; }, "config.json",
       "rms_norm_eps: expected a positive number, got a string"},
      {"config inconsistent", [](json& c, std::vector<TensorToWrite>&) { c["num_key_value_heads"] = 3; }, "config.json",
       "num_key_value_heads: 3 does not divide num_attention_heads 4"},
  };
  for (const BadModel& b : cases) {
    TempDir dir;
    json config = config_json(small_config(false));
    auto ts = tensors_for(small_config(false));
    b.edit(config, ts);
    write_model(dir.str(), config, ts);
    const std::string want = dir.file(b.file) + ": " + b.expect;
    Qwen3Config c;
    Status st = check_qwen3_checkpoint(dir.str(), &c);
    ASSERT_FALSE(st.ok) << b.what;
    EXPECT_NE(st.message.find(want), std::string::npos) << b.what << ": '" << st.message << "' lacks '" << want << "'";
    Qwen3Weights w;
    st = load_qwen3_checkpoint(dir.str(), &w);
    ASSERT_FALSE(st.ok) << b.what;
    EXPECT_NE(st.message.find(want), std::string::npos) << b.what << ": " << st.message;
  }
}

void expect_refused(const std::string& dir, const std::string& want) {
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(dir, &w);
  ASSERT_FALSE(st.ok) << want;
  EXPECT_NE(st.message.find(want), std::string::npos) << "'" << st.message << "' lacks '" << want << "'";
}

TEST(Checkpoint, RefusesMissingAndMalformedFiles) {
  const Qwen3Config c = small_config(true);
  {
    TempDir dir;
    expect_refused(dir.file("nope"), dir.file("nope") + ": (model directory): does not exist");
    test::write_bytes(dir.file("f"), "x");
    expect_refused(dir.file("f"), dir.file("f") + ": (model directory): not a directory");
  }
  {
    TempDir dir;
    ASSERT_TRUE(write_safetensors(dir.file("model.safetensors"), tensors_for(c)).ok);
    expect_refused(dir.str(), dir.file("config.json") + ": (file): cannot open: No such file");
  }
  {
    TempDir dir;
    test::write_bytes(dir.file("config.json"), config_json(c).dump());
    expect_refused(dir.str(), dir.str() + ": (model directory): neither model.safetensors nor model.safetensors.index.json exists");
  }
  {
    TempDir dir;
    write_model(dir.str(), config_json(c), tensors_for(c));
    test::write_bytes(dir.file("model.safetensors.index.json"), "{}");
    expect_refused(dir.str(), "holds both model.safetensors and model.safetensors.index.json");
  }
  {
    TempDir dir;  // truncated weights
    write_model(dir.str(), config_json(c), tensors_for(c));
    const std::string full = test::read_bytes(dir.file("model.safetensors"));
    test::write_bytes(dir.file("model.safetensors"), full.substr(0, full.size() - 10));
    expect_refused(dir.str(), dir.file("model.safetensors") + ": model.norm.weight: data_offsets: end");
    test::write_bytes(dir.file("model.safetensors"), full.substr(0, 5));
    expect_refused(dir.str(), dir.file("model.safetensors") + ": truncated: 5 bytes");
  }
  {
    TempDir dir;  // config.json not JSON
    write_model(dir.str(), config_json(c), tensors_for(c));
    test::write_bytes(dir.file("config.json"), "{\"hidden_size\": 16,");
    expect_refused(dir.str(), dir.file("config.json") + ": (file): not JSON");
  }
  {
    TempDir dir;  // config.json a folder: said so (it used to read as empty, "not JSON")
    write_model(dir.str(), config_json(c), tensors_for(c));
    std::filesystem::remove(dir.file("config.json"));
    std::filesystem::create_directory(dir.file("config.json"));
    expect_refused(dir.str(), dir.file("config.json") + ": (file): is a folder, not a file");
  }
  {
    TempDir dir;  // FIFOs are refused at once (an open would wait for a writer forever)
    write_model(dir.str(), config_json(c), tensors_for(c));
    std::filesystem::remove(dir.file("model.safetensors"));
    ASSERT_EQ(::mkfifo(dir.file("model.safetensors").c_str(), 0600), 0);
    expect_refused(dir.str(), dir.file("model.safetensors") + ": not a regular file");
    std::filesystem::remove(dir.file("config.json"));
    ASSERT_EQ(::mkfifo(dir.file("config.json").c_str(), 0600), 0);
    expect_refused(dir.str(), dir.file("config.json") + ": (file): not a regular file");
  }
}

TEST(Checkpoint, RefusesNonFiniteWeights) {
  const Qwen3Config c = small_config(true);
  auto shapes = tensors_for(c);
  const size_t last = find(shapes, "model.layers.1.self_attn.v_proj.weight")->values.size() - 1;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()})
    for (size_t at : {size_t(0), size_t(37), last}) {  // the tensor's first, an inner and its last element
      TempDir dir;
      auto ts = tensors_for(c);
      find(ts, "model.layers.1.self_attn.v_proj.weight")->values[at] = bad;
      write_model(dir.str(), config_json(c), ts);
      EXPECT_TRUE(check_qwen3_checkpoint(dir.str()).ok) << "headers alone are fine";
      expect_refused(dir.str(), dir.file("model.safetensors") + ": model.layers.1.self_attn.v_proj.weight: element " +
                                    std::to_string(at) + " is " + (std::isnan(bad) ? "NaN" : "infinite") +
                                    " (weights must be finite)");
    }
}

TEST(Checkpoint, RefusesBadShardIndexes) {
  const Qwen3Config c = small_config(true);
  const auto ts = tensors_for(c);
  const std::string shard = "model-00001-of-00001.safetensors";
  auto setup = [&](TempDir& dir, const std::vector<TensorToWrite>& in_shard, const json& index) {
    test::write_bytes(dir.file("config.json"), config_json(c).dump());
    ASSERT_TRUE(write_safetensors(dir.file(shard), in_shard).ok);
    test::write_bytes(dir.file("model.safetensors.index.json"), index.dump());
  };
  json good = {{"weight_map", json::object()}};
  for (const auto& t : ts) good["weight_map"][t.name] = shard;
  const std::string idx = "model.safetensors.index.json";
  {
    TempDir dir;
    setup(dir, ts, good);
    Qwen3Weights w;
    const Status st = load_qwen3_checkpoint(dir.str(), &w);
    ASSERT_TRUE(st.ok) << st.message;
  }
  {
    TempDir dir;  // a tensor of the shard is not in the map
    json j = good;
    j["weight_map"].erase("model.norm.weight");
    setup(dir, ts, j);
    expect_refused(dir.str(), dir.file(shard) + ": model.norm.weight: not listed in the weight_map of " + dir.file(idx));
  }
  {
    TempDir dir;  // the map lists a tensor the shard lacks
    json j = good;
    j["weight_map"]["model.layers.9.mlp.up_proj.weight"] = shard;
    setup(dir, ts, j);
    expect_refused(dir.str(), dir.file(idx) + ": weight_map.model.layers.9.mlp.up_proj.weight: " + shard +
                                  " holds no such tensor");
  }
  {
    TempDir dir;  // a tensor stored in two shards: the one the map does not name refuses it
    const std::string second = "model-00002-of-00002.safetensors";
    json j = good;
    j["weight_map"]["model.norm.weight"] = second;
    setup(dir, ts, j);
    const TensorToWrite* norm = nullptr;
    for (const auto& t : ts)
      if (t.name == "model.norm.weight") norm = &t;
    ASSERT_NE(norm, nullptr);
    ASSERT_TRUE(write_safetensors(dir.file(second), {*norm}).ok);
    expect_refused(dir.str(), dir.file(shard) + ": model.norm.weight: the weight_map places it in " + second);
  }
  {
    TempDir dir;  // the map names a shard that does not exist
    json j = good;
    j["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
    setup(dir, ts, j);
    expect_refused(dir.str(), dir.file("model-00002-of-00002.safetensors") + ": cannot open: No such file");
  }
  {
    TempDir dir;  // a shard outside the directory
    json j = good;
    j["weight_map"]["model.norm.weight"] = "../other.safetensors";
    setup(dir, ts, j);
    expect_refused(dir.str(), dir.file(idx) + ": weight_map.model.norm.weight: '../other.safetensors' is not a file name");
  }
  {
    TempDir dir;
    setup(dir, ts, json{{"metadata", json::object()}});
    expect_refused(dir.str(), dir.file(idx) + ": weight_map: missing");
  }
  {
    TempDir dir;
    json j = good;
    j["weight_map"]["model.norm.weight"] = 3;
    setup(dir, ts, j);
    expect_refused(dir.str(), dir.file(idx) + ": weight_map.model.norm.weight: expected a string, got a number");
  }
  {
    TempDir dir;
    setup(dir, ts, good);
    test::write_bytes(dir.file(idx), "not json");
    expect_refused(dir.str(), dir.file(idx) + ": (file): not JSON");
  }
  {
    TempDir dir;  // sharded, but a tensor the config needs is in no shard
    json j = good;
    j["weight_map"].erase("model.layers.0.mlp.gate_proj.weight");
    std::vector<TensorToWrite> fewer;
    for (const auto& t : ts)
      if (t.name != "model.layers.0.mlp.gate_proj.weight") fewer.push_back(t);
    setup(dir, fewer, j);
    expect_refused(dir.str(), dir.file(idx) + ": model.layers.0.mlp.gate_proj.weight: missing");
  }
}

// The one rule for a weight_map value, shared by the loader and the kv gate's checkpoint hash:
// a plain file name in the model directory, whatever its extension.
TEST(Checkpoint, ShardFileNameRule) {
  for (const char* ok : {"model-00001-of-00002.safetensors", "shard.bin", "a", ".hidden", "..x", "x.."})
    EXPECT_TRUE(is_shard_file_name(ok)) << ok;
  for (const char* bad : {"", ".", "..", "sub/x.safetensors", "/abs", "x/", "../m.safetensors"})
    EXPECT_FALSE(is_shard_file_name(bad)) << bad;
}

}  // namespace
}  // namespace kc::engine
