// Rope store kernels. Host twin: rope_store_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench rope-store. launch_rope_store picks one by format (measured on the H200,
// bench rope-store, commit 4137649; reports/h200/issue20-moves.md):
//
// rope_store_kernel (bf16, fp8, mxfp4): block per row, 256 threads (8 warps). Head slots are the row's q
//   heads, then its kv heads' K, then their V. The row's cos / sin table (rope_cos_sin for
//   pairs 0 .. rot_dims / 2 - 1: float64 angle from the row's logical pos, rounded once to
//   fp32) is computed once per row into shared memory, while the row's inputs (fp32 q, k,
//   v rows of the head slots, up to kRopeStageFloats at a time) come into shared memory
//   with 16-byte loads, several in flight per thread. Then warp w takes slots w, w + 8, ..:
//   q and k are rotated (neox pairing over the first rot_dims dims: the same expressions
//   as the twin's, c and s from the table), q goes to q_out [n][Hq][d] fp32, K and V (V
//   unrotated) are stored at the row's slot through kv_row in the cache format by its
//   Codec<F>::store_warp (codecs/: bf16 RNE; the fp8 and mxfp4 row rules over the
//   rotated values, the bytes of their encode_row). 0.70-0.78 (bf16) and 0.60-0.66 (fp8) of
//   the copy ceiling from 64 MiB up; rope_store_q4_kernel's scheme with store_warp gave
//   0.68-0.74 and 0.57-0.60 in the same run.
//
// rope_store_q4_kernel (q4): persistent blocks of 256 threads (as many as fit on the device,
//   at most one per row); block b takes rows b, b + grid, .. . A row's head slots (the same
//   order) are staged up to ws at a time (one stage per row when the row fits: 48 slots of
//   d 128 do). Each stage (an item) comes from global memory into one of two shared buffers
//   by cp.async (16 bytes a copy), the next item's copy in flight while the block works on
//   this one. In the stage, the eight 16-byte words of each group of 32 floats are permuted
//   (word w at w ^ (group index & 7), the group index counting over the stage's slot rows),
//   so eight threads that each read a word of their own group hit distinct banks, and a warp
//   over one group's 32 elements too. Per item:
//   - the row's cos / sin table (rope_cos_sin_theta for pairs 0 .. rot_dims / 2 - 1: float64
//     angle pos * theta_i, rounded once to fp32; theta_i = rope_theta once per block),
//   - rotation (the twin's expressions with fp32 products and sums rounded one by one: no
//     contraction into fmas): warp w takes the stage's q and K slots w, w + 8, ..; q goes to
//     q_out, K is rotated in place in the stage,
//   - the stores of K and V (V unrotated) at the row's slot through kv_row / kv_scale by a
//     thread per group of 32 (q4_store_group below: q4_encode_group's helpers, so the bytes
//     of the twin's encode_row; 16 code bytes in one store).
//   0.55-0.59 of the copy ceiling from 64 MiB up, where rope_store_kernel's q4 store (a warp
//   per row: the five butterfly stages and the amax reduction as shuffles, the scale per
//   lane) gave 0.41-0.45.
// Every address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/attention/launch.h"
#include "kernels/attention/rows.h"

