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
#include "tests/cuda_backend_or_skip.h"

namespace kc {
namespace {

constexpr int kGridRows = 65535;          // the grid's cap on a row index (kAttnRowsPerLaunch)
constexpr int kRows = kGridRows + 1000;   // rows of the one call
constexpr int kKeys = 300;                // keys of each lane

struct Drawn {
  std::mt19937_64 g;
  std::normal_distribution<float> nd{0.f, 2.f};
  explicit Drawn(uint64_t seed) : g(seed) {}
  std::vector<float> operator()(size_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = nd(g);
    return v;
  }
};

// Every key of two lanes of `keys` positions (position i at slot i), drawn k and v, through the
// rope store.
void store_keys(Backend& be, Cache& cache, int q_heads, int keys, Drawn& drawn) {
  std::vector<RopeRow> rows;
  for (int lane = 0; lane < 2; ++lane)
    for (int i = 0; i < keys; ++i) rows.push_back({lane, i, i});
  const size_t kvn = rows.size() * size_t(cache.lay.kv_heads) * cache.lay.head_dim;
  const std::vector<float> k = drawn(kvn), v = drawn(kvn);
  const RopeParams rp{q_heads, cache.lay.head_dim, 1e6, 0};
  ASSERT_TRUE(be.rope_store(cache, rp, rows.data(), int(rows.size()), nullptr, k.data(), v.data(), nullptr).ok);
}

// One call of every row, then a call of each range [first, first + count) alone: every row of a
// range must have the bytes of the one call. Returns the one call's output.
std::vector<float> expect_solo_bytes(Backend& be, const Cache& cache, const AttnParams& p,
                                     const std::vector<AttnRow>& rows, const std::vector<int32_t>& tails,
                                     const std::vector<float>& q, const std::vector<std::pair<int, int>>& ranges) {
  const int n = int(rows.size());
  const size_t per_row = size_t(p.q_heads) * cache.lay.head_dim;
  std::vector<float> one(size_t(n) * per_row, -1.0f);
  Status st = be.attention(cache, p, rows.data(), n, tails, q.data(), one.data());
  EXPECT_TRUE(st.ok) << "one call of " << n << " rows: " << st.message;
  if (!st.ok) return one;
  for (const auto& [i0, m] : ranges) {
    std::vector<float> part(size_t(m) * per_row, -2.0f);
    st = be.attention(cache, p, rows.data() + i0, m, tails, q.data() + size_t(i0) * per_row, part.data());
    EXPECT_TRUE(st.ok) << "rows " << i0 << "..: " << st.message;
    if (!st.ok) continue;
    size_t j = 0;
    const float* a = one.data() + size_t(i0) * per_row;
    while (j < part.size() && std::memcmp(&a[j], &part[j], 4) == 0) ++j;
    EXPECT_EQ(j, part.size()) << "row " << (i0 + j / per_row) << " (element " << j % per_row << ") is " << a[j]
                              << " in the call of " << n << " rows, " << (j < part.size() ? part[j] : 0.0f)
                              << " in the call of rows " << i0 << ".." << (i0 + m - 1);
  }
  return one;
}

struct RowsCase {
  Format f;
  int q_heads, kv_heads, d;
};

void check_many_rows(Backend& be, const RowsCase& c, uint64_t seed) {
  SCOPED_TRACE(std::string(format_name(c.f)) + " " + std::to_string(c.q_heads) + "q/" + std::to_string(c.kv_heads) +
               "kv/d" + std::to_string(c.d));
  Cache cache = make_paged_cache(KvLayout(1, c.kv_heads, c.d, c.f), 16, {kKeys, kKeys}, 3, seed);
  Drawn drawn(seed);
  store_keys(be, cache, c.q_heads, kKeys, drawn);
  if (::testing::Test::HasFatalFailure()) return;
  // Row i: lane i % 2, a committed length of 1 .. 290 (1 to 5 chunks of 64), and every third
  // row a tail of two keys at slots 298 and 299.
  const std::vector<int32_t> tails = {kKeys - 2, kKeys - 1};
  std::vector<AttnRow> rows(kRows);
  for (int i = 0; i < kRows; ++i) {
    const int32_t len = 1 + int32_t((uint64_t(i) * 7919u + seed) % 290u);
    rows[i] = {i % 2, len, 0, i % 3 == 0 ? 2 : 0};
  }
  const std::vector<float> q = drawn(size_t(kRows) * c.q_heads * c.d);
  const AttnParams p{c.q_heads, 0, 64, float(1.0 / std::sqrt(double(c.d)))};
  const std::vector<float> one = expect_solo_bytes(be, cache, p, rows, tails, q, {{0, 1000}, {65000, kRows - 65000}});
  // A row past the first launch's rows has an output (not the -1 it started as).
  EXPECT_NE(one[size_t(kRows - 1) * c.q_heads * c.d], -1.0f);
}

TEST(AttentionRows, MoreRowsThanAGridIndexGiveEachRowItsSoloBytes) {
  KC_CUDA_BACKEND_OR_SKIP(be);
  const std::vector<RowsCase> cases = {
      {Format::bf16, 4, 1, 128}, {Format::fp8, 4, 1, 128}, {Format::q4, 4, 1, 128}, {Format::bf16, 2, 1, 64}};
  uint64_t seed = 5;
  for (const RowsCase& c : cases) check_many_rows(*be, c, seed++);
}

// Rows whose partials pass the cuda backend's budget (1 GiB: kAttnPartialBytes in
// kernels/backend/cuda.cu), which then runs the call in batches of rows. 2100 rows of 4 q heads
// of 128, most over 60,000-65,535 keys in chunks of 256 (256 chunks: 532 KB of partials a row,
// so two batches: rows 0-2015 and 2016-2099) must give every row the bytes of a call of its own
// range: rows 0-99, 1000-1199, 2000-2099 (across the boundary) and a call of one row. Without
// the batches this call asked for 1.1 GB of partials; a kv-gate prefill of 65536 such rows for
// 34 GB. Two lanes of 65,536 keys (bf16; fp8 too).
TEST(AttentionRows, PartialsPastTheBudgetGoInBatchesOfRows) {
  KC_CUDA_BACKEND_OR_SKIP(be);
  constexpr int kLong = 65536, kN = 2100, kQh = 4, kD = 128;
  for (Format f : {Format::bf16, Format::fp8}) {
    SCOPED_TRACE(format_name(f));
    Cache cache = make_paged_cache(KvLayout(1, 1, kD, f), 256, {kLong, kLong}, 3, 17);
    Drawn drawn(23);
    store_keys(*be, cache, kQh, kLong, drawn);
    if (HasFatalFailure()) return;
    // Lengths 60,000 .. 65,535 (256 chunks), every 50th row 100 (a short row inside a long
    // batch), and from row 2000 on 100 .. 1,099 (at most 5 chunks): the first batch (rows
    // 0-2015) has 256 chunks and the second (2016-2099) 5, so a batch launched with another
    // batch's chunk count gives other bytes.
    std::vector<AttnRow> rows(kN);
    for (int i = 0; i < kN; ++i) {
      const uint32_t h = uint32_t((uint64_t(i) * 2654435761u) % 5536u);
      rows[i] = {i % 2, i >= 2000 ? 100 + int32_t(h % 1000u) : i % 50 == 0 ? 100 : 60000 + int32_t(h), 0, 0};
    }
    const std::vector<float> q = drawn(size_t(kN) * kQh * kD);
    const AttnParams p{kQh, 0, 256, float(1.0 / std::sqrt(double(kD)))};
    expect_solo_bytes(*be, cache, p, rows, {}, q, {{0, 100}, {1000, 200}, {2000, 100}, {2099, 1}});
  }
}

}  // namespace
}  // namespace kc
