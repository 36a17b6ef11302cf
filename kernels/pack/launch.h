// Launcher of the scale-plane packing kernel (pack/pack.cu): device pointers in, enqueued
// on the caller's stream, Status out; and the cuda backend's pack / unpack.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_arena.h"
#include "kernels/layout/kv_layout.h"
#include "kernels/pack/blob.h"

namespace kc {

// Moves positions [pos0, pos0 + count) of the lane `v` (device addresses) between the
// cache and `data` (the blob's data region on the device), one job per copies[i]
// (device array, ncopies entries): gather (cache -> data) or scatter (data -> cache).
// Enqueued on s; launch errors come back (the caller finishes its stream).
Status launch_pack_rows(const KvView& v, int64_t pos0, int64_t count, const PackCopy* copies, int ncopies,
                        uint8_t* data, bool scatter, cudaStream_t s);

// The cuda backend's pack / unpack of a host image: the image into the arena, the blob's
// data through scratch, on s; finished (the stream waited for) before they return. With
// `held`, the arena already holds c on the device (EngineBackend::hold, tables current):
// nothing of the image is copied in or out.
Status pack_cuda(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob,
                 DeviceArena& arena, DeviceScratch& scratch, cudaStream_t s, bool held = false);
Status unpack_cuda(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob, DeviceArena& arena,
                   DeviceScratch& scratch, cudaStream_t s, bool held = false);

}  // namespace kc
