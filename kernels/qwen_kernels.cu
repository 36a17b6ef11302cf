// Rope store, split-K attention (partial and merge) and keep kernels.
//
// rope_store_kernel: one warp per (row, head slot); head slots are the row's q heads,
//   then its kv heads' K, then their V. q and k are rotated (neox pairing over the first
//   rot_dims dims, angles in float64 from the row's logical pos, rounded once to fp32);
//   q goes to q_out [n][Hq][d] fp32, K and V (V unrotated) are stored at the row's slot
//   through kv_row in the cache format (fp8: the row helpers of fp8_rows.h over the
//   rotated values).
// attention_partial_kernel: block (chunk, kv head x sub-group of <= 8 q heads, row),
//   256 threads. Keys are the logical positions [chunk*W, chunk*W + W) of the row
//   (committed 0..len-1, then the tail through its index list). Scores: one thread per
//   key reads the key's K row once (16-byte loads) for every q head of the block (the
//   queries sit in shared memory) and resolves the key's V code and scale rows into
//   shared memory; m, p = expf(s - m) and l per head by one warp each;
//   p.v: threads split into key groups x 4-element slices of V, each V element read
//   once for every head; the key groups combine in a halving tree. The order of every
//   sum is the one attention_rows.h fixes (and the host twin replays). An empty chunk
//   gives m = -inf, l = 0, o = 0. Partials [row][q head][max chunks].
// attention_partial_mma_kernel: the same blocks, chunks, softmax and partials for bf16
//   and fp8 caches with head_dim 128 / 256, with both products on tensor cores
//   (mma.m16n8k16; order and error model in attention_rows.h; described below).
// attention_merge_kernel: block per (q head, row), a thread per output element; chunks
//   merged in chunk order: M = max of non-empty m, L = sum l * expf(m - M),
//   O = sum o * expf(m - M); out = O / L; a row with no keys gives 0 (never NaN).
// keep_kernel: block (field, lane); the lane's moves run in order, a barrier between
//   moves, so overlapping moves give the result of sequential in-order moves.
// Every address comes from kv_row / kv_field_row; no stride arithmetic here.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <type_traits>

#include "kernels/attention_rows.h"
#include "kernels/mma_smem.h"
#include "kernels/qwen_kernels_cuda.h"

namespace kc {

__device__ void store_row_dev(const KvView& v, int layer, int kv, int head, int32_t slot, const float* y, int nt,
                              int lane, float* wbuf) {
  const int d = v.lay.head_dim;
  uint8_t* row = kv_row(v, layer, kv, head, slot);
  if (v.lay.format == Format::q4) {
    // The row through the warp's shared buffer; lane g encodes group g (q4_rows.h).
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
  for (int t = 0; t < nt; ++t) amax = amax_step(amax, y[t]);
  for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float scale = fp8_row_scale(amax);
  for (int t = 0; t < nt; ++t) row[lane + 32 * t] = fp8_code(y[t], scale);
  if (lane == 0) memcpy(kv_scale(v, layer, kv, head, slot), &scale, 4);
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

// Four elements of a V row in two steps, so that several keys' raw words can be in
// flight before any is dequantised (fewer live registers than four floats per key).
template <Format F>
struct Raw4 {
  uint32_t w[F == Format::bf16 ? 2 : 1];
};
template <Format F>
__device__ __forceinline__ Raw4<F> load_raw4(const uint8_t* row, int e0) {
  Raw4<F> r;
  if constexpr (F == Format::bf16) {
    const uint2 t = __ldg(reinterpret_cast<const uint2*>(row + 2 * e0));
    r.w[0] = t.x, r.w[1] = t.y;
  } else if constexpr (F == Format::fp8) {
    r.w[0] = __ldg(reinterpret_cast<const uint32_t*>(row + e0));
  } else {
    r.w[0] = __ldg(reinterpret_cast<const uint16_t*>(row + e0 / 2));
  }
  return r;
}
template <Format F>
__device__ __forceinline__ void conv4(const Raw4<F>& r, float scale, float* out) {
  if constexpr (F == Format::bf16) {
    out[0] = __uint_as_float(r.w[0] << 16), out[1] = __uint_as_float(r.w[0] & 0xFFFF0000u);
    out[2] = __uint_as_float(r.w[1] << 16), out[3] = __uint_as_float(r.w[1] & 0xFFFF0000u);
  } else if constexpr (F == Format::fp8) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(r.w[0] >> (16 * hh)), __NV_E4M3);
      __half2 h2;
      memcpy(&h2, &hr, sizeof(h2));
      const float2 f = __half22float2(h2);
      out[2 * hh] = f.x * scale;
      out[2 * hh + 1] = f.y * scale;
    }
  } else {
    const float s = q4_finite(scale) ? scale : __uint_as_float(0x7FC00000u);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = (__uint_as_float(0x4B000000u | ((r.w[0] >> (4 * e)) & 15u)) - 8388616.0f) * s;
  }
}

// Rows are read 16 bytes at a time (8 elements of bf16, 16 of fp8, 32 of q4) and
// dequantised four elements at a time with conv4: fp8 codes through the hardware E4M3 -> fp16
// conversion (exact) and one fp32 product with the row scale, the value of fp8_value for
// every code (a NaN code gives a NaN); q4 as (2^23 + nibble) - (2^23 + 8), exact, times the
// group scale, a scale that is not finite making every element NaN (q4_elem's values).
template <Format F>
constexpr int bytes_per4() { return F == Format::bf16 ? 8 : (F == Format::fp8 ? 4 : 2); }
// The c-th group of four elements inside a 16-byte word.
template <Format F>
__device__ __forceinline__ Raw4<F> raw4_of(const uint4& t, int c) {
  const uint32_t w[4] = {t.x, t.y, t.z, t.w};
  Raw4<F> r;
  if constexpr (F == Format::bf16) r.w[0] = w[2 * c], r.w[1] = w[2 * c + 1];
  else if constexpr (F == Format::fp8) r.w[0] = w[c];
  else r.w[0] = (w[c / 2] >> (16 * (c % 2))) & 0xFFFFu;
  return r;
}

// Scale of the elements [e0, ..) of a row from its scale row (fp8: the row scale; q4:
// the group scale); 1 for bf16.
template <Format F>
__device__ __forceinline__ float elem_scale(const uint8_t* srow, int e0) {
  if constexpr (F == Format::fp8) return __ldg(reinterpret_cast<const float*>(srow));
  else if constexpr (F == Format::q4) return q4_load_scale(srow, e0 / 32);
  else return 1.0f;
}

