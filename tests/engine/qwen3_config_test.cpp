// engine/qwen3_config: what a Qwen3ForCausalLM config.json must hold, and every refusal.
#include "engine/qwen3_config.h"

#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

using json = nlohmann::json;

// A config as transformers 4.x saves a small Qwen3 (rope_theta at the top level).
json good_config() {
  return json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "vocab_size": 260, "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "rope_scaling": null, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "hidden_act": "silu", "attention_bias": false,
    "use_sliding_window": false, "sliding_window": null})");
}

Status parse(const json& j, Qwen3Config* c) { return parse_qwen3_config(j.dump(), "m/config.json", c); }

TEST(Qwen3Config, ReadsAGoodConfig) {
  Qwen3Config c;
  const Status st = parse(good_config(), &c);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.intermediate_size, 384);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.vocab_size, 260);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_EQ(c.rotary_dim, 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.q_dim(), 128);
  EXPECT_EQ(c.kv_dim(), 64);
  EXPECT_EQ(c.group_size(), 2);
}

TEST(Qwen3Config, Transformers5Layout) {
  // transformers 5: rope_theta (and partial_rotary_factor) under rope_parameters, `dtype`.
  json j = good_config();
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}, {"partial_rotary_factor", 0.25}};
  j["dtype"] = "float16";
  Qwen3Config c;
  const Status st = parse(j, &c);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_EQ(c.dtype, "float16");
}

TEST(Qwen3Config, RopeThetaUnderRopeScalingAndDefaults) {
  json j = good_config();
  j.erase("rope_theta");
  j["rope_scaling"] = {{"type", "default"}, {"rope_theta", 5e5}};
  j.erase("head_dim");  // default hidden / heads
  j["partial_rotary_factor"] = 0.5;
  Qwen3Config c;
  const Status st = parse(j, &c);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rotary_dim, 16);
  j["head_dim"] = nullptr;
  ASSERT_TRUE(parse(j, &c).ok);
  EXPECT_EQ(c.head_dim, 32);
}

TEST(Qwen3Config, WriterOutputReadsBack) {
  Qwen3Config c;
  ASSERT_TRUE(parse(good_config(), &c).ok);
  c.partial_rotary_factor = 0.25;
  c.rotary_dim = 8;
  c.tie_word_embeddings = false;
  Qwen3Config back;
  const Status st = parse_qwen3_config(qwen3_config_json(c), "w", &back);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(back.rotary_dim, 8);
  EXPECT_FALSE(back.tie_word_embeddings);
  EXPECT_EQ(back.rope_theta, c.rope_theta);
  EXPECT_EQ(back.rms_norm_eps, c.rms_norm_eps);
}

struct Bad {
  const char* what;
  std::function<void(json&)> edit;
  std::string expect;  // after "m/config.json: "
};

