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

// Rows are read 16 bytes at a time (8 elements of bf16, 16 of fp8, 32 of q4 and mxfp4)
// and dequantised four elements at a time by the format's traits (Codec<F>, codecs/):
// load_raw4 / raw4_of give four elements' raw bits (so that several keys' raw words can be
// in flight before any is dequantised: fewer live registers than four floats per key),
// elem_scale the scale of the elements [e0, ..) from the scale row (fp8: the row scale;
// q4 and mxfp4: their group's), conv4 the four fp32 values attention reads (each format
// states the values it gives: the twin's Codec<F>::attn_row's, exactly).

// Float offset of the partial kernel's per-key row-pointer arrays in shared memory
// (after queries, scores and the reduction buffer; rounded up to 16 bytes).
__host__ __device__ constexpr size_t attn_ptr_offset_floats(int G, int W, int D) {
  return (size_t(G) * D + size_t(G) * W + size_t(attn_key_groups(D) / 2) * G * D + 3) / 4 * 4;
}

// Resident partial blocks per SM asked of the register allocator: Codec<F>::kAttnMinBlocks,
// 4 for bf16 (64 registers; measured 7 % faster at 32K x b8 on the H200), 3 for the others
// (their dequantisation needs ~80 registers; at 4 fp8 and q4 spill and run 20 % slower).
// Block (chunk, kv head x head sub-group, row), kAttnThreads threads; the order of every
// sum is the one attention/rows.h fixes. Phases:
//  1. queries of the block's heads to shared memory;
//  2. scores: one thread per key, the whole row of K read once for all the block's heads
//     (16-byte loads), each head's dot in element order;
//  3. warp h: m, p = expf(s - m) (kept in shared memory), l;
//  4. p.v: thread (key group g, elements [4t, 4t+4)) accumulates every head over the
//     keys of its group, V read once for all heads; then the halving tree over groups.
template <int D, Format F>
__global__ void __launch_bounds__(kAttnThreads, Codec<F>::kAttnMinBlocks) attention_partial_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  using C = Codec<F>;
  extern __shared__ __align__(16) float sm[];
  constexpr int H = kAttnHeadsPerBlock;
  constexpr int VEC = 64 / C::kBytesPer4;  // elements of one 16-byte load
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
  if constexpr (C::kRotated) {  // attention in rotated space (q4): the query rotated once
    for (int t = tid; t < G * D / 32; t += kAttnThreads) C::rotate_query(qs + 32 * t, 32);
    __syncthreads();
  }

  const KvPlane kp = kv_plane(v, p.layer, 0, kvh), vp = kv_plane(v, p.layer, 1, kvh);
  constexpr bool kScales = C::kScales;
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
    // are used (Codec<F>::kAttnRawWords): 4 (64 B) for bf16 and fp8, 1 for q4 and mxfp4 (32
    // elements a word; more spilled and ran slower on the H200 for q4).
    constexpr int R4 = C::kBytesPer4;
    constexpr int RBMAX = C::kAttnRawWords;
    constexpr int RB = NV < RBMAX ? NV : RBMAX;
#pragma unroll 1
    for (int b = 0; b < NV; b += RB) {
      uint4 raw[RB];
      float sc[RB];
#pragma unroll
      for (int u = 0; u < RB; ++u) {
        raw[u] = __ldg(reinterpret_cast<const uint4*>(kr + (b + u) * 16));
        sc[u] = C::elem_scale(ksr, (b + u) * VEC);
      }
#pragma unroll
      for (int u = 0; u < RB; ++u)
#pragma unroll
        for (int c = 0; c < 16 / R4; ++c) {
          float x[4];
          C::conv4(C::raw4_of(raw[u], c), sc[u], x);
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
    typename C::Raw4 raw[KF];
    float sc[KF];
#pragma unroll
    for (int u = 0; u < KF; ++u) {
      raw[u] = C::load_raw4(vrows[i + u * KG], e0);
      sc[u] = C::elem_scale(vscales[i + u * KG], e0);
    }
#pragma unroll
    for (int u = 0; u < KF; ++u) {
      float x[kAttnElems];
      C::conv4(raw[u], sc[u], x);
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
    C::conv4(C::load_raw4(vrows[i], e0), C::elem_scale(vscales[i], e0), x);
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
  // The one dispatch: the format's kernel for the head_dim (every format takes this path).
  return with_format(fmt, [&](auto codec) -> Status {
    constexpr Format F = decltype(codec)::kFormat;
    void (*kern)(const KvView*, AttnParams, const AttnRow*, const int32_t*, const float*, int, int, float*, float*,
                 float*);
    switch (d) {
      case 32: kern = attention_partial_kernel<32, F>; break;
      case 64: kern = attention_partial_kernel<64, F>; break;
      case 128: kern = attention_partial_kernel<128, F>; break;
      case 256: kern = attention_partial_kernel<256, F>; break;
      default: return Status::Error("attention: head_dim must be 32, 64, 128 or 256");
    }
    KC_RETURN_IF_ERROR(cuda_allow_smem(reinterpret_cast<const void*>(kern), smem));
    kern<<<grid, kAttnThreads, smem, s>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);
    KC_LAUNCH_CHECK("attention_partial_kernel");
    return Status::Ok();
  });
}

}  // namespace kc