// What one partial block (chunk c, kv head x head sub-group, row r) works on: its q heads
// qh0 .. qh0 + G - 1 and its keys, the logical positions [k0, k0 + n) of the row.
struct AttnBlock {
  int c, r, kvh, G, qh0, n;
  int32_t k0;
  AttnRow row;
  KvView v;
  const int32_t* tail;
  __device__ AttnBlock(const KvView* views, const AttnParams& p, const AttnRow* rows, const int32_t* tails, int nsub)
      : c(blockIdx.x), r(blockIdx.z), kvh(blockIdx.y / nsub), row(rows[blockIdx.z]), v(views[row.lane]) {
    const int sub = blockIdx.y % nsub, group = p.q_heads / v.lay.kv_heads;
    G = min(kAttnHeadsPerBlock, group - sub * kAttnHeadsPerBlock);
    qh0 = kvh * group + sub * kAttnHeadsPerBlock;
    k0 = c * p.chunk;
    n = max(0, min(row.len + row.tail_len, k0 + p.chunk) - k0);
    tail = tails + row.tail_off;
  }
};

// Softmax of one head's chunk scores s[0..n) by one warp, in the order attention_rows.h
// fixes (both partial kernels): m = max s_i; p_i = expf(s_i - m); l: lane L sums p_L,
// p_{L+32}, .. in key order, then the xor butterfly. s[i] becomes p_i, or p_i * vs[i] when
// kWeighted (fp8's p' = p * V row scale; l stays the sum of p). Every lane gets m and l, and
// with kMax the largest value stored (for fp8's p' shift; 0 otherwise).
struct WarpSoftmax {
  float m, l, stored_max;
};
template <bool kWeighted, bool kMax>
__device__ __forceinline__ WarpSoftmax warp_softmax(float* s, int n, int lane, const float* vs) {
  float m = -INFINITY;
  for (int i = lane; i < n; i += 32) m = fmaxf(m, s[i]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  float l = 0.0f, pa = 0.0f;
  for (int i = lane; i < n; i += 32) {
    const float e = expf(s[i] - m);
    s[i] = kWeighted ? e * vs[i] : e;
    if constexpr (kMax) pa = fmaxf(pa, s[i]);
    l += e;
  }
  for (int off = 16; off > 0; off >>= 1) {
    l = l + __shfl_xor_sync(0xFFFFFFFFu, l, off);
    if constexpr (kMax) pa = fmaxf(pa, __shfl_xor_sync(0xFFFFFFFFu, pa, off));
  }
  return {m, l, pa};
}

// Float offset of the partial kernel's per-key row-pointer arrays in shared memory
// (after queries, scores and the reduction buffer; rounded up to 16 bytes).
__host__ __device__ constexpr size_t attn_ptr_offset_floats(int G, int W, int D) {
  return (size_t(G) * D + size_t(G) * W + size_t(attn_key_groups(D) / 2) * G * D + 3) / 4 * 4;
}

// Resident partial blocks per SM asked of the register allocator: 4 for bf16 (64
// registers; measured 7 % faster at 32K x b8 on the H200), 3 for fp8 and q4
// (their dequantisation needs ~80 registers; at 4 they spill and run 20 % slower).
template <Format F>
constexpr int attn_min_blocks() { return F == Format::bf16 ? 4 : 3; }

// Block (chunk, kv head x head sub-group, row), kAttnThreads threads; the order of every
// sum is the one attention_rows.h fixes. Phases:
//  1. queries of the block's heads to shared memory;
//  2. scores: one thread per key, the whole row of K read once for all the block's heads
//     (16-byte loads), each head's dot in element order;
//  3. warp h: m, p = expf(s - m) (kept in shared memory), l;
//  4. p.v: thread (key group g, elements [4t, 4t+4)) accumulates every head over the
//     keys of its group, V read once for all heads; then the halving tree over groups.
template <int D, Format F>
__global__ void __launch_bounds__(kAttnThreads, attn_min_blocks<F>()) attention_partial_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  extern __shared__ __align__(16) float sm[];
  constexpr int H = kAttnHeadsPerBlock;
  constexpr int VEC = 64 / bytes_per4<F>();  // elements of one 16-byte load
  constexpr int NV = D / VEC;           // 16-byte loads of a K row
  constexpr int TPR = D / kAttnElems;   // threads per V row
  constexpr int KG = kAttnThreads / TPR;  // key groups (attn_key_groups(D))
  const AttnBlock blk(views, p, rows, tails, nsub);
  const int c = blk.c, r = blk.r, kvh = blk.kvh, G = blk.G, qh0 = blk.qh0, W = p.chunk, n = blk.n;
  const int32_t k0 = blk.k0, *tail = blk.tail;
  const AttnRow& row = blk.row;
  const KvView& v = blk.v;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  float* qs = sm;              // [G][D]
  float* ss = qs + G * D;      // [G][W]: scores, then p
  float* red = ss + G * W;     // [KG/2][G][D]
  // [W] each key's V code row and V scale row, resolved once in the score phase so the
  // p.v phase does no page arithmetic (the offset of these arrays is 16-byte aligned).
  const uint8_t** vrows = reinterpret_cast<const uint8_t**>(sm + attn_ptr_offset_floats(G, W, D));
  const uint8_t** vscales = vrows + W;

  for (int i = tid; i < G * D; i += kAttnThreads) qs[i] = q[(size_t(r) * p.q_heads + qh0) * D + i];
  __syncthreads();
  if constexpr (F == Format::q4) {  // attention in rotated space: the query rotated once
    for (int t = tid; t < G * D / 32; t += kAttnThreads) hadamard32_inv(qs + 32 * t);
    __syncthreads();
  }

  const KvPlane kp = kv_plane(v, p.layer, 0, kvh), vp = kv_plane(v, p.layer, 1, kvh);
  constexpr bool kScales = F != Format::bf16;
  const KvPlane ksp = kv_plane(v, p.layer, 0, kvh, kScales), vsp = kv_plane(v, p.layer, 1, kvh, kScales);

  for (int i = tid; i < n; i += kAttnThreads) {
    const KvPos at = kv_pos(kp, key_slot(k0 + i, row.len, tail));  // one page split for the four planes
    const uint8_t* kr = kv_plane_at(kp, at);
    const uint8_t* ksr = kScales ? kv_plane_at(ksp, at) : nullptr;  // bf16: never read
    vrows[i] = kv_plane_at(vp, at);
    if constexpr (kScales) vscales[i] = kv_plane_at(vsp, at);
    float acc[H];
#pragma unroll
    for (int h = 0; h < H; ++h) acc[h] = 0.0f;
    // Raw 16-byte words in flight per thread, dequantised four elements at a time as they
    // are used: 4 (64 B) for bf16 and fp8, 1 for q4 (32 elements a word; more spilled and
    // ran slower on the H200).
    constexpr int R4 = bytes_per4<F>();
    constexpr int RBMAX = F == Format::q4 ? 1 : 4;
    constexpr int RB = NV < RBMAX ? NV : RBMAX;
#pragma unroll 1
    for (int b = 0; b < NV; b += RB) {
      uint4 raw[RB];
      float sc[RB];
#pragma unroll
      for (int u = 0; u < RB; ++u) {
        raw[u] = __ldg(reinterpret_cast<const uint4*>(kr + (b + u) * 16));
        sc[u] = elem_scale<F>(ksr, (b + u) * VEC);
      }
#pragma unroll
      for (int u = 0; u < RB; ++u)
#pragma unroll
        for (int c = 0; c < 16 / R4; ++c) {
          float x[4];
          conv4<F>(raw4_of<F>(raw[u], c), sc[u], x);
          const int e = (b + u) * VEC + 4 * c;
#pragma unroll
          for (int h = 0; h < H; ++h)
            if (h < G) {
              const float4 qq = *reinterpret_cast<const float4*>(qs + h * D + e);
              acc[h] = fmaf(qq.x, x[0], acc[h]);
              acc[h] = fmaf(qq.y, x[1], acc[h]);
              acc[h] = fmaf(qq.z, x[2], acc[h]);
              acc[h] = fmaf(qq.w, x[3], acc[h]);
            }
        }
    }
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < G) ss[h * W + i] = acc[h] * p.scale;
  }
  __syncthreads();

  for (int hw = warp; hw < G; hw += kAttnThreads / 32) {
    const WarpSoftmax sx = warp_softmax<false, false>(ss + hw * W, n, lane, nullptr);
    if (lane == 0) {
      const size_t pidx = (size_t(r) * p.q_heads + qh0 + hw) * max_chunks + c;
      pm[pidx] = sx.m;
      pl[pidx] = sx.l;
    }
  }
  __syncthreads();

  const int g = tid / TPR, e0 = (tid % TPR) * kAttnElems;
  float o[H][kAttnElems];
