// engine/make_model: both presets write checkpoints that load and pass validation,
// deterministically from the seed, with weights at the promised scale.
#include "engine/make_model.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <sstream>

#include "engine/checkpoint.h"
#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

using test::TempDir;

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST(MakeModel, TinyLoadsAndPassesValidation) {
  TempDir dir;
  const std::string out_dir = dir.file("tiny");
  std::ostringstream out, err;
  ASSERT_EQ(make_model_command("tiny", 0, 7, out_dir, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  EXPECT_NE(out.str().find("make-model: wrote " + out_dir + " (preset tiny, 2 layers, seed 7,"), std::string::npos)
      << out.str();
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(out_dir, &w);
  ASSERT_TRUE(st.ok) << st.message;
  const Qwen3Config& c = w.config;
  EXPECT_EQ(c.vocab_size, 260);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.rotary_dim, 32);
  EXPECT_EQ(c.intermediate_size, 384);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.dtype, "bfloat16");
  // Scales: linear weights with std 1/sqrt(in), norm weights in [0.75, 1.25].
  EXPECT_NEAR(rms(w.layers[0].q_proj.data) * std::sqrt(128.0), 1.0, 0.05);
  EXPECT_NEAR(rms(w.layers[1].down_proj.data) * std::sqrt(384.0), 1.0, 0.05);
  EXPECT_NEAR(rms(w.embed_tokens.data) * std::sqrt(128.0), 1.0, 0.05);
  for (const HostTensor* t : {&w.layers[0].input_layernorm, &w.layers[1].q_norm, &w.norm})
    for (float x : t->data) {
      ASSERT_GE(x, 0.75f);
      ASSERT_LE(x, 1.25f);
    }
  // Every value is bf16 (the low 16 bits of its fp32 pattern are zero).
  for (float x : w.layers[0].k_proj.data) ASSERT_EQ(std::bit_cast<uint32_t>(x) & 0xFFFFu, 0u);
}

TEST(MakeModel, DeterministicFromTheSeedAndPerTensor) {
  TempDir dir;
  std::ostringstream out, err;
  ASSERT_EQ(make_model_command("tiny", 2, 11, dir.file("a"), out, err), 0) << err.str();
  ASSERT_EQ(make_model_command("tiny", 2, 11, dir.file("b"), out, err), 0) << err.str();
  ASSERT_EQ(make_model_command("tiny", 2, 12, dir.file("c"), out, err), 0) << err.str();
  ASSERT_EQ(make_model_command("tiny", 3, 11, dir.file("d"), out, err), 0) << err.str();
  EXPECT_EQ(test::read_bytes(dir.file("a/model.safetensors")), test::read_bytes(dir.file("b/model.safetensors")));
  EXPECT_EQ(test::read_bytes(dir.file("a/config.json")), test::read_bytes(dir.file("b/config.json")));
  EXPECT_NE(test::read_bytes(dir.file("a/model.safetensors")), test::read_bytes(dir.file("c/model.safetensors")));
  Qwen3Weights a, d;
  ASSERT_TRUE(load_qwen3_checkpoint(dir.file("a"), &a).ok);
  ASSERT_TRUE(load_qwen3_checkpoint(dir.file("d"), &d).ok);
  EXPECT_EQ(d.layers.size(), 3u);
  EXPECT_EQ(a.layers[1].gate_proj.data, d.layers[1].gate_proj.data) << "a layer's weights do not depend on the layer count";
  EXPECT_EQ(a.embed_tokens.data, d.embed_tokens.data);
  EXPECT_NE(a.layers[0].gate_proj.data, a.layers[1].gate_proj.data);
}

TEST(MakeModel, Qwen35AttentionPresetOneLayerLoadsAndPassesValidation) {
  TempDir dir;
  const std::string out_dir = dir.file("q27");
  std::ostringstream out, err;
  ASSERT_EQ(make_model_command("qwen35-27b-attn", 1, 3, out_dir, out, err), 0) << err.str();
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(out_dir, &w);
  ASSERT_TRUE(st.ok) << st.message;
  const Qwen3Config& c = w.config;
  EXPECT_EQ(c.num_hidden_layers, 1);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1024);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(w.layers[0].q_proj.shape, (std::vector<int64_t>{24 * 256, 5120}));
  EXPECT_EQ(w.layers[0].k_proj.shape, (std::vector<int64_t>{4 * 256, 5120}));
  EXPECT_EQ(w.layers[0].o_proj.shape, (std::vector<int64_t>{5120, 24 * 256}));
  EXPECT_EQ(w.lm_head.shape, (std::vector<int64_t>{260, 5120}));
  EXPECT_NEAR(rms(w.layers[0].o_proj.data) * std::sqrt(6144.0), 1.0, 0.02);
}

