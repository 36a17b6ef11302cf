// Launchers of the rope store, attention and keep kernels: device pointers in, enqueued on
// the caller's stream, Status out (launch errors; the caller finishes its stream).
#pragma once
#include <cuda_runtime.h>

#include "kernels/backend/cuda_check.h"
#include "kernels/backend/kernel_fit.h"
#include "kernels/backend/kernel_paths.h"
#include "kernels/layout/kv_layout.h"
#include "kernels/attention/params.h"

namespace kc {
// A launch configuration with a programmatic dependency on the stream's previous kernel: its
// blocks may be scheduled while that kernel's last blocks run and wait in
// cudaGridDependencySynchronize. The merge launches this way, and bench attention's launch
// floor times an empty kernel launched the same way. attr must outlive the launch call.
inline cudaLaunchConfig_t dependent_launch(dim3 grid, dim3 block, cudaStream_t s, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = s;
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Rows of one partial or merge launch: a row is a grid index that CUDA caps at 65535 (the
// partial's z, the merge's y). launch_partial and launch_merge take more in launches of this many.
constexpr int kAttnRowsPerLaunch = 65535;

// The split-K partial alone (the tensor cores where attn_uses_mma, the fma chain otherwise):
// launch_attention's first launch, also timed alone by bench attention --timing partial.
Status launch_partial(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                      const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                      cudaStream_t s);

Status launch_rope_store(const KvView* views, Format fmt, int hkv, int d, const RopeParams& p, const RopeRow* rows,
                         int n, const float* q, const float* k, const float* v, float* q_out, cudaStream_t s);
Status launch_attention(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                        const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                        float* out, cudaStream_t s);
// keep: every field of `lay` (the views' layout: it picks the kernel, keep.cu) moves; `groups`
// lane groups (lane_off has groups + 1 entries), any number: a group is a grid y index, so more
// than kKeepGroupsPerLaunch go in several launches.
constexpr int kKeepGroupsPerLaunch = 65535;
Status launch_keep(const KvView* views, const KvLayout& lay, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s);
}  // namespace kc
