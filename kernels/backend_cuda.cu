// The cuda backend: copies a Cache and the inputs to the device, runs the kernels,
// copies the results back. Every CUDA call is checked; failures come back as Status.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda_check.h"
#include "kernels/fp8_rows_cuda.h"

namespace kc {
namespace {

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

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(DeviceInfo info) : info_(std::move(info)) {}
  std::string name() const override { return "cuda"; }
  DeviceInfo device() const override { return info_; }

  Status fp8_encode_rows(Cache& c, const float* x, const RowRef* rows, int n) override {
    if (c.lay.format != Format::fp8) return Status::Error("fp8_encode_rows: cache format is not fp8");
    KC_RETURN_IF_ERROR(validate_rows(c, rows, n));
    DeviceCache dc;
    DevBuf<float> dx;
    DevBuf<RowRef> dr;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dx.upload(x, size_t(n) * c.lay.head_dim));
    KC_RETURN_IF_ERROR(dr.upload(rows, n));
    KC_RETURN_IF_ERROR(launch_fp8_encode_rows(dc.views.get(), dx.get(), dr.get(), n));
    return dc.download(c);
  }
  Status fp8_decode_rows(const Cache& c, const RowRef* rows, int n, float* out) override {
    if (c.lay.format != Format::fp8) return Status::Error("fp8_decode_rows: cache format is not fp8");
    KC_RETURN_IF_ERROR(validate_rows(c, rows, n));
    DeviceCache dc;
    DevBuf<RowRef> dr;
    DevBuf<float> dout;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dr.upload(rows, n));
    KC_RETURN_IF_ERROR(dout.alloc(size_t(n) * c.lay.head_dim));
    KC_RETURN_IF_ERROR(launch_fp8_decode_rows(dc.views.get(), dr.get(), n, dout.get()));
    return dout.download(out, size_t(n) * c.lay.head_dim);
  }
  Status e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) override {
    if (first + count > (uint64_t(1) << 32)) return Status::Error("e4m3_encode_bits: range past 2^32");
    DevBuf<uint8_t> d;
    KC_RETURN_IF_ERROR(d.alloc(count));
    KC_RETURN_IF_ERROR(launch_e4m3_encode_bits(first, count, d.get()));
    return d.download(out, count);
  }

 private:
  DeviceInfo info_;
};

}  // namespace

bool cuda_device_present(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? std::string("no CUDA device: ") + cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

std::unique_ptr<Backend> make_cuda_backend(Status* st) {
  std::string why;
  if (!cuda_device_present(&why)) {
    *st = Status::Error("--backend cuda: " + why);
    return nullptr;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    *st = Status::Error("--backend cuda: cudaGetDeviceProperties failed");
    return nullptr;
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  DeviceInfo info{p.name, std::to_string(p.major) + "." + std::to_string(p.minor),
                  "driver " + std::to_string(drv) + ", runtime " + std::to_string(rt)};
  *st = Status::Ok();
  return std::make_unique<CudaBackend>(std::move(info));
}

}  // namespace kc