namespace kc {

constexpr int kRopeThreads = 256;
constexpr int kRopeStageFloats = 16384;  // rope_store_kernel: 64 KiB, the head slots staged at a time (all of them up to 64 at d 256)
constexpr int kRopeLoads = 8;            // rope_store_kernel: 16-byte loads in flight per thread while staging
constexpr int kRopeBufFloats = 8192;     // rope_store_q4_kernel: one stage buffer (32 KiB; two per block): 64 slots of d 128
constexpr size_t kRopeQ4SmemMax = 2 * size_t(kRopeBufFloats) * sizeof(float);

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

// rope_store_q4_kernel's stage: element j of slot row ls (head_dim D), its group's words
// permuted by the group index.
template <int D>
__device__ __forceinline__ int rope_ix(int ls, int j) {
  const int key = (ls * (D / 32) + (j >> 5)) & 7;
  return ls * D + (j & ~31) + ((((j >> 2) & 7) ^ key) << 2) + (j & 3);
}

__device__ __forceinline__ void cp_async16(float* smem, const float* g) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// One q4 group: its 32 rope-rotated values (word w, values 4w .. 4w + 3, at yg + 4 (w ^ key)) to 16
// code bytes and the 2-byte fp16 scale: q4_encode_group's steps with its own helpers
// (hadamard32_fwd, amax_step, q4_group_scale, fp16_to_float, q4_nibble_of), so the bytes of
// the twin's encode_row; the codes packed in registers, one 16-byte store where aligned.
__device__ void q4_store_group(const float* yg, int key, uint8_t* codes16, uint8_t* scale2) {
  float y[32];
#pragma unroll
  for (int i = 0; i < 32; i += 4) {
    const float4 t = *reinterpret_cast<const float4*>(yg + 4 * ((i / 4) ^ key));
    y[i] = t.x, y[i + 1] = t.y, y[i + 2] = t.z, y[i + 3] = t.w;
  }
  hadamard32_fwd(y);
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) amax = amax_step(amax, y[i]);
  uint16_t h = kQ4ScaleNaN;
  uint32_t w[4] = {0x01010101u * kQ4PoisonCodes, 0x01010101u * kQ4PoisonCodes, 0x01010101u * kQ4PoisonCodes,
                   0x01010101u * kQ4PoisonCodes};
  if (q4_finite(amax)) {
    h = q4_group_scale(amax);
    const float s = fp16_to_float(h);
    if (s == 0.0f) {
#pragma unroll
      for (int b = 0; b < 4; ++b) w[b] = 0x01010101u * kQ4ZeroCodes;
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        uint32_t x = 0;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = 4 * b + c;  // code byte i: elements 2i (low nibble) and 2i + 1
          x |= uint32_t(q4_nibble_of(y[2 * i], s) | (q4_nibble_of(y[2 * i + 1], s) << 4)) << (8 * c);
        }
        w[b] = x;
      }
    }
  }
  if ((reinterpret_cast<uintptr_t>(codes16) & 15u) == 0) {
    *reinterpret_cast<uint4*>(codes16) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) codes16[i] = uint8_t(w[i / 4] >> (8 * (i % 4)));
  }
  if ((reinterpret_cast<uintptr_t>(scale2) & 1u) == 0) {
    *reinterpret_cast<uint16_t*>(scale2) = h;
  } else {
    scale2[0] = uint8_t(h & 0xFFu);
    scale2[1] = uint8_t(h >> 8);
  }
}

