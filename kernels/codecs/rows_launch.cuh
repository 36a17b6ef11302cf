// The launch skeleton shared by the row codec kernels (codecs/fp8_rows.cu, codecs/q4_rows.cu,
// codecs/mxfp4_rows.cu): the grid of a one-warp-per-row kernel, and the host side of an encode
// (cache, inputs and rows up, launch, cache down) and of a decode (cache and rows up,
// launch, rows down). nvcc only.
#pragma once
#include <cstdint>

#include "kernels/layout/cache.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_cache.h"

namespace kc {

constexpr int kWarpRowThreads = 256;  // block of a one-warp-per-row kernel: whole warps

inline int warp_row_blocks(int n) { return int((int64_t(n) * 32 + kWarpRowThreads - 1) / kWarpRowThreads); }

// Encodes n rows of x ([n][head_dim]) on the device: launch(views, x, rows) with device
// pointers, then the cache comes back. Nothing moves when n is 0.
template <class Launch>
Status encode_rows_on_device(Cache& c, const float* x, const RowRef* rows, int n, Launch launch) {
  if (n == 0) return Status::Ok();
  DeviceCache dc;
  DevBuf<float> dx;
  DevBuf<RowRef> dr;
  KC_RETURN_IF_ERROR(dc.upload(c));
  KC_RETURN_IF_ERROR(dx.upload(x, size_t(n) * c.lay.head_dim));
  KC_RETURN_IF_ERROR(dr.upload(rows, size_t(n)));
  KC_RETURN_IF_ERROR(launch(dc.views.get(), dx.get(), dr.get()));
  return dc.download(c);
}

// Decodes n rows into out ([n][head_dim]) on the device: launch(views, rows, out) with
// device pointers. Nothing moves when n is 0.
template <class Launch>
Status decode_rows_on_device(const Cache& c, const RowRef* rows, int n, float* out, Launch launch) {
  if (n == 0) return Status::Ok();
  DeviceCache dc;
  DevBuf<RowRef> dr;
  DevBuf<float> dout;
  KC_RETURN_IF_ERROR(dc.upload(c));
  KC_RETURN_IF_ERROR(dr.upload(rows, size_t(n)));
  KC_RETURN_IF_ERROR(dout.alloc(size_t(n) * c.lay.head_dim));
  KC_RETURN_IF_ERROR(launch(dc.views.get(), dr.get(), dout.get()));
  return dout.download(out, size_t(n) * c.lay.head_dim);
}

}  // namespace kc
