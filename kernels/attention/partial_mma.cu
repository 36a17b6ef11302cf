// Split-K attention partial on the tensor cores: bf16 and fp8 caches with head_dim 128 /
// 256 (q4: partial_mma_q4.cu) (attention/rows.h gives its order and error model; shared-memory layout and tuning:
// attention/mma_smem.h). The host twin runs the fma order (attention/twin.cpp) and the
// qwen-pages contract bounds both (Backend::attention_arith).
// Every address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>

#include "kernels/attention/mma_parts.cuh"
#include "kernels/attention/mma_smem.h"
#include "kernels/attention/partial.cuh"
#include "kernels/attention/ptx.cuh"
#include "kernels/attention/short_path.cuh"

namespace kc {

// Two E4M3 codes (low byte first) to fp16x2, exactly.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t two) {
  const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(two & 0xFFFFu), __NV_E4M3);
  uint32_t u;
  memcpy(&u, &hr, 4);
  return u;
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

// The constants of one instantiation (D, F): fragment geometry, parts, key groups, V ring.
template <int D, Format F>
struct MmaShape {
  static constexpr int H = kAttnHeadsPerBlock;
  static constexpr int KS = D / 16;                       // k-steps of a K row
  static constexpr int EPL = F == Format::bf16 ? 8 : 16;  // elements of a lane's 16-byte load
  static constexpr int SPL = EPL / 4;                     // k-steps per load (4 elements each per lane)
  static constexpr int NB = D / (4 * EPL);                // 16-byte loads per lane per K row
  static constexpr bool kFp8 = F == Format::fp8;
  static constexpr int NPT = attn_mma_parts(F);  // parts of q and p (attention/rows.h)
#ifdef KC_PLANT_MMA_HI_ONLY
  static constexpr int NPU = 1;  // planted bug (test builds only): the products use the hi part alone
#else
  static constexpr int NPU = NPT;  // parts the products use
#endif
  static constexpr int NW = kAttnThreads / 32;
  // fp8: the first KPT * 256 keys' scale loads go out before q's fragments are built.
  static constexpr int KPT = kFp8 ? 2 : 0;
  // The p.v deals the key tiles to KG key groups of WPG warps (tile j to group j % KG;
  // attention/rows.h); warp w of group kg owns elements [16 MT ws, 16 MT (ws + 1)),
  // ws = w % WPG.
  static constexpr int KG = attn_mma_key_groups(D), WPG = NW / KG, MT = D / 16 / WPG;
  static constexpr int EB = kFp8 ? 1 : 2;  // bytes per V element
  static constexpr int RS = MmaTune<D, F>::ring_stages, RT = MmaTune<D, F>::ring_tiles;
  static_assert(D == 128 || D == 256, "mma partial: head_dim 128 or 256");
  static_assert(F == Format::bf16 || F == Format::fp8, "mma partial: bf16 or fp8");
  static_assert(kAttnThreads / 32 == H, "mma partial: one warp per head slot");
  static_assert((KG == 1 || KG == 2) && MT == 2, "mma partial: p.v key groups, 2 V m-tiles per warp");
  static_assert(RS >= 2, "mma partial: V ring of at least 2 stages");
};

// Where lane (g, t) reads key tile kt: keys 16 kt + g and 16 kt + g + 8 (rows resolved in
// registers; keys past n read key n - 1, whose scores are not kept), bytes from 16t.
__device__ __forceinline__ void mma_tile_rows(const KvPlane& kp, const AttnBlock& b, int kt, int lg, int lt,
                                              const uint8_t* (&dst)[2]) {
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int i = min(kt * 16 + lg + 8 * rr, b.n - 1);
    dst[rr] = kv_plane_row(kp, key_slot(b.k0 + i, b.row.len, b.tail)) + 16 * lt;
  }
}

// Key i's V row pointer to shared memory; fp8: its K and V row scales into ks, vs (one
// page split for the three planes).
template <bool kFp8>
__device__ __forceinline__ void mma_key_meta(const KvPlane& vp, const KvPlane& ksp, const KvPlane& vsp,
                                             const AttnBlock& b, int i, const uint8_t** vrows, float& ks, float& vs) {
  const KvPos at = kv_pos(vp, key_slot(b.k0 + i, b.row.len, b.tail));
  vrows[i] = kv_plane_at(vp, at);
  if constexpr (kFp8) {
    ks = __ldg(reinterpret_cast<const float*>(kv_plane_at(ksp, at)));
    vs = __ldg(reinterpret_cast<const float*>(kv_plane_at(vsp, at)));
  }
}

// 0. q's B fragments of head slot h (one warp): entry (k-step, part, lane (g, t)) holds
//    q[head g] at the four elements of k slots 2t, 2t+1 | 2t+8, 2t+9 of that step; slots
//    >= G are zero. fp8 runs on fp16 inputs: q of each head is scaled by
//    2^attn_f16_shift(its largest magnitude), exactly (the shift to qsh[h]).
template <int D, Format F>
__device__ __forceinline__ void mma_q_fragments(const float* qr, int h, int G, int lane, uint2* qf, int* qsh) {
  using M = MmaShape<D, F>;
  int sh = 0;
  if constexpr (M::kFp8) {
    if (h < G) sh = attn_f16_shift(warp_amax(qr, D, lane));
    if (lane == 0) qsh[h] = sh;
  }
  for (int i = lane; i < M::KS * 4; i += 32) {
    const int ks = i / 4, t = i % 4;
    const int e = (ks / M::SPL) * 4 * M::EPL + M::EPL * t + 4 * (ks % M::SPL);
    float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (h < G)
#pragma unroll
      for (int j = 0; j < 4; ++j) x[j] = M::kFp8 ? ldexpf(qr[e + j], sh) : qr[e + j];
    uint32_t lo[M::NPT], hi[M::NPT];
    split_parts<M::kFp8>(x[0], x[1], lo);
    split_parts<M::kFp8>(x[2], x[3], hi);
#pragma unroll
    for (int s = 0; s < M::NPT; ++s) qf[(ks * M::NPT + s) * 32 + 4 * h + t] = make_uint2(lo[s], hi[s]);
  }
}

