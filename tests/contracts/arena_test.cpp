// The guard check of contracts/arena.h: every byte outside the rows written counts, the
// arena's first and last bytes (the ends of its guard bands) included.
#include "contracts/arena.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/backend/forwarding.h"
#include "tests/contracts/contract_test_util.h"

namespace kc {
namespace {

TEST(Arena, GuardViolationsSeeTheFirstAndLastByteOfEachArena) {
  const KvLayout lay(1, 2, 64, Format::fp8);
  for (Cache c0 : {make_paged_cache(lay, 16, {20, 5}, 1, 3), make_window_cache(lay, {20, 5}, 2, 3)}) {
    std::vector<uint8_t> mask;
    mark_rows(c0, {{0, 0, 0, 0, 0}}, mask);
    for (size_t i : {size_t(0), c0.mem.size() - 1}) {
      Cache c = c0;
      c.mem[i] ^= 0x01;
      std::string where;
      EXPECT_EQ(guard_violations(c, c0.mem, mask, &where), 1) << "byte " << i << " of " << c.mem.size();
      EXPECT_EQ(where, "byte " + std::to_string(i) + " of the cache memory changed outside the rows written");
    }
    // A byte of the row written is allowed.
    Cache c = c0;
    kv_row(c.view(0), 0, 0, 0, 0)[0] ^= 0x01;
    EXPECT_EQ(guard_violations(c, c0.mem, mask, nullptr), 0);
  }
}

// Window lanes start on 256-byte boundaries, as device allocations do, whatever a lane's bytes
// (arena-window-unaligned: a lane of 8 fp8 positions of one 32-dim head, 576 bytes, put the next
// lane at an offset of 64 mod 256). The cpu backend reads any offset; a device kernel's vector
// loads need the alignment.
TEST(Arena, WindowLanesStartOn256ByteBoundaries) {
  for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4}) {
    const KvLayout lay(1, 1, 32, f);
    const Cache c = make_window_cache(lay, {7, 3, 5}, 1, 9);
    for (size_t l = 0; l < c.views.size(); ++l)
      EXPECT_EQ(c.views[l].base_off % 256, 0u) << format_name(f) << " lane " << l;
    EXPECT_EQ(c.mem.size() % 256, 0u) << format_name(f);
  }
}

// A byte-range fill whose ranges Edit::apply(cache, range) alters before the real fill runs.
template <class Edit>
class FillEditBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status fill(Cache& c, const ByteRange* ranges, int n, uint8_t value) override {
    std::vector<ByteRange> r(ranges, ranges + n);
    for (ByteRange& x : r) Edit::apply(c, x);
    return ForwardingBackend::fill(c, r.data(), n, value);
  }
};

// arena-offsets' refused fill ends exactly one byte past the memory: a fill whose range check is
// one byte short (a range ending at size + 1 taken as ending at the end) fails the fill gate.
// Mutation sweep round 7, ao-refused-fill-two-past: with the probe two bytes past, this
// backend refused it and the gate passed. One case, gates only (the contract's memory is past
// 4 GiB: about 3 s and 4.2 GB on cpu).
struct FillOneBytePast {
  static void apply(const Cache& c, ByteRange& x) {
    if (x.offset <= c.mem.size() && x.bytes == c.mem.size() - x.offset + 1) --x.bytes;  // the off-by-one
  }
};

TEST(ArenaOffsetsContract, RefusedFillEndsOneBytePastTheMemory) {
  const RunResult r = test::run_cpu_through<FillEditBackend<FillOneBytePast>>("arena-offsets", 1, "", true);
  EXPECT_GT(test::gate_failed(r, "fill"), 0) << summary_table(r.receipt);
}

// ---- host mutation sweep round 16 (reports/mutation-sweep/host-16-local/) ----
// Each decorator plants a defect that one gate alone sees; one case, gates only (about 3 s and
// 4.3 GB on cpu each).

// The fill gate checks every filled byte: a fill that leaves each range's first byte unwritten
// (ranges of one byte filled; the refusals as the cpu backend's) fails it
// (ao-fill-gate-last-byte-only; the control fill-drops-last-byte drops the last byte).
struct FillDropsFirstByte {
  static void apply(const Cache&, ByteRange& x) {
    if (x.bytes > 1) ++x.offset, --x.bytes;
  }
};

TEST(ArenaOffsetsContract, FillGateChecksEveryFilledByte) {
  const RunResult r = test::run_cpu_through<FillEditBackend<FillDropsFirstByte>>("arena-offsets", 1, "", true);
  EXPECT_GT(test::gate_failed(r, "fill"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// The guard scan reaches the far arena's end: a rope store that sets the far arena's last byte
// (past the window lane: no lane owns it, nothing reads it back) fails guards
// (ao-guards-tail-unscanned).
struct FarArenaLastByte {
  static void apply(Cache& c, const RopeParams& /*p*/, const RopeRow* /*rows*/, int /*n*/, float* /*q_out*/) {
    if (c.mem.size() > (uint64_t(1) << 32)) c.mem.back() = 1;
  }
};
using FarArenaLastByteBackend = test::RopeStoreEditBackend<FarArenaLastByte>;

TEST(ArenaOffsetsContract, GuardsScanTheFarArenasEnd) {
  const RunResult r = test::run_cpu_through<FarArenaLastByteBackend>("arena-offsets", 1, "", true);
  EXPECT_GT(test::gate_failed(r, "guards"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

// far==near compares the decoded rows' values: a row decode that flips the lowest bit of its
// first value on the far arena only fails it (ao-far-near-decoded-size-only). Case 1 (fp8): the
// bf16 case has no row codec.
class FarDecodeBitBackend final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    const Status st = ForwardingBackend::decode_rows(f, c, r, n, o);
    if (st.ok && n > 0 && c.mem.size() > (uint64_t(1) << 32)) test::flip_lowest_bit(o);
    return st;
  }
};

TEST(ArenaOffsetsContract, FarEqualsNearComparesDecodedValues) {
  const RunResult r = test::run_cpu_through<FarDecodeBitBackend>("arena-offsets", 2, "fmt=fp8", true);
  EXPECT_EQ(r.receipt["cases"]["run"], 1);
  EXPECT_GT(test::gate_failed(r, "far==near"), 0) << summary_table(r.receipt);
  EXPECT_FALSE(r.pass);
}

}  // namespace
}  // namespace kc
