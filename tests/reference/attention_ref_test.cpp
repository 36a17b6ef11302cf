// The attention reference's bound (reference/attention_ref.h) against numerics.md's error
// model, term by term, on inputs where every term but the accumulation's is exactly zero.
#include "reference/attention_ref.h"

#include <gtest/gtest.h>

#include "reference/bounds.h"

#include <cmath>
#include <vector>

namespace kc {
namespace {

// q = 0: every score 0, every weight 1 (term 2's r multiplies a zero spread). Every V row
// equal to v: out = v exactly, spread 0, mag |v|. Term 3 alone is left:
//   safety * (gamma_n' |v| + (gamma_n' + 2u) |v| + u |v|)   (u: the fp32 output rounding)
// with n' = acc_depth + ceil(n / chunk): the merge adds one term per chunk, not per key.
TEST(AttentionRef, BoundDepthIsTheChunkDepthPlusTheNumberOfChunks) {
  const int d = 4, acc_depth = 32;
  const double v = 0.5;
  struct C { int n, chunk, chunks; };
  for (const C& c : {C{100, 32, 4}, C{100, 1024, 1}, C{64, 16, 4}, C{1, 1, 1}}) {
    const Eigen::VectorXd q = Eigen::VectorXd::Zero(d);
    const Eigen::MatrixXd K = Eigen::MatrixXd::Ones(c.n, d);
    const Eigen::MatrixXd V = Eigen::MatrixXd::Constant(c.n, d, v);
    const ref::AttnRef r = ref::attention(q, K, V, 0.125, c.chunk, d, acc_depth);
    const double g = bound::gamma(acc_depth + c.chunks);
    const double want = bound::kAttnSafety * (g * v + (g + 2 * bound::kU32) * v + bound::kU32 * v) + 1e-30;
    for (int j = 0; j < d; ++j) {
      EXPECT_EQ(r.out[j], v);
      EXPECT_NEAR(r.bound[j], want, want * 1e-12) << "n " << c.n << " chunk " << c.chunk << " j " << j;
    }
  }
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// rope() takes each base's angles when two bases of one rot_dims alternate: its angles are cached
// per thread, and a cache keyed on rot_dims alone kept the first base's
// (ref-theta-cache-ignores-base; the contracts call it with one shape per case, so only a shard
// whose cases happened to follow each other that way saw it).
TEST(AttentionRef, RopeTakesEachBasesAnglesWhenBasesAlternate) {
  std::vector<double> x(16), y(16);
  for (int j = 0; j < 16; ++j) x[j] = 1.0 + j;
  for (double base : {1e6, 1e4, 1e6, 500.0}) {
    ref::rope(x.data(), y.data(), 16, 8, base, 1000);
    for (int i = 0; i < 4; ++i) {
      const long double a = 1000.0L * powl((long double)base, -2.0L * i / 8);
      EXPECT_NEAR(y[i], double(x[i] * cosl(a) - x[i + 4] * sinl(a)), 1e-12) << "base " << base << " dim " << i;
      EXPECT_NEAR(y[i + 4], double(x[i + 4] * cosl(a) + x[i] * sinl(a)), 1e-12) << "base " << base << " dim " << i + 4;
    }
    for (int j = 8; j < 16; ++j) EXPECT_EQ(y[j], x[j]) << j;
  }
}

}  // namespace
}  // namespace kc
