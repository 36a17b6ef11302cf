// The engine on the cuda backend (skipped without a device): the engine kernels and the
// device-resident cache. A prompt decoded alone (window, pages of 16 and 7) and inside a
// batch of 8 gives the same token ids and logits bytes on cuda; a forward on a cache held
// on the device gives the bytes of the same forward with per-call cache copies, and the
// released image equals the copied one byte for byte; cuda's greedy tokens agree with
// cpu's on the fixture model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "kernels/engine/engine_backend.h"
#include "tests/engine/fixture_generate.h"

namespace kc::engine {
namespace {

using test::fixture_model;
using test::run_one;
using test::same_bytes;

std::unique_ptr<Backend> cuda_or_skip(std::string* why) {
  if (!cuda_device_present(why)) return nullptr;
  Status st;
  return make_cuda_backend(&st);
}

TEST(EngineCuda, AloneEqualsInsideABatchOfEightAndPagedEqualsWindow) {
  std::string why;
  auto cuda = cuda_or_skip(&why);
  if (!cuda) GTEST_SKIP() << why;
  constexpr int kTokens = 10;
  const std::vector<int32_t> target = encode_prompt("def main(argv):\n    x = ");
  const GenerateResult window = run_one(*cuda, {target, kTokens, 0}, 64);
  ASSERT_EQ(window.tokens.size(), size_t(kTokens));
  EXPECT_TRUE(same_bytes(window, run_one(*cuda, {target, kTokens, 16}, 64))) << "pages of 16 != window";
  EXPECT_TRUE(same_bytes(window, run_one(*cuda, {target, kTokens, 7}, 64))) << "pages of 7 != window";
  std::vector<GenerateRequest> batch = {
      {encode_prompt("import os\nimport sys\n"), 6, 16}, {encode_prompt("d"), kTokens + 2, 0},
      {encode_prompt("class A:"), 3, 7},                 {target, kTokens, 7},
      {encode_prompt("    "), 8, 0},                     {encode_prompt("return self._x + 1\n"), 4, 16},
      {encode_prompt("import "), 9, 7},                  {encode_prompt("for i in range("), 11, 16}};
  GenerateOptions o;
  o.keep_logits = true;
  o.prefill_chunk = 5;
  std::vector<GenerateResult> out;
  ASSERT_TRUE(generate(fixture_model(), *cuda, batch, o, &out).ok);
  EXPECT_TRUE(same_bytes(window, out[3])) << "the prompt inside the batch differs from the prompt alone (cuda)";
}

TEST(EngineCuda, HeldCacheGivesTheBytesOfPerCallCopies) {
  std::string why;
  auto cuda = cuda_or_skip(&why);
  if (!cuda) GTEST_SKIP() << why;
  const Model& m = fixture_model();
  const std::vector<int32_t> prompt = encode_prompt("def main(argv):\n    return 0\n");
  auto run = [&](bool hold, Cache* cache, std::vector<float>* logits) {
    ASSERT_TRUE(make_engine_cache(m.kv_layout(), {{64, 0}, {64, 16}}, cache).ok);
    if (hold) {
      ASSERT_TRUE(cuda->engine()->hold(*cache).ok);
    }
    std::vector<ForwardRow> rows;
    for (size_t p = 0; p < prompt.size(); ++p) rows.push_back({int32_t(p % 2), prompt[p], int32_t(p / 2), true});
    // Two steps: the second attends what the first stored.
    const size_t half = rows.size() / 2;
    std::vector<ForwardRow> a(rows.begin(), rows.begin() + half), b(rows.begin() + half, rows.end());
    std::vector<float> la, lb;
    ASSERT_TRUE(m.forward(*cuda, *cache, a, &la).ok);
    ASSERT_TRUE(m.forward(*cuda, *cache, b, &lb).ok);
    if (hold) {
      ASSERT_TRUE(cuda->engine()->release(*cache).ok);
    }
    *logits = la;
    logits->insert(logits->end(), lb.begin(), lb.end());
  };
  Cache copied, held;
  std::vector<float> lc, lh;
  run(false, &copied, &lc);
  run(true, &held, &lh);
  ASSERT_EQ(lc.size(), lh.size());
  EXPECT_EQ(std::memcmp(lc.data(), lh.data(), lc.size() * 4), 0) << "held-cache logits differ";
  ASSERT_EQ(copied.mem.size(), held.mem.size());
  EXPECT_EQ(std::memcmp(copied.mem.data(), held.mem.data(), copied.mem.size()), 0) << "released image differs";
  // A second hold while one is held is refused.
  Cache other;
  ASSERT_TRUE(make_engine_cache(m.kv_layout(), {{8, 0}}, &other).ok);
  ASSERT_TRUE(cuda->engine()->hold(held).ok);
  EXPECT_FALSE(cuda->engine()->hold(other).ok);
  EXPECT_FALSE(cuda->engine()->release(other).ok);
  EXPECT_TRUE(cuda->engine()->release(held).ok);
}

TEST(EngineCuda, GreedyTokensAgreeWithCpu) {
  std::string why;
  auto cuda = cuda_or_skip(&why);
  if (!cuda) GTEST_SKIP() << why;
  auto cpu = make_cpu_backend();
  const std::vector<int32_t> prompt = encode_prompt("def main(");
  const GenerateResult c = run_one(*cpu, {prompt, 32, 0}, 64);
  const GenerateResult g = run_one(*cuda, {prompt, 32, 0}, 64);
  double worst = 0;
  for (size_t i = 0; i < std::min(c.logits.size(), g.logits.size()); ++i)
    for (size_t j = 0; j < c.logits[i].size(); ++j) worst = std::max(worst, double(std::fabs(c.logits[i][j] - g.logits[i][j])));
  std::cout << "cuda vs cpu: worst |logit difference| " << worst << " over " << c.logits.size() << " steps; cpu '"
            << decode_bytes(c.tokens) << "', cuda '" << decode_bytes(g.tokens) << "'\n";
  EXPECT_EQ(c.tokens, g.tokens);
}

}  // namespace
}  // namespace kc::engine
