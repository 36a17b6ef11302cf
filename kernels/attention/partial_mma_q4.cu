// Split-K attention partial on the tensor cores for q4 caches (head_dim 128 / 256), in
// rotated space as the fma partial (attention/rows.h gives its order and error model;
// shared-memory layout and tuning: attention/mma_smem.h, MmaQ4Smem / MmaQ4Tune). The host
// twin runs the fma order (attention/twin.cpp) and the qwen-pages contract bounds both
// (Backend::attention_arith).
// Every address comes from kv_row / kv_scale (kv_plane); no stride arithmetic here.
//
// Block (chunk, kv head x sub-group of <= 8 q heads, row), 256 threads (8 warps); the
// block's q heads are the n = 8 columns of mma.m16n8k16 (zero-padded), inputs fp16. With at
// most 4 heads at head_dim 128 (PK, attn_mma_q4_packed) the columns hold hi parts of heads 0..3, then lo
// parts: one mma where two run otherwise, the two sums added at the end (rows.h).
//  0. each warp issues its first K tile's loads (position from the page table); each key's
//     position (KvPos: page offset and slot, the same for every plane) goes to shared
//     memory once, with its V group scales as fp32 (NaN where not finite, 0 past n up to
//     the last tile's end) and each warp's largest V scale per group; warp h rotates q of
//     head slot h (the inverse rotation 2^-2 H32 per group, by shuffles: the fp32 adds and
//     subtracts of hadamard32_inv), scales it by 2^attn_f16_shift(its largest magnitude)
//     (exact) and splits it into two fp16 parts (q's B fragments);
//  1. scores: warp per 16-key tile (two per round, the next one's loads in flight; rows
//     from the shared positions); lane (g, t) reads, for keys g and g + 8, the 4 bytes
//     16 G + 4 t of every group G (elements 8 t .. 8 t + 7 of G) and the key's group
//     scales (two per fp16 fma: NaN where not finite); codes are exact in fp16 (nibble
//     pairs (n0, n4), (n1, n5) | (n2, n6), (n3, n7) of a word by one lop3 ((w & mask) |
//     0x64006400) and one fp16 add or fma each: k-steps 2 G and 2 G + 1, so a k-step lies
//     inside one group); per k-step c = 0, c += mma(K codes, q lo), c += mma(K codes, q
//     hi) (PK: c = mma(K codes, q parts)), then s = fmaf(c, the key's scale of the step's
//     group, s) (PK: then s = s_hi + s_lo); score = s 2^-shift * scale;
//  2. warp h: m, p = expf(s - m), l (as the fma kernel), p = 0 past n to the tile's end;
//     the V scales of each group times 2^shift_G (shift_G from the chunk's largest V scale
//     of G, so that p' = p * that < 2^15; exact); the V ring's first stages (16-byte
//     cp.async of the code rows, zero-filled past n) went out before the scores;
//  3. p.v: warp w of key group kg (attn_mma_key_groups: one of 8 warps at d 256, two of 4
//     at d 128 taking alternate tiles) owns element group G = w % (8 / KG), 32 elements in
//     two m-tiles (m slot g of m-tile jt is element 32 G + 4 g + 2 jt, slot g + 8 the next);
//     per tile, lane (g, t) forms p' = p * (V scale of (key, G) 2^shift_G) (one fp32
//     product) for head g and keys 2t, 2t+1, 2t+8, 2t+9 in two fp16 parts, takes the 16
//     bits 2 g of its keys' group-G codes from the ring by one transposing ldmatrix (rows:
//     the keys' group-G chunks), and c = 0, c += mma(V^T, p' lo), c += mma(V^T, p' hi)
//     (PK: c = mma(V^T, p' parts)), o += c; with two key groups o = o_0 + o_1 (PK: then o =
//     o_hi + o_lo); stored times 2^-shift_G.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/attention/mma_parts.cuh"
#include "kernels/attention/mma_smem.h"
#include "kernels/attention/partial.cuh"
#include "kernels/attention/ptx.cuh"
#include "kernels/attention/short_path.cuh"

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
  static_assert(RT % KG == 0, "q4 mma partial: a stage's tiles split evenly over the key groups");
  static_assert(RT * 16 * CPK == kAttnThreads, "q4 mma partial: one 16-byte copy per thread and stage");
  static_assert(NW % NG == 0, "q4 mma partial: whole warps per group for the scale pass");
};

// The ring's 16-byte chunk ch of key k sits at 16 (ch ^ ring_swz(k)) of the key's row: the
// rows of 8 consecutive keys' same chunk fall on distinct banks (the p.v's ldmatrix).
template <int D>
__device__ __forceinline__ int ring_swz(int k) {
  return D == 256 ? (k & 7) : ((k >> 1) & 3);
}

