// The cuda backend. It owns, for its whole life, a stream, a device-resident arena
// (DeviceArena: the cache's memory, page tables and views) and grow-only scratch arrays;
// the kernels run on its stream (the caller's, when given) and nothing waits for the whole
// device. Each operation on a host Cache is: the image and the inputs in (explicit async
// copies on the stream), the launches, the results out, then the stream finished, unless
// the cache is held (EngineBackend::hold): a held cache lives in a second arena for as
// long as the hold lasts, operations on it copy no cache bytes, and its host image is
// stale until release. The engine kernels (CudaEngine, kernels/engine/) run on the same
// stream with their buffers on the device. Every CUDA call is checked; failures come back
// as Status.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention/launch.h"
#include "kernels/backend/backend.h"
#include "kernels/backend/cuda_backend.h"
#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_arena.h"
#include "kernels/engine/engine_backend.h"
#include "kernels/engine/launch.h"
#include "kernels/pack/launch.h"

namespace kc {
namespace {

class CudaEngine;

// One block per range, its threads striding the range's bytes.
__global__ void fill_ranges_kernel(uint8_t* mem, const ByteRange* ranges, uint8_t value) {
  const ByteRange r = ranges[blockIdx.x];
#ifdef KC_PLANT_FILL_DROPS_LAST_BYTE  // planted bug (test builds only): each range one byte short
  for (uint64_t i = threadIdx.x; i + 1 < r.bytes; i += blockDim.x) mem[r.offset + i] = value;
#else
  for (uint64_t i = threadIdx.x; i < r.bytes; i += blockDim.x) mem[r.offset + i] = value;
#endif
}
// What both attention paths (a host cache's, the engine's on device buffers) size before
// their launches: the tail list (one placeholder entry when empty), the call's rows in
// batches, and the entries of each partial array (the largest batch's; at least one). The
// batches' partials (m, l and o: q_heads x chunks x (d + 2) floats a row, chunks the batch's
// most) fit in kAttnPartialBytes. A prefill of 65536 rows
// over 65536 keys (256 chunks) with 4 q heads of 128 would otherwise ask for 34 GB of partials
// at once. Each batch is a launch_attention of its own rows, in order on one stream, over the
// same scratch; a row's bytes do not depend on the rows beside it or on the batch's chunk
// count (rows==solo). Up to 1 GiB, one batch: every decode step and the contracts' calls.
constexpr size_t kAttnPartialBytes = size_t(1) << 30;
struct AttnBatch {
  int first, n, max_chunks;
};
struct AttnShape {
  size_t np = 1;  // partial slots of the largest batch
  std::vector<int32_t> tails;
  std::vector<AttnBatch> batches;
  AttnShape(const AttnParams& p, const AttnRow* rows, int n, int d, const std::vector<int32_t>& t) : tails(t) {
    if (tails.empty()) tails.push_back(0);
    const size_t per_chunk = size_t(p.q_heads) * (size_t(d) + 2) * sizeof(float);
    AttnBatch b{0, 0, 0};
    for (int i = 0; i < n; ++i) {
      const int ci = (rows[i].len + rows[i].tail_len + p.chunk - 1) / p.chunk;
      if (b.n > 0 && size_t(b.n + 1) * size_t(std::max(b.max_chunks, ci)) * per_chunk > kAttnPartialBytes) {
        batches.push_back(b);
        b = AttnBatch{i, 0, 0};
      }
      b.max_chunks = std::max(b.max_chunks, ci);
      ++b.n;
    }
    if (b.n > 0) batches.push_back(b);
    for (const AttnBatch& x : batches) np = std::max(np, size_t(x.n) * p.q_heads * x.max_chunks);
  }
};

// The engine's timing option: holds the stream until the host sets *flag (host memory
// mapped into the device), at most 200 ms (a step that syncs before its download would
// otherwise wait for itself).
__global__ void profile_gate_kernel(const volatile int* flag) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    if (*flag) return;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > 200000000ull) return;
  }
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(DeviceInfo info, cudaStream_t stream, bool own_stream)
      : info_(std::move(info)), s_(stream), own_stream_(own_stream) {}
  ~CudaBackend() override {
    for (const Fence& f : fences_) cudaEventDestroy(f.event);
    for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
    if (own_stream_) cudaStreamDestroy(s_);
  }
  std::string name() const override { return "cuda"; }
  AttnArith attention_arith(Format f, int d) const override {
    return attn_uses_mma(f, d) ? AttnArith::mma_split : AttnArith::fma_chain;
  }
  DeviceInfo device() const override { return info_; }

  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* rows, int n) override {
    return row_codec_op(f, "encode_rows", c, rows, n, [&](DeviceArena* a, int d) -> Status {
      float* dx;
      RowRef* dr;
      KC_RETURN_IF_ERROR(scratch_.put(0, x, size_t(n) * d, s_, &dx));
      KC_RETURN_IF_ERROR(scratch_.put(1, rows, size_t(n), s_, &dr));
      KC_RETURN_IF_ERROR(launch_encode_rows(f, a->views(), dx, dr, n, d, s_));
      KC_RETURN_IF_ERROR(detach(c, *a));
      return finish_stream(s_);
    });
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* rows, int n, float* out) override {
    return row_codec_op(f, "decode_rows", c, rows, n, [&](DeviceArena* a, int d) -> Status {
      RowRef* dr;
      float* dout;
      KC_RETURN_IF_ERROR(scratch_.put(0, rows, size_t(n), s_, &dr));
      KC_RETURN_IF_ERROR(scratch_.get(1, size_t(n) * d, &dout));
      KC_RETURN_IF_ERROR(launch_decode_rows(f, a->views(), dr, n, d, dout, s_));
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
    DeviceArena* a;
    KC_RETURN_IF_ERROR(attach(c, &a));
    KC_RETURN_IF_ERROR(scratch_.put(0, rows, size_t(n), s_, &dr));
    KC_RETURN_IF_ERROR(scratch_.put(1, q, nq, s_, &dq));
    KC_RETURN_IF_ERROR(scratch_.put(2, k, size_t(n) * hkv * d, s_, &dk));
    KC_RETURN_IF_ERROR(scratch_.put(3, v, size_t(n) * hkv * d, s_, &dv));
    KC_RETURN_IF_ERROR(scratch_.get(4, nq, &dout));
    KC_RETURN_IF_ERROR(launch_rope_store(a->views(), c.lay.format, hkv, d, p, dr, n, q ? dq : nullptr, dk, dv, dout, s_));
    if (nq) KC_CUDA_TRY(cudaMemcpyAsync(q_out, dout, nq * sizeof(float), cudaMemcpyDeviceToHost, s_));
    KC_RETURN_IF_ERROR(detach(c, *a));
    return finish_stream(s_);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KC_RETURN_IF_ERROR(validate_attention(c, p, rows, n, tails));
    const int d = c.lay.head_dim, hkv = c.lay.kv_heads;
    const AttnShape sh(p, rows, n, d, tails);
    AttnRow* dr;
    int32_t* dt;
    float *dq, *dout, *pm, *pl, *po;
    DeviceArena* a;
    KC_RETURN_IF_ERROR(attach(c, &a));
    KC_RETURN_IF_ERROR(scratch_.put(0, rows, size_t(n), s_, &dr));
    KC_RETURN_IF_ERROR(scratch_.put(1, sh.tails.data(), sh.tails.size(), s_, &dt));
    KC_RETURN_IF_ERROR(scratch_.put(2, q, size_t(n) * p.q_heads * d, s_, &dq));
    KC_RETURN_IF_ERROR(scratch_.get(3, size_t(n) * p.q_heads * d, &dout));
    KC_RETURN_IF_ERROR(scratch_.get(4, sh.np, &pm));
    KC_RETURN_IF_ERROR(scratch_.get(5, sh.np, &pl));
    KC_RETURN_IF_ERROR(scratch_.get(6, sh.np * d, &po));
    for (const AttnBatch& b : sh.batches) {
      const size_t o = size_t(b.first) * p.q_heads * d;
      KC_RETURN_IF_ERROR(launch_attention(a->views(), c.lay.format, hkv, d, p, dr + b.first, b.n, dt, dq + o,
                                          b.max_chunks, pm, pl, po, dout + o, s_));
    }
    return copy_out(out, dout, size_t(n) * p.q_heads * d);
  }
  // A held cache (or an alias of it) is packed from / unpacked into its device copy (its
  // tables refreshed first); no cache bytes cross to the host.
  Status pack(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob) override {
    if (DeviceArena* a = held_arena_of(c)) {
      KC_RETURN_IF_ERROR(a->refresh_tables(c, s_));
      return pack_cuda(c, lane, pos0, count, blob, *a, scratch_, s_, true);
    }
    return pack_cuda(c, lane, pos0, count, blob, arena_, scratch_, s_);
  }
  Status unpack(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob) override {
    if (DeviceArena* a = held_arena_of(c)) {
      KC_RETURN_IF_ERROR(a->refresh_tables(c, s_));
      return unpack_cuda(c, lane, pos0, blob, *a, scratch_, s_, true);
    }
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
    DeviceArena* a;
    KC_RETURN_IF_ERROR(attach(c, &a));
    KC_RETURN_IF_ERROR(scratch_.put(0, sorted.data(), size_t(n), s_, &dm));
    KC_RETURN_IF_ERROR(scratch_.put(1, off.data(), off.size(), s_, &doff));
    KC_RETURN_IF_ERROR(launch_keep(a->views(), c.lay, dm, doff, int(off.size()) - 1, s_));
    if (is_held(a)) return Status::Ok();  // nothing waits: the next download finds any error
    KC_RETURN_IF_ERROR(detach(c, *a));
    return finish_stream(s_);
  }
  EngineBackend* engine() override;

  // A held cache (or alias) is filled on the device, enqueued on the stream (ordered after
  // the work that read the bytes before); a cache that is not held is its host image.
  Status fill(Cache& c, const ByteRange* ranges, int n, uint8_t value) override {
    DeviceArena* a = held_arena_of(c);
    if (!a) return Backend::fill(c, ranges, n, value);
    KC_RETURN_IF_ERROR(validate_fill(c, ranges, n));
    for (int i = 0; i < n; ++i)
      if (ranges[i].offset + ranges[i].bytes > a->mem_bytes())
        return Status::Error("fill: range " + std::to_string(i) + " outside the held memory");
    if (n == 0) return Status::Ok();
    ByteRange* dr;
    KC_RETURN_IF_ERROR(scratch_.put(7, ranges, size_t(n), s_, &dr));
    fill_ranges_kernel<<<n, 256, 0, s_>>>(a->mem(), dr, value);
    KC_LAUNCH_CHECK("fill_ranges_kernel");
    return Status::Ok();
  }

  // Fences: one event per step, recorded on the stream; a step is done when its event is.
  Status fence(uint64_t step) override {
    cudaEvent_t e;
    if (!spare_events_.empty()) {
      e = spare_events_.back();
      spare_events_.pop_back();
    } else {
      KC_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
    const cudaError_t r = cudaEventRecord(e, s_);
    if (r != cudaSuccess) {
      spare_events_.push_back(e);
      return cuda_error("cudaEventRecord(fence)", __FILE__, __LINE__, r);
    }
    fences_.push_back({step, e});
    return Status::Ok();
  }
  Status fences_done(uint64_t* done) override {
    while (!fences_.empty()) {
      const cudaError_t q = cudaEventQuery(fences_.front().event);
      if (q == cudaErrorNotReady) {
        cudaGetLastError();  // not an error: the step is still running
        break;
      }
      if (q != cudaSuccess) return cuda_error("cudaEventQuery(fence)", __FILE__, __LINE__, q);
      pop_fence();
    }
    *done = fence_done_;
    return Status::Ok();
  }
  Status wait_fence(uint64_t step) override {
    while (!fences_.empty() && fences_.front().step <= step) {
      KC_CUDA_TRY(cudaEventSynchronize(fences_.front().event));
      pop_fence();
    }
    return Status::Ok();
  }

  MemoryStats memory_stats() const override {
    const DeviceMemoryCounters& m = device_memory_counters();
    return MemoryStats{true, m.current.load(), m.peak.load()};
  }
  void reset_peak_memory() override { reset_device_peak(); }

 private:
  // count elements of a device result out to the host, then the stream finished.
  template <class T>
  Status copy_out(T* host, const T* dev, size_t count) {
    if (count) KC_CUDA_TRY(cudaMemcpyAsync(host, dev, count * sizeof(T), cudaMemcpyDeviceToHost, s_));
    return finish_stream(s_);
  }

  friend class CudaEngine;
  // A row codec operation (encode_rows / decode_rows `op`): the format's checks, nothing
  // to do for n == 0, the cache attached; body(arena, head_dim) launches and copies.
  template <class Body>
  Status row_codec_op(Format f, const char* op, const Cache& c, const RowRef* rows, int n, Body body) {
    return with_row_codec(f, op, [&](auto codec) -> Status {
      using C = decltype(codec);
      KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>(op).c_str()));
      if (n == 0) return Status::Ok();
      DeviceArena* a;
      KC_RETURN_IF_ERROR(attach(c, &a));
      return body(a, c.lay.head_dim);
    });
  }
  // The device arena of a held cache or of an alias of it, else null.
  DeviceArena* held_arena_of(const Cache& c) {
    if (!held_) return nullptr;
    if (held_ == &c) return &held_arena_;
    for (Alias& x : aliases_)
      if (x.cache == &c) return x.arena.get();
    return nullptr;
  }
  bool is_held(const DeviceArena* a) const {
    if (a == &held_arena_) return true;
    for (const Alias& x : aliases_)
      if (x.arena.get() == a) return true;
    return false;
  }
  // The arena that holds c on the device: the held one or an alias of it (its page tables
  // refreshed if the image's changed; the memory not copied), else the per-call arena
  // loaded from the image.
  Status attach(const Cache& c, DeviceArena** a) {
    if (DeviceArena* h = held_arena_of(c)) {
      KC_RETURN_IF_ERROR(h->refresh_tables(c, s_));
      *a = h;
      return Status::Ok();
    }
    KC_RETURN_IF_ERROR(arena_.load(c, s_));
    *a = &arena_;
    return Status::Ok();
  }
  // After a write: the per-call arena back to the image; a held cache stays on the device.
  Status detach(Cache& c, const DeviceArena& a) {
    if (is_held(&a)) return Status::Ok();
    return a.store(c, s_);
  }
  void pop_fence() {
    fence_done_ = fences_.front().step;
    spare_events_.push_back(fences_.front().event);
    fences_.pop_front();
  }
  // The held cache's device memory out to its host image, the stream finished.
  Status sync_held() {
    KC_RETURN_IF_ERROR(held_arena_.store(*held_, s_));
    return finish_stream(s_);
  }

  DeviceInfo info_;
  cudaStream_t s_;
  bool own_stream_;
  DeviceArena arena_;
  DeviceScratch scratch_;
  Cache* held_ = nullptr;     // the cache held on the device (EngineBackend::hold), or null
  DeviceArena held_arena_;
  struct Alias {
    Cache* cache;
    std::unique_ptr<DeviceArena> arena;  // tables only, over held_arena_'s memory
  };
  std::vector<Alias> aliases_;
  struct Fence {
    uint64_t step;
    cudaEvent_t event;
  };
  std::deque<Fence> fences_;
  std::vector<cudaEvent_t> spare_events_;
  uint64_t fence_done_ = 0;
  std::unique_ptr<EngineBackend> engine_;
};

