// The trained fixture model (fixtures/models/stdlib-bytes-3m) read by our own loader and run
// through the float64 reference forward on held-out text: it predicts that text about as
// well as its training log says (0.73 bits/byte on its held-out set, with the fp32
// forward). A loader or forward that reads the checkpoint wrong (a transposed matrix, the
// wrong RoPE pairing, a missing norm) predicts bytes near chance, about 8 bits/byte; the
// same bytes shuffled (the control) must also score far worse, so the measure can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>

#include "engine/checkpoint.h"
#include "reference/qwen3_ref.h"
#include "tests/engine/ref_adapter.h"

namespace kc::engine {
namespace {

const std::string kModel = std::string(KC_SOURCE_DIR) + "/fixtures/models/stdlib-bytes-3m";

std::vector<int32_t> held_out_bytes(size_t n) {
  std::ifstream f(std::string(KC_SOURCE_DIR) + "/fixtures/text/sched.py.head", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  s.resize(std::min(s.size(), n));
  std::vector<int32_t> t = {256};  // <|bos|>
  for (unsigned char c : s) t.push_back(c);
  return t;
}

// Mean -log2 p(next byte) over every position of the sequence, float64 reference forward.
double bits_per_byte(const ref::Qwen3RefModel& m, const std::vector<int32_t>& tokens) {
  Eigen::MatrixXd logits;
  EXPECT_EQ(ref::qwen3_ref_logits(m, tokens, &logits), "");
  double bits = 0;
  for (size_t t = 0; t + 1 < tokens.size(); ++t) {
    const Eigen::VectorXd row = logits.row(Eigen::Index(t)).transpose();
    const double mx = row.maxCoeff();
    const double lse = mx + std::log((row.array() - mx).exp().sum());
    bits += (lse - row(tokens[t + 1])) / std::log(2.0);
  }
  return bits / double(tokens.size() - 1);
}

// The outside oracle: transformers' float32 logits of the same 385 tokens, computed on the
// H200 by tools/transformers_logits.py and committed beside the model.
std::vector<float> transformers_logits(size_t tokens, size_t vocab) {
  std::ifstream f(kModel + "/transformers-sched.f32", std::ios::binary);
  std::vector<float> v(tokens * vocab);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  EXPECT_TRUE(f.good()) << "transformers-sched.f32 missing or short";
  return v;
}

TEST(FixtureModel, Float64ForwardAgreesWithTransformers) {
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(kModel, &w);
  ASSERT_TRUE(st.ok) << st.message;
  const std::vector<int32_t> tokens = held_out_bytes(384);
  ASSERT_EQ(tokens.size(), 385u);
  Eigen::MatrixXd logits;
  ASSERT_EQ(ref::qwen3_ref_logits(test::to_reference(w), tokens, &logits), "");
  const std::vector<float> hf = transformers_logits(tokens.size(), 260);
  double worst = 0, scale = 0;
  int argmax_differs = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    Eigen::Index ours = 0, theirs = 0;
    float best = -INFINITY;
    logits.row(Eigen::Index(t)).maxCoeff(&ours);
    for (Eigen::Index v = 0; v < 260; ++v) {
      const double h = hf[t * 260 + size_t(v)];
      worst = std::max(worst, std::fabs(logits(Eigen::Index(t), v) - h));
      scale = std::max(scale, std::fabs(h));
      if (h > best) best = float(h), theirs = v;
    }
    argmax_differs += ours != theirs;
  }
  std::cout << "float64 forward vs transformers fp32: worst |logit diff| " << worst << " (largest |logit| " << scale
            << "), argmax differs at " << argmax_differs << " of " << tokens.size() << " positions\n";
  // transformers computes in fp32 over depths up to 768 with 4 layers: its logits carry
  // rounding of order 1e-5 relative; 1e-3 absolute leaves room for that and nothing else
  // (a wrong norm, RoPE pairing or head mapping moves logits by O(1)).
  EXPECT_LT(worst, 1e-3);
  EXPECT_EQ(argmax_differs, 0);
}

TEST(FixtureModel, LoadsAndPredictsHeldOutTextInFloat64) {
  Qwen3Weights w;
  const Status st = load_qwen3_checkpoint(kModel, &w);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(w.config.vocab_size, 260);
  EXPECT_EQ(w.config.num_hidden_layers, 4);
  const ref::Qwen3RefModel m = test::to_reference(w);
  const std::vector<int32_t> text = held_out_bytes(384);
  const double bpb = bits_per_byte(m, text);
  std::vector<int32_t> shuffled = text;
  std::shuffle(shuffled.begin() + 1, shuffled.end(), std::mt19937(7));
  const double bpb_shuffled = bits_per_byte(m, shuffled);
  std::cout << "held-out bits/byte " << bpb << ", shuffled control " << bpb_shuffled << "\n";
  // transformers (fp32, on the H200) gives 1.691638 bits/byte on these 384 bytes
  // (transformers-sched.json); a checkpoint read wrong scores near 8.
  EXPECT_NEAR(bpb, 1.691638, 1e-4) << "the checkpoint is not read as transformers reads it";
  EXPECT_GT(bpb_shuffled, 3.0) << "the control: shuffled bytes must be far less predictable";
}

}  // namespace
}  // namespace kc::engine
