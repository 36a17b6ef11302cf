#include "contracts/arena.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

namespace kc {
namespace {
void poison(std::vector<uint8_t>& mem, uint64_t seed) {
  std::mt19937_64 g(seed ^ 0x5EEDF00Dull);
  for (size_t i = 0; i < mem.size(); i += 8) {
    const uint64_t v = g();
    for (size_t k = 0; k < 8 && i + k < mem.size(); ++k) mem[i + k] = uint8_t(v >> (8 * k));
  }
}
}  // namespace

Cache make_paged_cache(const KvLayout& lay, int ptok, const std::vector<int>& lens, int spare, uint64_t seed) {
  Cache c;
  c.lay = lay;
  const uint64_t ps = lay.page_stride(ptok);
  std::vector<int> need;
  int total = spare;
  for (int len : lens) {
    need.push_back(std::max(1, (len + ptok - 1) / ptok));
    total += need.back();
  }
  std::vector<int32_t> phys(total);
  std::iota(phys.begin(), phys.end(), 0);
  std::mt19937_64 g(seed);
  std::shuffle(phys.begin(), phys.end(), g);
  // Interleave: deal physical pages to lanes in a random lane order.
  std::vector<int> owner;
  for (size_t l = 0; l < lens.size(); ++l) owner.insert(owner.end(), need[l], int(l));
  std::shuffle(owner.begin(), owner.end(), g);
  std::vector<std::vector<int32_t>> tables(lens.size());
  for (size_t i = 0; i < owner.size(); ++i) tables[owner[i]].push_back(phys[i]);
  c.mem.resize(kGuardBytes + uint64_t(total) * ps + kGuardBytes);
  for (size_t l = 0; l < lens.size(); ++l) {
    ViewDesc d;
    d.base_off = kGuardBytes;
    d.pt_off = int32_t(c.pts.size());
    d.n_pages = int32_t(tables[l].size());
    d.ptok = ptok;
    d.ps = ps;
    c.pts.insert(c.pts.end(), tables[l].begin(), tables[l].end());
    c.views.push_back(d);
  }
  poison(c.mem, seed);
  return c;
}

Cache make_window_cache(const KvLayout& lay, const std::vector<int>& lens, int slack, uint64_t seed) {
  Cache c;
  c.lay = lay;
  uint64_t off = kGuardBytes;
  for (int len : lens) {
    ViewDesc d;
    d.base_off = off;
    d.ptok = len + slack;
    c.views.push_back(d);
    off += (lay.kv_bytes(d.ptok) + 255) / 256 * 256 + kGuardBytes;
  }
  c.mem.resize(off);
  poison(c.mem, seed + 1);
  return c;
}

std::vector<int32_t> unowned_pages(const Cache& c) {
  std::set<int32_t> owned(c.pts.begin(), c.pts.end());
  std::vector<int32_t> out;
  for (const ViewDesc& d : c.views) {
    if (!d.paged()) continue;
    const int64_t n = int64_t((c.mem.size() - d.base_off - kGuardBytes) / d.ps);
    for (int32_t p = 0; p < n; ++p)
      if (!owned.count(p)) out.push_back(p);
    break;
  }
  return out;
}

void mark_rows(const Cache& c, const std::vector<RowRef>& rows, std::vector<uint8_t>& mask) {
  mask.resize(c.mem.size(), 0);
  for (const RowRef& r : rows) {
    const KvView v = c.view(r.lane);
    const uint8_t* row = kv_row(v, r.layer, r.kv, r.head, r.pos);
    std::fill_n(mask.begin() + (row - c.mem.data()), c.lay.code_bytes, uint8_t(1));
    if (c.lay.scale_bytes) {
      const uint8_t* s = kv_scale(v, r.layer, r.kv, r.head, r.pos);
      std::fill_n(mask.begin() + (s - c.mem.data()), c.lay.scale_bytes, uint8_t(1));
    }
  }
}

int64_t guard_violations(const Cache& after, const std::vector<uint8_t>& before,
                         const std::vector<uint8_t>& mask, std::string* first) {
  int64_t bad = 0;
  for (size_t i = 0; i < after.mem.size(); ++i) {
    if (after.mem[i] != before[i] && !(i < mask.size() && mask[i])) {
      if (bad == 0 && first) *first = "byte " + std::to_string(i) + " of the cache memory changed outside the rows written";
      ++bad;
    }
  }
  return bad;
}

}  // namespace kc