TEST(Qwen3Config, RefusesEveryMissingIllTypedOrInconsistentFieldByName) {
  std::vector<Bad> cases;
  for (const char* f : {"architectures", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                        "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps",
                        "tie_word_embeddings"})
    cases.push_back({f, [f](json& j) { j.erase(f); }, std::string(f) + ": missing"});
  cases.push_back({"no rope_theta anywhere", [](json& j) { j.erase("rope_theta"); },
                   "rope_theta: missing (looked at the top level, rope_parameters and rope_scaling)"});
  cases.push_back({"no dtype", [](json& j) { j.erase("torch_dtype"); }, "dtype: missing"});
  // Ill-typed.
  cases.push_back({"size as string", [](json& j) { j["hidden_size"] = "128"; },
                   "hidden_size: expected a positive integer, got a string"});
  cases.push_back({"size fractional", [](json& j) { j["intermediate_size"] = 384.5; },
                   "intermediate_size: expected a positive integer, got a non-integer number"});
  // A whole number written as a float is refused too, and the message says so (it used to call
  // 4096.0 "a non-integer number").
  cases.push_back({"size as float", [](json& j) { j["max_position_embeddings"] = 4096.0; },
                   "max_position_embeddings: expected a positive integer, got 4096.0, a whole number written as a float"});
  cases.push_back({"size zero", [](json& j) { j["num_hidden_layers"] = 0; },
                   "num_hidden_layers: expected a positive integer, got 0"});
  cases.push_back({"size negative", [](json& j) { j["vocab_size"] = -5; }, "vocab_size: expected a positive integer, got -5"});
  cases.push_back({"size huge", [](json& j) { j["vocab_size"] = 1ull << 40; }, "vocab_size: 1099511627776 is larger than"});
  cases.push_back({"head_dim string", [](json& j) { j["head_dim"] = "32"; }, "head_dim: expected a positive integer, got a string"});
  cases.push_back({"eps string", [](json& j) { j["rms_norm_eps"] = "1e-6"; }, "rms_norm_eps: expected a positive number, got a string"});
  cases.push_back({"eps zero", [](json& j) { j["rms_norm_eps"] = 0; }, "rms_norm_eps: expected a positive number, got 0"});
  cases.push_back({"eps past float", [](json& j) { j["rms_norm_eps"] = 3.5e38; },
                   "rms_norm_eps: 3.5e+38 is past the largest float (the norm's eps is a float)"});
  cases.push_back({"theta negative", [](json& j) { j["rope_theta"] = -1.0; }, "rope_theta: expected a positive number, got -1.0"});
  cases.push_back({"tie as int", [](json& j) { j["tie_word_embeddings"] = 1; },
                   "tie_word_embeddings: expected a boolean, got an integer"});
  cases.push_back({"dtype unknown", [](json& j) { j["torch_dtype"] = "int8"; },
                   "torch_dtype: 'int8' is not one of bfloat16, float16, float32"});
  cases.push_back({"dtype not string", [](json& j) { j["torch_dtype"] = 16; }, "torch_dtype: expected a string, got an integer"});
  cases.push_back({"dtype disagree", [](json& j) { j["dtype"] = "float32"; },
                   "dtype: 'float32' disagrees with torch_dtype 'bfloat16'"});
  cases.push_back({"architectures string", [](json& j) { j["architectures"] = "Qwen3ForCausalLM"; },
                   "architectures: expected an array, got a string"});
  cases.push_back({"architectures other", [](json& j) { j["architectures"] = {"LlamaForCausalLM"}; },
                   "architectures: [\"LlamaForCausalLM\"] does not name Qwen3ForCausalLM"});
  cases.push_back({"architectures element", [](json& j) { j["architectures"] = {1}; },
                   "architectures[0]: expected a string, got an integer"});
  cases.push_back({"model_type", [](json& j) { j["model_type"] = "llama"; }, "model_type: \"llama\" is not \"qwen3\""});
  cases.push_back({"rope_parameters type", [](json& j) { j["rope_parameters"] = 3; },
                   "rope_parameters: expected an object or null, got an integer"});
  cases.push_back({"rope scaled", [](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
                   "rope_scaling.rope_type: 'yarn' is not supported (only \"default\" RoPE)"});
  cases.push_back({"theta disagree", [](json& j) { j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}}; },
                   "rope_parameters.rope_theta: 10000 disagrees with rope_theta 1000000"});
  cases.push_back({"hidden_act", [](json& j) { j["hidden_act"] = "gelu"; }, "hidden_act: \"gelu\" is not supported"});
  cases.push_back({"attention_bias", [](json& j) { j["attention_bias"] = true; }, "attention_bias: true is not supported"});
  cases.push_back({"sliding window", [](json& j) { j["use_sliding_window"] = true; }, "use_sliding_window: true is not supported"});
  cases.push_back({"layer types", [](json& j) { j["layer_types"] = {"full_attention", "sliding_attention"}; },
                   "layer_types[1]: \"sliding_attention\" is not supported"});
  cases.push_back({"layer types first", [](json& j) { j["layer_types"] = {"sliding_attention", "full_attention"}; },
                   "layer_types[0]: \"sliding_attention\" is not supported"});
  // Inconsistent.
  cases.push_back({"kv heads", [](json& j) { j["num_key_value_heads"] = 3; },
                   "num_key_value_heads: 3 does not divide num_attention_heads 4"});
  cases.push_back({"head_dim odd", [](json& j) { j["head_dim"] = 33; }, "head_dim: 33 is odd (RoPE rotates pairs)"});
  cases.push_back({"no head_dim, not divisible",
                   [](json& j) {
                     j.erase("head_dim");
                     j["hidden_size"] = 130;
                   },
                   "head_dim: missing, and hidden_size 130 is not divisible by num_attention_heads 4"});
  cases.push_back({"rotary not integer", [](json& j) { j["partial_rotary_factor"] = 0.3; },
                   "partial_rotary_factor: 0.300000 * head_dim 32 is not an integer number of rotary dims"});
  cases.push_back({"rotary odd",
                   [](json& j) {
                     j["head_dim"] = 34;
                     j["partial_rotary_factor"] = 0.5;
                   },
                   "partial_rotary_factor: gives 17 rotary dims, an odd number"});
  cases.push_back({"rotary above 1", [](json& j) { j["partial_rotary_factor"] = 1.5; },
                   "partial_rotary_factor: 1.500000 is not in (0, 1]"});
  cases.push_back({"rotary zero", [](json& j) { j["partial_rotary_factor"] = 0; },
                   "partial_rotary_factor: expected a positive number, got 0"});
  cases.push_back({"rotary disagree", [](json& j) { j["rope_parameters"] = {{"partial_rotary_factor", 0.5}, {"rope_theta", 1e6}}; j["partial_rotary_factor"] = 0.25; },
                   "rope_parameters.partial_rotary_factor: 0.5 disagrees with partial_rotary_factor 0.25"});
  cases.push_back({"tensor too large", [](json& j) { j["vocab_size"] = 1 << 30; j["hidden_size"] = 1 << 12; j.erase("head_dim"); },
                   "vocab_size: makes a tensor of more than 2^40 elements"});

  for (const Bad& b : cases) {
    json j = good_config();
    b.edit(j);
    Qwen3Config c;
    const Status st = parse(j, &c);
    ASSERT_FALSE(st.ok) << b.what;
    EXPECT_NE(st.message.find("m/config.json: " + b.expect), std::string::npos)
        << b.what << ": '" << st.message << "' lacks 'm/config.json: " << b.expect << "'";
  }
}

