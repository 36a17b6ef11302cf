// Rope store kernel. Host twin: rope_store_host (attention/twin.cpp); contract: qwen-pages.
//
// rope_store_kernel: block per row, 256 threads (8 warps). Head slots are the row's q
//   heads, then its kv heads' K, then their V. The row's cos / sin table (rope_cos_sin for
//   pairs 0 .. rot_dims / 2 - 1: float64 angle from the row's logical pos, rounded once to
//   fp32) is computed once per row into shared memory, while the row's inputs (fp32 q, k,
//   v rows of the head slots, up to kRopeStageFloats at a time) come into shared memory
//   with 16-byte loads, several in flight per thread. Then warp w takes slots w, w + 8, ..:
//   q and k are rotated (neox pairing over the first rot_dims dims: the same expressions
//   as the twin's, c and s from the table), q goes to q_out [n][Hq][d] fp32, K and V (V
//   unrotated) are stored at the row's slot through kv_row in the cache format by its
//   Codec<F>::store_warp (codecs/: bf16 RNE; the fp8, q4 and mxfp4 row rules over the
//   rotated values, the bytes of their encode_row).
//   (Before: one warp per (row, slot), each computing its own float64 angles for every
//   element and reading its inputs 4 bytes a lane; bench rope-store measures the kernel.)
// Every address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/attention/launch.h"
#include "kernels/attention/rows.h"

namespace kc {

constexpr int kRopeThreads = 256;
constexpr int kRopeStageFloats = 16384;  // 64 KiB: the head slots staged at a time (all of them up to 64 at d 256)
constexpr int kRopeLoads = 8;            // 16-byte loads in flight per thread while staging

// One instantiation per head_dim and format: the row in registers (y[D / 32]) and the one
// format's store compiled in (a runtime head_dim kept y in local memory, and the four
// formats' stores in one kernel took 80 registers: 3 blocks per SM).
template <int D, Format F>
__global__ void __launch_bounds__(kRopeThreads, 4) rope_store_kernel(const KvView* views, RopeParams p,
                                                                      const RopeRow* rows, const float* q,
                                                                      const float* k, const float* vin, float* q_out,
                                                                      int ws) {
  extern __shared__ __align__(16) float xs[];  // [stage slots][D] inputs of the staged head slots
  __shared__ float tc[kMaxHeadDim / 2], tsn[kMaxHeadDim / 2];
  constexpr int NT = D / 32, D4 = D / 4;  // elements per lane; float4s per slot row (ws: slots per stage)
  const int hkv = views[0].lay.kv_heads;
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int slots = p.q_heads + 2 * hkv;
  const int r = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  const RopeRow row = rows[r];
  const KvView v = views[row.lane];
  const int h2 = p.rot_dims / 2;
  // The 16-byte word e of slot hs's input row.
  auto src4 = [&](int hs, int e) -> const float4* {
    const float* x = hs < p.q_heads         ? q + (size_t(r) * p.q_heads + hs) * D
                     : hs < p.q_heads + hkv ? k + (size_t(r) * hkv + hs - p.q_heads) * D
                                            : vin + (size_t(r) * hkv + hs - p.q_heads - hkv) * D;
    return reinterpret_cast<const float4*>(x) + e;
  };
  for (int s0 = 0; s0 < slots; s0 += ws) {
    const int n4 = min(ws, slots - s0) * D4;
    for (int b = 0; b < n4; b += kRopeLoads * kRopeThreads) {
      float4 t[kRopeLoads];
#pragma unroll
      for (int u = 0; u < kRopeLoads; ++u) {
        const int i = b + u * kRopeThreads + tid;
        if (i < n4) t[u] = __ldg(src4(s0 + i / D4, i % D4));
      }
      if (s0 == 0 && b == 0)  // the table, while the first loads are in flight
        for (int i = tid; i < h2; i += kRopeThreads) rope_cos_sin(row.pos, i, p.rot_dims, p.base, &tc[i], &tsn[i]);
#pragma unroll
      for (int u = 0; u < kRopeLoads; ++u) {
        const int i = b + u * kRopeThreads + tid;
        if (i < n4) reinterpret_cast<float4*>(xs)[i] = t[u];
      }
    }
    __syncthreads();
    for (int hs = s0 + warp; hs < s0 + min(ws, slots - s0); hs += kRopeThreads / 32) {
      const float* x = xs + (hs - s0) * D;
      const bool rotate = hs < p.q_heads + hkv;  // V is stored unrotated
      float y[NT];
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int j = lane + 32 * t;
        if (!rotate || j >= p.rot_dims) {
          y[t] = x[j];
        } else {
          const int i = j < h2 ? j : j - h2;
          const float c = tc[i], s = tsn[i];
          y[t] = j < h2 ? x[j] * c - x[j + h2] * s : x[j] * c + x[i] * s;
        }
      }
      if (hs < p.q_heads) {
#pragma unroll
        for (int t = 0; t < NT; ++t) q_out[(size_t(r) * p.q_heads + hs) * D + lane + 32 * t] = y[t];
      } else {
        const int kv = hs < p.q_heads + hkv ? 0 : 1;
        const int head = hs - p.q_heads - kv * hkv;
        // The format's store (Codec<F>::store_warp): the twin's encode_row bytes.
        Codec<F>::store_warp(v, RowRef{row.lane, p.layer, kv, head, row.slot}, y, NT, lane);
      }
    }
    __syncthreads();  // the stage is read before the next one overwrites it
  }
}

Status launch_rope_store(const KvView* views, Format fmt, int hkv, int d, const RopeParams& p, const RopeRow* rows,
                         int n, const float* q, const float* k, const float* v, float* q_out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  if ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) & 15u)
    return Status::Error("rope_store: q, k and v must start 16-byte aligned (they are read 16 bytes at a time)");
  // The stage: every head slot of a row, up to kRopeStageFloats floats.
  const int slots = (q ? p.q_heads : 0) + 2 * hkv;
  const int ws = std::min(slots, kRopeStageFloats / d);
  const size_t stage = size_t(ws) * d * sizeof(float);
  void (*kern)(const KvView*, RopeParams, const RopeRow*, const float*, const float*, const float*, float*, int) =
      nullptr;
  with_format(fmt, [&](auto codec) {
    constexpr Format F = decltype(codec)::kFormat;
    switch (d) {
      case 32: kern = rope_store_kernel<32, F>; break;
      case 64: kern = rope_store_kernel<64, F>; break;
      case 128: kern = rope_store_kernel<128, F>; break;
      case 256: kern = rope_store_kernel<256, F>; break;
    }
  });
  if (!kern) return Status::Error("rope_store: head_dim must be 32, 64, 128 or 256");
  if (stage > 48 * 1024) KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stage)));
  kern<<<unsigned(n), kRopeThreads, stage, s>>>(views, p, rows, q, k, v, q_out, ws);
  KC_LAUNCH_CHECK("rope_store_kernel");
  return Status::Ok();
}
}  // namespace kc
