// The cuda backend. It owns, for its whole life, a stream, a device-resident arena
// (DeviceArena: the cache's memory, page tables and views) and grow-only scratch arrays;
// the kernels run on its stream (the caller's, when given) and nothing waits for the whole
// device. Each operation on a host Cache is: the image and the inputs in (explicit async
// copies on the stream), the launches, the results out, then the stream finished. Every
// CUDA call is checked; failures come back as Status.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/attention/launch.h"
#include "kernels/backend/backend.h"
#include "kernels/backend/cuda_backend.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_arena.h"
#include "kernels/pack/launch.h"

namespace kc {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(DeviceInfo info, cudaStream_t stream, bool own_stream)
      : info_(std::move(info)), s_(stream), own_stream_(own_stream) {}
  ~CudaBackend() override {
    if (own_stream_) cudaStreamDestroy(s_);
  }
  std::string name() const override { return "cuda"; }
  AttnArith attention_arith(Format f, int d) const override {
    return attn_uses_mma(f, d) ? AttnArith::mma_split : AttnArith::fma_chain;
  }
  DeviceInfo device() const override { return info_; }

  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* rows, int n) override {
    return with_row_codec(f, "encode_rows", [&](auto codec) {
      using C = decltype(codec);
      KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>("encode_rows").c_str()));
      if (n == 0) return Status::Ok();
      const int d = c.lay.head_dim;
      float* dx;
      RowRef* dr;
      KC_RETURN_IF_ERROR(arena_.load(c, s_));
      KC_RETURN_IF_ERROR(scratch_.put(0, x, size_t(n) * d, s_, &dx));
      KC_RETURN_IF_ERROR(scratch_.put(1, rows, size_t(n), s_, &dr));
      KC_RETURN_IF_ERROR(launch_encode_rows(f, arena_.views(), dx, dr, n, d, s_));
      KC_RETURN_IF_ERROR(arena_.store(c, s_));
      return finish_stream(s_);
    });
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* rows, int n, float* out) override {
    return with_row_codec(f, "decode_rows", [&](auto codec) {
      using C = decltype(codec);
      KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>("decode_rows").c_str()));
      if (n == 0) return Status::Ok();
      const int d = c.lay.head_dim;
      RowRef* dr;
      float* dout;
      KC_RETURN_IF_ERROR(arena_.load(c, s_));
      KC_RETURN_IF_ERROR(scratch_.put(0, rows, size_t(n), s_, &dr));
      KC_RETURN_IF_ERROR(scratch_.get(1, size_t(n) * d, &dout));
      KC_RETURN_IF_ERROR(launch_decode_rows(f, arena_.views(), dr, n, d, dout, s_));
      return copy_out(out, dout, size_t(n) * d);
    });
  }
  Status e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) override {
    if (first + count > (uint64_t(1) << 32)) return Status::Error("e4m3_encode_bits: range past 2^32");
    uint8_t* d;
    KC_RETURN_IF_ERROR(scratch_.get(0, count, &d));
    KC_RETURN_IF_ERROR(launch_e4m3_encode_bits(first, count, d, s_));
    return copy_out(out, d, count);
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    KC_RETURN_IF_ERROR(validate_rope(c, p, rows, n));
    const int d = c.lay.head_dim, hkv = c.lay.kv_heads;
    const size_t nq = q ? size_t(n) * p.q_heads * d : 0;
    RopeRow* dr;
    float *dq, *dk, *dv, *dout;
    KC_RETURN_IF_ERROR(arena_.load(c, s_));
    KC_RETURN_IF_ERROR(scratch_.put(0, rows, size_t(n), s_, &dr));
    KC_RETURN_IF_ERROR(scratch_.put(1, q, nq, s_, &dq));
    KC_RETURN_IF_ERROR(scratch_.put(2, k, size_t(n) * hkv * d, s_, &dk));
    KC_RETURN_IF_ERROR(scratch_.put(3, v, size_t(n) * hkv * d, s_, &dv));
    KC_RETURN_IF_ERROR(scratch_.get(4, nq, &dout));
    KC_RETURN_IF_ERROR(launch_rope_store(arena_.views(), hkv, p, dr, n, q ? dq : nullptr, dk, dv, dout, s_));
    if (nq) KC_CUDA_TRY(cudaMemcpyAsync(q_out, dout, nq * sizeof(float), cudaMemcpyDeviceToHost, s_));
    KC_RETURN_IF_ERROR(arena_.store(c, s_));
    return finish_stream(s_);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KC_RETURN_IF_ERROR(validate_attention(c, p, rows, n, tails));
    const int d = c.lay.head_dim, hkv = c.lay.kv_heads;
    int max_chunks = 0;
    for (int i = 0; i < n; ++i)
      max_chunks = std::max(max_chunks, (rows[i].len + rows[i].tail_len + p.chunk - 1) / p.chunk);
    std::vector<int32_t> t = tails;
    if (t.empty()) t.push_back(0);
    const size_t np = std::max<size_t>(1, size_t(n) * p.q_heads * max_chunks);
    AttnRow* dr;
    int32_t* dt;
    float *dq, *dout, *pm, *pl, *po;
    KC_RETURN_IF_ERROR(arena_.load(c, s_));
    KC_RETURN_IF_ERROR(scratch_.put(0, rows, size_t(n), s_, &dr));
    KC_RETURN_IF_ERROR(scratch_.put(1, t.data(), t.size(), s_, &dt));
    KC_RETURN_IF_ERROR(scratch_.put(2, q, size_t(n) * p.q_heads * d, s_, &dq));
    KC_RETURN_IF_ERROR(scratch_.get(3, size_t(n) * p.q_heads * d, &dout));
    KC_RETURN_IF_ERROR(scratch_.get(4, np, &pm));
    KC_RETURN_IF_ERROR(scratch_.get(5, np, &pl));
    KC_RETURN_IF_ERROR(scratch_.get(6, np * d, &po));
    KC_RETURN_IF_ERROR(launch_attention(arena_.views(), c.lay.format, hkv, d, p, dr, n, dt, dq, max_chunks, pm, pl, po,
                                        dout, s_));
    return copy_out(out, dout, size_t(n) * p.q_heads * d);
  }
  Status pack(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob) override {
    return pack_cuda(c, lane, pos0, count, blob, arena_, scratch_, s_);
  }
  Status unpack(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob) override {
    return unpack_cuda(c, lane, pos0, blob, arena_, scratch_, s_);
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
    KeepMove* dm;
    int32_t* doff;
    KC_RETURN_IF_ERROR(arena_.load(c, s_));
    KC_RETURN_IF_ERROR(scratch_.put(0, sorted.data(), size_t(n), s_, &dm));
    KC_RETURN_IF_ERROR(scratch_.put(1, off.data(), off.size(), s_, &doff));
    KC_RETURN_IF_ERROR(launch_keep(arena_.views(), c.lay.field_count(), dm, doff, int(off.size()) - 1, s_));
    KC_RETURN_IF_ERROR(arena_.store(c, s_));
    return finish_stream(s_);
  }

 private:
  // count elements of a device result out to the host, then the stream finished.
  template <class T>
  Status copy_out(T* host, const T* dev, size_t count) {
    if (count) KC_CUDA_TRY(cudaMemcpyAsync(host, dev, count * sizeof(T), cudaMemcpyDeviceToHost, s_));
    return finish_stream(s_);
  }

  DeviceInfo info_;
  cudaStream_t s_;
  bool own_stream_;
  DeviceArena arena_;
  DeviceScratch scratch_;
};

}  // namespace