// The short path's q fragments in two steps, the loads first (before any K or V load of
// the block, so that they do not wait behind them) and the fragments later: lane's values
// are the elements mma_q_fragments reads for its i = lane, lane + 32, .. (float4 at e), and
// the fp8 shift comes from their warp max (the same max: exact in any order).
template <int D>
struct MmaQRegs {
  static constexpr int NI = (D / 16 * 4 + 31) / 32;
  float4 v[NI];
};
template <int D, Format F>
__device__ __forceinline__ void mma_q_load(const float* qr, int h, int G, int lane, MmaQRegs<D>& r) {
  using M = MmaShape<D, F>;
#pragma unroll
  for (int it = 0; it < MmaQRegs<D>::NI; ++it) {
    const int i = lane + 32 * it, ks = i / 4, t = i % 4;
    const int e = (ks / M::SPL) * 4 * M::EPL + M::EPL * t + 4 * (ks % M::SPL);
    r.v[it] = h < G && i < M::KS * 4 ? *reinterpret_cast<const float4*>(qr + e) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}
template <int D, Format F>
__device__ __forceinline__ void mma_q_fragments_regs(const MmaQRegs<D>& r, int h, int G, int lane, uint2* qf, int* qsh) {
  using M = MmaShape<D, F>;
  int sh = 0;
  if constexpr (M::kFp8) {
    float a = 0.0f;
#pragma unroll
    for (int it = 0; it < MmaQRegs<D>::NI; ++it)
      a = fmaxf(a, fmaxf(fmaxf(fabsf(r.v[it].x), fabsf(r.v[it].y)), fmaxf(fabsf(r.v[it].z), fabsf(r.v[it].w))));
    for (int off = 16; off > 0; off >>= 1) a = fmaxf(a, __shfl_xor_sync(0xFFFFFFFFu, a, off));
    if (h < G) sh = attn_f16_shift(a);
    if (lane == 0) qsh[h] = sh;
  }
#pragma unroll
  for (int it = 0; it < MmaQRegs<D>::NI; ++it) {
    const int i = lane + 32 * it, ks = i / 4, t = i % 4;
    if (i < M::KS * 4) {
      const float y[4] = {r.v[it].x, r.v[it].y, r.v[it].z, r.v[it].w};
      float x[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (h < G)
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = M::kFp8 ? ldexpf(y[j], sh) : y[j];
      uint32_t lo[M::NPT], hi[M::NPT];
      split_parts<M::kFp8>(x[0], x[1], lo);
      split_parts<M::kFp8>(x[2], x[3], hi);
#pragma unroll
      for (int s = 0; s < M::NPT; ++s) qf[(ks * M::NPT + s) * 32 + 4 * h + t] = make_uint2(lo[s], hi[s]);
    }
  }
}

// The scores of K load lb of a lane's two key rows (r0, r1) against q's fragments, into acc.
template <int D, Format F>
__device__ __forceinline__ void mma_k_load(int lb, const uint4& r0, const uint4& r1, const uint2* qf, int lane,
                                           float (&acc)[4]) {
  using M = MmaShape<D, F>;
  const uint32_t w0[4] = {r0.x, r0.y, r0.z, r0.w};
  const uint32_t w1[4] = {r1.x, r1.y, r1.z, r1.w};
#pragma unroll
  for (int s = 0; s < M::SPL; ++s) {
    uint32_t a[4];
    if constexpr (M::kFp8) {  // word s: codes of elements 4s .. 4s+3 of this load
      a[0] = e4m3x2_to_f16x2(w0[s]), a[2] = e4m3x2_to_f16x2(w0[s] >> 16);
      a[1] = e4m3x2_to_f16x2(w1[s]), a[3] = e4m3x2_to_f16x2(w1[s] >> 16);
    } else {  // words 2s, 2s+1: elements 4s .. 4s+3
      a[0] = w0[2 * s], a[2] = w0[2 * s + 1];
      a[1] = w1[2 * s], a[3] = w1[2 * s + 1];
    }
    const int ks = lb * M::SPL + s;
    float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q3 = M::NPU - 1; q3 >= 0; --q3) mma_16816<M::kFp8>(cc, a, qf[(ks * M::NPT + q3) * 32 + lane]);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += cc[e];
  }
}

// A score as stored: acc (the key's dot) scaled by p.scale (fp8: unshifted by q's shift of
// head h and times K's row scale of key i first).
template <bool kFp8>
__device__ __forceinline__ float mma_score_value(float acc, int h, int i, const int* qsh, const float* ksc, float scale) {
  float sc = acc;
  if constexpr (kFp8) sc = ldexpf(sc, -qsh[h]) * ksc[i];
  return sc * scale;
}

// 1. scores: warp w takes tiles w, w + 8, ..; as each of a tile's NB loads per row is
//    used, its register takes the next tile's load, so a whole tile stays in flight
//    (H200, 32K x b8, against two half-tile buffers: bf16 d256 296 -> 289 us, fp8 197
//    -> 192). kf holds the warp's first tile (issued at the start). Scores to ss[h W + i],
//    scaled by p.scale (fp8: unshifted and times K's row scale).
template <int D, Format F>
__device__ __forceinline__ void mma_scores(const KvPlane& kp, const AttnBlock& b, const AttnParams& p, int nt,
                                           int warp, int lane, int lg, int lt, uint4 (&kf)[2][MmaShape<D, F>::NB],
                                           const uint2* qf, const int* qsh, const float* ksc, float* ss) {
  using M = MmaShape<D, F>;
  const int n = b.n, G = b.G, W = p.chunk;
  for (int kt = warp; kt < nt; kt += M::NW) {
    const bool more = kt + M::NW < nt;
    const uint8_t* kn[2] = {nullptr, nullptr};
    if (more) mma_tile_rows(kp, b, kt + M::NW, lg, lt, kn);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int bb = 0; bb < M::NB; ++bb) {
      mma_k_load<D, F>(bb, kf[0][bb], kf[1][bb], qf, lane, acc);
      if (more)
        kf[0][bb] = ldg_mma<uint4, MmaTune<D, F>::k_l2_hint>(kn[0] + 64 * bb),
        kf[1][bb] = ldg_mma<uint4, MmaTune<D, F>::k_l2_hint>(kn[1] + 64 * bb);
    }
    // c0, c1: key kt*16 + g, heads 2t, 2t+1; c2, c3: key kt*16 + g + 8.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = kt * 16 + lg + 8 * (e >> 1), h = 2 * lt + (e & 1);
      if (i < n && h < G) ss[h * W + i] = mma_score_value<M::kFp8>(acc[e], h, i, qsh, ksc, p.scale);
    }
  }
}