// A word's 8 nibbles n0..n7 (codes + 8) as four fp16x2, exactly: r0 = (n0, n4), r1 = (n1,
// n5), r2 = (n2, n6), r3 = (n3, n7), each nibble minus 8 (the code). n0 / n4 by (w &
// 0x000F000F) | 0x64006400 = 1024 + n, minus 1032; n1 / n5 by the mask 0x00F000F0: 1024 +
// 16 n, times 1/16 minus 72 (one fp16 fma, exact); n2.. from w >> 8 the same way.
__device__ __forceinline__ void q4_word_to_f16x2(uint32_t w, uint32_t (&r)[4]) {
  const __half2 k1032 = __halves2half2(__ushort_as_half(0x6408), __ushort_as_half(0x6408));      // 1032
  const __half2 k16th = __halves2half2(__ushort_as_half(0x2C00), __ushort_as_half(0x2C00));      // 1/16
  const __half2 km72 = __halves2half2(__ushort_as_half(0xD480), __ushort_as_half(0xD480));       // -72
  const uint32_t magic = 0x64006400u;  // 1024 in both halves (one register: each lop3 below is one instruction)
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const uint32_t x = j ? w >> 8 : w;
    uint32_t u0, u1;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(u0) : "r"(x), "n"(0x000F000F), "r"(magic));  // (x & mask) | magic
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(u1) : "r"(x), "n"(0x00F000F0), "r"(magic));
    __half2 h0, h1;
    memcpy(&h0, &u0, 4);
    memcpy(&h1, &u1, 4);
    h0 = __hsub2(h0, k1032);
    h1 = __hfma2(h1, k16th, km72);
    memcpy(&r[2 * j], &h0, 4);
    memcpy(&r[2 * j + 1], &h1, 4);
  }
}
// Two fp16 scales (a word of a scale row) as fp32, a scale that is not finite as NaN
// (q4_decode_group_rotated's values): fma(h, 0, h) is h for finite h (signed zeros
// included) and NaN for +-Inf and NaN.
__device__ __forceinline__ float2 q4_scales_f32(uint32_t w) {
  uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %1;" : "=r"(r) : "r"(w), "r"(0u));
  __half2 h;
  memcpy(&h, &r, 4);
  return __half22float2(h);
}
__device__ __forceinline__ float q4_scale_f32(uint32_t h16) {
  return (h16 & 0x7C00u) == 0x7C00u ? __uint_as_float(0x7FC00000u) : __half2float(__ushort_as_half(uint16_t(h16)));
}
// The fp16 bits of group g's scale in a row's scales as loaded (uint2: 4 groups, uint4: 8),
// and the word holding groups 2j, 2j + 1.
__device__ __forceinline__ uint32_t sv_word(const uint2& v, int j) { return j == 0 ? v.x : v.y; }
__device__ __forceinline__ uint32_t sv_word(const uint4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; }
template <class SVT>
__device__ __forceinline__ uint32_t sv_half(const SVT& v, int g) { return (sv_word(v, g / 2) >> (16 * (g % 2))) & 0xFFFFu; }
// The 4-byte words at p + 16 g, g < N (one address, immediate offsets), L2 prefetch hint
// as ldg_mma.
template <int OFF>
__device__ __forceinline__ uint32_t ldg_word_at(const uint8_t* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  asm volatile("ld.global.nc" KC_MMA_LDQ ".u32 %0, [%1+%2];" : "=r"(r) : "l"(p), "n"(OFF));
  return r;
#else
  return __ldg(reinterpret_cast<const uint32_t*>(p + OFF));
#endif
}
template <int N, int... I>
__device__ __forceinline__ void ldg_words16(const uint8_t* p, uint32_t (&w)[N], std::integer_sequence<int, I...>) {
  ((w[I] = ldg_word_at<16 * I>(p)), ...);
}
template <int N>
__device__ __forceinline__ void ldg_words16(const uint8_t* p, uint32_t (&w)[N]) {
  ldg_words16(p, w, std::make_integer_sequence<int, N>());
}

