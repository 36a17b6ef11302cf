// The device copy of a Cache: memory, page tables, and each lane's resolved KvView.
// Shared by every cuda backend operation (backend/cuda.cu and the codec/packing files).
#pragma once
#include <vector>

#include "kernels/layout/cache.h"
#include "kernels/backend/cuda_check.h"

namespace kc {

// The device copy of a Cache: memory, page tables, and each lane's resolved KvView.
struct DeviceCache {
  DevBuf<uint8_t> mem;
  DevBuf<int32_t> pts;
  DevBuf<KvView> views;
  Status upload(const Cache& c) {
    KC_RETURN_IF_ERROR(mem.upload(c.mem.data(), c.mem.size()));
    KC_RETURN_IF_ERROR(pts.upload(c.pts.data(), c.pts.size()));
    std::vector<KvView> v;
    for (const ViewDesc& d : c.views) v.push_back(resolve_view(d, mem.get(), pts.get(), c.lay));
    return views.upload(v.data(), v.size());
  }
  Status download(Cache& c) const { return mem.download(c.mem.data(), c.mem.size()); }
};

}  // namespace kc
