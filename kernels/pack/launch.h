// Launcher of the scale-plane packing kernel (pack/pack.cu): device pointers in, Status out.
#pragma once
#include <cstdint>

#include "kernels/backend/cuda_check.h"
#include "kernels/layout/kv_layout.h"
#include "kernels/pack/blob.h"

namespace kc {

// Moves positions [pos0, pos0 + count) of the lane `v` (device addresses) between the
// cache and `data` (the blob's data region on the device), one job per copies[i]
// (device array, ncopies entries): gather (cache -> data) or scatter (data -> cache).
// sync: check the launch with a device sync (false in benchmarks: launch errors only).
Status launch_pack_rows(const KvView& v, int64_t pos0, int64_t count, const PackCopy* copies, int ncopies,
                        uint8_t* data, bool scatter, bool sync);

}  // namespace kc