// PK: at most 4 heads per block (attn_mma_q4_packed): the two parts of q and of p' sit side
// by side in the 8 columns (hi of heads 0..3, then lo of heads 0..3), one mma per k-step and
// per tile and m-tile; the hi and lo sums are added at the end of each score and output.
// CL > 1: the short-row path (attention/short_path.cuh), chunk c on the CL blocks of one
// cluster (block x = CL c + rank), the same arithmetic: rank r scores the tiles r, r + CL, ..
// (warp w: its tiles w, w + 8, ..) into every rank's ss, then after the cluster barrier runs
// the softmax of every head over all the chunk's keys (rank 0 writes m and l) and the p.v of
// its NG / CL element groups, whose code chunks of every key it loaded whole at the start
// (no ring); warp w < PW takes group w % (NG / CL) of key group w / (NG / CL).
template <int D, bool PK, int CL = 1>
__global__ void __launch_bounds__(kAttnThreads, CL > 1 ? 1 : mma_q4_min_blocks<D, PK>()) attention_partial_mma_q4_kernel(
    const KvView* views, AttnParams p, const AttnRow* rows, const int32_t* tails, const float* q, int max_chunks,
    int nsub, float* pm, float* pl, float* po) {
  using M = MmaQ4Shape<D>;
  using SV = typename M::SV;
  static_assert(!PK || D == 128, "q4 mma partial: packed parts at head_dim 128 only (attn_mma_q4_packed)");
  constexpr int NG = M::NG, KS = M::KS, NPT = M::NPT, RS = mma_q4_ring_stages<D, PK>(), RT = M::RT, RB = M::RB, CPK = M::CPK;
  static_assert(RS >= 2, "q4 mma partial: V ring of at least 2 stages");
  constexpr int NGS = NG / CL, PW = CL > 1 ? NGS * M::KG : M::NW;  // short path: groups per rank, p.v warps
  constexpr int SBQ = RB / CL, CPSQ = CPK / CL;                      // short path: slice bytes and chunks per key
  static_assert(CL == 1 || (NG % CL == 0 && PW <= M::NW), "q4 mma short path: whole groups per rank");
  extern __shared__ __align__(16) unsigned char smb[];
  KC_SHORT_ENTRY();
  const int rank = CL > 1 ? cluster_rank() : 0;
  // Short path: q of head slot `warp` (element 32 g + lane of each group) loaded first, before
  // any K or V load of the block (its address needs no view: kv heads = gridDim.y / nsub).
  float qv[M::NG];
  if constexpr (CL > 1) {
    const int w = threadIdx.x >> 5, sub = blockIdx.y % nsub, group = p.q_heads / (gridDim.y / nsub);
    const int qh0 = (blockIdx.y / nsub) * group + sub * kAttnHeadsPerBlock;
    const bool in = w < min(kAttnHeadsPerBlock, group - sub * kAttnHeadsPerBlock);
    const float* qr = q + (size_t(blockIdx.z) * p.q_heads + qh0 + w) * D;
#pragma unroll
    for (int g = 0; g < M::NG; ++g) qv[g] = in ? qr[32 * g + (threadIdx.x & 31)] : 0.0f;
  }
  const AttnBlock blk(views, p, rows, tails, nsub, CL > 1 ? int(blockIdx.x) / CL : int(blockIdx.x));
  const int n = blk.n, G = blk.G;
  if constexpr (CL > 1) KC_SHORT_PHASE(1);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, lg = lane >> 2, lt = lane & 3;
  const int nt = (n + 15) / 16;  // key tiles holding keys
  // This block's key tiles: j -> tile rank + CL j, j < ntr (CL = 1: every tile).
  const int ntr = CL == 1 ? nt : nt > rank ? (nt - rank + CL - 1) / CL : 0;
  auto tile_of = [&](int j) { return CL == 1 ? j : rank + CL * j; };
  const MmaQ4Smem lay = CL > 1 ? mma_q4_short_smem<D>(p.chunk, CL) : mma_q4_smem<D, PK>(p.chunk);
  const int S = lay.ss_stride, W16 = lay.w16;
  float* ss = reinterpret_cast<float*>(smb + lay.ss);
  uint4* qf = reinterpret_cast<uint4*>(smb + lay.qf);
  const uint2* qfp = reinterpret_cast<const uint2*>(qf);  // PK: [k-step][4 h + t][part] uint2
  const int q_lane = (4 * (lg & 3) + lt) * 2 + (lg >> 2);  // PK: column g = part g / 4 of head g % 4
  float* vsf = reinterpret_cast<float*>(smb + lay.vsc);
  uint64_t* pgb = reinterpret_cast<uint64_t*>(smb + lay.pgb);  // each key's KvPos
  uint32_t* pslot = reinterpret_cast<uint32_t*>(smb + lay.slot);
  uint32_t* wm = reinterpret_cast<uint32_t*>(smb + lay.wm);
  int* qsh = reinterpret_cast<int*>(smb + lay.qsh);

  const KvPlane kp = kv_plane(blk.v, p.layer, 0, blk.kvh), vp = kv_plane(blk.v, p.layer, 1, blk.kvh);
  const KvPlane ksp = kv_plane(blk.v, p.layer, 0, blk.kvh, true), vsp = kv_plane(blk.v, p.layer, 1, blk.kvh, true);
  // Lane (g, t)'s K reads of tile kt: code words at 16 G + 4 t of keys 16 kt + g and + 8
  // (keys past n read key n - 1, whose scores are not kept) and the two keys' scale rows;
  // the key's position from the page table (the first tile, before the positions are in
  // shared memory) or from shared memory.
  auto k_load = [&](int kt, bool direct, uint32_t (&kw)[2][NG], SV (&ks)[2]) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int i = min(kt * 16 + lg + 8 * rr, n - 1);
      KvPos at;
      if (direct) {
        at = kv_pos(kp, key_slot(blk.k0 + i, blk.row.len, blk.tail));
      } else {
        at.page_base = pgb[i];
        at.slot = pslot[i];
      }
      ldg_words16(kv_plane_at(kp, at) + 4 * lt, kw[rr]);
      ks[rr] = ldg_mma<SV>(kv_plane_at(ksp, at));
    }
  };
  uint32_t kw[2][NG];
  SV ks[2];
  if (warp < ntr) k_load(tile_of(warp), true, kw, ks);

  // Each key's position and V group scales as fp32 (a scale that is not finite as NaN;
  // 0 for the last tile's keys past n); this warp's largest |scale| bits per group (a scale
  // that is not finite counts as 0: its keys' p' are NaN whatever the shift). The first
  // KPT x 256 keys' loads (page table, then scale rows) go out together before q's
  // fragments are built: positions reach shared memory at once, the scale rows after q
  // (as the bf16 / fp8 kernel's meta loads); wider chunks go on in the loop after. Not in
  // the regular d256 kernel (KPT 0: the whole loop before q), where the scale rows live
  // across q cost more than the overlap gains (session 39, H100: 1.03-1.05x at 32K and
  // 128K, against 0.95-0.98x for d128 and 0.94x for the d256 short path).
  constexpr int KPT = D == 256 && CL == 1 ? 0 : 2;
  uint32_t vmx[NG];
