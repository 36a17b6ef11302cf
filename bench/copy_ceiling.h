// The copy ceiling of the rope-store and compact benches: a device-to-device copy of the
// bytes a kernel moves, measured in the same run (bench/timing.cuh).
#pragma once
#include <cstdint>

#include "kernels/layout/status.h"

namespace kc {

struct CopyCeiling {
  double bytes = 0;        // bytes copied one way (a multiple of 16)
  double memcpy_us = 0;    // median: cudaMemcpyAsync device to device
  double kernel_us = 0;    // median: 16-byte load / store grid-stride copy kernel
  double best_us() const { return memcpy_us < kernel_us ? memcpy_us : kernel_us; }
  // (bytes read + bytes written) / time of the faster copy.
  double bytes_per_s() const { return 2.0 * bytes / (best_us() * 1e-6); }
};
// Copies `bytes` (rounded up to 16) between two fresh device buffers both ways. flush_l2:
// the L2 read out (a buffer of twice its size, untimed) before every run (bench/timing.cuh,
// BenchL2Flush); false: runs back to back.
Status bench_copy_ceiling(uint64_t bytes, int warmup, int reps, bool flush_l2, CopyCeiling* c);

}  // namespace kc
