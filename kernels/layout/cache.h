// Cache: the host image of one or more lanes' KV storage (an arena of pages and/or
// contiguous windows), with each lane's page table, as every backend receives it.
// Backends resolve a ViewDesc into a KvView against their own copy of `mem`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/layout/kv_layout.h"
#include "kernels/layout/status.h"

namespace kc {

struct ViewDesc {
  uint64_t base_off = 0;  // paged: offset of arena page 0 in mem; window: the window's first byte
  int32_t pt_off = -1;    // paged: index of the lane's first page-table entry in pts; window: -1
  int32_t n_pages = 0;    // paged: entries in the lane's page table
  int32_t ptok = 0;       // positions per page; window: capacity in positions
  uint64_t ps = 0;        // page stride in bytes (paged)
  KC_HD bool paged() const { return pt_off >= 0; }
  KC_HD int64_t capacity() const { return paged() ? int64_t(n_pages) * ptok : ptok; }
};

KC_HD KvView resolve_view(const ViewDesc& d, uint8_t* mem, const int32_t* pts, const KvLayout& lay) {
  KvView v;
  v.base = mem + d.base_off;
  v.pt = d.paged() ? pts + d.pt_off : nullptr;
  v.ptok = d.ptok;
  v.ps = d.ps;
  v.lay = lay;
  return v;
}

// One row descriptor of a batch: which lane, layer, K/V, head and position.
struct RowRef {
  int32_t lane;
  int32_t layer;
  int32_t kv;
  int32_t head;
  int32_t pos;
};

struct Cache {
  KvLayout lay;
  std::vector<uint8_t> mem;
  std::vector<int32_t> pts;
  std::vector<ViewDesc> views;

  KvView view(int lane) { return resolve_view(views[lane], mem.data(), pts.data(), lay); }
  KvView view(int lane) const {
    return resolve_view(views[lane], const_cast<uint8_t*>(mem.data()), pts.data(), lay);
  }
  // Every byte a lane's views can address lies inside mem (checked before any launch).
  Status validate() const;
};

inline Status Cache::validate() const {
  for (size_t l = 0; l < views.size(); ++l) {
    const ViewDesc& d = views[l];
    const std::string who = "lane " + std::to_string(l) + ": ";
    if (d.ptok <= 0) return Status::Error(who + "ptok must be positive");
    if (d.capacity() >= (int64_t(1) << 31)) return Status::Error(who + "capacity must stay below 2^31 positions");
    if (d.paged()) {
      if (d.ps < lay.kv_bytes(d.ptok)) return Status::Error(who + "page stride smaller than a page");
      if (uint64_t(d.pt_off) + uint64_t(d.n_pages) > pts.size())
        return Status::Error(who + "page table outside pts");
      for (int32_t i = 0; i < d.n_pages; ++i) {
        const int32_t p = pts[d.pt_off + i];
        if (p < 0 || d.base_off + (uint64_t(p) + 1) * d.ps > mem.size())
          return Status::Error(who + "page " + std::to_string(p) + " outside the arena");
      }
    } else if (d.base_off + lay.kv_bytes(d.ptok) > mem.size()) {
      return Status::Error(who + "window outside the cache memory");
    }
  }
  return Status::Ok();
}

}  // namespace kc
