// Model::forward on the backend's engine (Backend::engine()) and on the host engine a
// decorator without one gets (make_host_engine over the decorator): the same logits bytes,
// so a test's decorator sees the forward the cpu backend runs.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/checkpoint.h"
#include "engine/generate.h"
#include "kernels/backend/forwarding.h"
#include "kernels/engine/engine_backend.h"

namespace kc::engine {
namespace {

const std::string kFixture = std::string(KC_SOURCE_DIR) + "/fixtures/models/stdlib-bytes-3m";

// Forwards every operation, counting the KV steps; has no engine of its own.
class PassThrough final : public ForwardingBackend {
 public:
  explicit PassThrough(Backend& b) : ForwardingBackend(b) {}
  int kv_calls = 0;
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* r, int n, const float* q, const float* k, const float* v,
                    float* qo) override {
    ++kv_calls;
    return real_.rope_store(c, p, r, n, q, k, v, qo);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* r, int n, const std::vector<int32_t>& t,
                   const float* q, float* o) override {
    ++kv_calls;
    return real_.attention(c, p, r, n, t, q, o);
  }
};

TEST(EngineBackend, DecoratorWithoutEngineGivesTheCpuEnginesBytes) {
  Qwen3Weights w;
  ASSERT_TRUE(load_qwen3_checkpoint(kFixture, &w).ok);
  Model m;
  ASSERT_TRUE(Model::create(w, {}, &m).ok);
  auto cpu = make_cpu_backend();
  ASSERT_NE(cpu->engine(), nullptr);
  PassThrough deco(*cpu);
  ASSERT_EQ(deco.engine(), nullptr);
  const std::vector<int32_t> prompt = encode_prompt("def main():\n");
  std::vector<ForwardRow> rows;
  for (size_t p = 0; p < prompt.size(); ++p) rows.push_back({0, prompt[p], int32_t(p), true});
  Cache a, b;
  ASSERT_TRUE(make_engine_cache(m.kv_layout(), {{32, 0}}, &a).ok);
  ASSERT_TRUE(make_engine_cache(m.kv_layout(), {{32, 0}}, &b).ok);
  std::vector<float> la, lb;
  ASSERT_TRUE(m.forward(*cpu, a, rows, &la).ok);
  ASSERT_TRUE(m.forward(deco, b, rows, &lb).ok);
  EXPECT_EQ(deco.kv_calls, 2 * int(m.config().num_hidden_layers));  // the decorator ran the KV steps
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0);
  EXPECT_EQ(a.mem, b.mem);
  // The host engine holds nothing: hold / release are no-ops that succeed.
  EXPECT_TRUE(cpu->engine()->hold(a).ok);
  EXPECT_TRUE(cpu->engine()->release(a).ok);
}

}  // namespace
}  // namespace kc::engine