// Says what is missing in words: no driver at all, a driver older than this build's
// runtime (both versions named), or a driver that sees no device.
bool cuda_device_present(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return true;
  cudaGetLastError();
  if (why) {
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);  // 0 when no driver is installed
    cudaRuntimeGetVersion(&rt);
    cudaGetLastError();
    auto ver = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    if (drv == 0)
      *why = "no CUDA device: no NVIDIA driver is installed (libcuda not found); this build's runtime is CUDA " + ver(rt);
    else if (e == cudaErrorInsufficientDriver || drv < rt)
      *why = "no CUDA device: the NVIDIA driver is too old: it supports CUDA " + ver(drv) + ", this build's runtime needs " +
             ver(rt);
    else if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0))
      *why = "no CUDA device: the NVIDIA driver (CUDA " + ver(drv) + ") sees no GPU (check CUDA_VISIBLE_DEVICES and nvidia-smi)";
    else
      *why = std::string("no CUDA device: ") + cudaGetErrorString(e) + " (driver CUDA " + ver(drv) + ", runtime " + ver(rt) + ")";
  }
  return false;
}

namespace {
Status device_info(DeviceInfo* info) {
  std::string why;
  if (!cuda_device_present(&why)) return Status::Error(why);
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
    return Status::Error("no usable CUDA device: cudaGetDeviceProperties failed");
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  *info = DeviceInfo{p.name, std::to_string(p.major) + "." + std::to_string(p.minor),
                     "driver " + std::to_string(drv) + ", runtime " + std::to_string(rt)};
  return Status::Ok();
}
}  // namespace

std::unique_ptr<Backend> make_cuda_backend_on(cudaStream_t stream, Status* st) {
  DeviceInfo info;
  *st = device_info(&info);
  if (!st->ok) return nullptr;
  return std::make_unique<CudaBackend>(std::move(info), stream, false);
}

std::unique_ptr<Backend> make_cuda_backend(Status* st) {
  DeviceInfo info;
  *st = device_info(&info);
  if (!st->ok) return nullptr;
  cudaStream_t s;
  const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    *st = cuda_error("cudaStreamCreateWithFlags", __FILE__, __LINE__, e);
    return nullptr;
  }
  return std::make_unique<CudaBackend>(std::move(info), s, true);
}

}  // namespace kc
