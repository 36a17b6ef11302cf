// The device-resident cache (the engine's pool): DeviceArena holds a Cache's memory,
// page tables and lane views on the device for as long as it lives, in grow-only
// buffers, so a step reuses them instead of allocating. Kernels read and write it through
// views() on the caller's stream; nothing here waits for the device. Copies between a host
// Cache and the arena are explicit (load / store), enqueued on the caller's stream; a host
// image is valid once the caller has finished the stream (finish_stream).
// DeviceScratch: grow-only device arrays for a backend's per-call inputs and outputs.
#pragma once
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/backend/cuda_check.h"
#include "kernels/layout/cache.h"

namespace kc {

class DeviceArena {
 public:
  // The image's memory, page tables and lane views in; the views resolve against the
  // arena's memory. Enqueued on s (the host image may change once this returns).
  Status load(const Cache& c, cudaStream_t s) {
    lay_ = c.lay;
    alias_ = nullptr;
    mem_bytes_ = c.mem.size();
    KC_RETURN_IF_ERROR(mem_.upload_async(c.mem.data(), c.mem.size(), s));
    return upload_tables(c, s);
  }
  // c's page tables and lane views over another arena's memory (`mem`, `bytes` long; that
  // arena must outlive this one's use): nothing of c's memory is copied. A draft cache that
  // lives in runs of the held target arena.
  Status alias(const Cache& c, uint8_t* mem, size_t bytes, cudaStream_t s) {
    KC_RETURN_IF_ERROR(check_views(c, bytes));
    lay_ = c.lay;
    alias_ = mem;
    mem_bytes_ = bytes;
    return upload_tables(c, s);
  }
  // The page tables and lane views of c (its memory left as it is on the device), when
  // they differ from the ones last loaded: a held cache whose pool moved pages. An alias
  // checks c's views against the aliased bytes (c's own image may be empty).
  Status refresh_tables(const Cache& c, cudaStream_t s) {
    if (!alias_ && c.mem.size() != mem_bytes_)
      return Status::Error("DeviceArena::refresh_tables: image size differs from the loaded one");
    if (c.pts == host_pts_ && same_descs(c.views)) return Status::Ok();
    if (alias_) KC_RETURN_IF_ERROR(check_views(c, mem_bytes_));
    return upload_tables(c, s);
  }
  // The arena's memory out to the image (same size as loaded), enqueued on s.
  Status store(Cache& c, cudaStream_t s) const {
    if (alias_) return Status::Error("DeviceArena::store: an alias holds no memory of its own");
    if (c.mem.size() != mem_bytes_) return Status::Error("DeviceArena::store: image size differs from the loaded one");
    return mem_.download_async(c.mem.data(), mem_bytes_, s);
  }
  const KvView* views() const { return views_.get(); }    // device array, one per lane
  const KvView& view(int lane) const { return host_views_[lane]; }  // device addresses
  uint8_t* mem() const { return alias_ ? alias_ : mem_.get(); }
  size_t mem_bytes() const { return mem_bytes_; }
  const KvLayout& layout() const { return lay_; }

 private:
  Status upload_tables(const Cache& c, cudaStream_t s) {
    KC_RETURN_IF_ERROR(pts_.upload_async(c.pts.data(), c.pts.size(), s));
    host_pts_ = c.pts;
    host_descs_ = c.views;
    host_views_.clear();
    for (const ViewDesc& d : c.views) host_views_.push_back(resolve_view(d, mem(), pts_.get(), c.lay));
    return views_.upload_async(host_views_.data(), host_views_.size(), s);
  }
  // Every byte c's views address lies inside `bytes` (Cache::validate's rule, against a
  // size instead of c's own image).
  static Status check_views(const Cache& c, size_t bytes) {
    for (size_t l = 0; l < c.views.size(); ++l) {
      const ViewDesc& d = c.views[l];
      const std::string who = "alias lane " + std::to_string(l) + ": ";
      if (d.ptok <= 0) return Status::Error(who + "ptok must be positive");
      if (d.paged()) {
        if (uint64_t(d.pt_off) + uint64_t(d.n_pages) > c.pts.size()) return Status::Error(who + "page table outside pts");
        for (int32_t i = 0; i < d.n_pages; ++i) {
          const int32_t p = c.pts[d.pt_off + i];
          if (p < 0 || d.base_off + (uint64_t(p) + 1) * d.ps > bytes)
            return Status::Error(who + "page " + std::to_string(p) + " outside the arena");
        }
      } else if (d.base_off + c.lay.kv_bytes(d.ptok) > bytes) {
        return Status::Error(who + "window outside the aliased memory");
      }
    }
    return Status::Ok();
  }
  KvLayout lay_;
  uint8_t* alias_ = nullptr;  // alias(): the other arena's memory
  size_t mem_bytes_ = 0;
  DevBuf<uint8_t> mem_;
  DevBuf<int32_t> pts_;
  DevBuf<KvView> views_;
  std::vector<KvView> host_views_;
  std::vector<int32_t> host_pts_;
  std::vector<ViewDesc> host_descs_;

  bool same_descs(const std::vector<ViewDesc>& v) const {
    if (v.size() != host_descs_.size()) return false;
    for (size_t i = 0; i < v.size(); ++i) {
      const ViewDesc &a = v[i], &b = host_descs_[i];
      if (a.base_off != b.base_off || a.pt_off != b.pt_off || a.n_pages != b.n_pages || a.ptok != b.ptok || a.ps != b.ps)
        return false;
    }
    return true;
  }
};

// Grow-only device arrays, one per slot, reused across calls (slot i: the i-th array of
// an operation). put: n elements in from the host on s; get: room for n elements.
class DeviceScratch {
 public:
  template <class T>
  Status get(int slot, size_t n, T** p) {
    KC_RETURN_IF_ERROR(bufs_[slot].reserve(n * sizeof(T)));
    *p = reinterpret_cast<T*>(bufs_[slot].get());
    return Status::Ok();
  }
  template <class T>
  Status put(int slot, const T* src, size_t n, cudaStream_t s, T** p) {
    KC_RETURN_IF_ERROR(get(slot, n, p));
    if (n) KC_CUDA_TRY(cudaMemcpyAsync(*p, src, n * sizeof(T), cudaMemcpyHostToDevice, s));
    return Status::Ok();
  }

 private:
  static constexpr int kSlots = 8;
  DevBuf<uint8_t> bufs_[kSlots];
};

}  // namespace kc