#pragma unroll
  for (int h = 0; h < H; ++h)
#pragma unroll
    for (int e = 0; e < kAttnElems; ++e) o[h][e] = 0.0f;
  constexpr int KF = 8;  // keys of a group whose V elements are loaded before use
  int i = g;
  for (; i + (KF - 1) * KG < n; i += KF * KG) {
    Raw4<F> raw[KF];
    float sc[KF];
#pragma unroll
    for (int u = 0; u < KF; ++u) {
      raw[u] = load_raw4<F>(vrows[i + u * KG], e0);
      sc[u] = elem_scale<F>(vscales[i + u * KG], e0);
    }
#pragma unroll
    for (int u = 0; u < KF; ++u) {
      float x[kAttnElems];
      conv4<F>(raw[u], sc[u], x);
#pragma unroll
      for (int h = 0; h < H; ++h)
        if (h < G) {
          const float pw = ss[h * W + i + u * KG];
#pragma unroll
          for (int e = 0; e < kAttnElems; ++e) o[h][e] = fmaf(pw, x[e], o[h][e]);
        }
    }
  }
  for (; i < n; i += KG) {
    float x[kAttnElems];
    conv4<F>(load_raw4<F>(vrows[i], e0), elem_scale<F>(vscales[i], e0), x);
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < G) {
        const float pw = ss[h * W + i];
#pragma unroll
        for (int e = 0; e < kAttnElems; ++e) o[h][e] = fmaf(pw, x[e], o[h][e]);
      }
  }
  // Halving tree over key groups: o_g += o_{g+s} for s = KG/2, .., 1.
#pragma unroll
  for (int s = KG / 2; s >= 1; s >>= 1) {
    if (g >= s && g < 2 * s)
#pragma unroll
      for (int h = 0; h < H; ++h)
        if (h < G)
#pragma unroll
          for (int e = 0; e < kAttnElems; ++e) red[((g - s) * G + h) * D + e0 + e] = o[h][e];
    __syncthreads();
    if (g < s)
#pragma unroll
      for (int h = 0; h < H; ++h)
        if (h < G)
#pragma unroll
          for (int e = 0; e < kAttnElems; ++e) o[h][e] = o[h][e] + red[(g * G + h) * D + e0 + e];
    __syncthreads();
  }
  if (g == 0)
#pragma unroll
    for (int h = 0; h < H; ++h)
      if (h < G) {
        const size_t pidx = (size_t(r) * p.q_heads + qh0 + h) * max_chunks + c;
#pragma unroll
        for (int e = 0; e < kAttnElems; ++e) po[pidx * D + e0 + e] = o[h][e];
      }
}

// ---- Tensor-core partial: bf16 and fp8 caches, head_dim 128 and 256 (attention_rows.h
// gives its order and error model). Block (chunk, kv head x sub-group of <= 8 q heads,
// row), 256 threads (8 warps); the block's q heads are the n = 8 columns of
// mma.m16n8k16 (zero-padded). Phases:
//  0. each warp issues its first K tile's loads (rows resolved in registers); warp w
//     splits q of head slot w into B fragments of bf16 (fp8: fp16, shifted) parts; each
//     key's V row pointer (and fp8 row scales) to shared memory;
//  1. scores: warp per 16-key tile; lane (g, t) reads 16 bytes of keys g and g+8 per
//     load, its A fragments of two (bf16) or four (fp8: 16 codes) k-steps (elements
//     assigned to the k slots in that order; q's fragments use the same map); the next
//     tile's loads replace the current one's as they are used; the first V loads go out
//     before the barrier;
//  2. warp h: m, p = expf(s - m), l (as the fma kernel; fp8 keeps p' = p * V scale),
//     then head h's p' B fragments per 16-key tile;
//  3. p.v: one key group of 8 warps, or two of 4 taking alternate key tiles
//     (attn_mma_key_groups); a warp owns 16 * MT elements (V^T is the A operand,
//     m = elements) and takes keys 2t, 2t+1, 2t+8, 2t+9 of a tile in k slots 2t, 2t+1,
//     2t+8, 2t+9. The block copies V tiles (16-byte cp.async) into a ring of stages in
//     shared memory (the first ones before the softmax, over no live array; the others
//     over the dead q fragments and scores too), and each warp reads a tile's A fragments
//     with ldmatrix.trans (fp8: one, then byte permutes pair the codes by key; bf16: one
//     per m-tile, the fragments as they are). Group 1's sums reach group 0 through shared
//     memory.
template <bool kF16>  // inputs fp16 (fp8 caches) or bf16
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint2 b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b.x), "r"(b.y));
#else
  __trap();  // launch_attention picks this kernel only on sm_80 and newer builds
