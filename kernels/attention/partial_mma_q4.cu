// Split-K attention partial on the tensor cores for q4 caches (head_dim 128 / 256), in
// rotated space as the fma partial (attention/rows.h gives its order and error model;
// shared-memory layout and tuning: attention/mma_smem.h, MmaQ4Smem / MmaQ4Tune). The host
// twin runs the fma order (attention/twin.cpp) and the qwen-pages contract bounds both
// (Backend::attention_arith).
// Every address comes from kv_row / kv_scale (kv_plane); no stride arithmetic here.
//
// Block (chunk, kv head x sub-group of <= 8 q heads, row), 256 threads (8 warps); the
// block's q heads are the n = 8 columns of mma.m16n8k16 (zero-padded), inputs fp16:
//  0. each warp issues its first K tile's loads; warp h rotates q of head slot h (the
//     inverse rotation 2^-2 H32 per group, by shuffles: the fp32 adds and subtracts of
//     hadamard32_inv), scales it by 2^attn_f16_shift(its largest magnitude) (exact) and
//     splits it into two fp16 parts (q's B fragments); each key's V row pointer and V
//     group scales (fp16) to shared memory, and each warp's largest V scale per group;
//  1. scores: warp per 16-key tile; lane (g, t) reads, for keys g and g + 8, the 4 bytes
//     16 G + 4 t of every group G (elements 8 t .. 8 t + 7 of G) and the key's group
//     scales; codes are exact in fp16 (nibble pairs (n0, n4), (n1, n5) | (n2, n6), (n3, n7)
//     of a word by (w & 0x000F000F) | 0x64006400 - 1032: k-steps 2 G and 2 G + 1, so a
//     k-step lies inside one group); per k-step c = 0, c += mma(K codes, q lo), c +=
//     mma(K codes, q hi), then s = fmaf(c, the key's scale of the step's group, s);
//     score = ldexpf(s, -shift) * scale;
//  2. warp h: m, p = expf(s - m), l (as the fma kernel); the V ring's first stages (16-byte
//     cp.async of the code rows, zero-filled past n) went out before the scores;
//  3. p.v: warp w of key group kg (attn_mma_key_groups: one of 8 warps at d 256, two of 4
//     at d 128 taking alternate tiles) owns element group G = w % (8 / KG), 32 elements in
//     two m-tiles (m slot g of m-tile jt is element 32 G + 4 g + 2 jt, slot g + 8 the next);
//     per tile, lane (g, t) forms p' = (p * V scale of (key, G)) * 2^shift_G for head g and
//     keys 2t, 2t+1, 2t+8, 2t+9 (shift_G from the chunk's largest V scale of G, so p' <
//     2^15) in two fp16 parts, reads the 16 bits 2 g of its keys' group-G codes from the
//     ring (the A fragments: two keys per half2), and c = 0, c += mma(V^T, p' lo), c +=
//     mma(V^T, p' hi), o += c; with two key groups o = o_0 + o_1; stored times 2^-shift_G.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

#include "kernels/attention/mma_parts.cuh"
#include "kernels/attention/mma_smem.h"
#include "kernels/attention/partial.cuh"
#include "kernels/attention/ptx.cuh"