#pragma unroll
  for (int g = 0; g < NG; ++g) vmx[g] = 0;
  auto key_meta = [&](int i, const KvPos& at, const SV& sv, bool pos) {
    if (i < n) {
      if (pos) {
        pgb[i] = at.page_base;
        pslot[i] = at.slot;
      }
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        const uint32_t h = sv_half(sv, g), mag = h & 0x7FFFu;
        vsf[g * W16 + i] = q4_scale_f32(h);
        vmx[g] = max(vmx[g], mag < 0x7C00u ? mag : 0u);
      }
    } else if (i < nt * 16) {
#pragma unroll
      for (int g = 0; g < NG; ++g) vsf[g * W16 + i] = 0.0f;
    }
  };
  auto key_loop = [&](int from) {  // keys from, from + 256, .. below nt x 16, loaded one by one
    for (int i = from; i < nt * 16; i += kAttnThreads) {
      KvPos at;
      SV sv{};
      if (i < n) {
        at = kv_pos(vp, key_slot(blk.k0 + i, blk.row.len, blk.tail));
        sv = ldg_mma<SV>(kv_plane_at(vsp, at));
      }
      key_meta(i, at, sv, true);
    }
  };
  auto warp_max = [&] {
#pragma unroll
    for (int g = 0; g < NG; ++g) {
      const uint32_t m = __reduce_max_sync(0xFFFFFFFFu, vmx[g]);
      if (lane == 0) wm[warp * NG + g] = m;
    }
  };
  KvPos mat[KPT > 0 ? KPT : 1];
  SV msv[KPT > 0 ? KPT : 1];
  if constexpr (KPT == 0) {
    key_loop(tid);
    warp_max();
  } else {
#pragma unroll
    for (int k = 0; k < KPT; ++k)
      if (tid + k * kAttnThreads < n) mat[k] = kv_pos(vp, key_slot(blk.k0 + tid + k * kAttnThreads, blk.row.len, blk.tail));
#pragma unroll
    for (int k = 0; k < KPT; ++k)
      if (tid + k * kAttnThreads < n) {
        msv[k] = ldg_mma<SV>(kv_plane_at(vsp, mat[k]));
        pgb[tid + k * kAttnThreads] = mat[k].page_base;  // positions stored now: only the scale rows stay live across q
        pslot[tid + k * kAttnThreads] = mat[k].slot;
      }
  }

  // q of head slot `warp`, rotated (lane = element of each group), shifted, split: B
  // fragment (k-step 2 G + s, lane (g, t)) holds, for head g, the elements of k slots
  // 2t, 2t+1 | 2t+8, 2t+9: 8t + 2s, 8t + 2s + 4 | 8t + 2s + 1, 8t + 2s + 5 of group G (the
  // K codes' pairs), hi part in .x, .y and lo part in .z, .w. The rotated q is staged in
  // the scores' space (dead until the scores).
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
        float v = CL > 1 ? qv[g] : qr[32 * g + lane];
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
      qf[k * 32 + 4 * warp + t] = make_uint4(lo[0], hi[0], lo[1], hi[1]);
    }
  }
  if constexpr (KPT > 0) {
#pragma unroll
    for (int k = 0; k < KPT; ++k) key_meta(tid + k * kAttnThreads, mat[k], msv[k], false);
    key_loop(tid + KPT * kAttnThreads);  // chunks wider than KPT x 256
    warp_max();
  }
  // The V ring: stage st holds tiles st*RT .. of code rows, chunk ch of key k at
  // 16 (ch ^ ring_swz(k)), keys past n zero-filled (their p' is 0); one 16-byte copy per
  // thread and stage.
  const uint32_t ring_s = uint32_t(__cvta_generic_to_shared(smb + lay.ring));
  const int nst = (nt + RT - 1) / RT;
  auto issue = [&](int st, int slot) {
    if (st < nst) {
      const int u = tid / (16 * CPK), key = (tid / CPK) % 16, ch = tid % CPK, kt = st * RT + u;
      if (kt < nt) {
        const bool in = kt * 16 + key < n;
        const uint32_t dst = ring_s + uint32_t(((slot * RT + u) * 16 + key) * RB + ((ch ^ ring_swz<D>(key)) << 4));
        const int i = in ? kt * 16 + key : 0;
        KvPos at;
        at.page_base = pgb[i];
        at.slot = pslot[i];
        cp_async16_zfill(dst, kv_plane_at(vp, at) + 16 * ch, in);
      }
    }
    cp_async_commit();
  };
  __syncthreads();
  if constexpr (CL > 1) {
    KC_SHORT_PHASE(2);
    // Short path: q's staging in ss is done (release); the rank's code chunks of every key,
    // whole, keys past n zero-filled; one commit group.
    cluster_arrive();
    for (int c = tid; c < nt * 16 * CPSQ; c += kAttnThreads) {
      const int key = c / CPSQ, ch = c % CPSQ;
      const bool in = key < n;
      const int i = in ? key : 0;
      KvPos at;
      at.page_base = pgb[i];
      at.slot = pslot[i];
      cp_async16_zfill(ring_s + uint32_t(key * SBQ + ((ch ^ short_swz<CPSQ>(key)) << 4)),
                       kv_plane_at(vp, at) + 16 * (rank * CPSQ + ch), in);
    }
    cp_async_commit();
    cluster_wait();  // every rank has started and staged its q: its ss may be written
  } else {
#pragma unroll 1
    for (int st = 0; st < RS - 1; ++st) issue(st, st);  // the V ring's first stages, during the scores
  }

  // 1. scores: warp w takes tiles w, w + 8, ..; the next tile's reads go out first (two
  // tiles per round, so that the buffers swap without copies). Packed (PK): lane (g, t)'s
  // columns 2t, 2t+1 are hi parts of heads 2t, 2t+1 for t < 2 and lo parts of heads
  // 2t - 4, 2t - 3 for t >= 2; the two sums meet in one add (lanes t and t ^ 2).
  // The unscale 2^-shift of lane's heads 2t, 2t+1 (exact; ldexpf where 2^-shift is not a
  // normal fp32).
  const uint32_t ss_s = uint32_t(__cvta_generic_to_shared(ss));  // short path: the scores' address in every rank
  float qmul[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int sh = qsh[(2 * lt + j) & (PK ? 3 : 7)];
    qmul[j] = sh <= 126 ? __int_as_float((127 - sh) << 23) : 0.0f;
  }
  auto score_tile = [&](int kt, const uint32_t (&kw)[2][NG], const SV (&ks)[2]) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < NG / 2; ++j) {
      const float2 s0 = q4_scales_f32(sv_word(ks[0], j)), s1 = q4_scales_f32(sv_word(ks[1], j));
#pragma unroll
      for (int gg = 0; gg < 2; ++gg) {
        const int g = 2 * j + gg;
        const float sc0 = gg ? s0.y : s0.x, sc1 = gg ? s1.y : s1.x;
        uint32_t a0[4], a1[4];
        q4_word_to_f16x2(kw[0][g], a0);
        q4_word_to_f16x2(kw[1][g], a1);
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const int k = 2 * g + s;
          const uint32_t a[4] = {a0[2 * s], a1[2 * s], a0[2 * s + 1], a1[2 * s + 1]};
          float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          if constexpr (PK) {
            uint2 b = qfp[k * 64 + q_lane];
            if (M::NPU == 1 && lg >= 4) b = make_uint2(0u, 0u);  // the plant: no lo part
            mma_16816<true>(cc, a, b);
          } else {
            const uint4 qv = qf[k * 32 + lane];
#pragma unroll
            for (int q3 = M::NPU - 1; q3 >= 0; --q3)
              mma_16816<true>(cc, a, q3 ? make_uint2(qv.z, qv.w) : make_uint2(qv.x, qv.y));
          }
          acc[0] = fmaf(cc[0], sc0, acc[0]);
          acc[1] = fmaf(cc[1], sc0, acc[1]);
          acc[2] = fmaf(cc[2], sc1, acc[2]);
          acc[3] = fmaf(cc[3], sc1, acc[3]);
        }
      }
    }
    if constexpr (PK)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] = acc[e] + __shfl_xor_sync(0xFFFFFFFFu, acc[e], 2);  // hi + lo
    // c0, c1: key kt*16 + g, heads 2t, 2t+1; c2, c3: key kt*16 + g + 8.
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = kt * 16 + lg + 8 * (e >> 1), h = 2 * lt + (e & 1);
      if (i < n && h < G) {
        const float m = qmul[e & 1];
        const float v = (m != 0.0f ? acc[e] * m : ldexpf(acc[e], -qsh[h])) * p.scale;
        if constexpr (CL > 1) st_cluster_all<CL>(ss_s + uint32_t(h * S + i) * 4, v);  // every rank's ss
        else ss[h * S + i] = v;
      }
    }
  };
  if constexpr (CL > 1) {
    for (int j = warp; j < ntr; j += 2 * M::NW) {  // the rank's tiles (as below)
      const bool second = j + M::NW < ntr;
      uint32_t kw2[2][NG];
      SV ks2[2];
      if (second) k_load(tile_of(j + M::NW), false, kw2, ks2);
      score_tile(tile_of(j), kw, ks);
      if (j + 2 * M::NW < ntr) k_load(tile_of(j + 2 * M::NW), false, kw, ks);
      if (second) score_tile(tile_of(j + M::NW), kw2, ks2);
    }
  } else {
    for (int kt = warp; kt < nt; kt += 2 * M::NW) {
      const bool second = kt + M::NW < nt;
      uint32_t kw2[2][NG];
      SV ks2[2];
      if (second) k_load(kt + M::NW, false, kw2, ks2);
      score_tile(kt, kw, ks);
      if (kt + 2 * M::NW < nt) k_load(kt + 2 * M::NW, false, kw, ks);
      if (second) score_tile(kt + M::NW, kw2, ks2);
    }
  }

  if constexpr (CL > 1) {
    KC_SHORT_PHASE(3);
    cluster_arrive();
    cluster_wait();  // every score of the chunk is in every rank's ss
    KC_SHORT_PHASE(4);
  } else {
    __syncthreads();
  }

  // 2. softmax of head slot `warp` (the order of the fma kernel); p stays in ss, 0 past n
  // up to the last tile's end (the p.v reads whole tiles; a head slot >= G is all 0).
  if (warp < G) {
    const WarpSoftmax sx = warp_softmax<false, false, (CL > 1 ? 8 : 1)>(ss + warp * S, n, lane, nullptr);
    if (lane == 0 && rank == 0) {
      const size_t pidx = (size_t(blk.r) * p.q_heads + blk.qh0 + warp) * max_chunks + blk.c;
      pm[pidx] = sx.m;
      pl[pidx] = sx.l;
    }
  }
  for (int i = (warp < G ? n : 0) + lane; i < nt * 16; i += 32) ss[warp * S + i] = 0.0f;
  // The V scales of group warp % NG times 2^shift, shift from the chunk's largest V scale of
  // the group (exact: a power of two), so that p' = p * (scale 2^shift) < 2^15.
  {
    constexpr int WPS = M::NW / NG;  // warps per group in this pass
    const int g = warp % NG;
    const uint32_t mb = __reduce_max_sync(0xFFFFFFFFu, lane < M::NW ? wm[lane * NG + g] : 0u);
    const float sc = ldexpf(1.0f, attn_f16_shift(__half2float(__ushort_as_half(uint16_t(mb)))));
    for (int i = (warp / NG) * 32 + lane; i < nt * 16; i += 32 * WPS) vsf[g * W16 + i] *= sc;
  }
  if constexpr (CL > 1) cp_async_wait<0>();  // the rank's V chunks
  __syncthreads();
  if constexpr (CL > 1) KC_SHORT_PHASE(5);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();  // the merge may be scheduled (it waits for us)