#endif
}
// (x, y) = the sum of NPT parts from hi down, each a bf16x2 or fp16x2 (x in the low half)
// rounded to nearest from what the parts before left; the differences are exact. bf16
// (3 parts): exact for normal numbers; fp16 (2 parts, inputs scaled below 2^15): at most
// 2^-22 of the value, and 2^-25 for a part below fp16's normal range.
template <bool kF16, int NPT>
__device__ __forceinline__ void split_parts(float x, float y, uint32_t (&part)[NPT]) {
#pragma unroll
  for (int s = 0; s < NPT; ++s) {
    if constexpr (kF16) {
      const __half2 h = __floats2half2_rn(x, y);
      memcpy(&part[s], &h, 4);
      const float2 f = __half22float2(h);
      x -= f.x, y -= f.y;
    } else {
      part[s] = uint32_t(bf16_from_float(x)) | (uint32_t(bf16_from_float(y)) << 16);
      x -= __uint_as_float(part[s] << 16);
      y -= __uint_as_float(part[s] & 0xFFFF0000u);
    }
  }
}
// Two E4M3 codes (low byte first) to fp16x2, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xFFFFu), __NV_E4M3);
  uint32_t u;
  memcpy(&u, &hr, 4);
  return u;
}
// Global loads of the mma partial, asking L2 to fetch the 256 bytes around each miss
// (the rest of a K row or of the neighbouring V slices is read next; 1.5 % faster at 32K x
// b8 on the H200, in two repeated pairs).
#ifndef KC_MMA_LDQ  // the loads' cache qualifiers (experiments override)
#define KC_MMA_LDQ ".L2::256B"
#endif
template <typename T>
__device__ __forceinline__ T ldg_mma(const uint8_t* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) == 16) {
    uint4 r;
    asm volatile("ld.global.nc" KC_MMA_LDQ ".v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (sizeof(T) == 8) {
    uint2 r;
    asm volatile("ld.global.nc" KC_MMA_LDQ ".v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return reinterpret_cast<T&>(r);
  } else if constexpr (sizeof(T) == 4) {
    uint32_t r;
    asm volatile("ld.global.nc" KC_MMA_LDQ ".u32 %0, [%1];" : "=r"(r) : "l"(p));
    return reinterpret_cast<T&>(r);
  }
#endif
  return __ldg(reinterpret_cast<const T*>(p));
}
// Warp-wide max of |x| over x[lane], x[lane + 32], .. x[n - 1].
__device__ __forceinline__ float warp_amax(const float* x, int n, int lane) {
  float a = 0.0f;
  for (int i = lane; i < n; i += 32) a = fmaxf(a, fabsf(x[i]));
  for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, off));
  return a;
}

// Experiment hook KC_MMA_PHASES (never in a default build): each warp of the mma partial
// stamps clock64() at its phase boundaries, and launch_attention prints the grid's mean
// cycles per warp of each phase (set-up, scores, wait at the barrier after them, softmax and
// p fragments, p.v, partial stores) after every launch, synchronously.
#ifdef KC_MMA_PHASES
__device__ unsigned long long kc_phase_sum[8];  // [0] warps, [1..6] cycles of each phase
#define KC_PHASE(k) \
  do { const long long t_ = clock64(); if (lane == 0) kc_phase_t[warp][k] = t_; } while (0)
#define KC_PHASE_DONE()                                                                    \
  do {                                                                                     \
    if (lane == 0) {                                                                       \
      for (int k_ = 1; k_ < 7; ++k_)                                                       \
        atomicAdd(&kc_phase_sum[k_], (unsigned long long)(kc_phase_t[warp][k_] - kc_phase_t[warp][k_ - 1])); \
      atomicAdd(&kc_phase_sum[0], 1ull);                                                   \
    }                                                                                      \
  } while (0)
#else
#define KC_PHASE(k) do {} while (0)
#define KC_PHASE_DONE() do {} while (0)
#endif

__device__ __forceinline__ void cp_async16(uint32_t dst, const uint8_t* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
#endif
}
// The same with zero-fill: nothing is read when !valid, the 16 bytes become zeros.
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const uint8_t* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
#endif
}
template <int D, Format F>
__global__ void __launch_bounds__(kAttnThreads, MmaTune<D, F>::min_blocks) attention_partial_mma_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  static_assert(D == 128 || D == 256, "mma partial: head_dim 128 or 256");
  static_assert(F == Format::bf16 || F == Format::fp8, "mma partial: bf16 or fp8");
  constexpr int H = kAttnHeadsPerBlock;
  constexpr int KS = D / 16;                        // k-steps of a K row
  constexpr int EPL = F == Format::bf16 ? 8 : 16;   // elements of a lane's 16-byte load
  constexpr int SPL = EPL / 4;                      // k-steps per load (4 elements each per lane)
  constexpr int NB = D / (4 * EPL);                 // 16-byte loads per lane per K row
  constexpr bool kFp8 = F == Format::fp8;
  static_assert(kAttnThreads / 32 == H, "mma partial: one warp per head slot");
  extern __shared__ __align__(16) unsigned char smb[];
  const AttnBlock blk(views, p, rows, tails, nsub);
  const int c = blk.c, r = blk.r, kvh = blk.kvh, G = blk.G, qh0 = blk.qh0, W = p.chunk, n = blk.n;
  const int32_t k0 = blk.k0, *tail = blk.tail;
  const AttnRow& row = blk.row;
  const KvView& v = blk.v;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, lg = lane >> 2, lt = lane & 3;
  const int nt = (n + 15) / 16;  // key tiles holding keys
  constexpr int NPT = attn_mma_parts(F);  // parts of q and p (attention_rows.h)
#ifdef KC_PLANT_MMA_HI_ONLY
  constexpr int NPU = 1;  // planted bug (test builds only): the products use the hi part alone
#else
  constexpr int NPU = NPT;  // parts the products use
#endif
  const MmaSmem lay(W, D, NPT, MmaTune<D, F>::stage_bytes, MmaTune<D, F>::ring_stages, MmaTune<D, F>::ring_pre);
#ifdef KC_MMA_PHASES
  __shared__ long long kc_phase_t[kAttnThreads / 32][8];
