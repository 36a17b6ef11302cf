// Split-K attention partial on the fma chain (every format and head_dim; the cuda backend
// takes partial_mma.cu instead for bf16 / fp8 with head_dim 128 / 256). Host twin:
// attention_partial_host (attention/twin.cpp); contract: qwen-pages.
//
// attention_partial_kernel: block (chunk, kv head x sub-group of <= 8 q heads, row),
//   256 threads. Keys are the logical positions [chunk*W, chunk*W + W) of the row
//   (committed 0..len-1, then the tail through its index list). Scores: one thread per
//   key reads the key's K row once (16-byte loads) for every q head of the block (the
//   queries sit in shared memory) and resolves the key's V code and scale rows into
//   shared memory; m, p = expf(s - m) and l per head by one warp each;
//   p.v: threads split into key groups x 4-element slices of V, each V element read
//   once for every head; the key groups combine in a halving tree. The order of every
//   sum is the one attention/rows.h fixes (and the host twin replays). An empty chunk
//   gives m = -inf, l = 0, o = 0. Partials [row][q head][max chunks].
// Every address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention/partial.cuh"

namespace kc {

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
// sum is the one attention/rows.h fixes. Phases:
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

Status launch_partial_fma(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows,
                          int n, const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                          cudaStream_t s) {
  const int group = p.q_heads / hkv;
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
    kern<<<grid, kAttnThreads, smem, s>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);                \
  } while (0)
  switch (d) {
    case 32: KC_PARTIAL(32); break;
    case 64: KC_PARTIAL(64); break;
    case 128: KC_PARTIAL(128); break;
    case 256: KC_PARTIAL(256); break;
    default: return Status::Error("attention: head_dim must be 32, 64, 128 or 256");
  }
#undef KC_PARTIAL
  KC_LAUNCH_CHECK("attention_partial_kernel");
  return Status::Ok();
}

}  // namespace kc