// architectures names the model when any of its entries is Qwen3ForCausalLM, first or last.
TEST(Qwen3Config, ArchitecturesNameQwen3AnywhereInTheList) {
  for (const json& a : {json{"Qwen3ForCausalLM", "Qwen3Model"}, json{"Qwen3Model", "Qwen3ForCausalLM"}}) {
    json j = good_config();
    j["architectures"] = a;
    Qwen3Config c;
    const Status st = parse(j, &c);
    EXPECT_TRUE(st.ok) << a.dump() << ": " << st.message;
  }
  json j = good_config();
  j["architectures"] = {"Qwen3Model", "LlamaForCausalLM"};
  Qwen3Config c;
  EXPECT_FALSE(parse(j, &c).ok);
}

// The layer limit (4096): 4096 layers read, 4097 are refused by name.
TEST(Qwen3Config, LayerLimitIsInclusive) {
  json j = good_config();
  j["num_hidden_layers"] = 4096;
  Qwen3Config c;
  const Status ok = parse(j, &c);
  ASSERT_TRUE(ok.ok) << ok.message;
  EXPECT_EQ(c.num_hidden_layers, 4096);
  j["num_hidden_layers"] = 4097;
  const Status st = parse(j, &c);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("m/config.json: num_hidden_layers: 4097 is more than 4096"), std::string::npos) << st.message;
}

TEST(Qwen3Config, RefusesFilesThatAreNotConfigs) {
  Qwen3Config c;
  Status st = parse_qwen3_config("{\"hidden_size\": ", "m/config.json", &c);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("m/config.json: (file): not JSON"), std::string::npos) << st.message;
  st = parse_qwen3_config("[1]", "m/config.json", &c);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("m/config.json: (top level): expected an object, got an array"), std::string::npos) << st.message;
  // A repeated key is refused by name (plain parsing kept the last value: 128 then 64 read 64).
  st = parse_qwen3_config("{\"hidden_size\": 128, \"hidden_size\": 64}", "m/config.json", &c);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("m/config.json: hidden_size: appears twice"), std::string::npos) << st.message;
  test::TempDir dir;
  st = read_qwen3_config(dir.file("config.json"), &c);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find(dir.file("config.json") + ": (file): cannot open: No such file"), std::string::npos)
      << st.message;
  test::write_bytes(dir.file("config.json"), good_config().dump());
  st = read_qwen3_config(dir.file("config.json"), &c);
  EXPECT_TRUE(st.ok) << st.message;
}

}  // namespace
}  // namespace kc::engine
