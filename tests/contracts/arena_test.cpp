// The guard check of contracts/arena.h: every byte outside the rows written counts, the
// arena's first and last bytes (the ends of its guard bands) included.
#include "contracts/arena.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace kc
