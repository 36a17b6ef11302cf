#include "kernels/backend/kernel_fit.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/backend/cuda_check.h"

namespace kc {
namespace {
std::mutex& fit_mutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

Status cuda_device_facts(CudaDeviceFacts* out) {
  static std::map<int, CudaDeviceFacts> known;
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(fit_mutex());
  auto it = known.find(dev);
  if (it == known.end()) {
    CudaDeviceFacts f;
    KC_CUDA_TRY(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, dev));
    KC_CUDA_TRY(cudaDeviceGetAttribute(&f.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    KC_CUDA_TRY(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, dev));
    KC_CUDA_TRY(cudaDeviceGetAttribute(&f.l2_bytes, cudaDevAttrL2CacheSize, dev));
    it = known.emplace(dev, f).first;
  }
  *out = it->second;
  return Status::Ok();
}

namespace {
// Under fit_mutex.
Status allow_smem_locked(int dev, const void* kern, size_t smem) {
  static std::map<std::pair<int, const void*>, size_t> allowed;  // (device, kernel) -> bytes set
  size_t& a = allowed[{dev, kern}];
  if (smem > a) {
    KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    a = smem;
  }
  return Status::Ok();
}
}  // namespace

Status cuda_allow_smem(const void* kern, size_t smem) {
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(fit_mutex());
  return allow_smem_locked(dev, kern, smem);
}

Status cuda_blocks_per_sm(const void* kern, int threads, size_t smem, int* per_sm) {
  static std::map<std::tuple<int, const void*, int, size_t>, int> resident;
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(fit_mutex());
  auto it = resident.find({dev, kern, threads, smem});
  if (it == resident.end()) {
    KC_RETURN_IF_ERROR(allow_smem_locked(dev, kern, smem));
    int n = 0;
    KC_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, threads, smem));
    if (n < 1)
      return Status::Error("kernel does not fit on a multiprocessor: " + std::to_string(threads) + " threads, " +
                           std::to_string(smem) + " bytes of shared memory");
    it = resident.emplace(std::make_tuple(dev, kern, threads, smem), n).first;
  }
  *per_sm = it->second;
  return Status::Ok();
}

Status cuda_active_clusters(const void* kern, int cl, int threads, size_t smem, int* clusters) {
  static std::map<std::tuple<int, const void*, int, int, size_t>, int> fits;
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(fit_mutex());
  auto it = fits.find({dev, kern, cl, threads, smem});
  if (it == fits.end()) {
    KC_RETURN_IF_ERROR(allow_smem_locked(dev, kern, smem));
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = cluster_launch(dim3(unsigned(cl)), dim3(unsigned(threads)), smem, nullptr, cl, &attr);
    int n = 0;
    KC_CUDA_TRY(cudaOccupancyMaxActiveClusters(&n, kern, &cfg));
    it = fits.emplace(std::make_tuple(dev, kern, cl, threads, smem), n).first;
  }
  *clusters = it->second;
  return Status::Ok();
}

}  // namespace kc