#endif

  // 3. p.v of element group gv over the key group kg's tiles: per tile, lane (g, t) forms
  // p' = p * (V scale 2^shift) of head g, keys 2t, 2t+1 | 2t+8, 2t+9 (one fp32 product
  // each) in two fp16 parts, and takes its keys' group-gv codes (16 bits 2 g: elements 4g ..
  // 4g + 3) from the ring by one transposing ldmatrix (row = key, the group's 16 bytes).
  // Short path (CL > 1): warp w < PW takes the rank's group gl = w % NGS (gv = NGS rank + gl)
  // of key group w / NGS, its chunk gl of every key's slice in shared memory.
  const bool pv = CL == 1 || warp < PW;
  const int kg = CL > 1 ? warp / NGS : warp / M::WPG, gl = CL > 1 ? warp % NGS : warp % M::WPG;
  const int gv = CL > 1 ? NGS * rank + gl : gl;
  const int psh = attn_f16_shift(__half2float(__ushort_as_half(
      uint16_t(__reduce_max_sync(0xFFFFFFFFu, lane < M::NW ? wm[lane * NG + gv] : 0u)))));
  const float* sp = ss + (PK ? lg & 3 : lg) * S;  // head g's p (PK: head g % 4)
  const float* vs = vsf + gv * W16;   // group gv's scaled V scales
  const int lrow = lane & 15;         // the ldmatrix row (key) this lane addresses
  const uint32_t lm_off = CL > 1 ? uint32_t(lrow * SBQ + ((gl ^ short_swz<CPSQ>(lrow)) << 4))
                                 : uint32_t(lrow * RB + ((gv ^ ring_swz<D>(lrow)) << 4));
  float o[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] = 0.0f;
  // Tile kt of the p.v, its 16 rows of code chunks at tile u of ring slot `slot` (short
  // path: slot 0, u = kt: tile kt of the slice).
  auto pv_tile = [&](int kt, int slot, int u) {
    const int kb = kt * 16 + 2 * lt;
    const float2 pa = *reinterpret_cast<const float2*>(sp + kb), pb = *reinterpret_cast<const float2*>(sp + kb + 8);
    const float2 va = *reinterpret_cast<const float2*>(vs + kb), vb = *reinterpret_cast<const float2*>(vs + kb + 8);
    uint32_t lo[NPT], hi[NPT];
    split_parts<true>(pa.x * va.x, pa.y * va.y, lo);
    split_parts<true>(pb.x * vb.x, pb.y * vb.y, hi);
    if constexpr (PK) {  // column g: part g / 4 (the plant: no lo part)
      const bool lop = lg >= 4;
      lo[0] = lop ? (M::NPU == 2 ? lo[1] : 0u) : lo[0];
      hi[0] = lop ? (M::NPU == 2 ? hi[1] : 0u) : hi[0];
    }
    uint32_t w01, w89;
    ldmatrix_x2_trans(w01, w89, ring_s + uint32_t((slot * RT + u) * 16 * (CL > 1 ? SBQ : RB)) + lm_off);
    uint32_t c01[4], c89[4];
    q4_word_to_f16x2(w01, c01);
    q4_word_to_f16x2(w89, c89);
#pragma unroll
    for (int jt = 0; jt < 2; ++jt) {
      const uint32_t a[4] = {c01[2 * jt], c01[2 * jt + 1], c89[2 * jt], c89[2 * jt + 1]};
      float cc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (PK) {
        mma_16816<true>(cc, a, make_uint2(lo[0], hi[0]));
      } else {
#pragma unroll
        for (int part = M::NPU - 1; part >= 0; --part)
          mma_16816<true>(cc, a, make_uint2(part ? lo[1] : lo[0], part ? hi[1] : hi[0]));
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) o[jt][e] += cc[e];
    }
  };
  if constexpr (CL > 1) {
    // Unrolled by 4: the later tiles' shared-memory loads go out before the earlier tiles'
    // products; o += c stays in tile order.
    if (pv)
#pragma unroll 4
      for (int kt = kg; kt < nt; kt += M::KG) pv_tile(kt, 0, kt);
    KC_SHORT_PHASE(6);
  } else {
    for (int st = 0, slot = 0; st < nst; ++st, slot = slot + 1 == RS ? 0 : slot + 1) {
      cp_async_wait<RS - 2>();
      __syncthreads();
      issue(st + RS - 1, slot == 0 ? RS - 1 : slot - 1);
#pragma unroll
      for (int uu = 0; uu < RT / M::KG; ++uu) {
        const int u = uu * M::KG + kg, kt = st * RT + u;
        if (kt < nt) pv_tile(kt, slot, u);
      }
    }
  }
  cp_async_wait<0>();  // no copy outlives the block (the empty groups past the last stage)
  if constexpr (M::KG == 2) {
    // Group 1 hands its sums to group 0 through q's fragment space (dead since the scores).
    float4* ox = reinterpret_cast<float4*>(smb + lay.qf);
    static_assert(size_t(KS) * 32 * 16 >= size_t(M::WPG) * 32 * 2 * 16, "q4 mma partial: exchange space");
    __syncthreads();
    if (pv && kg == 1)
#pragma unroll
      for (int jt = 0; jt < 2; ++jt) ox[(gl * 2 + jt) * 32 + lane] = make_float4(o[jt][0], o[jt][1], o[jt][2], o[jt][3]);
    __syncthreads();
    if (!pv || kg == 1) return;
#pragma unroll
    for (int jt = 0; jt < 2; ++jt) {
#ifndef KC_PLANT_PV_GROUP_DROP  // planted bug (test builds only): group 1's keys are lost
      const float4 y = ox[(gl * 2 + jt) * 32 + lane];
      o[jt][0] += y.x, o[jt][1] += y.y, o[jt][2] += y.z, o[jt][3] += y.w;
#endif
    }
  }
  if (!pv) return;  // short path: warps without a group
  // PK: hi + lo (lanes t and t ^ 2), after the key groups' sum.
  if constexpr (PK)