TEST(MakeModel, RefusesBadArgumentsWithExit2) {
  TempDir dir;
  struct Case {
    std::string preset;
    int layers;
    std::string out;
    std::string expect;
  };
  test::write_bytes(dir.file("a-file"), "x");
  std::filesystem::create_directories(dir.file("full"));
  test::write_bytes(dir.file("full/keep.txt"), "mine");
  const std::vector<Case> cases = {
      {"huge", 1, dir.file("m1"), "make-model: --preset: 'huge' is not a preset (known: tiny, qwen35-27b-attn)"},
      {"tiny", -1, dir.file("m2"), "make-model: --layers: -1 is not in 1..64"},
      {"tiny", 65, dir.file("m3"), "make-model: --layers: 65 is not in 1..64"},
      {"tiny", 1, "", "make-model: --out: a directory is required"},
      {"tiny", 1, dir.file("a-file"), "make-model: " + dir.file("a-file") + ": (output directory): exists and is not a directory"},
      {"tiny", 1, dir.file("full"), "make-model: " + dir.file("full") + ": (output directory): exists and is not empty"},
  };
  for (const Case& c : cases) {
    std::ostringstream out, err;
    EXPECT_EQ(make_model_command(c.preset, c.layers, 1, c.out, out, err), 2) << c.expect;
    EXPECT_NE(err.str().find(c.expect), std::string::npos) << "'" << err.str() << "' lacks '" << c.expect << "'";
    EXPECT_EQ(out.str(), "");
  }
  EXPECT_EQ(test::read_bytes(dir.file("full/keep.txt")), "mine") << "a refused directory is left alone";
}

// --layers: 1..64, the range the refusal names (0 takes the preset's default of 2); both ends
// are accepted by every preset.
TEST(MakeModel, LayersFromOneTo64AreAccepted) {
  for (const std::string& preset : qwen3_preset_names())
    for (const auto& [layers, want] : std::vector<std::pair<int, int64_t>>{{1, 1}, {64, 64}, {0, 2}}) {
      Qwen3Config c;
      const Status st = qwen3_preset(preset, layers, &c);
      EXPECT_TRUE(st.ok) << preset << " --layers " << layers << ": " << st.message;
      EXPECT_EQ(c.num_hidden_layers, want) << preset << " --layers " << layers;
    }
  Qwen3Config c;
  EXPECT_EQ(qwen3_preset("tiny", 65, &c).message, "--layers: 65 is not in 1..64 (0 takes the preset's default)");
}

// A write that fails part way (here: a file-size limit lets config.json through and stops
// model.safetensors) leaves nothing behind: not the files, not the folders the command made,
// so the same command can simply be run again. An existing empty folder stays (emptied).
TEST(MakeModel, AFailedWriteLeavesNothingHalfWritten) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("empty"));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto prev = std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG
  rlimit low = old;
  low.rlim_cur = 64 * 1024;  // config.json fits, the tiny preset's ~1.4 MB of weights do not
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  std::ostringstream out1, err1, out2, err2;
  const int rc1 = make_model_command("tiny", 1, 1, dir.file("new/a/b"), out1, err1);
  const int rc2 = make_model_command("tiny", 1, 1, dir.file("empty"), out2, err2);
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, prev);
  EXPECT_EQ(rc1, 2) << err1.str();
  EXPECT_NE(err1.str().find("model.safetensors"), std::string::npos) << err1.str();
  EXPECT_FALSE(std::filesystem::exists(dir.file("new"))) << "the folders make-model created are removed";
  EXPECT_EQ(rc2, 2) << err2.str();
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("empty")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("empty"))) << "what make-model wrote is removed";
  std::ostringstream out3, err3;  // and the command runs again, to completion
  EXPECT_EQ(make_model_command("tiny", 1, 1, dir.file("new/a/b"), out3, err3), 0) << err3.str();
  Qwen3Config back;
  EXPECT_TRUE(check_qwen3_checkpoint(dir.file("new/a/b"), &back).ok);
}

}  // namespace
}  // namespace kc::engine
