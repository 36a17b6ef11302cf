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

}  // namespace kc
