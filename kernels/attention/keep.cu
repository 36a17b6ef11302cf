// Compaction (keep) kernel. Host twin: keep_host (attention/twin.cpp); contract: qwen-pages.
//
// keep_kernel: block (field, lane); the lane's moves run in order, a barrier between
//   moves, so overlapping moves give the result of sequential in-order moves. Every
//   declared field (codes and scales) moves; addresses come from kv_field_row.
#include <cuda_runtime.h>

#include "kernels/attention/launch.h"

namespace kc {

__global__ void keep_kernel(const KvView* views, const KeepMove* moves, const int32_t* lane_off) {
  const int f = blockIdx.x, g = blockIdx.y;
  for (int32_t i = lane_off[g]; i < lane_off[g + 1]; ++i) {
    const KeepMove mv = moves[i];
#ifdef KC_PLANT_KEEP_FIRST_LANE
    const KvView v = views[moves[0].lane];  // planted bug (test builds only): the first move's lane
#else
    const KvView v = views[mv.lane];
#endif
    const uint32_t bytes = v.lay.field(f).bytes_per_pos;
    const uint8_t* src = kv_field_row(v, f, mv.src);
    uint8_t* dst = kv_field_row(v, f, mv.dst);
    for (uint32_t b = threadIdx.x; b < bytes; b += blockDim.x) dst[b] = src[b];
    __syncthreads();
  }
}

Status launch_keep(const KvView* views, int fields, const KeepMove* moves, const int32_t* lane_off, int groups,
                   cudaStream_t s) {
  if (groups == 0) return Status::Ok();
  keep_kernel<<<dim3(fields, groups), 128, 0, s>>>(views, moves, lane_off);
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}
}  // namespace kc