// V tiles through a ring of RS stages of RT tiles in shared memory, by 16-byte cp.async
// (block ch of key row k at 16 (ch ^ (k & 7)), so that ldmatrix's eight rows hit eight
// different bank groups): issue(st, slot) sends stage st into slot `slot`, then one commit
// group (empty past the last stage, nst).
template <int D, Format F>
struct MmaVRing {
  const int &nst, &nt, &n, &tid;
  const uint32_t& ring_s;  // the ring's shared-memory address
  const uint8_t** const& vrows;
  __device__ __forceinline__ void issue(int st, int slot) const {
    using M = MmaShape<D, F>;
    if (st < nst) {
      constexpr int RB = D * M::EB, CPK = RB / 16, CPS = M::RT * 16 * CPK;
#pragma unroll
      for (int q0 = 0; q0 < CPS; q0 += kAttnThreads) {
        const int q = q0 + tid;
        if (CPS % kAttnThreads == 0 || q < CPS) {
          const int u = q / (16 * CPK), key = (q / CPK) % 16, ch = q % CPK, kt = st * M::RT + u;
          if (kt < nt) {
            const uint32_t dst = ring_s + uint32_t(((slot * M::RT + u) * 16 + key) * RB + ((ch ^ (key & 7)) << 4));
            if constexpr (M::kFp8) {
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
  }
};

// 2. softmax of head slot hw (one warp; the order of the fma kernel; fp8 keeps p' = p * V
//    row scale and its shift in psh[hw]), m and l to the partial arrays, then that head's
//    p' B fragments: entry (tile, part, lane (w, t)): keys 2t, 2t+1 | 2t+8, 2t+9 of the
//    tile; slots >= G are zero.
template <int D, Format F, int U = 1>  // U: warp_softmax's loads in flight per lane
__device__ __forceinline__ void mma_softmax_p(float* s, int hw, int lane, const AttnBlock& b, const AttnParams& p,
                                              int nt, int max_chunks, const float* vsc, float* pm, float* pl,
                                              uint2* pf, int* psh, bool write_ml = true) {
  using M = MmaShape<D, F>;
  const int n = b.n, G = b.G;
  int sh = 0;
  if (hw < G) {
    const WarpSoftmax sx = warp_softmax<M::kFp8, M::kFp8, U>(s, n, lane, vsc);
    if constexpr (M::kFp8) sh = attn_f16_shift(sx.stored_max);
    if (lane == 0) {
      if (write_ml) {
        const size_t pidx = (size_t(b.r) * p.q_heads + b.qh0 + hw) * max_chunks + b.c;
        pm[pidx] = sx.m;
        pl[pidx] = sx.l;
      }
      psh[hw] = sh;
    }
  }
  __syncwarp();
  auto entry = [&](int i) {
    const int kt = i / 4, t = i % 4;
    float x[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int key = kt * 16 + 2 * t + (j & 1) + 8 * (j >> 1);
      x[j] = hw < G && key < n ? (M::kFp8 ? ldexpf(s[key], sh) : s[key]) : 0.0f;
    }
    uint32_t lo[M::NPT], hi[M::NPT];
    split_parts<M::kFp8>(x[0], x[1], lo);
    split_parts<M::kFp8>(x[2], x[3], hi);
#pragma unroll
    for (int q3 = 0; q3 < M::NPT; ++q3) pf[(kt * M::NPT + q3) * 32 + 4 * hw + t] = make_uint2(lo[q3], hi[q3]);
  };
  if constexpr (U > 1) {  // short path: unrolled by 4, the later entries' loads out before the first's parts
#pragma unroll 4
    for (int i = lane; i < nt * 4; i += 32) entry(i);
  } else {
    for (int i = lane; i < nt * 4; i += 32) entry(i);
  }
}

// 3. p.v: warp w of key group kg owns elements [16 MT ws, 16 MT (ws + 1)); m slot g of its
//    m-tile jt is element 16 MT ws + 16 jt + 2g (fp8; bf16: + g) and slot g + 8 the next
//    one (bf16: 8 further). The group's tiles kg, kg + KG, .. in key order, as the ring's
//    stages arrive (stages ring_pre .. RS - 2 are issued here, the rest one per stage
//    consumed).
template <int D, Format F>
__device__ __forceinline__ void mma_pv(const MmaVRing<D, F>& ring, int kg, int ws, int lane, const uint2* pf,
                                       float (&o)[MmaShape<D, F>::MT][4]) {
  using M = MmaShape<D, F>;
  constexpr int RS = M::RS, RT = M::RT, NPT = M::NPT;
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
  for (int st = MmaTune<D, F>::ring_pre; st < RS - 1; ++st) ring.issue(st, st);
  const int nst = ring.nst, nt = ring.nt;
  for (int st = 0, slot = 0; st < nst; ++st, slot = slot + 1 == RS ? 0 : slot + 1) {
    cp_async_wait<RS - 2>();
    __syncthreads();
    ring.issue(st + RS - 1, slot == 0 ? RS - 1 : slot - 1);
#pragma unroll
    for (int u = 0; u < RT; ++u) {
      const int kt = st * RT + u;
      if (kt >= nt) break;
      if (M::KG > 1 && kt % M::KG != kg) continue;
      uint2 b[NPT];
#pragma unroll
      for (int part = 0; part < NPT; ++part) b[part] = pf[(kt * NPT + part) * 32 + lane];
      const uint32_t tbase = ring.ring_s + uint32_t((slot * RT + u) * 16 * D * M::EB);
      uint32_t r[4];
      if constexpr (M::kFp8) ldmatrix_x4_trans(r, tbase + lofs);
#pragma unroll
      for (int jt = 0; jt < 2; ++jt) {
        uint32_t a[4];
        if constexpr (M::kFp8) {
          a[0] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt], 0, 0x0020));
          a[1] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt], 0, 0x0031));
          a[2] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt + 1], 0, 0x0020));
          a[3] = e4m3x2_to_f16x2(__byte_perm(r[2 * jt + 1], 0, 0x0031));
        } else {
          ldmatrix_x4_trans(a, tbase + (jt ? bofs1 : bofs0));
        }
        float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int part = M::NPU - 1; part >= 0; --part) mma_16816<M::kFp8>(cc, a, b[part]);
