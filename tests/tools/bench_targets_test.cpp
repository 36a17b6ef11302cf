// The host side of the benches' verdicts: how a target is judged met, which rows of bench
// rope-store / compact count for their target, and the median bench engine judges by. The
// benches time on a device only; these are the pure computations their receipts report
// (mutation sweep round 10: each of them could change a verdict and no cpu test saw it).
#include <gtest/gtest.h>

#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench_attention.h"
#include "tools/bench_engine.h"
#include "tools/bench_moves.h"

namespace kc {
namespace {

// A target's limit is inclusive on both sides: bench attention's achieved / ceiling >= 0.80 is
// met at exactly 0.80, a ratio <= 1.05 at exactly 1.05; 0 means not measured, never met.
TEST(BenchTargets, LimitItselfMeetsAndZeroIsNotMeasured) {
  const nlohmann::json at_least = bench_target("of ceiling", 0.80, 0.80, true);
  EXPECT_TRUE(at_least["met"].get<bool>());
  EXPECT_TRUE(at_least["measured"].get<bool>());
  EXPECT_FALSE(bench_target("of ceiling", 0.7999, 0.80, true)["met"].get<bool>());
  EXPECT_TRUE(bench_target("paged / window", 1.05, 1.05, false)["met"].get<bool>());
  EXPECT_FALSE(bench_target("paged / window", 1.0501, 1.05, false)["met"].get<bool>());
  const nlohmann::json none = bench_target("ours / SDPA", 0, 1.0, false);  // 0 <= 1.0, yet not measured
  EXPECT_FALSE(none["met"].get<bool>());
  EXPECT_FALSE(none["measured"].get<bool>());
  EXPECT_EQ(at_least["name"], "of ceiling");
  EXPECT_EQ(at_least["limit"].get<double>(), 0.80);
  EXPECT_TRUE(at_least["at_least"].get<bool>());
}

// bench rope-store / compact: the target covers 64 MiB up, 64 MiB itself included (a --quick
// run's rows are 4, 64 and 256 MiB), at 0.85 of the ceiling inclusive, verified rows only.
TEST(BenchTargets, MovesTargetFrom64MibAtLeast085Verified) {
  EXPECT_TRUE(bench_moves_target("16MiB/bf16/p16", 16, 0.2, true).is_null());
  EXPECT_TRUE(bench_moves_target("63MiB/bf16/p16", 63, 0.9, true).is_null());
  const nlohmann::json at64 = bench_moves_target("64MiB/bf16/p16", 64, 0.5, true);
  ASSERT_FALSE(at64.is_null());
  EXPECT_FALSE(at64["met"].get<bool>());
  EXPECT_EQ(at64["name"], "64MiB/bf16/p16: achieved / ceiling");
  EXPECT_TRUE(bench_moves_target("64MiB/q4/window", 64, 0.85, true)["met"].get<bool>());
  EXPECT_FALSE(bench_moves_target("64MiB/q4/window", 64, 0.8499, true)["met"].get<bool>());
  const nlohmann::json unverified = bench_moves_target("256MiB/fp8/p256", 256, 0.95, false);
  EXPECT_FALSE(unverified["met"].get<bool>());
  EXPECT_FALSE(unverified["measured"].get<bool>());
}

// The median of an even count is the mean of the two middle values (four reps of a
// paged / window ratio: 1.00, 1.02, 1.04, 1.30 -> 1.03, not the upper 1.04 that would miss
// the <= 1.02 target by more); of an odd count the middle one; order does not matter.
TEST(BenchTargets, EngineMedianOfEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(bench_median({1.30, 1.00, 1.04, 1.02}), 1.03);
  EXPECT_DOUBLE_EQ(bench_median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(bench_median({5.0}), 5.0);
  EXPECT_DOUBLE_EQ(bench_median({2.0, 4.0}), 3.0);
  EXPECT_EQ(bench_median({}), 0.0);
}

}  // namespace
}  // namespace kc