namespace kc {

template <int D>
struct MmaQ4Shape {
  static constexpr int NW = kAttnThreads / 32;
  static constexpr int NG = D / 32;  // groups of a row
  static constexpr int KS = D / 16;  // k-steps of a row
  static constexpr int NPT = attn_mma_parts(Format::q4);
#ifdef KC_PLANT_MMA_HI_ONLY
  static constexpr int NPU = 1;  // planted bug (test builds only): the products use the hi part alone
#else
  static constexpr int NPU = NPT;
#endif
  static constexpr int KG = attn_mma_key_groups(D), WPG = NW / KG;
  static constexpr int RB = D / 2;     // code bytes of a row
  static constexpr int CPK = RB / 16;  // its 16-byte chunks, one per group
  static constexpr int RS = MmaQ4Tune<D>::ring_stages, RT = MmaQ4Tune<D>::ring_tiles;
  using SV = std::conditional_t<D == 128, uint2, uint4>;  // a row's NG fp16 scales
  static_assert(D == 128 || D == 256, "q4 mma partial: head_dim 128 or 256");
  static_assert(NPT == 2, "q4 mma partial: two fp16 parts");
  static_assert(WPG == NG, "q4 mma partial: a key group's warps own one element group each");
  static_assert(RS >= 2, "q4 mma partial: V ring of at least 2 stages");
};

// Two 4-bit codes at bits 0 and 16 of w (nibbles n and n + 4 of a 32-bit word) as fp16x2,
// exactly: 1024 + nibble - 1032 = the code.
__device__ __forceinline__ uint32_t q4x2_to_f16x2(uint32_t w) {
  const uint32_t u = (w & 0x000F000Fu) | 0x64006400u;
  __half2 h;
  memcpy(&h, &u, 4);
  h = __hsub2(h, __halves2half2(__ushort_as_half(0x6408), __ushort_as_half(0x6408)));  // 1032
  uint32_t r;
  memcpy(&r, &h, 4);
  return r;
}
// fp16 bits to fp32; a scale that is not finite gives NaN (q4_decode_group_rotated's values).
__device__ __forceinline__ float q4_scale_f32(uint32_t h16) {
  return (h16 & 0x7C00u) == 0x7C00u ? __uint_as_float(0x7FC00000u) : __half2float(__ushort_as_half(uint16_t(h16)));
}
// The fp16 bits of group g's scale in a row's scales as loaded (uint2: 4 groups, uint4: 8).
__device__ __forceinline__ uint32_t sv_half(const uint2& v, int g) { return ((g < 2 ? v.x : v.y) >> (16 * (g % 2))) & 0xFFFFu; }
__device__ __forceinline__ uint32_t sv_half(const uint4& v, int g) {
  const uint32_t w = g < 2 ? v.x : g < 4 ? v.y : g < 6 ? v.z : v.w;
  return (w >> (16 * (g % 2))) & 0xFFFFu;
}

template <int D>
__global__ void __launch_bounds__(kAttnThreads, MmaQ4Tune<D>::min_blocks) attention_partial_mma_q4_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  using M = MmaQ4Shape<D>;
  using SV = typename M::SV;
  constexpr int NG = M::NG, KS = M::KS, NPT = M::NPT, RS = M::RS, RT = M::RT, RB = M::RB, CPK = M::CPK;
  extern __shared__ __align__(16) unsigned char smb[];
  const AttnBlock blk(views, p, rows, tails, nsub);
  const int n = blk.n, G = blk.G;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, lg = lane >> 2, lt = lane & 3;
  const int nt = (n + 15) / 16;  // key tiles holding keys
  const MmaQ4Smem lay = mma_q4_smem<D>(p.chunk);
  const int S = lay.ss_stride, W16 = lay.w16;
  float* ss = reinterpret_cast<float*>(smb + lay.ss);
  uint2* qf = reinterpret_cast<uint2*>(smb + lay.qf);
  uint16_t* vsc = reinterpret_cast<uint16_t*>(smb + lay.vsc);
  const uint8_t** vrows = reinterpret_cast<const uint8_t**>(smb + lay.vrows);
  uint32_t* wm = reinterpret_cast<uint32_t*>(smb + lay.wm);
  int* qsh = reinterpret_cast<int*>(smb + lay.qsh);

  const KvPlane kp = kv_plane(blk.v, p.layer, 0, blk.kvh), vp = kv_plane(blk.v, p.layer, 1, blk.kvh);
  const KvPlane ksp = kv_plane(blk.v, p.layer, 0, blk.kvh, true), vsp = kv_plane(blk.v, p.layer, 1, blk.kvh, true);
  // Lane (g, t)'s K reads of tile kt: code words at 16 G + 4 t of keys 16 kt + g and + 8
  // (keys past n read key n - 1, whose scores are not kept) and the two keys' scale rows.
  auto k_load = [&](int kt, uint32_t (&kw)[2][NG], SV (&ks)[2]) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int i = min(kt * 16 + lg + 8 * rr, n - 1);
      const KvPos at = kv_pos(kp, key_slot(blk.k0 + i, blk.row.len, blk.tail));
      const uint8_t* cr = kv_plane_at(kp, at) + 4 * lt;
#pragma unroll
      for (int g = 0; g < NG; ++g) kw[rr][g] = ldg_mma<uint32_t>(cr + 16 * g);
      ks[rr] = ldg_mma<SV>(kv_plane_at(ksp, at));
    }
  };
  uint32_t kw[2][NG];
  SV ks[2];
  if (warp < nt) k_load(warp, kw, ks);

  // Each key's V row pointer and group scales; this warp's largest |scale| bits per group
  // (a scale that is not finite counts as 0: its keys' p' are NaN whatever the shift).
  uint32_t vmx[NG];
