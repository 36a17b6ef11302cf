// Cache setups shared by the contracts: the same lanes laid out as pages shuffled
// through one arena and as contiguous windows, poisoned, with guard bands; the byte
// mask of what a launch may write; the guard check (every other byte unchanged).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/layout/cache.h"
#include "kernels/codecs/fp8.h"

namespace kc {

constexpr uint64_t kGuardBytes = 256;  // canary band before and after each region

// Pages of every lane (ceil(len / ptok), at least one) plus `spare` unowned pages, in a
// shuffled physical order; lanes' pages interleave. Everything is poisoned.
Cache make_paged_cache(const KvLayout& lay, int ptok, const std::vector<int>& lens, int spare, uint64_t seed);
// One window per lane of capacity len + slack, separated by guard bands; poisoned.
Cache make_window_cache(const KvLayout& lay, const std::vector<int>& lens, int slack, uint64_t seed);
// Arena pages no lane's page table names.
std::vector<int32_t> unowned_pages(const Cache& c);

// Marks the bytes that writing `rows` (codes and, for formats with scales, scales) may
// change. `fields` selects codes only (false) or codes and scales (true).
void mark_rows(const Cache& c, const std::vector<RowRef>& rows, std::vector<uint8_t>& mask);
// Counts bytes outside the mask that differ from `before`; names the first.
int64_t guard_violations(const Cache& after, const std::vector<uint8_t>& before,
                         const std::vector<uint8_t>& mask, std::string* first);

// A buffer with canaries: n elements of T between two guard bands of poisoned bytes.
template <class T>
struct Guarded {
  std::vector<uint8_t> bytes;
  size_t n;
  explicit Guarded(size_t n_, uint8_t poison = 0xA7) : bytes(n_ * sizeof(T) + 2 * kGuardBytes, poison), n(n_) {}
  T* data() { return reinterpret_cast<T*>(bytes.data() + kGuardBytes); }
  const T* data() const { return reinterpret_cast<const T*>(bytes.data() + kGuardBytes); }
  bool guards_intact(uint8_t poison = 0xA7) const {
    for (uint64_t i = 0; i < kGuardBytes; ++i)
      if (bytes[i] != poison || bytes[bytes.size() - 1 - i] != poison) return false;
    return true;
  }
};

}  // namespace kc