#endif
  KC_PHASE(0);
  uint2* qf = reinterpret_cast<uint2*>(smb + lay.qf);
  uint2* pf = reinterpret_cast<uint2*>(smb + lay.pf);
  const uint8_t** vrows = reinterpret_cast<const uint8_t**>(smb + lay.vrows);
  float* ksc = reinterpret_cast<float*>(smb + lay.ksc);
  float* vsc = reinterpret_cast<float*>(smb + lay.vsc);
  float* ss = reinterpret_cast<float*>(smb + lay.ss);
  int* qsh = reinterpret_cast<int*>(smb + lay.qsh);
  int* psh = reinterpret_cast<int*>(smb + lay.psh);

  // The first K tile's loads go out before anything else: lane (g, t) of warp w reads
  //    keys 16w + g and 16w + g + 8 (rows resolved in registers), bytes 16t + 64b, into
  //    kf (a whole tile: NB loads per row).
  const KvPlane kp = kv_plane(v, p.layer, 0, kvh), vp = kv_plane(v, p.layer, 1, kvh);
  const KvPlane ksp = kv_plane(v, p.layer, 0, kvh, kFp8), vsp = kv_plane(v, p.layer, 1, kvh, kFp8);
  auto tile_rows = [&](int kt, const uint8_t* (&dst)[2]) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int i = min(kt * 16 + lg + 8 * rr, n - 1);  // keys past n read key n - 1 (scores not kept)
      dst[rr] = kv_plane_row(kp, key_slot(k0 + i, row.len, tail)) + 16 * lt;
    }
  };
  constexpr int NW = kAttnThreads / 32;
  const uint8_t* kc[2] = {nullptr, nullptr};
  uint4 kf[2][NB];
  if (warp < nt) {
    tile_rows(warp, kc);
#pragma unroll
    for (int b = 0; b < NB; ++b) kf[0][b] = ldg_mma<uint4>(kc[0] + 64 * b), kf[1][b] = ldg_mma<uint4>(kc[1] + 64 * b);
  }

  // Each key's V row pointer (and fp8 K and V row scales; one page split for the three
  //    planes). fp8: the first KPT * 256 keys' scale loads go out before q's fragments
  //    are built and reach shared memory after (3 % faster at 32K x b8 on the H200); bf16
  //    resolves every row after (doing it before was 2 to 5 % slower).
  constexpr int KPT = kFp8 ? 2 : 0;
  auto key_meta = [&](int i, float& ks, float& vs) {
    const KvPos at = kv_pos(vp, key_slot(k0 + i, row.len, tail));
    vrows[i] = kv_plane_at(vp, at);
    if constexpr (kFp8) {
      ks = __ldg(reinterpret_cast<const float*>(kv_plane_at(ksp, at)));
      vs = __ldg(reinterpret_cast<const float*>(kv_plane_at(vsp, at)));
    }
  };
  float kscr[KPT + 1] = {}, vscr[KPT + 1] = {};
#pragma unroll
  for (int k = 0; k < KPT; ++k)
    if (tid + k * kAttnThreads < n) key_meta(tid + k * kAttnThreads, kscr[k], vscr[k]);

  // 0. q's B fragments, warp w for head slot w: entry (k-step, part, lane (g, t)) holds
  //    q[head g] at the four elements of k slots 2t, 2t+1 | 2t+8, 2t+9 of that step;
  //    slots >= G are zero. fp8 runs on fp16 inputs: q and p' of each head are scaled by
  //    2^attn_f16_shift(their largest magnitude), exactly, and unscaled after.
  {
    const int h = warp;  // kAttnThreads / 32 == H
    const float* qr = q + (size_t(r) * p.q_heads + qh0 + h) * D;
    int sh = 0;
    if constexpr (kFp8) {
      if (h < G) sh = attn_f16_shift(warp_amax(qr, D, lane));
      if (lane == 0) qsh[h] = sh;
    }
    for (int i = lane; i < KS * 4; i += 32) {
      const int ks = i / 4, t = i % 4;
      const int e = (ks / SPL) * 4 * EPL + EPL * t + 4 * (ks % SPL);
      float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (h < G)
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = kFp8 ? ldexpf(qr[e + j], sh) : qr[e + j];
      uint32_t lo[NPT], hi[NPT];
      split_parts<kFp8>(x[0], x[1], lo);
      split_parts<kFp8>(x[2], x[3], hi);
#pragma unroll
      for (int s = 0; s < NPT; ++s) qf[(ks * NPT + s) * 32 + 4 * h + t] = make_uint2(lo[s], hi[s]);
    }
  }
  if constexpr (kFp8)