#pragma unroll
  for (int g = 0; g < NG; ++g) vmx[g] = 0;
  for (int i = tid; i < n; i += kAttnThreads) {
    const KvPos at = kv_pos(vp, key_slot(blk.k0 + i, blk.row.len, blk.tail));
    vrows[i] = kv_plane_at(vp, at);
    const SV sv = ldg_mma<SV>(kv_plane_at(vsp, at));
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      const uint32_t h = sv_half(sv, g), mag = h & 0x7FFFu;
      vsc[g * W16 + i] = uint16_t(h);
      vmx[g] = max(vmx[g], mag < 0x7C00u ? mag : 0u);
    }
  }
#pragma unroll
  for (int g = 0; g < NG; ++g) {
    uint32_t m = vmx[g];
    for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    if (lane == 0) wm[warp * NG + g] = m;
  }

  // q of head slot `warp`, rotated (lane = element of each group), shifted, split: B
  // fragment (k-step 2 G + s, part, lane (g, t)) holds, for head g, the elements of k slots
  // 2t, 2t+1 | 2t+8, 2t+9: 8t + 2s, 8t + 2s + 4 | 8t + 2s + 1, 8t + 2s + 5 of group G (the
  // K codes' pairs). The rotated q is staged in the scores' space (dead until the scores).
  {
    float* qs = ss + warp * D;
    float x[NG];
    float amax = 0.0f;
#pragma unroll
    for (int g = 0; g < NG; ++g) x[g] = 0.0f;
    if (warp < G) {
      const float* qr = q + (size_t(blk.r) * p.q_heads + blk.qh0 + warp) * D;
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        float v = qr[32 * g + lane];
#pragma unroll
        for (int h = 1; h < 32; h <<= 1) {
          const float o = __shfl_xor_sync(0xFFFFFFFFu, v, h);
          v = (lane & h) ? o - v : v + o;
        }
        x[g] = v * 0.25f;
        amax = fmaxf(amax, fabsf(x[g]));
      }
      for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
    }
    const int sh = warp < G ? attn_f16_shift(amax) : 0;
    if (lane == 0) qsh[warp] = sh;
#pragma unroll
    for (int g = 0; g < NG; ++g) qs[32 * g + lane] = ldexpf(x[g], sh);
    __syncwarp();
    for (int i = lane; i < KS * 4; i += 32) {
      const int k = i / 4, t = i % 4, e = 32 * (k / 2) + 8 * t + 2 * (k % 2);
      uint32_t lo[NPT], hi[NPT];
      split_parts<true>(qs[e], qs[e + 4], lo);
      split_parts<true>(qs[e + 1], qs[e + 5], hi);
#pragma unroll
      for (int s = 0; s < NPT; ++s) qf[(k * NPT + s) * 32 + 4 * warp + t] = make_uint2(lo[s], hi[s]);
    }
  }
  // The V ring: stage st holds tiles st*RT .. of code rows, chunk ch of key k at
  // 16 (ch ^ ((k >> 1) & (CPK - 1))) (the p.v's reads of keys 2t, 2t+1 hit distinct banks),
  // keys past n zero-filled (p' = 0 there).
  const uint32_t ring_s = uint32_t(__cvta_generic_to_shared(smb + lay.ring));
  const int nst = (nt + RT - 1) / RT;
  auto issue = [&](int st, int slot) {
    if (st < nst) {
      constexpr int CPS = RT * 16 * CPK;
#pragma unroll
      for (int q0 = 0; q0 < CPS; q0 += kAttnThreads) {
        const int qq = q0 + tid;
        if (CPS % kAttnThreads == 0 || qq < CPS) {
          const int u = qq / (16 * CPK), key = (qq / CPK) % 16, ch = qq % CPK, kt = st * RT + u;
          if (kt < nt) {
            const bool in = kt * 16 + key < n;
            const uint32_t dst =
                ring_s + uint32_t(((slot * RT + u) * 16 + key) * RB + ((ch ^ ((key >> 1) & (CPK - 1))) << 4));
            cp_async16_zfill(dst, vrows[in ? kt * 16 + key : 0] + 16 * ch, in);
          }
        }
      }
    }
    cp_async_commit();
  };
  __syncthreads();