#pragma unroll
        for (int e = 0; e < 4; ++e) o[jt][e] += cc[e];
      }
    }
  }
}

// With two key groups, group 1 hands its sums to group 0 through the q fragments' space
// (dead since the scores; ox), lane-contiguous float4s. False for group 1's warps, whose
// work ends here.
template <int D, Format F>
__device__ __forceinline__ bool mma_pv_join(int kg, int ws, int lane, float4* ox, float (&o)[MmaShape<D, F>::MT][4]) {
  using M = MmaShape<D, F>;
  constexpr int MT = M::MT;
  static_assert(mma_qf_bytes(D, M::NPT) >= size_t(M::WPG) * 32 * MT * 16, "mma partial: p.v exchange space");
  __syncthreads();  // the ring's slots cover the q fragments' space
  if (kg == 1)
#pragma unroll
    for (int jt = 0; jt < MT; ++jt) ox[(ws * MT + jt) * 32 + lane] = make_float4(o[jt][0], o[jt][1], o[jt][2], o[jt][3]);
  __syncthreads();
  if (kg == 1) return false;
#pragma unroll
  for (int jt = 0; jt < MT; ++jt) {
#ifndef KC_PLANT_PV_GROUP_DROP  // planted bug (test builds only): group 1's keys are lost
    const float4 x = ox[(ws * MT + jt) * 32 + lane];
    o[jt][0] += x.x, o[jt][1] += x.y, o[jt][2] += x.z, o[jt][3] += x.w;
#endif
  }
  return true;
}

// The partial output: c0, c1 are heads 2t, 2t+1 of m slot g; c2, c3 of m slot g + 8
// (fp8: unshifted by the head's p' shift).
template <int D, Format F>
__device__ __forceinline__ void mma_store_partial(const float (&o)[MmaShape<D, F>::MT][4], const AttnBlock& b,
                                                  const AttnParams& p, int ws, int lg, int lt, int max_chunks,
                                                  const int* psh, float* po) {
  using M = MmaShape<D, F>;
  constexpr bool kKeep = attn_keeps_partials(F, D);  // kept in L2 for the merge (mma_smem.h)
  const uint64_t keep = kKeep ? l2_policy_evict_last() : 0;
#pragma unroll
  for (int jt = 0; jt < M::MT; ++jt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = 2 * lt + (e & 1);
      if (h < b.G) {
        const size_t pidx = (size_t(b.r) * p.q_heads + b.qh0 + h) * max_chunks + b.c;
        const int elem = M::kFp8 ? 32 * ws + 16 * jt + 2 * lg + (e >> 1) : 32 * ws + 16 * jt + lg + 8 * (e >> 1);
        const float v = M::kFp8 ? ldexpf(o[jt][e], -psh[h]) : o[jt][e];
        if constexpr (kKeep)
          st_f32_l2(po + pidx * D + elem, v, keep);
        else
          po[pidx * D + elem] = v;
      }
    }
}

