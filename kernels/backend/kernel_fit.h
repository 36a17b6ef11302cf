// What a kernel's launch needs to know about the current device, asked of the runtime once
// per device and cached (a short row's timing includes the launcher's host time, so the
// launch path makes no attribute or occupancy query after the first).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/layout/status.h"

namespace kc {

// The current device's multiprocessor count, opt-in shared memory per block, compute
// capability's major number and L2 cache size in bytes.
struct CudaDeviceFacts {
  int sms = 0;
  int smem_optin = 0;
  int major = 0;
  int l2_bytes = 0;
};
Status cuda_device_facts(CudaDeviceFacts* out);

// Raises kern's dynamic shared-memory limit to smem on the current device, once per
// (device, kernel, larger size): the limit only grows, so every size set before stays
// launchable. A cudaDeviceReset would have to clear this cache.
Status cuda_allow_smem(const void* kern, size_t smem);

// Blocks of kern resident per multiprocessor with `threads` threads and smem bytes of
// dynamic shared memory on the current device (after cuda_allow_smem(kern, smem)), asked
// once per (device, kernel, threads, smem). An error if not one block fits.
Status cuda_blocks_per_sm(const void* kern, int threads, size_t smem, int* per_sm);

// A launch configuration of clusters of cl blocks along x (grid.x a multiple of cl). attr
// must outlive the launch call; cuda_active_clusters asks its fit with the same config.
inline cudaLaunchConfig_t cluster_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s, int cl,
                                         cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = unsigned(cl), attr->val.clusterDim.y = 1, attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Clusters of cl blocks of kern (`threads` threads, smem bytes of dynamic shared memory each)
// that the current device holds at once (after cuda_allow_smem(kern, smem); 0 when none
// fits), asked once per (device, kernel, cl, threads, smem). sm_90 and newer.
Status cuda_active_clusters(const void* kern, int cl, int threads, size_t smem, int* clusters);

}  // namespace kc