#pragma unroll
    for (int k = 0; k < KPT; ++k)
      if (tid + k * kAttnThreads < n) ksc[tid + k * kAttnThreads] = kscr[k], vsc[tid + k * kAttnThreads] = vscr[k];
  for (int i = tid + KPT * kAttnThreads; i < n; i += kAttnThreads) {  // chunks wider than KPT * 256
    float a = 0.0f, b = 0.0f;
    key_meta(i, a, b);
    if constexpr (kFp8) ksc[i] = a, vsc[i] = b;
  }
  // fp8: the last tile's keys past n read key n - 1's V row with p = 0, so the p.v loads
  // need no per-key test (E4M3 has no infinity, and a NaN code makes the output NaN
  // through key n - 1 itself). bf16 tests each key (0 * inf would be NaN).
  if constexpr (kFp8)
    if (tid < nt * 16 - n) vrows[n + tid] = kv_plane_row(vp, key_slot(k0 + n - 1, row.len, tail));
  __syncthreads();
  KC_PHASE(1);

  // 1. scores: warp w takes tiles w, w + 8, ..; as each of a tile's NB loads per row is
  //    used, its register takes the next tile's load, so a whole tile stays in flight
  //    (H200, 32K x b8, against two half-tile buffers: bf16 d256 296 -> 289 us, fp8 197
  //    -> 192).
  auto mma_load = [&](int lb, const uint4& r0, const uint4& r1, float (&acc)[4]) {  // K load lb of both rows
    const uint32_t w0[4] = {r0.x, r0.y, r0.z, r0.w};
    const uint32_t w1[4] = {r1.x, r1.y, r1.z, r1.w};
#pragma unroll
    for (int s = 0; s < SPL; ++s) {
      uint32_t a[4];
      if constexpr (kFp8) {  // word s: codes of elements 4s .. 4s+3 of this load
        a[0] = e4m3x2_to_f16x2(w0[s]), a[2] = e4m3x2_to_f16x2(w0[s] >> 16);
        a[1] = e4m3x2_to_f16x2(w1[s]), a[3] = e4m3x2_to_f16x2(w1[s] >> 16);
      } else {  // words 2s, 2s+1: elements 4s .. 4s+3
        a[0] = w0[2 * s], a[2] = w0[2 * s + 1];
        a[1] = w1[2 * s], a[3] = w1[2 * s + 1];
      }
      const int ks = lb * SPL + s;
      float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int q3 = NPU - 1; q3 >= 0; --q3) mma_16816<kFp8>(cc, a, qf[(ks * NPT + q3) * 32 + lane]);
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] += cc[e];
    }
  };
  for (int kt = warp; kt < nt; kt += NW) {
    const bool more = kt + NW < nt;
    const uint8_t* kn[2] = {nullptr, nullptr};
    if (more) tile_rows(kt + NW, kn);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      mma_load(b, kf[0][b], kf[1][b], acc);
      if (more) kf[0][b] = ldg_mma<uint4>(kn[0] + 64 * b), kf[1][b] = ldg_mma<uint4>(kn[1] + 64 * b);
    }
    // c0, c1: key kt*16 + g, heads 2t, 2t+1; c2, c3: key kt*16 + g + 8.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = kt * 16 + lg + 8 * (e >> 1), h = 2 * lt + (e & 1);
      if (i < n && h < G) {
        float sc = acc[e];
        if constexpr (kFp8) sc = ldexpf(sc, -qsh[h]) * ksc[i];
        ss[h * W + i] = sc * p.scale;
      }
    }
  }

  // The p.v deals the key tiles to KG key groups of NW / KG warps (tile j to group j % KG;
  // attention_rows.h); warp w of group kg owns elements [16 MT ws, 16 MT (ws + 1)),
  // ws = w % (NW / KG).
  constexpr int KG = attn_mma_key_groups(D), WPG = NW / KG, MT = D / 16 / WPG;
  static_assert((KG == 1 || KG == 2) && MT == 2, "mma partial: p.v key groups, 2 V m-tiles per warp");
  const int kg = warp / WPG, ws = warp % WPG;
  constexpr int EB = kFp8 ? 1 : 2;  // bytes per V element
  // V tiles through a ring of RS stages of RT tiles in shared memory, by 16-byte
  // cp.async (block ch of key row k at 16 (ch ^ (k & 7)), so that ldmatrix's eight rows hit
  // eight different bank groups); stage s in slot s % RS. Stages 0 .. pre - 1 go out
  // before the softmax (their slots overlap no live array), the rest of the first RS - 1
  // after it.
  constexpr int RS = MmaTune<D, F>::ring_stages, RT = MmaTune<D, F>::ring_tiles;
  static_assert(RS >= 2, "mma partial: V ring of at least 2 stages");
  const uint32_t ring_s = uint32_t(__cvta_generic_to_shared(smb + lay.ring));
  const int nst = (nt + RT - 1) / RT;
  auto ring_issue = [&](int st, int slot) {
    if (st < nst) {
      constexpr int RB = D * EB, CPK = RB / 16, CPS = RT * 16 * CPK;
#pragma unroll
      for (int q0 = 0; q0 < CPS; q0 += kAttnThreads) {
        const int q = q0 + tid;
        if (CPS % kAttnThreads == 0 || q < CPS) {
          const int u = q / (16 * CPK), key = (q / CPK) % 16, ch = q % CPK, kt = st * RT + u;
          if (kt < nt) {
            const uint32_t dst = ring_s + uint32_t(((slot * RT + u) * 16 + key) * RB + ((ch ^ (key & 7)) << 4));
            if constexpr (kFp8) {
              cp_async16(dst, vrows[kt * 16 + key] + 16 * ch);
            } else {  // bf16: keys past n read as zeros (p = 0 there, and 0 * inf would be NaN)
              const bool in = kt * 16 + key < n;
              cp_async16_zfill(dst, vrows[in ? kt * 16 + key : 0] + 16 * ch, in);
            }
          }
        }
      }
    }
    cp_async_commit();
  };
  if constexpr (MmaTune<D, F>::ring_pre == 1) {
    ring_issue(0, 0);
  } else {
#pragma unroll 1
    for (int st = 0; st < MmaTune<D, F>::ring_pre; ++st) ring_issue(st, st);
  }
  KC_PHASE(2);
  __syncthreads();
  KC_PHASE(3);

  // 2. softmax, warp w for head slot w (the order of the fma kernel; fp8 keeps p' = p * V
  //    row scale and its shift), then that head's p' B fragments: entry (tile, part,
  //    lane (w, t)): keys 2t, 2t+1 | 2t+8, 2t+9 of the tile; slots >= G are zero.
  {
    const int hw = warp;
    float* s = ss + hw * W;
    int sh = 0;
    if (hw < G) {
      const WarpSoftmax sx = warp_softmax<kFp8, kFp8>(s, n, lane, vsc);
      if constexpr (kFp8) sh = attn_f16_shift(sx.stored_max);
      if (lane == 0) {
        const size_t pidx = (size_t(r) * p.q_heads + qh0 + hw) * max_chunks + c;
        pm[pidx] = sx.m;
        pl[pidx] = sx.l;
        psh[hw] = sh;
      }
    }
    __syncwarp();
    for (int i = lane; i < nt * 4; i += 32) {
      const int kt = i / 4, t = i % 4;
      float x[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = kt * 16 + 2 * t + (j & 1) + 8 * (j >> 1);
        x[j] = hw < G && key < n ? (kFp8 ? ldexpf(s[key], sh) : s[key]) : 0.0f;
      }
      uint32_t lo[NPT], hi[NPT];
      split_parts<kFp8>(x[0], x[1], lo);
      split_parts<kFp8>(x[2], x[3], hi);
#pragma unroll
      for (int q3 = 0; q3 < NPT; ++q3) pf[(kt * NPT + q3) * 32 + 4 * hw + t] = make_uint2(lo[q3], hi[q3]);
    }
  }
  __syncthreads();

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();  // the merge may be scheduled (it waits for us)
#endif
  KC_PHASE(4);
  // 3. p.v: warp w of key group kg owns elements [16 MT ws, 16 MT (ws + 1)); m slot g of
  //    its m-tile jt is element 16 MT ws + 16 jt + 2g (fp8; bf16: + g) and slot g + 8 the
  //    next one (bf16: 8 further). The group's tiles kg, kg + KG, .. in key order, as the
  //    ring's stages arrive; with two groups o = o(group 0) + o(group 1) at last.
  float o[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
  {
    // ldmatrix rows of this lane: matrix lane >> 3 is keys 0-7 | 8-15 (bit 0) of 16-byte
    // block 2 ws | 2 ws + 1 (bit 1); lane (g, t) then holds key 2t, 2t+1 (and 2t+8, 2t+9)
    // of elements 2g, 2g + 1 of the block: m slot g is element 16 (2 ws + jt) + 2g, g + 8 the next.
    const int lkey = (lane & 7) + 8 * ((lane >> 3) & 1), lcb = 2 * ws + (lane >> 4);
    const uint32_t lofs = uint32_t(lkey * D + ((lcb ^ (lkey & 7)) << 4));
    // bf16: matrices (keys 0-7, block c), (0-7, c + 1), (8-15, c), (8-15, c + 1) of the
    // m-tile's 16-byte blocks c = 4 ws + 2 jt, c + 1 are its A fragments as they are: m slot g
    // is element 32 ws + 16 jt + g, slot g + 8 element 32 ws + 16 jt + 8 + g.
    const int bkey = (lane & 7) + 8 * (lane >> 4), bcb = 4 * ws + ((lane >> 3) & 1);
    const uint32_t bofs0 = uint32_t(bkey * 2 * D + ((bcb ^ (bkey & 7)) << 4));
    const uint32_t bofs1 = uint32_t(bkey * 2 * D + (((bcb + 2) ^ (bkey & 7)) << 4));
#pragma unroll
    for (int st = MmaTune<D, F>::ring_pre; st < RS - 1; ++st) ring_issue(st, st);
    for (int st = 0, slot = 0; st < nst; ++st, slot = slot + 1 == RS ? 0 : slot + 1) {
      cp_async_wait<RS - 2>();
      __syncthreads();
      ring_issue(st + RS - 1, slot == 0 ? RS - 1 : slot - 1);
#pragma unroll
      for (int u = 0; u < RT; ++u) {
        const int kt = st * RT + u;
        if (kt >= nt) break;
        if (KG > 1 && kt % KG != kg) continue;
        uint2 b[NPT];
#pragma unroll
        for (int part = 0; part < NPT; ++part) b[part] = pf[(kt * NPT + part) * 32 + lane];
        const uint32_t tbase = ring_s + uint32_t((slot * RT + u) * 16 * D * EB);
        uint32_t r[4];
        if constexpr (kFp8) ldmatrix_x4_trans(r, tbase + lofs);
#pragma unroll
        for (int jt = 0; jt < 2; ++jt) {
          uint32_t a[4];
          if constexpr (kFp8) {
            a[0] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt], 0, 0x0020));
            a[1] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt], 0, 0x0031));
            a[2] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt + 1], 0, 0x0020));
            a[3] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt + 1], 0, 0x0031));
          } else {
            ldmatrix_x4_trans(a, tbase + (jt ? bofs1 : bofs0));
          }
          float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int part = NPU - 1; part >= 0; --part) mma_16816<kFp8>(cc, a, b[part]);