#pragma unroll 1
  for (int st = 0; st < RS - 1; ++st) issue(st, st);  // the V ring's first stages, during the scores

  // 1. scores: warp w takes tiles w, w + 8, ..; the next tile's reads go out first.
  for (int kt = warp; kt < nt; kt += M::NW) {
    const bool more = kt + M::NW < nt;
    uint32_t kn[2][NG];
    SV ksn[2];
    if (more) k_load(kt + M::NW, kn, ksn);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      uint32_t a0[4], a1[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) a0[j] = q4x2_to_f16x2(kw[0][g] >> (4 * j)), a1[j] = q4x2_to_f16x2(kw[1][g] >> (4 * j));
      const float s0 = q4_scale_f32(sv_half(ks[0], g)), s1 = q4_scale_f32(sv_half(ks[1], g));
#pragma unroll
      for (int s = 0; s < 2; ++s) {
        const int k = 2 * g + s;
        const uint32_t a[4] = {a0[2 * s], a1[2 * s], a0[2 * s + 1], a1[2 * s + 1]};
        float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int q3 = M::NPU - 1; q3 >= 0; --q3) mma_16816<true>(cc, a, qf[(k * NPT + q3) * 32 + lane]);
        acc[0] = fmaf(cc[0], s0, acc[0]);
        acc[1] = fmaf(cc[1], s0, acc[1]);
        acc[2] = fmaf(cc[2], s1, acc[2]);
        acc[3] = fmaf(cc[3], s1, acc[3]);
      }
    }
    // c0, c1: key kt*16 + g, heads 2t, 2t+1; c2, c3: key kt*16 + g + 8.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = kt * 16 + lg + 8 * (e >> 1), h = 2 * lt + (e & 1);
      if (i < n && h < G) ss[h * S + i] = ldexpf(acc[e], -qsh[h]) * p.scale;
    }
    if (more) {
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        ks[rr] = ksn[rr];
#pragma unroll
        for (int g = 0; g < NG; ++g) kw[rr][g] = kn[rr][g];
      }
    }
  }

  __syncthreads();

  // 2. softmax of head slot `warp` (the order of the fma kernel); p stays in ss.
  if (warp < G) {
    const WarpSoftmax sx = warp_softmax<false, false>(ss + warp * S, n, lane, nullptr);
    if (lane == 0) {
      const size_t pidx = (size_t(blk.r) * p.q_heads + blk.qh0 + warp) * max_chunks + blk.c;
      pm[pidx] = sx.m;
      pl[pidx] = sx.l;
    }
  }
  __syncthreads();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();  // the merge may be scheduled (it waits for us)
#endif

  // 3. p.v of element group gv over the key group kg's tiles.
  const int kg = warp / M::WPG, gv = warp % M::WPG;
  uint32_t vmax_bits = 0;