// The engine kernels on the backend's stream, its buffers in device memory; the KV steps
// on the backend's arenas (held or per call).
class CudaEngine final : public EngineBackend {
 public:
  explicit CudaEngine(CudaBackend& b) : b_(b) {}
  ~CudaEngine() override {
    open_gate();
    if (prof_flag_) cudaFreeHost(const_cast<int*>(prof_flag_));
    for (cudaEvent_t e : prof_free_) cudaEventDestroy(e);
    for (const Span& sp : prof_spans_) cudaEventDestroy(sp.a), cudaEventDestroy(sp.b);
    if (prof_begin_) cudaEventDestroy(prof_begin_);
    if (prof_end_) cudaEventDestroy(prof_end_);
  }
  std::string name() const override { return "cuda"; }
  bool on_device() const override { return true; }

  Status scratch(int slot, size_t bytes, void** p) override {
    if (slot < 0 || slot >= kScratchSlots) return Status::Error("engine scratch: slot out of range");
    Grow& g = bufs_[slot];
    if (bytes > g.cap) {
      open_gate();  // the copy below waits for the stream
      // Grown keeping its contents (a forward may grow a buffer it has filled).
      void* q = nullptr;
      KC_RETURN_IF_ERROR(device_alloc(&q, bytes));
      if (g.cap) {
        KC_CUDA_TRY(cudaMemcpyAsync(q, g.p, g.cap, cudaMemcpyDeviceToDevice, b_.s_));
        KC_RETURN_IF_ERROR(finish_stream(b_.s_));
        device_free(g.p, g.cap);
      }
      g.p = q;
      g.cap = bytes;
    }
    *p = g.p;
    return Status::Ok();
  }
  Status weights(uint64_t owner, const void* host, size_t bytes, const void** p) override {
    auto key = std::make_pair(owner, host);
    auto it = weights_.find(key);
    if (it == weights_.end()) {
      open_gate();  // the upload below waits for the stream
      // On the backend's stream, then finished: a plain cudaMemcpy from pageable memory
      // runs on the legacy stream and may return before its DMA is done, and the
      // backend's non-blocking stream would not wait for it (the first forward read
      // half-uploaded weights that way).
      auto buf = std::make_unique<DevBuf<uint8_t>>();
      KC_RETURN_IF_ERROR(buf->upload_async(static_cast<const uint8_t*>(host), bytes, b_.s_));
      KC_RETURN_IF_ERROR(finish_stream(b_.s_));
      it = weights_.emplace(key, std::move(buf)).first;
    }
    if (it->second->size() != bytes) return Status::Error("engine weights: a host buffer changed its size");
    *p = it->second->get();
    return Status::Ok();
  }
  Status upload(void* dst, const void* host, size_t bytes) override {
    if (bytes) KC_CUDA_TRY(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, b_.s_));
    return Status::Ok();
  }
  Status download(void* host, const void* src, size_t bytes) override {
    if (!prof_open_) {
      if (bytes) KC_CUDA_TRY(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, b_.s_));
      return finish_stream(b_.s_);
    }
    // The end of a profiled step: its last event, the gate opened, the step's events read.
    KC_CUDA_TRY(cudaEventRecord(prof_end_, b_.s_));
    prof_.host_enqueue_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - prof_t0_).count();
    open_gate();
    if (bytes) KC_CUDA_TRY(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, b_.s_));
    KC_RETURN_IF_ERROR(finish_stream(b_.s_));
    return collect_step();
  }
  Status embed(const uint16_t* E, int64_t vocab, int64_t dim, const int32_t* tokens, int n, float* out) override {
    KC_RETURN_IF_ERROR(validate_embed(E, vocab, dim, tokens, n, out));
    Prof pr(this, [] { return std::string("embed"); });
    return pr.end(launch_engine_embed(E, dim, tokens, n, out, b_.s_));  // tokens checked by the caller (device memory)
  }
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    KC_RETURN_IF_ERROR(validate_rms_norm(x, w, n, dim, eps, out));
    Prof pr(this, [&] { return "rms_norm dim " + std::to_string(dim); });
    return pr.end(launch_engine_rms_norm(x, w, n, dim, eps, out, b_.s_, debug_.legacy_kernels));
  }
  Status rms_norm_parts(const NormPart* parts, int count, int dim, float eps) override {
    if (debug_.legacy_kernels) return EngineBackend::rms_norm_parts(parts, count, dim, eps);
    KC_RETURN_IF_ERROR(validate_rms_norm_parts(parts, count, dim, eps));
    Prof pr(this, [&] { return "rms_norm parts " + std::to_string(count) + " dim " + std::to_string(dim); });
    return pr.end(launch_engine_rms_norm_parts(parts, count, dim, eps, b_.s_));
  }
  Status matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) override {
    KC_RETURN_IF_ERROR(validate_matmul(W, rows, cols, x, n, y));
    Prof pr(this, [&] { return "matmul " + std::to_string(rows) + " x " + std::to_string(cols); });
    return pr.end(launch_engine_matmul(W, rows, cols, x, n, y, b_.s_, debug_.legacy_kernels, debug_.tree_passes));
  }
  Status matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n) override {
    KC_RETURN_IF_ERROR(validate_matmul_parts(parts, count, cols, x, n));
    Prof pr(this, [&] {
      std::string k = "matmul ";
      for (int i = 0; i < count; ++i) k += (i ? "+" : "") + std::to_string(parts[i].rows);
      return k + " x " + std::to_string(cols);
    });
    return pr.end(launch_engine_matmul_parts(parts, count, cols, x, n, b_.s_, debug_.legacy_kernels, debug_.tree_passes));
  }
  Status swiglu(const float* gate, const float* up, int64_t count, float* out) override {
    KC_RETURN_IF_ERROR(validate_swiglu(gate, up, count, out));
    Prof pr(this, [] { return std::string("swiglu"); });
    return pr.end(launch_engine_swiglu(gate, up, count, out, b_.s_));
  }
  Status add(float* h, const float* t, int64_t count) override {
    KC_RETURN_IF_ERROR(validate_add(h, t, count));
    Prof pr(this, [] { return std::string("add"); });
    return pr.end(launch_engine_add(h, t, count, b_.s_));
  }
  Status add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out) override {
    KC_RETURN_IF_ERROR(validate_add_rms_norm(h, t, w, n, dim, eps, out));
    if (!launch_engine_add_rms_norm_fits(h, t, w, n, dim, out) || debug_.legacy_kernels)
      return EngineBackend::add_rms_norm(h, t, w, n, dim, eps, out);
    Prof pr(this, [&] { return "add + rms_norm dim " + std::to_string(dim); });
    return pr.end(launch_engine_add_rms_norm(h, t, w, n, dim, eps, out, b_.s_));
  }
  Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps, const uint16_t* W,
                int64_t vocab, float* out) override {
    KC_RETURN_IF_ERROR(validate_logits(h, sel, m, dim, norm, eps, W, vocab, out));
    if (m == 0) return Status::Ok();
    int32_t* dsel;
    float* tmp;
    KC_RETURN_IF_ERROR(put_table(3, sel, size_t(m), &dsel));
    KC_RETURN_IF_ERROR(internal_.get(1, size_t(m) * dim, &tmp));
    Prof pr(this, [] { return std::string("logits (final norm + head)"); });
    KC_RETURN_IF_ERROR(launch_engine_gather_norm(h, dsel, m, dim, norm, eps, tmp, b_.s_, debug_.legacy_kernels));
    return pr.end(launch_engine_matmul(W, vocab, dim, tmp, m, out, b_.s_, debug_.legacy_kernels, debug_.tree_passes));
  }
  Status argmax(const float* x, int n, int64_t len, int32_t* out) override {
    KC_RETURN_IF_ERROR(validate_argmax(x, n, len, out));
    Prof pr(this, [] { return std::string("argmax"); });
    return pr.end(launch_engine_argmax(x, n, len, out, b_.s_));
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    KC_RETURN_IF_ERROR(validate_rope(c, p, rows, n));
    if (n == 0) return Status::Ok();
    RopeRow* dr;
    DeviceArena* a;
    KC_RETURN_IF_ERROR(b_.attach(c, &a));
    KC_RETURN_IF_ERROR(put_table(0, rows, size_t(n), &dr));
    // (A cache that is not held goes back to the host below: not timed.)
    Prof pr(this, [] { return std::string("rope_store"); }, b_.is_held(a));
    KC_RETURN_IF_ERROR(pr.end(launch_rope_store(a->views(), c.lay.format, c.lay.kv_heads, c.lay.head_dim, p, dr, n, q, k, v,
                                                  q_out, b_.s_)));
    if (b_.is_held(a)) return Status::Ok();  // nothing waits: the next download finds any error
    open_gate();
    KC_RETURN_IF_ERROR(b_.detach(c, *a));
    return finish_stream(b_.s_);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KC_RETURN_IF_ERROR(validate_attention(c, p, rows, n, tails));
    if (n == 0) return Status::Ok();
    const int d = c.lay.head_dim;
    const AttnShape sh(p, rows, n, d, tails);
    AttnRow* dr;
    int32_t* dt;
    float *pm, *pl, *po;
    DeviceArena* a;
    KC_RETURN_IF_ERROR(b_.attach(c, &a));
    KC_RETURN_IF_ERROR(put_table(1, rows, size_t(n), &dr));
    KC_RETURN_IF_ERROR(put_table(2, sh.tails.data(), sh.tails.size(), &dt));
    KC_RETURN_IF_ERROR(internal_.get(5, sh.np, &pm));
    KC_RETURN_IF_ERROR(internal_.get(6, sh.np, &pl));
    KC_RETURN_IF_ERROR(internal_.get(7, sh.np * d, &po));
    Prof pr(this, [] { return std::string("attention (partial + merge)"); }, b_.is_held(a));
    Status st;
    for (const AttnBatch& b : sh.batches) {
      const size_t o = size_t(b.first) * p.q_heads * d;
      st = launch_attention(a->views(), c.lay.format, c.lay.kv_heads, d, p, dr + b.first, b.n, dt, q + o, b.max_chunks,
                            pm, pl, po, out + o, b_.s_);
      if (!st.ok) break;
    }
    KC_RETURN_IF_ERROR(pr.end(st));
    if (b_.is_held(a)) return Status::Ok();
    open_gate();
    return finish_stream(b_.s_);
  }
  Status hold(Cache& c) override {
    open_gate();
    if (b_.held_ == &c) return Status::Ok();
    if (b_.held_) return Status::Error("engine hold: another cache is already held on the device");
    KC_RETURN_IF_ERROR(c.validate());
    KC_RETURN_IF_ERROR(b_.held_arena_.load(c, b_.s_));
    KC_RETURN_IF_ERROR(finish_stream(b_.s_));
    b_.held_ = &c;
    return Status::Ok();
  }
  Status release(Cache& c) override {
    open_gate();
    for (size_t i = 0; i < b_.aliases_.size(); ++i)
      if (b_.aliases_[i].cache == &c) {
        KC_RETURN_IF_ERROR(finish_stream(b_.s_));  // nothing still reads its tables
        b_.aliases_.erase(b_.aliases_.begin() + i);
        return Status::Ok();
      }
    if (b_.held_ != &c) return Status::Error("engine release: this cache is not held");
    const Status st = b_.sync_held();
    b_.held_ = nullptr;
    b_.aliases_.clear();
    return st;
  }
  Status set_debug(const Debug& d) override {
    if (!engine_tree_passes_known(d.tree_passes))
      return Status::Error("engine debug: tree_passes " + std::to_string(d.tree_passes) + " is not 0, 1 or 2");
    open_gate();
    if (d.profile && !prof_flag_) {
      int* f = nullptr;
      KC_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&f), sizeof(int), cudaHostAllocMapped));
      *f = 1;
      prof_flag_ = f;
      KC_CUDA_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&prof_flag_dev_), f, 0));
      KC_CUDA_TRY(cudaEventCreate(&prof_begin_));
      KC_CUDA_TRY(cudaEventCreate(&prof_end_));
    }
    debug_ = d;
    return Status::Ok();
  }
  Status take_profile(Profile* p) override {
    open_gate();
    *p = prof_;
    p->kinds.clear();
    for (const auto& [k, v] : prof_kinds_) p->kinds.push_back({k, v.first, v.second});
    std::stable_sort(p->kinds.begin(), p->kinds.end(), [](const ProfileKind& a, const ProfileKind& b) { return a.us > b.us; });
    prof_ = Profile{};
    prof_kinds_.clear();
    return Status::Ok();
  }
  Status hold_alias(Cache& c, Cache& base) override {
    if (!b_.held_ || b_.held_ != &base) return Status::Error("engine hold_alias: the base cache is not held");
    if (&c == &base || b_.held_arena_of(c)) return Status::Error("engine hold_alias: this cache is already held");
    auto a = std::make_unique<DeviceArena>();
    KC_RETURN_IF_ERROR(a->alias(c, b_.held_arena_.mem(), b_.held_arena_.mem_bytes(), b_.s_));
    b_.aliases_.push_back({&c, std::move(a)});
    return Status::Ok();
  }

 private:
  // ---- the timing option (Debug::profile) ----
  struct Span {
    std::string kind;
    cudaEvent_t a, b;
  };
  // An event pair around one engine call's launches (nothing when the option is off).
  class Prof {
   public:
    template <class KindFn>
    Prof(CudaEngine* e, KindFn kind, bool on = true) : e_(on && e->debug_.profile ? e : nullptr) {
      if (!e_) return;
      st_ = e_->begin_span(kind());
    }
    Status end(Status launched) {
      if (!e_ || !launched.ok || !st_.ok) return launched.ok ? st_ : launched;
      return e_->end_span();
    }

   private:
    CudaEngine* e_;
    Status st_ = Status::Ok();
  };
  Status take_event(cudaEvent_t* e) {
    if (!prof_free_.empty()) {
      *e = prof_free_.back();
      prof_free_.pop_back();
      return Status::Ok();
    }
    KC_CUDA_TRY(cudaEventCreate(e));
    return Status::Ok();
  }
  // The first call of a step closes the gate: the step waits on the device until its download.
  Status begin_span(std::string kind) {
    if (!prof_open_) {
      *prof_flag_ = 0;
      profile_gate_kernel<<<1, 1, 0, b_.s_>>>(prof_flag_dev_);
      KC_LAUNCH_CHECK("profile_gate_kernel");
      KC_CUDA_TRY(cudaEventRecord(prof_begin_, b_.s_));
      prof_open_ = true;
      prof_t0_ = std::chrono::steady_clock::now();
    }
    Span sp{std::move(kind), nullptr, nullptr};
    KC_RETURN_IF_ERROR(take_event(&sp.a));
    KC_RETURN_IF_ERROR(take_event(&sp.b));
    KC_CUDA_TRY(cudaEventRecord(sp.a, b_.s_));
    prof_spans_.push_back(std::move(sp));
    return Status::Ok();
  }
  Status end_span() {
    KC_CUDA_TRY(cudaEventRecord(prof_spans_.back().b, b_.s_));
    return Status::Ok();
  }
  // Opens the gate (the host is about to wait for the stream, or the step ends).
  void open_gate() {
    if (prof_flag_) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *prof_flag_ = 1;
    }
  }
  // After the step's download: every span's time into its kind, the step's span.
  Status collect_step() {
    prof_open_ = false;
    float ms = 0;
    KC_CUDA_TRY(cudaEventElapsedTime(&ms, prof_begin_, prof_end_));
    prof_.gpu_span_us += 1e3 * ms;
    prof_.steps += 1;
    for (Span& sp : prof_spans_) {
      KC_CUDA_TRY(cudaEventElapsedTime(&ms, sp.a, sp.b));
      auto& k = prof_kinds_[sp.kind];
      k.first += 1;
      k.second += 1e3 * ms;
      prof_free_.push_back(sp.a);
      prof_free_.push_back(sp.b);
    }
    prof_spans_.clear();
    return Status::Ok();
  }
  Debug debug_;
  volatile int* prof_flag_ = nullptr;  // host memory mapped into the device
  int* prof_flag_dev_ = nullptr;
  bool prof_open_ = false;
  cudaEvent_t prof_begin_ = nullptr, prof_end_ = nullptr;
  std::chrono::steady_clock::time_point prof_t0_;
  std::vector<Span> prof_spans_;
  std::vector<cudaEvent_t> prof_free_;
  Profile prof_;
  std::map<std::string, std::pair<int64_t, double>> prof_kinds_;

  // A small host table (rope rows, attention rows, tails, selected rows) on the device: copied
  // only when its bytes differ from the last copy of the same table, so the layers of one
  // forward (the same rows in every layer) copy it once. The device buffer is written by
  // nothing else, and the stream keeps the copy before every kernel that reads it.
  template <class T>
  Status put_table(int i, const T* src, size_t n, T** p) {
    Table& t = tables_[i];
    const size_t bytes = n * sizeof(T);
    const uint8_t* b = reinterpret_cast<const uint8_t*>(src);
    if (!(t.dev.get() && t.host.size() == bytes && std::equal(b, b + bytes, t.host.begin()))) {
      KC_RETURN_IF_ERROR(t.dev.upload_async(b, bytes, b_.s_));
      t.host.assign(b, b + bytes);
    }
    *p = reinterpret_cast<T*>(t.dev.get());
    return Status::Ok();
  }
  struct Table {
    DevBuf<uint8_t> dev;
    std::vector<uint8_t> host;
  };
  Table tables_[4];

  CudaBackend& b_;
  struct Grow {
    void* p = nullptr;
    size_t cap = 0;
    ~Grow() { device_free(p, cap); }
  };
  Grow bufs_[kScratchSlots];
  DeviceScratch internal_;  // the engine's own row tables and attention partials
  std::map<std::pair<uint64_t, const void*>, std::unique_ptr<DevBuf<uint8_t>>> weights_;
};

EngineBackend* CudaBackend::engine() {
  if (!engine_) engine_ = std::make_unique<CudaEngine>(*this);
  return engine_.get();
}

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