// Block (chunk, kv head x sub-group of <= 8 q heads, row), 256 threads (8 warps); the
// block's q heads are the n = 8 columns of mma.m16n8k16 (zero-padded). Phases:
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
// Each phase is a device function above; this body orders them and their barriers.
template <int D, Format F>
__global__ void __launch_bounds__(kAttnThreads, MmaTune<D, F>::min_blocks) attention_partial_mma_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  using M = MmaShape<D, F>;
  constexpr bool kFp8 = M::kFp8;
  constexpr int KPT = M::KPT, NB = M::NB, NPT = M::NPT, RS = M::RS, MT = M::MT;
  extern __shared__ __align__(16) unsigned char smb[];
  const AttnBlock blk(views, p, rows, tails, nsub);
  const int n = blk.n;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, lg = lane >> 2, lt = lane & 3;
  const int nt = (n + 15) / 16;  // key tiles holding keys
  const MmaSmem lay(p.chunk, D, NPT, MmaTune<D, F>::stage_bytes, RS, MmaTune<D, F>::ring_pre);
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
  // keys 16w + g and 16w + g + 8, bytes 16t + 64b, into kf (a whole tile: NB loads per row).
  const KvPlane kp = kv_plane(blk.v, p.layer, 0, blk.kvh), vp = kv_plane(blk.v, p.layer, 1, blk.kvh);
  const KvPlane ksp = kv_plane(blk.v, p.layer, 0, blk.kvh, kFp8), vsp = kv_plane(blk.v, p.layer, 1, blk.kvh, kFp8);
  const uint8_t* kc[2] = {nullptr, nullptr};
  uint4 kf[2][NB];
  if (warp < nt) {
    mma_tile_rows(kp, blk, warp, lg, lt, kc);
#pragma unroll
    for (int b = 0; b < NB; ++b)
      kf[0][b] = ldg_mma<uint4, MmaTune<D, F>::k_l2_hint>(kc[0] + 64 * b),
      kf[1][b] = ldg_mma<uint4, MmaTune<D, F>::k_l2_hint>(kc[1] + 64 * b);
  }

  // Each key's V row pointer (and fp8 K and V row scales). fp8: the first KPT * 256 keys'
  // scale loads go out before q's fragments are built and reach shared memory after (3 %
  // faster at 32K x b8 on the H200); bf16 resolves every row after (doing it before was 2
  // to 5 % slower).
  float kscr[KPT + 1] = {}, vscr[KPT + 1] = {};
#pragma unroll
  for (int k = 0; k < KPT; ++k)
    if (tid + k * kAttnThreads < n) mma_key_meta<kFp8>(vp, ksp, vsp, blk, tid + k * kAttnThreads, vrows, kscr[k], vscr[k]);

  mma_q_fragments<D, F>(q + (size_t(blk.r) * p.q_heads + blk.qh0 + warp) * D, warp, blk.G, lane, qf, qsh);
  if constexpr (kFp8)
#pragma unroll
    for (int k = 0; k < KPT; ++k)
      if (tid + k * kAttnThreads < n) ksc[tid + k * kAttnThreads] = kscr[k], vsc[tid + k * kAttnThreads] = vscr[k];
  for (int i = tid + KPT * kAttnThreads; i < n; i += kAttnThreads) {  // chunks wider than KPT * 256
    float a = 0.0f, b = 0.0f;
    mma_key_meta<kFp8>(vp, ksp, vsp, blk, i, vrows, a, b);
    if constexpr (kFp8) ksc[i] = a, vsc[i] = b;
  }
  // fp8: the last tile's keys past n read key n - 1's V row with p = 0, so the p.v loads
  // need no per-key test (E4M3 has no infinity, and a NaN code makes the output NaN
  // through key n - 1 itself). bf16 tests each key (0 * inf would be NaN).
  if constexpr (kFp8)
    if (tid < nt * 16 - n) vrows[n + tid] = kv_plane_row(vp, key_slot(blk.k0 + n - 1, blk.row.len, blk.tail));
  __syncthreads();
  KC_PHASE(1);

  mma_scores<D, F>(kp, blk, p, nt, warp, lane, lg, lt, kf, qf, qsh, ksc, ss);
  const int kg = warp / M::WPG, ws = warp % M::WPG;

  // The V ring's stages 0 .. pre - 1 go out before the softmax (their slots overlap no
  // live array), the rest of the first RS - 1 in mma_pv.
  const uint32_t ring_s = uint32_t(__cvta_generic_to_shared(smb + lay.ring));
  const int nst = (nt + M::RT - 1) / M::RT;
  const MmaVRing<D, F> ring{nst, nt, n, tid, ring_s, vrows};
  if constexpr (MmaTune<D, F>::ring_pre == 1) {
    ring.issue(0, 0);
  } else {
#pragma unroll 1
    for (int st = 0; st < MmaTune<D, F>::ring_pre; ++st) ring.issue(st, st);
  }
  KC_PHASE(2);
  __syncthreads();
  KC_PHASE(3);

  mma_softmax_p<D, F>(ss + warp * p.chunk, warp, lane, blk, p, nt, max_chunks, vsc, pm, pl, pf, psh);
  __syncthreads();

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();  // the merge may be scheduled (it waits for us)
#endif
  KC_PHASE(4);
  float o[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
  mma_pv<D, F>(ring, kg, ws, lane, pf, o);
  if constexpr (M::KG == 2)
    if (!mma_pv_join<D, F>(kg, ws, lane, reinterpret_cast<float4*>(smb + lay.qf), o))
      return;  // (KC_MMA_PHASES: group 1's warps leave unstamped)
  KC_PHASE(5);
  mma_store_partial<D, F>(o, blk, p, ws, lg, lt, max_chunks, psh, po);
  KC_PHASE(6);
  KC_PHASE_DONE();
}