// One instantiation per head_dim.
template <int D>
__global__ void __launch_bounds__(kRopeThreads, 4) rope_store_q4_kernel(const KvView* views, RopeParams p,
                                                                      const RopeRow* rows, int n, const float* q,
                                                                      const float* k, const float* vin, float* q_out,
                                                                      int ws) {
  extern __shared__ __align__(16) float xs[];  // two stages of ws slot rows of D floats
  __shared__ double th[kMaxHeadDim / 2];
  __shared__ float tc[kMaxHeadDim / 2], tsn[kMaxHeadDim / 2];
  constexpr int D4 = D / 4, G = D / 32;
  const int hkv = views[0].lay.kv_heads;
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int slots = p.q_heads + 2 * hkv, nst = (slots + ws - 1) / ws;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31, h2 = p.rot_dims / 2;
  const int items = int((n - 1 - int(blockIdx.x)) / int(gridDim.x) + 1) * nst;  // grid <= n
  auto row_of = [&](int it) { return int(blockIdx.x) + (it / nst) * int(gridDim.x); };
  // Item it's slot rows into buffer (it & 1): 16-byte copies, word e of a slot row where
  // rope_ix puts its first element.
  auto load = [&](int it) {
    const int r = row_of(it), s0 = (it % nst) * ws;
    float* buf = xs + (it & 1) * ws * D;
    const int n4 = min(ws, slots - s0) * D4;
    for (int i = tid; i < n4; i += kRopeThreads) {
      const int ls = i / D4, e = i % D4, hs = s0 + ls;
      const float* x = hs < p.q_heads         ? q + (size_t(r) * p.q_heads + hs) * D
                       : hs < p.q_heads + hkv ? k + (size_t(r) * hkv + hs - p.q_heads) * D
                                              : vin + (size_t(r) * hkv + hs - p.q_heads - hkv) * D;
      cp_async16(buf + rope_ix<D>(ls, 4 * e), x + 4 * e);
    }
    cp_async_commit();
  };
  load(0);
  for (int i = tid; i < h2; i += kRopeThreads) th[i] = rope_theta(i, p.rot_dims, p.base);  // read by thread i only
  for (int it = 0; it < items; ++it) {
    if (it + 1 < items) load(it + 1);  // its buffer was last read before the previous item's final barrier
    const int r = row_of(it), s0 = (it % nst) * ws, cnt = min(ws, slots - s0);
    const RopeRow row = rows[r];
    const KvView v = views[row.lane];
    if (it % nst == 0)  // a new row: its table (the previous row's readers passed the last barrier)
      for (int i = tid; i < h2; i += kRopeThreads) rope_cos_sin_theta(row.pos, th[i], &tc[i], &tsn[i]);
    if (it + 1 < items)
      cp_async_wait<1>();  // this item's copies landed (the next item's may still fly)
    else
      cp_async_wait<0>();
    __syncthreads();
    float* const buf = xs + (it & 1) * ws * D;
    // Rotation: the stage's q slots to q_out, its K slots in place (a lane owns a pair).
    for (int ls = warp; ls < cnt; ls += kRopeThreads / 32) {
      const int hs = s0 + ls;
      if (hs >= p.q_heads + hkv) break;  // V: stored unrotated
      if (hs < p.q_heads) {
        float* o = q_out + (size_t(r) * p.q_heads + hs) * D;
        for (int i = lane; i < h2; i += 32) {
          const float a = buf[rope_ix<D>(ls, i)], b = buf[rope_ix<D>(ls, i + h2)], c = tc[i], s = tsn[i];
          o[i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
          o[i + h2] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
        }
        for (int j = p.rot_dims + lane; j < D; j += 32) o[j] = buf[rope_ix<D>(ls, j)];
      } else {
        for (int i = lane; i < h2; i += 32) {
          const int ia = rope_ix<D>(ls, i), ib = rope_ix<D>(ls, i + h2);
          const float a = buf[ia], b = buf[ib], c = tc[i], s = tsn[i];
          buf[ia] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
          buf[ib] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
        }
      }
    }
    __syncthreads();
    // K and V: local slots kv0 .. cnt - 1, a thread per group of 32.
    const int kv0 = max(0, min(cnt, p.q_heads - s0));
    for (int t = tid; t < (cnt - kv0) * G; t += kRopeThreads) {
      const int ls = kv0 + t / G, g = t % G, hs = s0 + ls;
      const int kv = hs < p.q_heads + hkv ? 0 : 1, head = hs - p.q_heads - kv * hkv;
      q4_store_group(buf + ls * D + 32 * g, (ls * G + g) & 7, kv_row(v, p.layer, kv, head, row.slot) + 16 * g,
                     kv_scale(v, p.layer, kv, head, row.slot) + 2 * g);
    }
    __syncthreads();  // the stage is read before a later copy overwrites it
  }
}

// ---- rope_store_reg_kernel (bf16, fp8, q4): persistent blocks, rows in registers ----
// Block b takes rows b, b + grid, ..; a row's head slots (q heads, K, V) are split into
// warp steps: a step is one slot row (d 128: a float4 per lane; d 256: two), two (d 64) or
// four (d 32) slot rows, each lane holding four consecutive elements of one row. Warp w takes
// steps w, w + 8, .., kRegF4 / V of them per item (a row is one item when its steps fit:
// 48 slots of d 128). The item's inputs are read straight into registers, the next item's
// loads issued before this item is worked on (two register sets). Per step: the rotation
// (the twin's expressions, products and sums rounded one by one; the partner element
// through a per-warp shared row), then q to q_out as float4s, K and V in the cache format
// (the bytes of the twin's encode_row): bf16 RNE, four codes per lane; fp8 the row amax
// over the row's lanes (amax_step, order-free), fp8_code per element; q4 a group of 32 over
// eight lanes: butterflies h = 1, 2 in the lane, 4, 8, 16 across lanes (each element the
// twin's sum or difference), amax over the eight lanes, the group scale and nibbles.
// The row's cos / sin table: theta_i once per block, cos and sin of a row by separate
// threads (rope_cos_sin_theta), double-buffered in shared memory and computed for the next
// row while this row's last item is worked on.
template <int D, int NF>
struct RopeRegShape {
  static constexpr int V = D >= 128 ? D / 128 : 1;   // float4s per lane per slot row
  static constexpr int RW = D <= 128 ? 128 / D : 1;  // slot rows per warp step
  static constexpr int LPR = D / 4 / V;              // lanes per slot row
  static constexpr int K = NF / V > 0 ? NF / V : 1;  // warp steps per item (NF: float4 inputs per lane per item)
};

template <int D, Format F, int NF, int MINB>
__global__ void __launch_bounds__(kRopeThreads, MINB) rope_store_reg_kernel(const KvView* views, RopeParams p,
                                                                       const RopeRow* rows, int n, const float* q,
                                                                       const float* k, const float* vin,
                                                                       float* q_out) {
  using S = RopeRegShape<D, NF>;
  constexpr int V = S::V, RW = S::RW, LPR = S::LPR, K = S::K, NW = kRopeThreads / 32;
  __shared__ double th[kMaxHeadDim / 2];
  __shared__ float tc[2][kMaxHeadDim / 2], tsn[2][kMaxHeadDim / 2];
  __shared__ __align__(16) float scr[NW][128 * V];  // a warp's step: its slot rows, element j of row sub at sub * D + j
  const int hkv = views[0].lay.kv_heads;
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int qh = p.q_heads, slots = qh + 2 * hkv, steps = (slots + RW - 1) / RW, nch = (steps + NW * K - 1) / (NW * K);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, h2 = p.rot_dims / 2;
  const int sub = lane / LPR, el = lane % LPR;  // the lane's slot row in a step, its first float4 in the row
  const int items = ((n - 1 - int(blockIdx.x)) / int(gridDim.x) + 1) * nch;  // grid <= n
  auto row_of = [&](int it) { return int(blockIdx.x) + (it / nch) * int(gridDim.x); };
  auto slot_of = [&](int it, int kk) { return ((it % nch) * NW * K + warp + NW * kk) * RW + sub; };
  auto load = [&](int it, float4 (&x)[K][V]) {
    const int r = row_of(it);
#pragma unroll
    for (int kk = 0; kk < K; ++kk) {
      const int hs = slot_of(it, kk);
      if (hs < slots) {
        const float* src = hs < qh         ? q + (size_t(r) * qh + hs) * D
                           : hs < qh + hkv ? k + (size_t(r) * hkv + hs - qh) * D
                                           : vin + (size_t(r) * hkv + hs - qh - hkv) * D;
#pragma unroll
        for (int vv = 0; vv < V; ++vv) x[kk][vv] = __ldcs(reinterpret_cast<const float4*>(src) + el + LPR * vv);
      } else {
#pragma unroll
        for (int vv = 0; vv < V; ++vv) x[kk][vv] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
  };
  // The table of item it's row into buffer b (cos by threads 0 .. h2 - 1, sin by h2 .. 2 h2 - 1).
  auto table = [&](int it, int b) {
    const int64_t pos = rows[row_of(it)].pos;
    for (int t = tid; t < 2 * h2; t += kRopeThreads) {
      float c, s;
      if (t < h2) {
        rope_cos_sin_theta(pos, th[t], &c, &s);
        tc[b][t] = c;
      } else {
        rope_cos_sin_theta(pos, th[t - h2], &c, &s);
        tsn[b][t - h2] = s;
      }
    }
  };
  auto process = [&](int it, const float4 (&x)[K][V]) {
    const int r = row_of(it), tb = (it / nch) & 1;
    const RopeRow row = rows[r];
    const KvView view = views[row.lane];
    float* const sw = scr[warp];
#pragma unroll
    for (int kk = 0; kk < K; ++kk) {
      const int hs = slot_of(it, kk);
      if (hs - sub >= slots) break;  // the warp's steps are done (warp-uniform)
      const int kind = hs >= slots ? 3 : hs < qh ? 0 : hs < qh + hkv ? 1 : 2;  // q, K, V, none
      float y[V][4];
#pragma unroll
      for (int vv = 0; vv < V; ++vv) reinterpret_cast<float4*>(sw)[lane + 32 * vv] = x[kk][vv];
      __syncwarp();
#pragma unroll
      for (int vv = 0; vv < V; ++vv) {
        const float xa[4] = {x[kk][vv].x, x[kk][vv].y, x[kk][vv].z, x[kk][vv].w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int j = 4 * (el + LPR * vv) + c;
          if (kind < 2 && j < p.rot_dims) {
            const bool lo = j < h2;
            const int i = lo ? j : j - h2;
            const float a = xa[c], b = sw[sub * D + (lo ? j + h2 : i)], cs = tc[tb][i], sn = tsn[tb][i];
            y[vv][c] = lo ? __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn)) : __fadd_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
          } else {
            y[vv][c] = xa[c];
          }
        }
      }
      __syncwarp();  // the shared row is read before the next step writes it
      if (kind == 0) {
#pragma unroll
        for (int vv = 0; vv < V; ++vv)
          reinterpret_cast<float4*>(q_out + (size_t(r) * qh + hs) * D)[el + LPR * vv] =
              make_float4(y[vv][0], y[vv][1], y[vv][2], y[vv][3]);
      }
      if (hs - sub + RW <= qh) continue;  // a step of q rows only (warp-uniform); else every lane joins the shuffles below
      const bool st = kind == 1 || kind == 2;
      const int kv = kind == 2 ? 1 : 0, head = hs - qh - kv * hkv;
      if constexpr (F == Format::bf16) {
        if (st) {
          uint8_t* row_b = kv_row(view, p.layer, kv, head, row.slot);
#pragma unroll
          for (int vv = 0; vv < V; ++vv) {
            const uint32_t w0 = uint32_t(bf16_from_float(y[vv][0])) | (uint32_t(bf16_from_float(y[vv][1])) << 16);
            const uint32_t w1 = uint32_t(bf16_from_float(y[vv][2])) | (uint32_t(bf16_from_float(y[vv][3])) << 16);
            uint8_t* o = row_b + 8 * (el + LPR * vv);
            if ((reinterpret_cast<uintptr_t>(o) & 7u) == 0) {
              *reinterpret_cast<uint2*>(o) = make_uint2(w0, w1);
            } else {
              memcpy(o, &w0, 4);
              memcpy(o + 4, &w1, 4);
            }
          }
        }
      } else if constexpr (F == Format::fp8) {
        float amax = 0.0f;
#pragma unroll
        for (int vv = 0; vv < V; ++vv)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
#ifdef KC_PLANT_FP8_STORE_AMAX_OFF_BY_ONE  // planted bug (test builds only): element d - 1 missed
            if (4 * (el + LPR * vv) + c == D - 1) continue;
#endif
            amax = amax_step(amax, y[vv][c]);
          }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
        if (st) {
          const float scale = fp8_row_scale(amax);
          uint8_t* row_b = kv_row(view, p.layer, kv, head, row.slot);
#pragma unroll
          for (int vv = 0; vv < V; ++vv) {
            uint32_t w = 0;
#pragma unroll
            for (int c = 0; c < 4; ++c) w |= uint32_t(fp8_code(y[vv][c], scale)) << (8 * c);
#ifdef KC_PLANT_FP8_STORE_ZEROS  // planted bug (test builds only): zero codes and scale
            w = 0;
#endif
            uint8_t* o = row_b + 4 * (el + LPR * vv);
            if ((reinterpret_cast<uintptr_t>(o) & 3u) == 0)
              *reinterpret_cast<uint32_t*>(o) = w;
            else
              memcpy(o, &w, 4);
          }
          if (el == 0) {
#ifdef KC_PLANT_FP8_STORE_ZEROS
            memset(kv_scale(view, p.layer, kv, head, row.slot), 0, 4);
#else
            memcpy(kv_scale(view, p.layer, kv, head, row.slot), &scale, 4);
#endif
          }
        }
      } else {  // q4: lanes 8 m .. 8 m + 7 of a row hold a group (word w = lane & 7: elements 4 w .. 4 w + 3)
        const int w = lane & 7;
        uint8_t* codes = st ? kv_row(view, p.layer, kv, head, row.slot) : nullptr;
        uint8_t* scales = st ? kv_scale(view, p.layer, kv, head, row.slot) : nullptr;
#pragma unroll
        for (int vv = 0; vv < V; ++vv) {
          float* t = y[vv];
#pragma unroll
          for (int h = 1; h < 4; h <<= 1)  // in the lane: element c pairs with c ^ h
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              if (c & h) continue;
              const float a = t[c], b = t[c + h];
              t[c] = a + b;
              t[c + h] = a - b;
            }
#pragma unroll
          for (int h = 4; h < 32; h <<= 1)  // across lanes: word w pairs with w ^ (h / 4)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              const float o = __shfl_xor_sync(0xFFFFFFFFu, t[c], h / 4);
#ifdef KC_PLANT_Q4_BUTTERFLY_SIGN
              t[c] = (w & (h / 4)) ? (h == 8 ? t[c] - o : o - t[c]) : t[c] + o;  // planted bug (test builds only)
#else
              t[c] = (w & (h / 4)) ? o - t[c] : t[c] + o;
#endif
            }
          float amax = 0.0f;
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            t[c] = t[c] * 0.125f;
            amax = amax_step(amax, t[c]);
          }
#pragma unroll
          for (int o = 1; o < 8; o <<= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
          if (st) {
            uint16_t hsc = kQ4ScaleNaN;
            uint32_t b2 = 0x0101u * kQ4PoisonCodes;
            if (q4_finite(amax)) {
              hsc = q4_group_scale(amax);
              const float sc = fp16_to_float(hsc);
              b2 = sc == 0.0f ? 0x0101u * kQ4ZeroCodes
                              : uint32_t(q4_nibble_of(t[0], sc) | (q4_nibble_of(t[1], sc) << 4)) |
                                    (uint32_t(q4_nibble_of(t[2], sc) | (q4_nibble_of(t[3], sc) << 4)) << 8);
            }
            const int e = el + LPR * vv;  // the lane's float4: code bytes 2 e, 2 e + 1; group e / 8
            const uint16_t b16 = uint16_t(b2);
            if ((reinterpret_cast<uintptr_t>(codes + 2 * e) & 1u) == 0)
              *reinterpret_cast<uint16_t*>(codes + 2 * e) = b16;
            else
              memcpy(codes + 2 * e, &b16, 2);
            if (w == 0) memcpy(scales + 2 * (e / 8), &hsc, 2);
          }
        }
      }
    }
  };
  for (int i = tid; i < h2; i += kRopeThreads) th[i] = rope_theta(i, p.rot_dims, p.base);
  float4 xa[K][V], xb[K][V];
  load(0, xa);
  __syncthreads();  // th
  table(0, 0);
  __syncthreads();
  // Item it works on one register set while the other's loads (item it + 1) are in flight.
  // The barrier after each item: the next row's table (written during this row's last item
  // into the buffer the row before last read) is complete before it is read.
  for (int it = 0; it < items; it += 2) {
    if (it + 1 < items) load(it + 1, xb);
    process(it, xa);
    if (it + 1 < items && (it + 1) % nch == 0) table(it + 1, ((it + 1) / nch) & 1);
    __syncthreads();
    if (it + 1 >= items) break;
    if (it + 2 < items) load(it + 2, xa);
    process(it + 1, xb);
    if (it + 2 < items && (it + 2) % nch == 0) table(it + 2, ((it + 2) / nch) & 1);
    __syncthreads();
  }
}

