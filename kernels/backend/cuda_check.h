// One error macro for CUDA calls: records the statement, file:line and device, and
// returns a Status instead of aborting. KC_LAUNCH_CHECK follows every launch; nothing in
// the kernel layer waits for the device (the caller finishes its stream).
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "kernels/backend/device_memory.h"
#include "kernels/layout/status.h"

namespace kc {

// The error is reported once, through the Status: the runtime's last error (which a failed
// API call such as cudaMalloc also sets) is cleared here, or the next KC_LAUNCH_CHECK would
// report it again against a launch that did nothing wrong (seen: bench attention's row after an
// out-of-memory row failed "in launch fill_kernel"). A sticky error (a kernel's fault) stays,
// as the runtime keeps it.
inline Status cuda_error(const char* stmt, const char* file, int line, cudaError_t e) {
  (void)cudaGetLastError();
  int dev = -1;
  cudaGetDevice(&dev);
  return Status::Error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                       ") in `" + stmt + "` at " + file + ":" + std::to_string(line) + " on device " +
                       std::to_string(dev));
}

#define KC_CUDA_TRY(stmt)                                                             \
  do {                                                                                \
    cudaError_t kc_e_ = (stmt);                                                       \
    if (kc_e_ != cudaSuccess) return ::kc::cuda_error(#stmt, __FILE__, __LINE__, kc_e_); \
  } while (0)

// After every launch: the launch's own error (bad configuration, too much shared memory),
// without waiting for the device. Errors the kernel meets while it runs come back from
// the caller's synchronisation of its stream (finish_stream).
#define KC_LAUNCH_CHECK(kernel_name)                                                   \
  do {                                                                                 \
    cudaError_t kc_e_ = cudaGetLastError();                                            \
    if (kc_e_ != cudaSuccess) return ::kc::cuda_error("launch " kernel_name, __FILE__, __LINE__, kc_e_); \
  } while (0)

// The caller's wait for its stream (the kernel layer never waits): the first error of any
// operation enqueued on it.
inline Status finish_stream(cudaStream_t s) {
  const cudaError_t e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) return cuda_error("cudaStreamSynchronize(stream)", __FILE__, __LINE__, e);
  return Status::Ok();
}

// Every device allocation goes through these two (the process-wide accounting of
// kernels/backend/device_memory.h): cudaMalloc / cudaFree with the bytes counted.
inline Status device_alloc(void** p, size_t bytes) {
  *p = nullptr;
  if (bytes == 0) return Status::Ok();
  KC_CUDA_TRY(cudaMalloc(p, bytes));
  note_device_alloc(bytes);
  return Status::Ok();
}
inline void device_free(void* p, size_t bytes) {
  if (!p) return;
  cudaFree(p);
  note_device_free(bytes);
}

// Device buffer owned by the host scope that made it.
template <class T>
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { drop(); }
  Status alloc(size_t n) {
    drop();
    n_ = n;
    if (n == 0) return Status::Ok();
    void* q = nullptr;
    KC_RETURN_IF_ERROR(device_alloc(&q, n * sizeof(T)));
    p_ = static_cast<T*>(q);
    cap_ = n;
    return Status::Ok();
  }
  Status upload(const T* src, size_t n) {
    KC_RETURN_IF_ERROR(alloc(n));
    if (n) KC_CUDA_TRY(cudaMemcpy(p_, src, n * sizeof(T), cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  Status download(T* dst, size_t n) const {
    if (n) KC_CUDA_TRY(cudaMemcpy(dst, p_, n * sizeof(T), cudaMemcpyDeviceToHost));
    return Status::Ok();
  }
  // Grow-only storage for n elements (kept across calls): reallocated only when too small.
  Status reserve(size_t n) {
    if (n <= cap_) return Status::Ok();
    drop();
    void* q = nullptr;
    KC_RETURN_IF_ERROR(device_alloc(&q, n * sizeof(T)));
    p_ = static_cast<T*>(q);
    cap_ = n;
    return Status::Ok();
  }
  // n elements in from the host, enqueued on s (reserve first).
  Status upload_async(const T* src, size_t n, cudaStream_t s) {
    KC_RETURN_IF_ERROR(reserve(n));
    n_ = n;
    if (n) KC_CUDA_TRY(cudaMemcpyAsync(p_, src, n * sizeof(T), cudaMemcpyHostToDevice, s));
    return Status::Ok();
  }
  // n elements out to the host, enqueued on s: dst is valid once s is finished.
  Status download_async(T* dst, size_t n, cudaStream_t s) const {
    if (n) KC_CUDA_TRY(cudaMemcpyAsync(dst, p_, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    return Status::Ok();
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  void drop() {
    device_free(p_, cap_ * sizeof(T));
    p_ = nullptr;
    cap_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
  size_t cap_ = 0;
};

}  // namespace kc
