// keep (compaction) on cuda over more lanes than one grid index holds. A lane group (one lane's
// moves) is keep_kernel's grid y, which CUDA caps at 65535; launch_keep runs more groups in
// launches of kKeepGroupsPerLaunch (kernels/attention/launch.h), each naming its first group.
// Before that, a keep call whose moves touched 65536 lanes failed on cuda ("invalid argument")
// while the cpu backend took it. One call over 66,500 window lanes (65,835 of them with moves) must leave the bytes
// that the cpu backend leaves: bf16 (the table path without scales), fp8 and q4 (code and scale
// planes moved together), lanes without moves among them (so a group's lane is not its index)
// and the last launch's lanes moved too. Labelled cuda; skipped (visibly) without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "contracts/arena.h"
#include "kernels/backend/backend.h"
#include "tests/cuda_backend_or_skip.h"

namespace kc {
namespace {

constexpr int kGridGroups = 65535;  // the grid's cap on a group index (kKeepGroupsPerLaunch)
constexpr int kLanes = 66500;       // window lanes of the cache: 65,835 of them move (groups)
constexpr int kLen = 4;                    // positions of each lane

// The first byte where two images differ, as "byte i: a vs b", or "" where they are equal.
std::string first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return "byte " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
  return "";
}

TEST(KeepLanes, MoreLanesThanAGridIndexLeaveTheCpuBackendsBytes) {
  KC_CUDA_BACKEND_OR_SKIP(cuda);
  auto cpu = make_cpu_backend();
  for (Format f : {Format::bf16, Format::fp8, Format::q4}) {
    SCOPED_TRACE(format_name(f));
    Cache start = make_window_cache(KvLayout(1, 2, 64, f), std::vector<int>(kLanes, kLen), 0, 31);
    std::mt19937_64 g(41);
    for (uint8_t& b : start.mem) b = uint8_t(g());
    // Every lane but each 100th moves (a group's lane is then not its index); the lanes of the
    // first launch's groups move 2 -> 0 and 3 -> 1, the second launch's 300 groups 3 -> 1 only.
    std::vector<KeepMove> moves;
    int moved_lanes = 0;
    for (int l = 0; l < kLanes; ++l) {
      if (l % 100 == 99) continue;
      if (moved_lanes++ < kGridGroups) moves.push_back({l, 2, 0});
      moves.push_back({l, 3, 1});
    }
    ASSERT_EQ(moved_lanes, kGridGroups + 300);
    Cache on_cpu = start, on_cuda = start;
    ASSERT_TRUE(cpu->keep(on_cpu, moves.data(), int(moves.size())).ok);
    const Status st = cuda->keep(on_cuda, moves.data(), int(moves.size()));
    ASSERT_TRUE(st.ok) << st.message;
    // On the cpu the last moved lane's (66,498's) row 1 of its first code plane now holds row 3's
    // bytes (so the comparison covers a moved lane of the second launch).
    const KvView last_cpu = on_cpu.view(kLanes - 2), last_start = start.view(kLanes - 2);
    EXPECT_EQ(0, std::memcmp(kv_field_row(last_cpu, 0, 1), kv_field_row(last_start, 0, 3), start.lay.code_bytes));
    EXPECT_NE(0, std::memcmp(kv_field_row(last_start, 0, 1), kv_field_row(last_start, 0, 3), start.lay.code_bytes));
    EXPECT_EQ(first_difference(on_cuda.mem, on_cpu.mem), "") << "cuda's keep over " << moved_lanes << " lanes";
  }
}

}  // namespace
}  // namespace kc