// ---- The short-row path (attention/short_path.cuh): chunk c on the CL blocks of one
// cluster, block x = CL c + rank. The arithmetic of every score, of the softmax and of
// every output element is the kernel's above (the same helpers, the same order), so a row
// gives the same bytes on either path; what changes is who does it:
//  0. as above (each rank resolves every key's V row and fp8 scales, and builds q's
//     fragments); the first KT K tiles of each warp go out at once; the rank's V slice
//     (elements [E rank, E rank + E), E = D / CL) of every key goes to shared memory by
//     cp.async, whole;
//  1. scores of the rank's key tiles rank, rank + CL, .. (warp w: the rank's tiles w,
//     w + 8, ..), each stored into every rank's scores (distributed shared memory); the
//     cluster barrier;
//  2. every rank runs the softmax of all 8 head slots over all the chunk's keys (rank 0
//     writes m and l) and builds p's fragments;
//  3. p.v of the slice: warp w < PW takes m-tile w % MTS (16 elements) of key group
//     w / MTS (the group's tiles in key order, as above); group 1's sums reach group 0
//     through shared memory; stores.
template <int D, Format F, int CL>
__global__ void __launch_bounds__(kAttnThreads, 1) attention_partial_mma_short_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  using M = MmaShape<D, F>;
  using T = MmaShortTune<D, F, CL>;
  constexpr bool kFp8 = M::kFp8;
  constexpr int KPT = M::KPT, NB = M::NB, NPT = M::NPT, KG = M::KG, NW = M::NW;
  constexpr int SB = T::slice_bytes, CPS = SB / 16, MTS = T::E / 16, PW = MTS * KG, KT = T::k_tiles;
  static_assert(T::E % 16 == 0 && SB % 16 == 0 && PW <= NW, "mma short path: slice of whole m-tiles, one warp each");
  extern __shared__ __align__(16) unsigned char smb[];
  KC_SHORT_ENTRY();
  cluster_arrive_relaxed();  // this block has started: the others may write its scores after their wait
  const int rank = cluster_rank();
  MmaQRegs<D> qreg;  // q first: its address needs no view (kv heads = gridDim.y / nsub)
  {
    const int sub = blockIdx.y % nsub, group = p.q_heads / (gridDim.y / nsub);
    const int qh0 = (blockIdx.y / nsub) * group + sub * kAttnHeadsPerBlock;
    const int G = min(kAttnHeadsPerBlock, group - sub * kAttnHeadsPerBlock), w = threadIdx.x >> 5;
    mma_q_load<D, F>(q + (size_t(blockIdx.z) * p.q_heads + qh0 + w) * D, w, G, threadIdx.x & 31, qreg);
  }
  const AttnBlock blk(views, p, rows, tails, nsub, blockIdx.x / CL);
  const int n = blk.n;
  KC_SHORT_PHASE(1);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, lg = lane >> 2, lt = lane & 3;
  const int nt = (n + 15) / 16;                              // key tiles holding keys
  const int ntr = nt > rank ? (nt - rank + CL - 1) / CL : 0;  // this rank's: rank, rank + CL, ..
  const MmaShortSmem lay = T::smem(p.chunk);
  uint2* qf = reinterpret_cast<uint2*>(smb + lay.qf);
  uint2* pf = reinterpret_cast<uint2*>(smb + lay.pf);
  const uint8_t** vrows = reinterpret_cast<const uint8_t**>(smb + lay.vrows);
  float* ksc = reinterpret_cast<float*>(smb + lay.ksc);
  float* vsc = reinterpret_cast<float*>(smb + lay.vsc);
  float* ss = reinterpret_cast<float*>(smb + lay.ss);
  int* qsh = reinterpret_cast<int*>(smb + lay.qsh);
  int* psh = reinterpret_cast<int*>(smb + lay.psh);

  const KvPlane kp = kv_plane(blk.v, p.layer, 0, blk.kvh), vp = kv_plane(blk.v, p.layer, 1, blk.kvh);
  const KvPlane ksp = kv_plane(blk.v, p.layer, 0, blk.kvh, kFp8), vsp = kv_plane(blk.v, p.layer, 1, blk.kvh, kFp8);
  // The small loads before the bulk (an SM's loads come back roughly in issue order): every
  // key's V row pointer and its fp8 scales (into registers first), then the K tiles, then
  // the rank's V slice of every key (bf16: keys past n zero-filled; fp8: key n - 1's row,
  // with p = 0; one commit group); then q's fragments from the registers loaded at entry.
  float kscr[KPT + 1] = {}, vscr[KPT + 1] = {};
#pragma unroll
  for (int k = 0; k < KPT; ++k)
    if (tid + k * kAttnThreads < n) mma_key_meta<kFp8>(vp, ksp, vsp, blk, tid + k * kAttnThreads, vrows, kscr[k], vscr[k]);
  for (int i = tid + KPT * kAttnThreads; i < n; i += kAttnThreads) {  // chunks wider than KPT * 256
    float a = 0.0f, b = 0.0f;
    mma_key_meta<kFp8>(vp, ksp, vsp, blk, i, vrows, a, b);
    if constexpr (kFp8) ksc[i] = a, vsc[i] = b;
  }
  if constexpr (kFp8)
    if (tid < nt * 16 - n) vrows[n + tid] = kv_plane_row(vp, key_slot(blk.k0 + n - 1, blk.row.len, blk.tail));
  uint4 kf[KT][2][NB];