#pragma unroll
  for (int w = 0; w < M::NW; ++w) vmax_bits = max(vmax_bits, wm[w * NG + gv]);
  const int psh = attn_f16_shift(__half2float(__ushort_as_half(uint16_t(vmax_bits))));
  const float pscale = ldexpf(1.0f, psh);  // exact: a power of two
  const float* sp = ss + lg * S;            // head g's p
  const uint16_t* vs = vsc + gv * W16;      // group gv's V scales
  float o[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
  for (int st = 0, slot = 0; st < nst; ++st, slot = slot + 1 == RS ? 0 : slot + 1) {
    cp_async_wait<RS - 2>();
    __syncthreads();
    issue(st + RS - 1, slot == 0 ? RS - 1 : slot - 1);
#pragma unroll
    for (int u = 0; u < RT; ++u) {
      const int kt = st * RT + u;
      if (kt >= nt) break;
      if (M::KG > 1 && kt % M::KG != kg) continue;
      // p' of head g, keys kb, kb + 1 | kb + 8, kb + 9 (zero past n and for slots >= G).
      const int kb = kt * 16 + 2 * lt;
      float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (lg < G) {
        const float2 pa = *reinterpret_cast<const float2*>(sp + kb), pb = *reinterpret_cast<const float2*>(sp + kb + 8);
        const uint32_t va = *reinterpret_cast<const uint32_t*>(vs + kb), vb = *reinterpret_cast<const uint32_t*>(vs + kb + 8);
        const float pp[4] = {pa.x, pa.y, pb.x, pb.y};
        const uint32_t vv[4] = {va & 0xFFFFu, va >> 16, vb & 0xFFFFu, vb >> 16};
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (kb + (j & 1) + 8 * (j >> 1) < n) x[j] = (pp[j] * q4_scale_f32(vv[j])) * pscale;
      }
      uint32_t lo[NPT], hi[NPT];
      split_parts<true>(x[0], x[1], lo);
      split_parts<true>(x[2], x[3], hi);
      // Codes: the 16 bits 2 g of group gv of keys 2t, 2t+1, 2t+8, 2t+9 (elements 4g .. 4g+3).
      const unsigned char* tb = smb + lay.ring + size_t((slot * RT + u) * 16) * RB + 2 * lg;
      auto code16 = [&](int key) -> uint32_t {
        return *reinterpret_cast<const uint16_t*>(tb + key * RB + ((gv ^ ((key >> 1) & (CPK - 1))) << 4));
      };
      const uint32_t w01 = code16(2 * lt) | (code16(2 * lt + 1) << 16);
      const uint32_t w89 = code16(2 * lt + 8) | (code16(2 * lt + 9) << 16);
#pragma unroll
      for (int jt = 0; jt < 2; ++jt) {
        const uint32_t a[4] = {q4x2_to_f16x2(w01 >> (8 * jt)), q4x2_to_f16x2(w01 >> (8 * jt + 4)),
                               q4x2_to_f16x2(w89 >> (8 * jt)), q4x2_to_f16x2(w89 >> (8 * jt + 4))};
        float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int part = M::NPU - 1; part >= 0; --part)
          mma_16816<true>(cc, a, make_uint2(part ? lo[1] : lo[0], part ? hi[1] : hi[0]));
#pragma unroll
        for (int e = 0; e < 4; ++e) o[jt][e] += cc[e];
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the empty groups past the last stage)
  if constexpr (M::KG == 2) {
    // Group 1 hands its sums to group 0 through q's fragment space (dead since the scores).
    float4* ox = reinterpret_cast<float4*>(smb + lay.qf);
    static_assert(size_t(KS) * NPT * 32 * 8 >= size_t(M::WPG) * 32 * 2 * 16, "q4 mma partial: exchange space");
    __syncthreads();
    if (kg == 1)
#pragma unroll
      for (int jt = 0; jt < 2; ++jt) ox[(gv * 2 + jt) * 32 + lane] = make_float4(o[jt][0], o[jt][1], o[jt][2], o[jt][3]);
    __syncthreads();
    if (kg == 1) return;
#pragma unroll
    for (int jt = 0; jt < 2; ++jt) {
#ifndef KC_PLANT_PV_GROUP_DROP  // planted bug (test builds only): group 1's keys are lost
      const float4 y = ox[(gv * 2 + jt) * 32 + lane];
      o[jt][0] += y.x, o[jt][1] += y.y, o[jt][2] += y.z, o[jt][3] += y.w;
#endif
    }
  }
  // c0, c1: heads 2t, 2t+1 of m slot g (element 32 gv + 4 g + 2 jt); c2, c3: of slot g + 8 (+1).
#pragma unroll
  for (int jt = 0; jt < 2; ++jt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = 2 * lt + (e & 1);
      if (h < G) {
        const size_t pidx = (size_t(blk.r) * p.q_heads + blk.qh0 + h) * max_chunks + blk.c;
        po[pidx * D + 32 * gv + 4 * lg + 2 * jt + (e >> 1)] = ldexpf(o[jt][e], -psh);
      }
    }
}

Status launch_partial_mma_q4(const KvView* views, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                             const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                             cudaStream_t s) {
  const int group = p.q_heads / hkv;
  const int nsub = (group + kAttnHeadsPerBlock - 1) / kAttnHeadsPerBlock;
  const dim3 grid(max_chunks, hkv * nsub, n);
  void (*kern)(const KvView*, AttnParams, const AttnRow*, const int32_t*, const float*, int, int, float*, float*,
               float*) = nullptr;
  size_t smem = 0;
  if (d == 128) kern = attention_partial_mma_q4_kernel<128>, smem = mma_q4_smem<128>(p.chunk).total;
  if (d == 256) kern = attention_partial_mma_q4_kernel<256>, smem = mma_q4_smem<256>(p.chunk).total;
  if (!kern)
    return Status::Error("attention (tensor cores): format q4 at head_dim " + std::to_string(d) +
                         " has no tensor-core partial");
  KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kern<<<grid, kAttnThreads, smem, s>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);
  KC_LAUNCH_CHECK("attention_partial_mma_q4_kernel");
  return Status::Ok();
}

}  // namespace kc
