// Attention on cuda over more query rows than one grid index holds. A row is the partial's grid
// z and the merge's grid y, and CUDA caps both at 65535; launch_partial and launch_merge take
// more rows in launches of kAttnRowsPerLaunch (kernels/attention/launch.h). Before that, a call
// of 65536 rows failed on cuda ("invalid configuration argument") while the cpu backend took
// it: a kv-gate fixture may prefill 65536 rows in one forward (its schema's prefill_chunk
// maximum). One call of 66,535 rows must give every row the bytes that the same row gets in a
// call of its own range (rows==solo): rows 0-999, and 65,000-66,534, which straddle the
// launches' boundary. Formats and paths: bf16, fp8 and q4 at d 128 (tensor cores), bf16 at d 64
// (the fma chain), two paged lanes of 300 keys stored by the rope store, chunks of 64, some rows
// with a tail. Labelled cuda; skipped (visibly) without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "contracts/arena.h"
#include "kernels/backend/backend.h"

namespace kc {
namespace {

constexpr int kGridRows = 65535;          // the grid's cap on a row index (kAttnRowsPerLaunch)
constexpr int kRows = kGridRows + 1000;   // rows of the one call
constexpr int kKeys = 300;                // keys of each lane

struct RowsCase {
  Format f;
  int q_heads, kv_heads, d;
};

void check_many_rows(Backend& be, const RowsCase& c, uint64_t seed) {
  SCOPED_TRACE(std::string(format_name(c.f)) + " " + std::to_string(c.q_heads) + "q/" + std::to_string(c.kv_heads) +
               "kv/d" + std::to_string(c.d));
  const KvLayout lay(1, c.kv_heads, c.d, c.f);
  Cache cache = make_paged_cache(lay, 16, {kKeys, kKeys}, 3, seed);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  auto drawn = [&](size_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = nd(g);
    return v;
  };
  // Every key of both lanes: position i at slot i.
  std::vector<RopeRow> keys;
  for (int lane = 0; lane < 2; ++lane)
    for (int i = 0; i < kKeys; ++i) keys.push_back({lane, i, i});
  const size_t kvn = keys.size() * size_t(c.kv_heads) * c.d;
  const std::vector<float> k = drawn(kvn), v = drawn(kvn);
  const RopeParams rp{c.q_heads, c.d, 1e6, 0};
  ASSERT_TRUE(be.rope_store(cache, rp, keys.data(), int(keys.size()), nullptr, k.data(), v.data(), nullptr).ok);

  // Row i: lane i % 2, a committed length of 1 .. 290 (1 to 5 chunks of 64), and every third
  // row a tail of two keys at slots 298 and 299.
  const std::vector<int32_t> tails = {kKeys - 2, kKeys - 1};
  std::vector<AttnRow> rows(kRows);
  for (int i = 0; i < kRows; ++i) {
    const int32_t len = 1 + int32_t((uint64_t(i) * 7919u + seed) % 290u);
    rows[i] = {i % 2, len, 0, i % 3 == 0 ? 2 : 0};
  }
  const size_t per_row = size_t(c.q_heads) * c.d;
  const std::vector<float> q = drawn(size_t(kRows) * per_row);
  const AttnParams p{c.q_heads, 0, 64, float(1.0 / std::sqrt(double(c.d)))};
  std::vector<float> one(size_t(kRows) * per_row, -1.0f);
  Status st = be.attention(cache, p, rows.data(), kRows, tails, q.data(), one.data());
  ASSERT_TRUE(st.ok) << "one call of " << kRows << " rows: " << st.message;
  for (const auto& [i0, m] : {std::pair<int, int>{0, 1000}, std::pair<int, int>{65000, kRows - 65000}}) {
    std::vector<float> part(size_t(m) * per_row, -2.0f);
    st = be.attention(cache, p, rows.data() + i0, m, tails, q.data() + size_t(i0) * per_row, part.data());
    ASSERT_TRUE(st.ok) << "rows " << i0 << "..: " << st.message;
    size_t j = 0;
    const float* a = one.data() + size_t(i0) * per_row;
    while (j < part.size() && std::memcmp(&a[j], &part[j], 4) == 0) ++j;
    EXPECT_EQ(j, part.size()) << "row " << (i0 + j / per_row) << " (element " << j % per_row << ") is " << a[j]
                              << " in the call of " << kRows << " rows, " << (j < part.size() ? part[j] : 0.0f)
                              << " in the call of rows " << i0 << ".." << (i0 + m - 1);
  }
  // A row past the first launch's rows has an output (not the -1 it started as).
  EXPECT_NE(one[size_t(kRows - 1) * per_row], -1.0f);
}

TEST(AttentionRows, MoreRowsThanAGridIndexGiveEachRowItsSoloBytes) {
  std::string why;
  if (!cuda_device_present(&why)) GTEST_SKIP() << why;
  Status st;
  std::unique_ptr<Backend> be = make_cuda_backend(&st);
  ASSERT_TRUE(be) << st.message;
  const std::vector<RowsCase> cases = {
      {Format::bf16, 4, 1, 128}, {Format::fp8, 4, 1, 128}, {Format::q4, 4, 1, 128}, {Format::bf16, 2, 1, 64}};
  uint64_t seed = 5;
  for (const RowsCase& c : cases) check_many_rows(*be, c, seed++);
}

}  // namespace
}  // namespace kc