// Blocks per SM of rope_store_q4_kernel<D> at a dynamic shared size, per device: asked once
// (the launch path stays free of the occupancy query). The kernel's dynamic shared limit is
// raised once to the most any launch asks (kRopeQ4SmemMax), never lowered.
struct RopeOcc {
  const void* kern;
  int dev;
  size_t smem;
  int per_sm;
};
static Status rope_blocks_per_sm(const void* kern, size_t smem, bool raise_limit, int* per_sm, int* sms) {
  static std::mutex mu;
  static std::vector<RopeOcc> known;  // smem 0: the limit is raised on that device
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  KC_CUDA_TRY(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
  std::lock_guard<std::mutex> lock(mu);
  bool raised = !raise_limit;
  for (const RopeOcc& o : known) {
    if (o.kern != kern || o.dev != dev) continue;
    raised = raised || (o.smem == 0 && o.per_sm == 0);
    if (o.smem == smem && o.per_sm != 0) {
      *per_sm = o.per_sm;
      return Status::Ok();
    }
  }
  if (!raised) {
    KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kRopeQ4SmemMax)));
    known.push_back({kern, dev, 0, 0});
  }
  KC_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, kern, kRopeThreads, smem));
  if (*per_sm < 1) return Status::Error("rope_store: the q4 kernel does not fit on an SM");
  known.push_back({kern, dev, smem, *per_sm});
  return Status::Ok();
}

