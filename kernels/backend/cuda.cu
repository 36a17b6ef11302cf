// The cuda backend: copies a Cache and the inputs to the device, runs the kernels,
// copies the results back. Every CUDA call is checked; failures come back as Status.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/backend/backend.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_cache.h"
#include "kernels/pack/pack.h"
#include "kernels/attention/launch.h"
#include <algorithm>
#include <map>

namespace kc {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(DeviceInfo info) : info_(std::move(info)) {}
  std::string name() const override { return "cuda"; }
  AttnArith attention_arith(Format f, int d) const override {
    return attn_uses_mma(f, d) ? AttnArith::mma_split : AttnArith::fma_chain;
  }
  DeviceInfo device() const override { return info_; }

  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* rows, int n) override {
    return encode_rows_cuda(f, c, x, rows, n);
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* rows, int n, float* out) override {
    return decode_rows_cuda(f, c, rows, n, out);
  }
  Status e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) override {
    if (first + count > (uint64_t(1) << 32)) return Status::Error("e4m3_encode_bits: range past 2^32");
    DevBuf<uint8_t> d;
    KC_RETURN_IF_ERROR(d.alloc(count));
    KC_RETURN_IF_ERROR(launch_e4m3_encode_bits(first, count, d.get()));
    return d.download(out, count);
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    KC_RETURN_IF_ERROR(validate_rope(c, p, rows, n));
    const int d = c.lay.head_dim, hkv = c.lay.kv_heads;
    DeviceCache dc;
    DevBuf<RopeRow> dr;
    DevBuf<float> dq, dk, dv, dout;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dr.upload(rows, n));
    const size_t nq = q ? size_t(n) * p.q_heads * d : 0;
    KC_RETURN_IF_ERROR(dq.upload(q, nq));
    KC_RETURN_IF_ERROR(dk.upload(k, size_t(n) * hkv * d));
    KC_RETURN_IF_ERROR(dv.upload(v, size_t(n) * hkv * d));
    KC_RETURN_IF_ERROR(dout.alloc(nq));
    KC_RETURN_IF_ERROR(launch_rope_store(dc.views.get(), hkv, p, dr.get(), n, q ? dq.get() : nullptr, dk.get(), dv.get(),
                                         dout.get()));
    KC_RETURN_IF_ERROR(dout.download(q_out, nq));
    return dc.download(c);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KC_RETURN_IF_ERROR(validate_attention(c, p, rows, n, tails));
    const int d = c.lay.head_dim, hkv = c.lay.kv_heads;
    int max_chunks = 0;
    for (int i = 0; i < n; ++i)
      max_chunks = std::max(max_chunks, (rows[i].len + rows[i].tail_len + p.chunk - 1) / p.chunk);
    DeviceCache dc;
    DevBuf<AttnRow> dr;
    DevBuf<int32_t> dt;
    DevBuf<float> dq, dout, pm, pl, po;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dr.upload(rows, n));
    std::vector<int32_t> t = tails;
    if (t.empty()) t.push_back(0);
    KC_RETURN_IF_ERROR(dt.upload(t.data(), t.size()));
    KC_RETURN_IF_ERROR(dq.upload(q, size_t(n) * p.q_heads * d));
    KC_RETURN_IF_ERROR(dout.alloc(size_t(n) * p.q_heads * d));
    const size_t np = std::max<size_t>(1, size_t(n) * p.q_heads * max_chunks);
    KC_RETURN_IF_ERROR(pm.alloc(np));
    KC_RETURN_IF_ERROR(pl.alloc(np));
    KC_RETURN_IF_ERROR(po.alloc(np * d));
    KC_RETURN_IF_ERROR(launch_attention(dc.views.get(), c.lay.format, hkv, d, p, dr.get(), n, dt.get(), dq.get(), max_chunks,
                                        pm.get(), pl.get(), po.get(), dout.get()));
    return dout.download(out, size_t(n) * p.q_heads * d);
  }
  Status pack(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob) override {
    return pack_cuda(c, lane, pos0, count, blob);
  }
  Status unpack(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob) override {
    return unpack_cuda(c, lane, pos0, blob);
  }
  Status keep(Cache& c, const KeepMove* moves, int n) override {
    KC_RETURN_IF_ERROR(validate_keep(c, moves, n));
    // Group by lane, keeping each lane's order; one block per (field, lane group).
    std::vector<KeepMove> sorted(moves, moves + n);
    std::stable_sort(sorted.begin(), sorted.end(), [](const KeepMove& a, const KeepMove& b) { return a.lane < b.lane; });
    std::vector<int32_t> off = {0};
    for (int i = 1; i <= n; ++i)
      if (i == n || sorted[i].lane != sorted[i - 1].lane) off.push_back(i);
    if (n == 0) return Status::Ok();
    DeviceCache dc;
    DevBuf<KeepMove> dm;
    DevBuf<int32_t> doff;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dm.upload(sorted.data(), n));
    KC_RETURN_IF_ERROR(doff.upload(off.data(), off.size()));
    KC_RETURN_IF_ERROR(launch_keep(dc.views.get(), c.lay.field_count(), dm.get(), doff.get(), int(off.size()) - 1));
    return dc.download(c);
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