#pragma unroll
    for (int jt = 0; jt < 2; ++jt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[jt][e] = o[jt][e] + __shfl_xor_sync(0xFFFFFFFFu, o[jt][e], 2);
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
  if constexpr (CL > 1) {
    KC_SHORT_PHASE(7);
    KC_SHORT_DONE();
  }
}

Status launch_partial_mma_q4(const KvView* views, int hkv, int d, const AttnParams& p, const AttnRow* rows, int n,
                             const int32_t* tails, const float* q, int max_chunks, float* pm, float* pl, float* po,
                             cudaStream_t s) {
  const int group = p.q_heads / hkv;
  const int nsub = (group + kAttnHeadsPerBlock - 1) / kAttnHeadsPerBlock;
  const bool pk = attn_mma_q4_packed(Format::q4, d, group);  // head_dim 128 only
  // The short-row path where the grid leaves most of the device idle (attn_short_pick):
  // clusters of 8 (d 256 only: a rank takes whole groups), 4 or 2.
  AttnShortKernel cand[3] = {};
  if (d == 128) {
    cand[1] = {4, pk ? attention_partial_mma_q4_kernel<128, true, 4> : attention_partial_mma_q4_kernel<128, false, 4>,
               mma_q4_short_smem<128>(p.chunk, 4).total};
    cand[2] = {2, pk ? attention_partial_mma_q4_kernel<128, true, 2> : attention_partial_mma_q4_kernel<128, false, 2>,
               mma_q4_short_smem<128>(p.chunk, 2).total};
  }
  if (d == 256) {
    cand[0] = {8, attention_partial_mma_q4_kernel<256, false, 8>, mma_q4_short_smem<256>(p.chunk, 8).total};
    cand[1] = {4, attention_partial_mma_q4_kernel<256, false, 4>, mma_q4_short_smem<256>(p.chunk, 4).total};
    cand[2] = {2, attention_partial_mma_q4_kernel<256, false, 2>, mma_q4_short_smem<256>(p.chunk, 2).total};
  }
  int pick = -1;
  KC_RETURN_IF_ERROR(attn_short_pick(max_chunks * hkv * nsub * n, cand, 3, &pick));
  if (pick >= 0) {
#ifdef KC_MMA_PHASES
    KC_CUDA_TRY(short_phases_reset());
#endif
    KC_RETURN_IF_ERROR(attn_launch_short(cand[pick], dim3(max_chunks, hkv * nsub, n), s, views, p, rows, tails, q,
                                         max_chunks, nsub, pm, pl, po));
    KC_LAUNCH_CHECK("attention_partial_mma_q4_kernel (short path)");
    if (pk) KernelPaths::note("partial-packed");  // the short kernel's q4 parts side by side
#ifdef KC_MMA_PHASES
    KC_CUDA_TRY(short_phases_print("q4", d, cand[pick].cl, s));
#endif
    return Status::Ok();
  }
  const dim3 grid(max_chunks, hkv * nsub, n);
  void (*kern)(const KvView*, AttnParams, const AttnRow*, const int32_t*, const float*, int, int, float*, float*,
               float*) = nullptr;
  size_t smem = 0;
  if (d == 128)
    kern = pk ? attention_partial_mma_q4_kernel<128, true> : attention_partial_mma_q4_kernel<128, false>,
    smem = pk ? mma_q4_smem<128, true>(p.chunk).total : mma_q4_smem<128>(p.chunk).total;
  if (d == 256) kern = attention_partial_mma_q4_kernel<256, false>, smem = mma_q4_smem<256>(p.chunk).total;
  if (!kern)
    return Status::Error("attention (tensor cores): format q4 at head_dim " + std::to_string(d) +
                         " has no tensor-core partial");
  KC_RETURN_IF_ERROR(cuda_allow_smem(reinterpret_cast<const void*>(kern), smem));
  kern<<<grid, kAttnThreads, smem, s>>>(views, p, rows, tails, q, max_chunks, nsub, pm, pl, po);
  KC_LAUNCH_CHECK("attention_partial_mma_q4_kernel");
  KernelPaths::note(pk ? "partial-mma-packed" : "partial-mma");
  return Status::Ok();
}

}  // namespace kc
