// Rope store kernel. Host twin: rope_store_host (attention/twin.cpp); contract: qwen-pages.
//
// rope_store_kernel: one warp per (row, head slot); head slots are the row's q heads,
//   then its kv heads' K, then their V. q and k are rotated (neox pairing over the first
//   rot_dims dims, angles in float64 from the row's logical pos, rounded once to fp32);
//   q goes to q_out [n][Hq][d] fp32, K and V (V unrotated) are stored at the row's slot
//   through kv_row in the cache format (fp8: the row helpers of codecs/fp8.h over the
//   rotated values; q4: codecs/q4.h's group encoder).
// Every address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_runtime.h>

#include "kernels/attention/launch.h"
#include "kernels/attention/rows.h"

namespace kc {

__device__ void store_row_dev(const KvView& v, int layer, int kv, int head, int32_t slot, const float* y, int nt,
                              int lane, float* wbuf) {
  const int d = v.lay.head_dim;
  uint8_t* row = kv_row(v, layer, kv, head, slot);
  if (v.lay.format == Format::q4) {
    // The row through the warp's shared buffer; lane g encodes group g (codecs/q4.h).
    for (int t = 0; t < nt; ++t) wbuf[lane + 32 * t] = y[t];
    __syncwarp();
    if (lane < d / 32) q4_encode_group(wbuf + 32 * lane, row + 16 * lane, kv_scale(v, layer, kv, head, slot) + 2 * lane);
    __syncwarp();
    return;
  }
  if (v.lay.format == Format::bf16) {
    for (int t = 0; t < nt; ++t) {
      const uint16_t b = bf16_from_float(y[t]);
      memcpy(row + 2 * (lane + 32 * t), &b, 2);
    }
    return;
  }
  float amax = 0.0f;
#ifdef KC_PLANT_FP8_STORE_AMAX_OFF_BY_ONE  // planted bug (test builds only): element d - 1 missed
  for (int t = 0; t < nt; ++t)
    if (lane + 32 * t != d - 1) amax = amax_step(amax, y[t]);
#else
  for (int t = 0; t < nt; ++t) amax = amax_step(amax, y[t]);
#endif
  for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float scale = fp8_row_scale(amax);
  for (int t = 0; t < nt; ++t) row[lane + 32 * t] = fp8_code(y[t], scale);
  if (lane == 0) memcpy(kv_scale(v, layer, kv, head, slot), &scale, 4);
#ifdef KC_PLANT_FP8_STORE_ZEROS  // planted bug (test builds only): zero codes and scales
  for (int t = 0; t < nt; ++t) row[lane + 32 * t] = 0;
  if (lane == 0) memset(kv_scale(v, layer, kv, head, slot), 0, 4);
#endif
  (void)d;
}

__global__ void rope_store_kernel(const KvView* views, RopeParams p, const RopeRow* rows, int n, const float* q,
                                  const float* k, const float* vin, float* q_out) {
  __shared__ float wbufs[256 / 32][kMaxHeadDim];
  const int hkv = views[0].lay.kv_heads;
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int slots = p.q_heads + 2 * hkv;
  const int64_t w = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (w >= int64_t(n) * slots) return;
  const int r = int(w / slots), hs = int(w % slots);
  const RopeRow row = rows[r];
  const KvView v = views[row.lane];
  const int d = v.lay.head_dim, nt = d / 32, h2 = p.rot_dims / 2;
  const float* x;
  bool rotate = true;
  if (hs < p.q_heads) x = q + (size_t(r) * p.q_heads + hs) * d;
  else if (hs < p.q_heads + hkv) x = k + (size_t(r) * hkv + hs - p.q_heads) * d;
  else { x = vin + (size_t(r) * hkv + hs - p.q_heads - hkv) * d; rotate = false; }
  float y[kMaxHeadDim / 32];
  for (int t = 0; t < nt; ++t) {
    const int j = lane + 32 * t;
    if (!rotate || j >= p.rot_dims) {
      y[t] = x[j];
    } else {
      const int i = j < h2 ? j : j - h2;
      float c, s;
      rope_cos_sin(row.pos, i, p.rot_dims, p.base, &c, &s);
      y[t] = j < h2 ? x[j] * c - x[j + h2] * s : x[j] * c + x[i] * s;
    }
  }
  if (hs < p.q_heads) {
    for (int t = 0; t < nt; ++t) q_out[(size_t(r) * p.q_heads + hs) * d + lane + 32 * t] = y[t];
  } else {
    const int kv = hs < p.q_heads + hkv ? 0 : 1;
    const int head = hs - p.q_heads - kv * hkv;
    store_row_dev(v, p.layer, kv, head, row.slot, y, nt, lane, wbufs[threadIdx.x / 32]);
  }
}

Status launch_rope_store(const KvView* views, int hkv, const RopeParams& p, const RopeRow* rows, int n, const float* q,
                         const float* k, const float* v, float* q_out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  const int64_t warps = int64_t(n) * ((q ? p.q_heads : 0) + 2 * hkv);
  rope_store_kernel<<<unsigned((warps * 32 + 255) / 256), 256, 0, s>>>(views, p, rows, n, q, k, v, q_out);
  KC_LAUNCH_CHECK("rope_store_kernel");
  return Status::Ok();
}
}  // namespace kc