#pragma unroll
          for (int e = 0; e < 4; ++e) o[jt][e] += cc[e];
        }
      }
    }
  }
  if constexpr (KG == 2) {
    // Group 1 hands its sums to group 0 through the q fragments' space (dead since the
    // scores), lane-contiguous float4s.
    static_assert(mma_qf_bytes(D, NPT) >= size_t(WPG) * 32 * MT * 16, "mma partial: p.v exchange space");
    float4* ox = reinterpret_cast<float4*>(smb + lay.qf);
    __syncthreads();  // the ring's slots cover the q fragments' space
    if (kg == 1)
#pragma unroll
      for (int jt = 0; jt < MT; ++jt) ox[(ws * MT + jt) * 32 + lane] = make_float4(o[jt][0], o[jt][1], o[jt][2], o[jt][3]);
    __syncthreads();
    if (kg == 1) return;  // (KC_MMA_PHASES: group 1's warps leave unstamped)
#pragma unroll
    for (int jt = 0; jt < MT; ++jt) {
#ifndef KC_PLANT_PV_GROUP_DROP  // planted bug (test builds only): group 1's keys are lost
      const float4 x = ox[(ws * MT + jt) * 32 + lane];
      o[jt][0] += x.x, o[jt][1] += x.y, o[jt][2] += x.z, o[jt][3] += x.w;
#endif
    }
  }
  KC_PHASE(5);
  // c0, c1: heads 2t, 2t+1 of m slot g; c2, c3: of m slot g + 8.
#pragma unroll
  for (int jt = 0; jt < MT; ++jt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = 2 * lt + (e & 1);
      if (h < G) {
        const size_t pidx = (size_t(r) * p.q_heads + qh0 + h) * max_chunks + c;
        const int elem = kFp8 ? 32 * ws + 16 * jt + 2 * lg + (e >> 1) : 32 * ws + 16 * jt + lg + 8 * (e >> 1);
        po[pidx * D + elem] = kFp8 ? ldexpf(o[jt][e], -psh[h]) : o[jt][e];
      }
    }
  KC_PHASE(6);
  KC_PHASE_DONE();
}

// Block per (q head, row), one thread per output element. M (the max of the non-empty
// chunks' m; exact in any order) is a block reduction; then every thread walks the chunks
// in chunk order (the same L in every thread), their m and l staged through shared
// memory kMergeTile chunks at a time and their partials loaded kMergeBatch chunks at a
// time before the first is used. The merge is latency-bound (a few loads per thread), so
// the first tile's m and l are staged by the pass that finds M, and the first batch of
// partials is in flight during it.
// Batch of 16: on the H200 (24q/4kv/d256) 54.8 us against 59.5 us before at 32K x b1 and
// 297 against 299 us at 32K x b8 (two alternating runs each); 32 and 64 were no better.
constexpr int kMergeTile = 256, kMergeBatch = 16;
__global__ void attention_merge_kernel(AttnParams p, const AttnRow* rows, int d, int max_chunks, const float* pm,
                                       const float* pl, const float* po, bool unrotate, float* out) {
  __shared__ float obuf[kMaxHeadDim];
  __shared__ float tl[kMergeTile], tm[kMergeTile], wmax[kMaxHeadDim / 32];
  constexpr int U = kMergeBatch;
  const int qh = blockIdx.x, r = blockIdx.y, j = threadIdx.x, lane = j & 31;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();  // launched early (programmatic dependency): wait for the partials
#endif
  const AttnRow row = rows[r];
  const int nc = (row.len + row.tail_len + p.chunk - 1) / p.chunk;
  const size_t base = (size_t(r) * p.q_heads + qh) * max_chunks;
  float oc[U];  // partials of chunks [t0 + c0, t0 + c0 + U) at element j
  auto load_batch = [&](int c, int tn) {
#pragma unroll
    for (int u = 0; u < U; ++u)
      oc[u] = c + u < tn ? __ldg(po + (base + c + u) * d + j) : 0.0f;
  };
  load_batch(0, min(nc, kMergeTile));
  float M = -INFINITY;
  for (int c = j; c < nc; c += d) {
    const float lc = __ldg(pl + base + c), mc = __ldg(pm + base + c);
    if (c < kMergeTile) tl[c] = lc, tm[c] = mc;
    if (lc > 0.0f) M = fmaxf(M, mc);
  }
  for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xFFFFFFFFu, M, off));
  if (lane == 0) wmax[j / 32] = M;
  __syncthreads();  // also: the first tile's m and l are staged
  M = -INFINITY;
  for (int w = 0; w < d / 32; ++w) M = fmaxf(M, wmax[w]);
  float L = 0.0f, acc = 0.0f;
  for (int t0 = 0; t0 < nc; t0 += kMergeTile) {
    const int tn = min(kMergeTile, nc - t0);
    if (t0 > 0) {
      __syncthreads();  // the previous tile is consumed
      for (int c = j; c < tn; c += d) {
        tl[c] = __ldg(pl + base + t0 + c);
        tm[c] = __ldg(pm + base + t0 + c);
      }
      __syncthreads();
    }
    for (int c0 = 0; c0 < tn; c0 += U) {
      if (t0 > 0 || c0 > 0) load_batch(t0 + c0, t0 + tn);
      // Branch-free, so the batch's loads, weights and products are scheduled ahead of
      // the two in-order sums; a chunk past the tile or without keys leaves them as they are.
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int cu = min(c0 + u, tn - 1);
        const float lc = tl[cu], w = expf(tm[cu] - M);
        const bool use = c0 + u < tn && lc > 0.0f;
        const float Ln = L + lc * w, an = acc + oc[u] * w;
        L = use ? Ln : L;
        acc = use ? an : acc;
      }
    }
  }
  float res = L > 0.0f ? acc / L : 0.0f;
  if (unrotate) {  // q4: the output back to original space, once
    obuf[j] = res;
    __syncthreads();
    if (j < d / 32) hadamard32_inv(obuf + 32 * j);
    __syncthreads();
    res = obuf[j];
  }
  out[(size_t(r) * p.q_heads + qh) * d + j] = res;
}