#pragma unroll
  for (int u = 0; u < KT; ++u)
    if (warp + u * NW < ntr) {
      const uint8_t* kc[2];
      mma_tile_rows(kp, blk, rank + CL * (warp + u * NW), lg, lt, kc);
#pragma unroll
      for (int b = 0; b < NB; ++b) kf[u][0][b] = ldg_mma<uint4>(kc[0] + 64 * b), kf[u][1][b] = ldg_mma<uint4>(kc[1] + 64 * b);
    }
  __syncthreads();
  KC_SHORT_PHASE(2);
  const uint32_t ring_s = uint32_t(__cvta_generic_to_shared(smb + lay.ring));
  for (int c = tid; c < nt * 16 * CPS; c += kAttnThreads) {
    const int key = c / CPS, ch = c % CPS;
    const uint32_t dst = ring_s + uint32_t(key * SB + ((ch ^ short_swz<CPS>(key)) << 4));
    if constexpr (kFp8) {
      cp_async16(dst, vrows[key] + rank * SB + 16 * ch);
    } else {
      const bool in = key < n;
      cp_async16_zfill(dst, vrows[in ? key : 0] + rank * SB + 16 * ch, in);
    }
  }
  cp_async_commit();
  mma_q_fragments_regs<D, F>(qreg, warp, blk.G, lane, qf, qsh);
  if constexpr (kFp8)
#pragma unroll
    for (int k = 0; k < KPT; ++k)
      if (tid + k * kAttnThreads < n) ksc[tid + k * kAttnThreads] = kscr[k], vsc[tid + k * kAttnThreads] = vscr[k];
  __syncthreads();

  // 1. scores of the rank's tiles into every rank's ss.
  const uint32_t ss_s = uint32_t(__cvta_generic_to_shared(ss));
  cluster_wait();  // every block of the cluster has started
  for (int j0 = warp; j0 < ntr; j0 += KT * NW) {
#pragma unroll
    for (int u = 0; u < KT; ++u) {
      const int j = j0 + u * NW;
      if (j < ntr) {
        const int kt = rank + CL * j, jn = j + KT * NW;
        const bool more = jn < ntr;
        const uint8_t* kn[2] = {nullptr, nullptr};
        if (more) mma_tile_rows(kp, blk, rank + CL * jn, lg, lt, kn);
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int bb = 0; bb < NB; ++bb) {
          mma_k_load<D, F>(bb, kf[u][0][bb], kf[u][1][bb], qf, lane, acc);
          if (more) kf[u][0][bb] = ldg_mma<uint4>(kn[0] + 64 * bb), kf[u][1][bb] = ldg_mma<uint4>(kn[1] + 64 * bb);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = kt * 16 + lg + 8 * (e >> 1), h = 2 * lt + (e & 1);
          if (i < n && h < blk.G)
            st_cluster_all<CL>(ss_s + uint32_t(h * p.chunk + i) * 4,
                               mma_score_value<kFp8>(acc[e], h, i, qsh, ksc, p.scale));
        }
      }
    }
  }
  KC_SHORT_PHASE(3);
  cluster_arrive();
  cluster_wait();  // every score of the chunk is in every rank's ss
  KC_SHORT_PHASE(4);

  // 2. softmax and p's fragments (rank 0 writes m and l).
  mma_softmax_p<D, F, 8>(ss + warp * p.chunk, warp, lane, blk, p, nt, max_chunks, vsc, pm, pl, pf, psh, rank == 0);
  cp_async_wait<0>();
  __syncthreads();
  KC_SHORT_PHASE(5);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();  // the merge may be scheduled (it waits for us)
#endif

  // 3. p.v of m-tile mt of the slice over key group kg's tiles.
  const bool pv = warp < PW;
  const int kg = warp / MTS, mt = warp % MTS;
  float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (pv) {
    // bf16: matrices (keys 0-7, chunk 2 mt), (0-7, 2 mt + 1), (8-15, 2 mt), (8-15, 2 mt + 1)
    // are the A fragments (m slot g: element 16 mt + g, slot g + 8: 16 mt + 8 + g); fp8:
    // (keys 0-7, chunk mt), (8-15, chunk mt), byte permutes pair the codes by key (m slot g:
    // element 16 mt + 2 g, slot g + 8: the next one).
    const int bkey = kFp8 ? (lane & 15) : (lane & 7) + 8 * (lane >> 4);
    const int bch = kFp8 ? mt : 2 * mt + ((lane >> 3) & 1);
    const uint32_t lofs = uint32_t(bkey * SB + ((bch ^ short_swz<CPS>(bkey)) << 4));
    // Unrolled by 4: the later tiles' shared-memory loads go out before the earlier tiles'
    // products; o += c stays in tile order.
#pragma unroll 4
    for (int kt = kg; kt < nt; kt += KG) {
      uint2 b[NPT];
#pragma unroll
      for (int part = 0; part < NPT; ++part) b[part] = pf[(kt * NPT + part) * 32 + lane];
      const uint32_t tbase = ring_s + uint32_t(kt * 16 * SB);
      uint32_t a[4];
      if constexpr (kFp8) {
        uint32_t r0, r1;
        ldmatrix_x2_trans(r0, r1, tbase + lofs);
        a[0] = e4m3x2_to_f16x2(__byte_perm(r0, 0, 0x0020));
        a[1] = e4m3x2_to_f16x2(__byte_perm(r0, 0, 0x0031));
        a[2] = e4m3x2_to_f16x2(__byte_perm(r1, 0, 0x0020));
        a[3] = e4m3x2_to_f16x2(__byte_perm(r1, 0, 0x0031));
      } else {
        ldmatrix_x4_trans(a, tbase + lofs);
      }
      float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int part = M::NPU - 1; part >= 0; --part) mma_16816<kFp8>(cc, a, b[part]);
#pragma unroll
      for (int e = 0; e < 4; ++e) o[e] += cc[e];
    }
  }
  KC_SHORT_PHASE(6);
  if constexpr (KG == 2) {  // group 1's sums to group 0 through q's fragment space (dead since the scores)
    float4* ox = reinterpret_cast<float4*>(smb + lay.qf);
    static_assert(mma_qf_bytes(D, NPT) >= size_t(MTS) * 32 * 16, "mma short path: p.v exchange space");
    if (pv && kg == 1) ox[mt * 32 + lane] = make_float4(o[0], o[1], o[2], o[3]);
    __syncthreads();
#ifndef KC_PLANT_PV_GROUP_DROP  // planted bug (test builds only): group 1's keys are lost
    if (pv && kg == 0) {
      const float4 x = ox[mt * 32 + lane];
      o[0] += x.x, o[1] += x.y, o[2] += x.z, o[3] += x.w;
    }
#endif
  }
  if (pv && kg == 0)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = 2 * lt + (e & 1);
      if (h < blk.G) {
        const size_t pidx = (size_t(blk.r) * p.q_heads + blk.qh0 + h) * max_chunks + blk.c;
        const int elem = T::E * rank + 16 * mt + (kFp8 ? 2 * lg + (e >> 1) : lg + 8 * (e >> 1));
        po[pidx * D + elem] = kFp8 ? ldexpf(o[e], -psh[h]) : o[e];
      }
    }
  KC_SHORT_PHASE(7);
  KC_SHORT_DONE();
}

