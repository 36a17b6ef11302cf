// Pieces shared by the two split-K attention partials (partial_fma.cu, partial_mma.cu):
// what one block works on, the warp softmax in the order attention/rows.h fixes, and the
// launchers that attention.cu composes. nvcc only.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/attention/launch.h"
#include "kernels/attention/rows.h"

namespace kc {

// What one partial block (chunk c, kv head x head sub-group, row r) works on: its q heads
// qh0 .. qh0 + G - 1 and its keys, the logical positions [k0, k0 + n) of the row. The chunk
// is blockIdx.x, or `chunk` (the short-row path: a cluster of blocks per chunk).
struct AttnBlock {
  int c, r, kvh, G, qh0, n;
  int32_t k0;
  AttnRow row;
  KvView v;
  const int32_t* tail;
  __device__ AttnBlock(const KvView* views, const AttnParams& p, const AttnRow* rows, const int32_t* tails, int nsub)
      : AttnBlock(views, p, rows, tails, nsub, blockIdx.x) {}
  __device__ AttnBlock(const KvView* views, const AttnParams& p, const AttnRow* rows, const int32_t* tails, int nsub,
                       int chunk)
      : c(chunk), r(blockIdx.z), kvh(blockIdx.y / nsub), row(rows[blockIdx.z]), v(views[row.lane]) {
    const int sub = blockIdx.y % nsub, group = p.q_heads / v.lay.kv_heads;
    G = min(kAttnHeadsPerBlock, group - sub * kAttnHeadsPerBlock);
    qh0 = kvh * group + sub * kAttnHeadsPerBlock;
    k0 = c * p.chunk;
    n = max(0, min(row.len + row.tail_len, k0 + p.chunk) - k0);
#ifdef KC_PLANT_ATTN_FIRST_ROW_TAIL
    tail = tails + rows[0].tail_off;  // planted bug (test builds only): the first row's tail list
#else
    tail = tails + row.tail_off;
#endif
  }
};

// Softmax of one head's chunk scores s[0..n) by one warp, in the order attention/rows.h
// fixes (both partial kernels): m = max s_i; p_i = expf(s_i - m); l: lane L sums p_L,
// p_{L+32}, .. in key order, then the xor butterfly. s[i] becomes p_i, or p_i * vs[i] when
// kWeighted (fp8's p' = p * V row scale; l stays the sum of p). Every lane gets m and l, and
// with kMax the largest value stored (for fp8's p' shift; 0 otherwise).
struct WarpSoftmax {
  float m, l, stored_max;
};
// U: the loads in flight per lane (below). 1 in the regular partials, whose register caps
// (64 / 80 a thread) spill more with 8; 8 in the short-row path (one block per SM, up to
// 255 registers), where the softmax sits on the launch's critical path.
template <bool kWeighted, bool kMax, int U = 1>
__device__ __forceinline__ WarpSoftmax warp_softmax(float* s, int n, int lane, const float* vs) {
#ifdef KC_PLANT_ATTN_MAX_ZERO
  float m = 0.0f;  // planted bug (test builds only): the running max starts at 0, not -inf
#else
  float m = -INFINITY;
#endif
  float l = 0.0f, pa = 0.0f;
  if constexpr (U == 1) {
    for (int i = lane; i < n; i += 32) m = fmaxf(m, s[i]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    for (int i = lane; i < n; i += 32) {
      const float e = expf(s[i] - m);
      s[i] = kWeighted ? e * vs[i] : e;
      if constexpr (kMax) pa = fmaxf(pa, s[i]);
      l += e;
    }
  } else {
    // Both passes take the lane's values U at a time, every load of a batch issued before
    // the first is used (the loads' latency once per batch, not once per key); the max, the
    // sum and the stores run in the same order as one at a time, so the bytes do not change.
    int i = lane;
    for (; i + 32 * (U - 1) < n; i += 32 * U) {
      float v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = s[i + 32 * u];
#pragma unroll
      for (int u = 0; u < U; ++u) m = fmaxf(m, v[u]);
    }
    for (; i < n; i += 32) m = fmaxf(m, s[i]);
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    auto one = [&](int k, float x, float w) {
      const float e = expf(x - m);
      s[k] = kWeighted ? e * w : e;
      if constexpr (kMax) pa = fmaxf(pa, s[k]);
      l += e;
    };
    for (i = lane; i + 32 * (U - 1) < n; i += 32 * U) {
      float v[U], w[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        v[u] = s[i + 32 * u];
        w[u] = kWeighted ? vs[i + 32 * u] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) one(i + 32 * u, v[u], w[u]);
    }
    for (; i < n; i += 32) one(i, s[i], kWeighted ? vs[i] : 0.0f);
  }
  for (int off = 16; off > 0; off >>= 1) {
    l = l + __shfl_xor_sync(0xFFFFFFFFu, l, off);
    if constexpr (kMax) pa = fmaxf(pa, __shfl_xor_sync(0xFFFFFFFFu, pa, off));
  }
  return {m, l, pa};
}

// Launchers of the pieces (device pointers, enqueued on s, Status out); launch_attention
// composes them.
Status launch_partial_fma(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows,
                          int n, const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                          cudaStream_t s);
Status launch_partial_mma(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows,
                          int n, const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                          cudaStream_t s);
// q4 caches (partial_mma_q4.cu); launch_partial_mma hands them over.
Status launch_partial_mma_q4(const KvView* views, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                             const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                             cudaStream_t s);
// The short-row path (attention/short_path.cuh): a candidate kernel, its cluster size cl
// (blocks per chunk; the grid's x is chunks x cl) and dynamic shared memory; fn null: none.
using AttnPartialKernel = void (*)(const KvView*, AttnParams, const AttnRow*, const int32_t*, const float*, int, int,
                                   float*, float*, float*);
struct AttnShortKernel {
  int cl;
  AttnPartialKernel fn;
  size_t smem;
};
// *pick: the first candidate (the largest cl first) with which a partial grid of `blocks`
// regular blocks runs in one wave of one block per SM: blocks x cl <= the SMs, the shared
// memory fits, and the device holds `blocks` clusters of cl at once
// (cudaOccupancyMaxActiveClusters, cached); -1 (the regular kernel) otherwise, below sm_90,
// or with KC_ATTN_SHORT=0 in the environment (read once; for A/B runs). Full grids (a batch
// of long rows) never take it; the choice changes no arithmetic.
Status attn_short_pick(int blocks, const AttnShortKernel* cand, int ncand, int* pick);
// Launches candidate k as the cluster grid of the regular grid g (x: chunks).
Status attn_launch_short(const AttnShortKernel& k, dim3 g, cudaStream_t s, const KvView* views, const AttnParams& p,
                         const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks, int nsub, float* pm,
                         float* pl, float* po);
// kept: the partial kept its outputs in L2 (attn_keeps_partials, mma_smem.h).
Status launch_merge(const AttnParams& p, const AttnRow* rows, int n, int d, int max_chunks, const float* pm,
                    const float* pl, const float* po, bool unrotate, bool kept, float* out, cudaStream_t s);

}  // namespace kc