Status launch_rope_store(const KvView* views, Format fmt, int hkv, int d, const RopeParams& p, const RopeRow* rows,
                         int n, const float* q, const float* k, const float* v, float* q_out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  if ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) & 15u)
    return Status::Error("rope_store: q, k and v must start 16-byte aligned (they are read 16 bytes at a time)");
  const int slots = (q ? p.q_heads : 0) + 2 * hkv;
  static const char* var = std::getenv("KC_MOVES_VARIANT");  // EXPERIMENT ONLY (removed before the final commit)
  const bool old = var && std::strstr(var, "ropeold");
  if (!old && fmt != Format::mxfp4) {
    void (*kern)(const KvView*, RopeParams, const RopeRow*, int, const float*, const float*, const float*, float*) =
        nullptr;
    with_format(fmt, [&](auto codec) {
      constexpr Format F = decltype(codec)::kFormat;
      if constexpr (F != Format::mxfp4) {
        const bool v34 = var && std::strstr(var, "rope34");
        switch (d) {
          case 32: kern = v34 ? rope_store_reg_kernel<32, F, 3, 4> : rope_store_reg_kernel<32, F, 6, 2>; break;
          case 64: kern = v34 ? rope_store_reg_kernel<64, F, 3, 4> : rope_store_reg_kernel<64, F, 6, 2>; break;
          case 128: kern = v34 ? rope_store_reg_kernel<128, F, 3, 4> : rope_store_reg_kernel<128, F, 6, 2>; break;
          case 256: kern = v34 ? rope_store_reg_kernel<256, F, 3, 4> : rope_store_reg_kernel<256, F, 6, 2>; break;
        }
      }
    });
    if (!kern) return Status::Error("rope_store: head_dim must be 32, 64, 128 or 256");
    int per_sm = 0, sms = 0;
    KC_RETURN_IF_ERROR(rope_blocks_per_sm(reinterpret_cast<const void*>(kern), 0, false, &per_sm, &sms));
    static const char* ps = std::getenv("KC_ROPE_PERSM");  // EXPERIMENT ONLY
    if (ps && std::atoi(ps) > 0) per_sm = std::min(per_sm, std::atoi(ps));
    const int grid = int(std::min<int64_t>(n, int64_t(per_sm) * sms));
    kern<<<unsigned(grid), kRopeThreads, 0, s>>>(views, p, rows, n, q, k, v, q_out);
    KC_LAUNCH_CHECK("rope_store_reg_kernel");
    return Status::Ok();
  }
  if (fmt == Format::q4) {
    void (*kern)(const KvView*, RopeParams, const RopeRow*, int, const float*, const float*, const float*, float*,
                 int) = nullptr;
    switch (d) {
      case 32: kern = rope_store_q4_kernel<32>; break;
      case 64: kern = rope_store_q4_kernel<64>; break;
      case 128: kern = rope_store_q4_kernel<128>; break;
      case 256: kern = rope_store_q4_kernel<256>; break;
    }
    if (!kern) return Status::Error("rope_store: head_dim must be 32, 64, 128 or 256");
    // The stages: every head slot of a row when they fit a buffer (kRopeBufFloats), two buffers.
    const int ws = std::min(slots, kRopeBufFloats / d);
    const size_t smem = 2 * size_t(ws) * d * sizeof(float);
    int per_sm = 0, sms = 0;
    KC_RETURN_IF_ERROR(rope_blocks_per_sm(reinterpret_cast<const void*>(kern), smem, true, &per_sm, &sms));
    const int grid = int(std::min<int64_t>(n, int64_t(per_sm) * sms));
    kern<<<unsigned(grid), kRopeThreads, smem, s>>>(views, p, rows, n, q, k, v, q_out, ws);
    KC_LAUNCH_CHECK("rope_store_q4_kernel");
    return Status::Ok();
  }
  // The stage: every head slot of a row, up to kRopeStageFloats floats.
  const int ws = std::min(slots, kRopeStageFloats / d);
  const size_t stage = size_t(ws) * d * sizeof(float);
  void (*kern)(const KvView*, RopeParams, const RopeRow*, const float*, const float*, const float*, float*, int) =
      nullptr;
  with_format(fmt, [&](auto codec) {
    constexpr Format F = decltype(codec)::kFormat;
    if constexpr (F != Format::q4) {
      switch (d) {
        case 32: kern = rope_store_kernel<32, F>; break;
        case 64: kern = rope_store_kernel<64, F>; break;
        case 128: kern = rope_store_kernel<128, F>; break;
        case 256: kern = rope_store_kernel<256, F>; break;
      }
    }
  });
  if (!kern) return Status::Error("rope_store: head_dim must be 32, 64, 128 or 256");
  if (stage > 48 * 1024) KC_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(stage)));
  kern<<<unsigned(n), kRopeThreads, stage, s>>>(views, p, rows, q, k, v, q_out, ws);
  KC_LAUNCH_CHECK("rope_store_kernel");
  return Status::Ok();
}
}  // namespace kc