Status launch_partial_mma(const KvView* views, Format fmt, int hkv, int d, const AttnParams& p, const AttnRow* rows,
                          int n, const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                          cudaStream_t s) {
  if (fmt == Format::q4)  // its own kernel (partial_mma_q4.cu)
    return launch_partial_mma_q4(views, hkv, d, p, rows, n, tails, q, max_chunks, pm, pl, po, s);
  const int group = p.q_heads / hkv;
  const int nsub = (group + kAttnHeadsPerBlock - 1) / kAttnHeadsPerBlock;
  // The short-row path where the grid leaves most of the device idle (attn_short_pick).
  AttnShortKernel cand[3] = {};
  with_format(fmt, [&](auto codec) {
    using C = decltype(codec);
    if constexpr (C::kAttnMma && C::kFormat != Format::q4) {
      constexpr Format F = C::kFormat;
      if (d == 128) {
        cand[0] = {8, attention_partial_mma_short_kernel<128, F, 8>, MmaShortTune<128, F, 8>::smem(p.chunk).total};
        cand[1] = {4, attention_partial_mma_short_kernel<128, F, 4>, MmaShortTune<128, F, 4>::smem(p.chunk).total};
        cand[2] = {2, attention_partial_mma_short_kernel<128, F, 2>, MmaShortTune<128, F, 2>::smem(p.chunk).total};
      }
      if (d == 256) {
        cand[0] = {8, attention_partial_mma_short_kernel<256, F, 8>, MmaShortTune<256, F, 8>::smem(p.chunk).total};
        cand[1] = {4, attention_partial_mma_short_kernel<256, F, 4>, MmaShortTune<256, F, 4>::smem(p.chunk).total};
        cand[2] = {2, attention_partial_mma_short_kernel<256, F, 2>, MmaShortTune<256, F, 2>::smem(p.chunk).total};
      }
    }
  });
  int pick = -1;
  KC_RETURN_IF_ERROR(attn_short_pick(max_chunks * hkv * nsub * n, cand, 3, &pick));
  if (pick >= 0) {
#ifdef KC_MMA_PHASES
    KC_CUDA_TRY(short_phases_reset());
#endif
    KC_RETURN_IF_ERROR(attn_launch_short(cand[pick], dim3(max_chunks, hkv * nsub, n), s, views, p, rows, tails, q,
                                         max_chunks, nsub, pm, pl, po));
    KC_LAUNCH_CHECK("attention_partial_mma_short_kernel");
#ifdef KC_MMA_PHASES
    KC_CUDA_TRY(short_phases_print(format_name(fmt), d, cand[pick].cl, s));
#endif
    return Status::Ok();
  }
  const size_t smem = mma_smem(p.chunk, d, fmt).total;
  const dim3 grid(max_chunks, hkv * nsub, n);
  // The one dispatch: formats with a tensor-core path (Codec<F>::kAttnMma), head_dim 128
  // or 256; launch_attention sends every other case to the fma partial.
  void (*kern)(const KvView*, AttnParams, const AttnRow*, const int32_t*, const float*, int, int, float*, float*,
               float*) = nullptr;
  with_format(fmt, [&](auto codec) {
    using C = decltype(codec);
    if constexpr (C::kAttnMma && C::kFormat != Format::q4) {
      if (d == 128) kern = attention_partial_mma_kernel<128, C::kFormat>;
      if (d == 256) kern = attention_partial_mma_kernel<256, C::kFormat>;
    }
  });
  if (!kern)
    return Status::Error(std::string("attention (tensor cores): format ") + format_name(fmt) + " at head_dim " +
                         std::to_string(d) + " has no tensor-core partial");
  KC_RETURN_IF_ERROR(cuda_allow_smem(reinterpret_cast<const void*>(kern), smem));
  kern<<<grid, kAttnThreads, smem, s>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);
  KernelPaths::note("partial-mma");
#ifdef KC_MMA_PHASES
  {
    unsigned long long h[8] = {};
    KC_RETURN_IF_ERROR(finish_stream(s));  // an experiment's hook: it waits, and says so
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
  KC_LAUNCH_CHECK("attention_partial_mma_kernel");
  return Status::Ok();
}

}  // namespace kc
