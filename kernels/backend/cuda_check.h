// One error macro for CUDA calls: records the statement, file:line and device, and
// returns a Status instead of aborting. KC_LAUNCH_CHECK follows every launch.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "kernels/layout/status.h"

namespace kc {

inline Status cuda_error(const char* stmt, const char* file, int line, cudaError_t e) {
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

#define KC_LAUNCH_CHECK(kernel_name)                                                   \
  do {                                                                                 \
    cudaError_t kc_e_ = cudaGetLastError();                                            \
    if (kc_e_ == cudaSuccess) kc_e_ = cudaDeviceSynchronize();                         \
    if (kc_e_ != cudaSuccess) return ::kc::cuda_error("launch " kernel_name, __FILE__, __LINE__, kc_e_); \
  } while (0)

// Launch check without a device-wide sync (benchmarks time back-to-back launches).
#define KC_LAUNCH_CHECK_ASYNC(kernel_name)                                             \
  do {                                                                                 \
    cudaError_t kc_e_ = cudaGetLastError();                                            \
    if (kc_e_ != cudaSuccess) return ::kc::cuda_error("launch " kernel_name, __FILE__, __LINE__, kc_e_); \
  } while (0)

// Device buffer owned by the host scope that made it.
template <class T>
class DevBuf {
 public:
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { if (p_) cudaFree(p_); }
  Status alloc(size_t n) {
    if (p_) { cudaFree(p_); p_ = nullptr; }
    n_ = n;
    if (n == 0) return Status::Ok();
    KC_CUDA_TRY(cudaMalloc(&p_, n * sizeof(T)));
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
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace kc
