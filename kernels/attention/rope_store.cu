// Rope store kernel. Host twin: rope_store_host (attention/twin.cpp); contract: qwen-pages.
//
// rope_store_kernel: one warp per (row, head slot); head slots are the row's q heads,
//   then its kv heads' K, then their V. q and k are rotated (neox pairing over the first
//   rot_dims dims, angles in float64 from the row's logical pos, rounded once to fp32);
//   q goes to q_out [n][Hq][d] fp32, K and V (V unrotated) are stored at the row's slot
//   through kv_row in the cache format by its Codec<F>::store_warp (codecs/: bf16 RNE; the
//   fp8, q4 and mxfp4 row rules over the rotated values, the bytes of their encode_row).
// Every address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_runtime.h>

#include "kernels/attention/launch.h"
#include "kernels/attention/rows.h"

namespace kc {

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
    // The format's store (Codec<F>::store_warp), through the one switch: the twin's
    // encode_row bytes.
    float* wbuf = wbufs[threadIdx.x / 32];
    with_format(v.lay.format, [&](auto codec) {
      decltype(codec)::store_warp(v, RowRef{row.lane, p.layer, kv, head, row.slot}, y, nt, lane, wbuf);
    });
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
