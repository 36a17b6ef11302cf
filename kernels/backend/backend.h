// Backend: the one interface behind which the kernels run. `cpu` runs the host twins,
// `cuda` the CUDA kernels (inputs copied to the device, results copied back). Every
// operation validates its inputs and returns a Status; none aborts the process.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/params.h"
#include "kernels/attention/rows.h"
#include "kernels/codecs/rows.h"
#include "kernels/layout/cache.h"
#include "kernels/layout/status.h"

namespace kc {

class EngineBackend;  // kernels/engine/engine_backend.h

// Device memory of the process (kernels/backend/device_memory.h): bytes allocated now and
// the peak since the last reset. `applicable` is false where the backend has no device
// memory (cpu): the numbers are then meaningless, and a receipt says null, never 0.
struct MemoryStats {
  bool applicable = false;
  uint64_t current_bytes = 0;
  uint64_t peak_bytes = 0;
};

// A byte range of a cache's memory (offsets into Cache::mem).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct DeviceInfo {
  std::string name;      // GPU name or CPU model
  std::string compute;   // compute capability, or "" on cpu
  std::string driver;    // driver / runtime versions, or "" on cpu
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual DeviceInfo device() const = 0;

  // Row codecs (codecs/rows.h: fp8, q4, mxfp4): encode n rows of x ([n][head_dim] fp32,
  // original space) into the cache through kv_row / kv_scale in `format`; decode n rows
  // from the cache into out ([n][head_dim]; q4: the inverse rotation applied). The cache's
  // format must be `format`.
  virtual Status encode_rows(Format format, Cache& cache, const float* x, const RowRef* rows, int n) = 0;
  virtual Status decode_rows(Format format, const Cache& cache, const RowRef* rows, int n, float* out) = 0;
  // E4M3 conversion of the floats whose bit patterns are first .. first+count-1.
  virtual Status e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) = 0;

  // Rope store: q [n][q_heads][d], k and v [n][kv_heads][d] fp32; rotated queries to
  // q_out [n][q_heads][d]; rotated k and plain v stored at each row's slot. q may be
  // null (rows whose k and v are stored without a query).
  virtual Status rope_store(Cache& cache, const RopeParams& p, const RopeRow* rows, int n, const float* q,
                            const float* k, const float* v, float* q_out) = 0;
  // Split-K attention (partial + in-order merge): q [n][q_heads][d] -> out [n][q_heads][d].
  // tails holds every row's tail cache positions (row.tail_off, row.tail_len).
  virtual Status attention(const Cache& cache, const AttnParams& p, const AttnRow* rows, int n,
                           const std::vector<int32_t>& tails, const float* q, float* out) = 0;
  // How attention computes its two products for a cache format and head_dim (the
  // float64 bound takes its depths from it; attention/rows.h): the fma chain of the host
  // twin, or the tensor-core order of the cuda backend.
  virtual AttnArith attention_arith(Format format, int head_dim) const {
    (void)format, (void)head_dim;
    return AttnArith::fma_chain;
  }
  // Scale-plane packing (see pack/blob.h): positions [pos0, pos0 + count) of `lane`, every
  // declared field, into a versioned host blob; unpack a blob into `lane` at pos0. Unpack
  // refuses a blob that does not match (layout, field table, size, checksum) and then
  // writes nothing.
  virtual Status pack(const Cache& cache, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob) = 0;
  virtual Status unpack(Cache& cache, int lane, int64_t pos0, const std::vector<uint8_t>& blob) = 0;
  // Compaction: every field's row src -> dst, per lane in the given (ascending) order.
  virtual Status keep(Cache& cache, const KeepMove* moves, int n) = 0;
  // The engine kernels of this backend, on its own memory (kernels/engine/engine_backend.h),
  // or null (a decorator: the engine then runs the host twins and calls this backend for
  // the KV steps). Owned by the backend.
  virtual EngineBackend* engine() { return nullptr; }

  // Fills `n` byte ranges of the cache's memory with `value` (the serving pool's poison of
  // freed pages, a control's erased scale planes). Where the cache lives: the host image,
  // or the device copy of a held cache (EngineBackend::hold), so a held cache stays
  // valid. Refuses a range outside the memory, writing nothing. The default fills the
  // host image (right for every backend that holds nothing).
  virtual Status fill(Cache& cache, const ByteRange* ranges, int n, uint8_t value);

  // Fences of the work enqueued so far: fence(step) marks everything issued before it as
  // step `step` (increasing); fences_done gives the highest step whose work has finished
  // on the device (non-blocking); wait_fence(step) returns once step `step` finished. The
  // default (and cpu): work is done when its call returned, so every recorded step is done.
  virtual Status fence(uint64_t step) {
    fenced_ = step;
    return Status::Ok();
  }
  virtual Status fences_done(uint64_t* done) {
    *done = fenced_;
    return Status::Ok();
  }
  virtual Status wait_fence(uint64_t step) {
    (void)step;
    return Status::Ok();
  }

  // Device memory (see MemoryStats): not applicable unless the backend has a device.
  virtual MemoryStats memory_stats() const { return MemoryStats{}; }
  // Restarts the peak at the bytes allocated now (process-wide); no-op without a device.
  virtual void reset_peak_memory() {}

 private:
  uint64_t fenced_ = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
// Errors (not built with CUDA, no device, driver failure) come back in *st.
std::unique_ptr<Backend> make_cuda_backend(Status* st);
// True when the cuda backend is built and a device answers.
bool cuda_device_present(std::string* why = nullptr);

// Checks shared by every backend before a row batch is launched.
Status validate_rows(const Cache& cache, const RowRef* rows, int n);
Status validate_rope(const Cache& cache, const RopeParams& p, const RopeRow* rows, int n);
Status validate_attention(const Cache& cache, const AttnParams& p, const AttnRow* rows, int n,
                          const std::vector<int32_t>& tails);
Status validate_keep(const Cache& cache, const KeepMove* moves, int n);
Status validate_fill(const Cache& cache, const ByteRange* ranges, int n);

}  // namespace kc
