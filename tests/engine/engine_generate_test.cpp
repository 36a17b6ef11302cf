// Greedy decoding on the fixture model (cpu backend): batch invariance (a prompt decoded
// alone and inside a batch of 8 mixed prompts on paged and window lanes gives the same
// token ids and the same logits bytes; paged == window), determinism of `generate`, and
// bad input refused with exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "tools/receipt_views.h"
#include "tests/engine/fixture_generate.h"
#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

using test::fixture_model;
using test::load_fixture;
using test::run_one;
using test::same_bytes;

std::string text_at(size_t off, size_t n) {
  std::ifstream f(std::string(KC_SOURCE_DIR) + "/fixtures/text/sched.py.head", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s.substr(off, n);
}

TEST(EngineGenerate, AloneEqualsInsideABatchOfEightAndPagedEqualsWindow) {
  auto cpu = make_cpu_backend();
  constexpr int kTokens = 10;
  const std::vector<int32_t> target = encode_prompt(text_at(0, 21));
  // Alone: on a window, on pages of 16 and of 7 (prefill chunk 64: one chunk).
  const GenerateResult window = run_one(*cpu, {target, kTokens, 0}, 64);
  const GenerateResult paged16 = run_one(*cpu, {target, kTokens, 16}, 64);
  const GenerateResult paged7 = run_one(*cpu, {target, kTokens, 7}, 64);
  ASSERT_EQ(window.tokens.size(), size_t(kTokens));
  EXPECT_TRUE(same_bytes(window, paged16)) << "pages of 16 != window";
  EXPECT_TRUE(same_bytes(window, paged7)) << "pages of 7 != window";

  // Inside a batch of 8 different prompts (lengths 2..34 tokens, different max_tokens so
  // lanes leave the batch at different steps), lanes on windows and on pages of 16 and 7
  // interleaved in one arena, prefill in chunks of 5 rows per lane.
  std::vector<GenerateRequest> batch = {
      {encode_prompt(text_at(100, 33)), 6, 16}, {encode_prompt("d"), kTokens + 2, 0},
      {encode_prompt(text_at(300, 12)), 3, 7},  {target, kTokens, 7},
      {encode_prompt(text_at(50, 5)), 8, 0},    {encode_prompt(text_at(200, 27)), 4, 16},
      {encode_prompt("import "), 9, 7},         {encode_prompt(text_at(10, 17)), 11, 16}};
  GenerateOptions o;
  o.keep_logits = true;
  o.prefill_chunk = 5;
  std::vector<GenerateResult> out;
  GenerateStats stats;
  Status st = generate(fixture_model(), *cpu, batch, o, &out, &stats);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_TRUE(same_bytes(window, out[3])) << "the prompt inside the batch differs from the prompt alone";
  // Another lane: a window lane alone on pages of 7 equals its batch bytes.
  EXPECT_TRUE(same_bytes(run_one(*cpu, {batch[1].prompt, batch[1].max_tokens, 7}, 64), out[1]));
  std::cout << "batch of 8: " << stats.decode_steps << " decode steps, " << stats.decode_tokens << " decode tokens, cache "
            << stats.cache_bytes << " bytes; target continuation '" << decode_bytes(window.tokens) << "'\n";

  // Control: attention whose chunk depends on the batch size (a test-only plant in the
  // model) changes the target's bytes.
  ModelOptions planted;
  planted.plant_batch_dependent_chunk = true;
  std::vector<GenerateResult> bad;
  st = generate(load_fixture(planted), *cpu, batch, o, &bad);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_FALSE(same_bytes(window, bad[3])) << "control: a batch-dependent split-K stayed byte-equal";
}

// The engine decodes with an mxfp4 KV cache (E2M1 codes and an E8M0 exponent per 32
// elements of every rotated k and v row): the continuation is the same bytes on a window,
// on pages of 7 and with the prompt prefilled in chunks of 5; the cache is mxfp4's size
// (d/2 + d/32 bytes a row against bf16's 2d); the first token (same prompt, no generated
// keys yet) equals the bf16 cache's. Control: the bf16 cache's logits are not the same
// bytes (the format is in effect, not silently bf16).
TEST(EngineGenerate, Mxfp4CacheDecodes) {
  auto cpu = make_cpu_backend();
  ModelOptions mo;
  mo.kv_format = Format::mxfp4;
  const Model mx = load_fixture(mo);
  ASSERT_EQ(mx.kv_layout().format, Format::mxfp4);
  constexpr int kTokens = 12;
  const std::vector<int32_t> target = encode_prompt(text_at(0, 21));
  auto gen = [&](const Model& m, int32_t page, int chunk, GenerateStats* stats) {
    std::vector<GenerateResult> out;
    GenerateOptions o;
    o.keep_logits = true;
    o.prefill_chunk = chunk;
    const Status st = generate(m, *cpu, {{target, kTokens, page}}, o, &out, stats);
    EXPECT_TRUE(st.ok) << st.message;
    return out.empty() ? GenerateResult{} : out[0];
  };
  GenerateStats mstats, bstats;
  const GenerateResult window = gen(mx, 0, 64, &mstats);
  ASSERT_EQ(window.tokens.size(), size_t(kTokens));
  for (const auto& row : window.logits)
    for (float x : row) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(same_bytes(window, gen(mx, 7, 64, nullptr))) << "mxfp4: pages of 7 != window";
  EXPECT_TRUE(same_bytes(window, gen(mx, 0, 5, nullptr))) << "mxfp4: prefill in chunks of 5 != one chunk";
  const GenerateResult bf = gen(fixture_model(), 0, 64, &bstats);
  const KvLayout lay = mx.kv_layout();
  EXPECT_EQ(lay.code_bytes, uint32_t(lay.head_dim / 2));
  EXPECT_EQ(lay.scale_bytes, uint32_t(lay.head_dim / 32));
  EXPECT_LT(mstats.cache_bytes * 3, bstats.cache_bytes) << "the mxfp4 cache is not smaller than a third of bf16's";
  ASSERT_FALSE(bf.tokens.empty());
  EXPECT_EQ(window.tokens[0], bf.tokens[0]);
  EXPECT_FALSE(same_bytes(window, bf)) << "control: the mxfp4 cache gave bf16's bytes";
  size_t agree = 0;
  while (agree < std::min(window.tokens.size(), bf.tokens.size()) && window.tokens[agree] == bf.tokens[agree]) ++agree;
  std::cout << "mxfp4 cache: '" << decode_bytes(window.tokens) << "' (bf16: '" << decode_bytes(bf.tokens) << "', "
            << agree << " leading tokens equal); cache " << mstats.cache_bytes << " bytes (bf16 " << bstats.cache_bytes
            << ")\n";
}

TEST(EngineGenerate, GreedyDefMainIsDeterministic) {
  auto cpu = make_cpu_backend();
  const GenerateRequest r{encode_prompt("def main("), 32, 0};
  std::vector<GenerateResult> a, b;
  ASSERT_TRUE(generate(fixture_model(), *cpu, {r}, {}, &a).ok);
  ASSERT_TRUE(generate(fixture_model(), *cpu, {r}, {}, &b).ok);
  ASSERT_FALSE(a[0].tokens.empty());
  EXPECT_EQ(a[0].tokens, b[0].tokens);
  EXPECT_TRUE(a[0].stopped_at_eos || a[0].tokens.size() == 32u);
  std::cout << "def main(" << decode_bytes(a[0].tokens) << "\n";
}

TEST(EngineGenerate, CommandPrintsAndWritesItsResult) {
  test::TempDir dir;
  GenerateCommand cmd;
  cmd.model_dir = test::fixture_dir();
  cmd.prompt = "def main(";
  cmd.prompt_given = true;
  cmd.max_tokens = 4;
  cmd.kv_cache = "fp8";
  cmd.pages = 3;
  cmd.out_file = dir.file("sub/result.json");
  std::ostringstream out, err;
  ASSERT_EQ(generate_command(cmd, out, err), 0) << err.str();
  // A receipt of kind generate that report reads back and renders.
  nlohmann::json r;
  const Status st = Receipt::load(cmd.out_file, &r);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(r["kind"], "generate");
  EXPECT_EQ(r["verdict"], "pass");
  const nlohmann::json& g = r["generate"];
  EXPECT_EQ(g["kv_cache"], "fp8");
  EXPECT_EQ(g["pages"], 3);
  EXPECT_TRUE(g["stopped_at_eos"].get<bool>() || g["tokens"].size() == 4u);
  EXPECT_EQ(g["prompt_tokens"].size(), 10u);  // <|eos|> + "def main("
  EXPECT_EQ(g["checkpoint_sha256"].get<std::string>().size(), 64u);
  EXPECT_GT(g["cache_bytes"].get<int64_t>(), 0);
  EXPECT_GT(g["time_to_first_token_s"].get<double>(), 0.0);
  const std::string md = render_receipt(Receipt(r), cmd.out_file, ViewFormat::md);
  EXPECT_NE(md.find("| kv cache | fp8, pages of 3 |"), std::string::npos) << md;
}

// A prompt token must be an id of the vocabulary: vocab_size (one past the last) and -1 are
// refused by name before any forward; vocab_size - 1 is a token.
TEST(EngineGenerate, RefusesATokenOneOutsideTheVocabulary) {
  auto cpu = make_cpu_backend();
  const int32_t V = int32_t(fixture_model().config().vocab_size);
  std::vector<GenerateResult> out;
  for (int32_t t : {V, -1}) {
    const Status st = generate(fixture_model(), *cpu, {{{kTokEos, t}, 1, 0}}, {}, &out);
    EXPECT_FALSE(st.ok) << t;
    EXPECT_NE(st.message.find("request 0: token " + std::to_string(t) + " out of the vocabulary"), std::string::npos)
        << st.message;
  }
  const Status ok = generate(fixture_model(), *cpu, {{{kTokEos, V - 1}, 1, 0}}, {}, &out);
  EXPECT_TRUE(ok.ok) << ok.message;
}

// The printed continuation holds the byte tokens only: <|bos|> (256) and <|eos|> (257) are
// not bytes, nor is a negative id.
TEST(EngineGenerate, DecodeBytesKeepsOnlyByteTokens) {
  EXPECT_EQ(decode_bytes({kTokBos, 'a', kTokEos, 255, -1, 0, 'b'}), std::string("a\xff\0b", 4));
}

TEST(EngineGenerate, BadInputExits2NamingIt) {
  test::TempDir dir;
  test::write_bytes(dir.file("notes.txt"), "x");
  struct Bad {
    std::string model, prompt_file, kv;
    bool prompt_given;
    int max_tokens, pages;
    std::string expect;
  };
  const std::vector<Bad> cases = {
      {dir.file("missing"), "", "bf16", true, 4, 0, "missing"},
      {dir.str(), "", "bf16", true, 4, 0, "config.json"},
      {test::fixture_dir(), "", "int4", true, 4, 0, "--kv-cache int4"},
      {test::fixture_dir(), "", "bf16", true, 0, 0, "--max-tokens"},
      {test::fixture_dir(), "", "bf16", false, 4, 0, "exactly one of --prompt"},
      {test::fixture_dir(), dir.file("nope.txt"), "bf16", false, 4, 0, "nope.txt"},
      {test::fixture_dir(), dir.file("notes.txt"), "bf16", true, 4, 0, "exactly one of --prompt"},
      {test::fixture_dir(), "", "bf16", true, 4, -1, "--pages"},
      {test::fixture_dir(), "", "bf16", true, 5000, 0, "max_position_embeddings"},
      // The positions fed: the prompt (<|eos|> x: 2 tokens) and every generated token but the
      // last, so 4096 new tokens need 4097 of the model's 4096 (4095 fit).
      {test::fixture_dir(), "", "bf16", true, 4096, 0, "prompt + max_tokens - 1 = 4097 positions"},
  };
  for (const Bad& b : cases) {
    GenerateCommand cmd;
    cmd.model_dir = b.model;
    cmd.prompt = "x";
    cmd.prompt_given = b.prompt_given;
    cmd.prompt_file = b.prompt_file;
    cmd.kv_cache = b.kv;
    cmd.max_tokens = b.max_tokens;
    cmd.pages = b.pages;
    std::ostringstream out, err;
    EXPECT_EQ(generate_command(cmd, out, err), 2) << b.expect;
    EXPECT_NE(err.str().find(b.expect), std::string::npos) << err.str();
  }
}

}  // namespace
}  // namespace kc::engine