__global__ void keep_kernel(const KvView* views, const KeepMove* moves, const int32_t* lane_off) {
  const int f = blockIdx.x, g = blockIdx.y;
  for (int32_t i = lane_off[g]; i < lane_off[g + 1]; ++i) {
    const KeepMove mv = moves[i];
    const KvView v = views[mv.lane];
    const uint32_t bytes = v.lay.field(f).bytes_per_pos;
    const uint8_t* src = kv_field_row(v, f, mv.src);
    uint8_t* dst = kv_field_row(v, f, mv.dst);
    for (uint32_t b = threadIdx.x; b < bytes; b += blockDim.x) dst[b] = src[b];
    __syncthreads();
  }
}

Status launch_rope_store(const KvView* views, int hkv, const RopeParams& p, const RopeRow* rows, int n, const float* q,
                         const float* k, const float* v, float* q_out) {
  if (n == 0) return Status::Ok();
  const int64_t warps = int64_t(n) * ((q ? p.q_heads : 0) + 2 * hkv);
  rope_store_kernel<<<unsigned((warps * 32 + 255) / 256), 256>>>(views, p, rows, n, q, k, v, q_out);
  KC_LAUNCH_CHECK("rope_store_kernel");
  return Status::Ok();
}

Status launch_attention(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                        const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                        float* out, bool sync) {
  if (n == 0) return Status::Ok();
  const int group = p.q_heads / hkv;
  if (max_chunks > 0 && attn_uses_mma(fmt, d)) {
    const int nsub = (group + kAttnHeadsPerBlock - 1) / kAttnHeadsPerBlock;
    const size_t smem = mma_smem(p.chunk, d, fmt).total;
    const dim3 grid(max_chunks, hkv * nsub, n);
    auto* kern = d == 128 ? (fmt == Format::bf16 ? attention_partial_mma_kernel<128, Format::bf16>
                                                  : attention_partial_mma_kernel<128, Format::fp8>)
                          : (fmt == Format::bf16 ? attention_partial_mma_kernel<256, Format::bf16>
                                                  : attention_partial_mma_kernel<256, Format::fp8>);
    KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    kern<<<grid, kAttnThreads, smem>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);
#ifdef KC_MMA_PHASES
    {
      unsigned long long h[8] = {};
      KC_CUDA_TRY(cudaDeviceSynchronize());
      KC_CUDA_TRY(cudaMemcpyFromSymbol(h, kc_phase_sum, sizeof h));
      const double w = double(h[0] ? h[0] : 1);
      std::fprintf(stderr,
                   "mma partial phases (d%d %s, %llu warps, mean cycles per warp): set-up %.0f scores %.0f "
                   "barrier %.0f softmax %.0f p.v %.0f stores %.0f\n",
                   d, format_name(fmt), h[0], h[1] / w, h[2] / w, h[3] / w, h[4] / w, h[5] / w, h[6] / w);
      const unsigned long long z[8] = {};
      KC_CUDA_TRY(cudaMemcpyToSymbol(kc_phase_sum, z, sizeof z));
    }
#endif
    if (sync) KC_LAUNCH_CHECK("attention_partial_mma_kernel");
    else KC_LAUNCH_CHECK_ASYNC("attention_partial_mma_kernel");
  } else if (max_chunks > 0) {
    const int nsub = (group + kAttnHeadsPerBlock - 1) / kAttnHeadsPerBlock;
    const int G = std::min(group, kAttnHeadsPerBlock);
    const size_t smem = attn_ptr_offset_floats(G, p.chunk, d) * sizeof(float) + size_t(2) * p.chunk * sizeof(void*);
    const dim3 grid(max_chunks, hkv * nsub, n);
    const bool bf = fmt == Format::bf16;
#define KC_PARTIAL(D)                                                                                          \
  do {                                                                                                         \
    auto* kern = bf ? attention_partial_kernel<D, Format::bf16>                                                 \
                    : (fmt == Format::fp8 ? attention_partial_kernel<D, Format::fp8>                              \
                                          : attention_partial_kernel<D, Format::q4>);                             \
    KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));           \
    kern<<<grid, kAttnThreads, smem>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);                \
  } while (0)
    switch (d) {
      case 32: KC_PARTIAL(32); break;
      case 64: KC_PARTIAL(64); break;
      case 128: KC_PARTIAL(128); break;
      case 256: KC_PARTIAL(256); break;
      default: return Status::Error("attention: head_dim must be 32, 64, 128 or 256");
    }
#undef KC_PARTIAL
    if (sync) KC_LAUNCH_CHECK("attention_partial_kernel");
    else KC_LAUNCH_CHECK_ASYNC("attention_partial_kernel");
  }
  // The merge is launched with a programmatic dependency on the partial: its blocks may be
  // scheduled while the partial's last blocks run, and wait in cudaGridDependencySynchronize.
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(p.q_heads, n);
  cfg.blockDim = dim3(d);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  KC_CUDA_TRY(cudaLaunchKernelEx(&cfg, attention_merge_kernel, p, rows, d, max_chunks, pm, pl, po, fmt == Format::q4, out));
  if (sync) KC_LAUNCH_CHECK("attention_merge_kernel");
  else KC_LAUNCH_CHECK_ASYNC("attention_merge_kernel");
  return Status::Ok();
}

Status launch_keep(const KvView* views, int fields, const KeepMove* moves, const int32_t* lane_off, int groups) {
  if (groups == 0) return Status::Ok();
  keep_kernel<<<dim3(fields, groups), 128>>>(views, moves, lane_off);
  KC_LAUNCH_CHECK("keep_kernel");
  return Status::Ok();
}

}  // namespace kc
