// Rope store kernels. Host twin: rope_store_host (attention/twin.cpp); contract: qwen-pages;
// bench: bench rope-store. launch_rope_store picks one by format and head_dim (measured on the
// H200, bench rope-store; reports/h200/issue20-rope3, -rope5, -rope6, -rope7, -rope8):
// - bf16: rope_store_ring_kernel (MODE 0, 2 data stages);
// - fp8, q4 at d 128: rope_store_ring_kernel (MODE 247: the stage freed early, 2 data stages,
//   two table warps that load a batch ahead, the consumers' per-block plan;
//   reports/h200/issue20-rope10, -round9, receipts-s47);
// - bf16, fp8, q4 at d 128 where the kernel's stores fit in the L2: the same with the inputs read
//   evict-first (MODE bit 8; reports/h200/issue20-rope9), through 3 (bf16) or 4 (fp8, q4) data
//   stages (kRopeRingStagesL2, kRopeRingQuantStagesL2; reports/h200/receipts-s48);
// - fp8, q4 at d 256: rope_store_ring_kernel (MODE 3, kRopeRingQuantStages data stages);
// - fp8, q4 at d 32 / 64: rope_store_tma_kernel;
// - the persistent kernels need rot_dims % 8 == 0, q_out 16-byte aligned and their stages in a
//   block's shared memory; otherwise, and for mxfp4, rope_store_kernel.
//
// rope_store_tma_kernel (fp8, q4 at d 32 / 64): persistent, one block per SM of 16 consumer
//   warps, a loader warp and a table warp; block b takes rows b, b + grid, .. through a
//   ring of kRopeTmaStages stages (a row each):
//   - the loader (one lane) brings a row's fp32 q, k and v rows (three contiguous pieces)
//     into a stage by bulk copies (cp.async.bulk, the tensor memory accelerator), their
//     bytes counted on the stage's full barrier (mbarrier);
//   - the table warp writes the stage's cos / sin table (rope_cos_sin_theta of the row's pos
//     for pairs 0 .. rot_dims / 2 - 1: float64 angle pos * theta_i, rounded once to fp32, with
//     theta_i = rope_theta once per block) and the row's K / V code and scale addresses
//     (kv_row / kv_scale), then arrives on the full barrier: the float64 table and the page
//     table loads are done ahead, off the consumers' path;
//   - the consumers wait for the full barrier; a slot (head row) per LPR = min(32, D / 4)
//     lanes, lane lr holding elements 4 (lr + LPR c) .. + 3: q and K are rotated (neox
//     pairing, the twin's expressions with each fp32 product and sum rounded on its own:
//     __fmul_rn / __fadd_rn / __fsub_rn, no contraction), q goes to q_out [n][Hq][d] with
//     16-byte stores, K and V (V unrotated) to the row's slot by rope_kv_store (the bytes
//     of the format's encode_row: fp8 the row's amax by shuffles, codes by division; q4
//     hadamard32_fwd's butterflies inside the lane and by shuffles over a group's 8 lanes,
//     then the group's amax, fp16 scale and nibbles); then they arrive on the stage's empty
//     barrier, which the loader and the table warp wait for before they fill it again.
//   From 64 MiB up (d 128): fp8 0.60-0.72 and q4 0.58-0.70 of the copy ceiling; the ring
//   kernel's batched table and MODE 3 took fp8 / q4 at d 128 to 0.69-0.91 and 0.65-0.86
//   (issue20-rope6, same call): the per-row table chain (rows, views, float64 cos / sin, page
//   table) of one warp set this kernel's pace.
//
// rope_store_kernel (bf16, mxfp4, and fp8 / q4 where the kernel above does not apply): block
//   per row, 256 threads (8 warps). Head slots are the row's q heads, then its kv heads' K,
//   then their V. The row's cos / sin table (rope_cos_sin) is computed once per row into
//   shared memory, while the row's inputs (up to kRopeStageFloats at a time) come into
//   shared memory with 16-byte loads, several in flight per thread. Then warp w takes slots
//   w, w + 8, ..: q and k are rotated (the twin's expressions, c and s from the table), q
//   goes to q_out, K and V are stored through the format's Codec<F>::store_warp (codecs/).
//   bf16: 0.70-0.78 of the copy ceiling from 64 MiB up.
// Every cache address comes from kv_row / kv_scale; no stride arithmetic here.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/attention/launch.h"
#include "kernels/attention/ptx.cuh"
#include "kernels/attention/rows.h"

namespace kc {

constexpr int kRopeThreads = 256;
constexpr int kRopeStageFloats = 16384;  // rope_store_kernel: 64 KiB, the head slots staged at a time (all of them up to 64 at d 256)
constexpr int kRopeLoads = 8;            // rope_store_kernel: 16-byte loads in flight per thread while staging
constexpr int kRopeTmaConsumerWarps = 16;  // rope_store_tma_kernel: consumer warps (then the loader, then the table warp(s))
constexpr int kRopeTmaThreads = 32 * (kRopeTmaConsumerWarps + 2);
constexpr int kRopeTmaStages = 2;        // rope_store_tma_kernel: rows in a block's ring (2 beat 3 to 6: issue20-rope3.md)

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

// ---- rope_store_tma_kernel ----
// Shared memory of one block: the stages' barriers, theta_i (float64, once per block), then
// per stage the row's inputs (slots x D floats), its cos / sin table and its K / V row
// addresses. The host sizes it with the same function.
struct RopeTmaLayout {
  uint32_t theta_off, stage_off, stage_bytes, x_bytes, tab_off, ptr_off;
};
KC_HD uint32_t rope_align16(uint32_t b) { return (b + 15u) & ~15u; }
KC_HD RopeTmaLayout rope_tma_layout(int slots, int d, int h2, int hkv, int stages) {
  RopeTmaLayout L;
  L.theta_off = rope_align16(uint32_t(2 * stages) * 8u);
  L.stage_off = L.theta_off + rope_align16(uint32_t(h2) * 8u);
  L.x_bytes = uint32_t(slots) * uint32_t(d) * 4u;
  L.tab_off = rope_align16(L.x_bytes);                           // tc[h2], then ts[h2]
  L.ptr_off = L.tab_off + rope_align16(uint32_t(2 * h2) * 4u);   // codes[2 hkv], then scales[2 hkv]
  L.stage_bytes = L.ptr_off + rope_align16(uint32_t(4 * hkv) * 8u);
  return L;
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "RS_WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra RS_WAIT_%=;\n}\n" ::"r"(smem_addr(b)),
      "r"(parity)
      : "memory");
}
// One bulk copy (the tensor memory accelerator) of `bytes` (a multiple of 16, both ends
// 16-byte aligned) from global to shared memory, completing on barrier b.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(b))
               : "memory");
}
// bulk_load with an L2 evict-first policy on the source's lines (read once, dead after).
__device__ __forceinline__ void bulk_load_ef(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  const uint64_t pol = l2_policy_evict_first();
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(b)), "l"(pol)
      : "memory");
}

// Four consecutive elements j .. j + 3 of a slot row (x: the row in shared memory), rotated
// when rotate (neox pairing: the twin's expressions, each product and sum rounded on its own).
// h2 % 4 == 0, so the four share their half and their partner's four are one 16-byte word.
// SEL = false: the partner and the table are loaded only where the four are rotated. SEL = true
// (the grouped consumer): without branches, every load issued (the table at a safe index where
// the four are not rotated) and the result selected, y = 0 where !on; the same values.
template <bool SEL = false>
__device__ __forceinline__ void rope4(const float* x, const float* tc, const float* ts, int j, int h2, int rot,
                                      bool rotate, float y[4], bool on = true) {
  const float4 a = *reinterpret_cast<const float4*>(x + j);
  const float aa[4] = {a.x, a.y, a.z, a.w};
  const bool rr = rotate && j < rot;
  if constexpr (!SEL) {
    y[0] = a.x, y[1] = a.y, y[2] = a.z, y[3] = a.w;
    if (!rr) return;
  }
  const bool lo = j < h2;
  const int i = lo ? j : j - h2;
  const float4 b = *reinterpret_cast<const float4*>(x + (lo ? j + h2 : i));
  const int ti = SEL && !rr ? 0 : i;
  const float4 c = *reinterpret_cast<const float4*>(tc + ti), s = *reinterpret_cast<const float4*>(ts + ti);
  const float bb[4] = {b.x, b.y, b.z, b.w}, cc[4] = {c.x, c.y, c.z, c.w}, ss[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float p = __fmul_rn(aa[e], cc[e]), q = __fmul_rn(bb[e], ss[e]);
    const float rv = lo ? __fsub_rn(p, q) : __fadd_rn(p, q);  // y_i = x_i c - x_{i+h} s; y_{i+h} = x_{i+h} c + x_i s
    y[e] = !SEL ? rv : !on ? 0.0f : (rr ? rv : aa[e]);
  }
}

// The K / V row store of the lanes of one row (LPR lanes; lane lr holds elements
// 4 (lr + LPR c) .. + 3 in y[4 c ..], c < CPL): encode_row's bytes of the format (fp8, q4), by
// shuffles among the row's lanes. Every lane of the warp calls it (the shuffles); `on`
// lanes store.
// The q4 butterflies across lanes are one fma(-+1, v, o) each (the add's or subtract's bytes),
// and with kRopeFastEncode the nibbles come from q4_nibble_magic: on an H100 (same call against
// the add / subtract / select and q4_nibble_of, three rounds, reports/h200/receipts-s46) q4 rows
// 0.990-0.994x the time at 64 MiB, 0.968-0.983x at 16 MiB, bytes equal on every row. A second
// round (the amax by max.NaN, the nibbles by byte permutes, each quotient by one reciprocal and
// Markstein's correction, the scale's amax / 7 by q4_scale_quotient): 0.986-0.992x at 64 MiB on
// an H100 (reports/h200/receipts-s47, call 1).
// MODE bit 1 (kRopeFastEncode): the same bytes by cheaper instructions. The amax is the max of
// the magnitudes' bits (non-negative floats order as their bits, and a NaN's bits lie above
// +Inf's: fp8_row_scale / q4_finite only tell a finite amax from a non-finite one, so the
// scale and codes are amax_step's), over the row by one redux.sync where a row is the warp;
// fp8 codes two at a time (the same cvt.rn.satfinite.e4m3x2, both halves used); the q4 scale
// through the hardware fp16 conversions (cvt.rn.f16.f32 is IEEE round to nearest even, so
// fp16_from_float's bits for the finite non-negative scale; fp16 -> fp32 is exact).
// MODE bit 4 (kRopeEarlyFree, with kRopeIlp): a consumer lane arrives on the stage's empty
// barrier right after its last loads from the stage (rope_consume_row_ilp), not at the row's
// end: its rotation's results are in registers, so the loader refills the stage while the
// warp's q stores and K / V encodes run.
// MODE bit 8 (kRopeEvictFirst, rope_store_ring_kernel): the loader's bulk copies read q, k and v
// with an L2 evict-first policy, so the L2 keeps the kernel's stores (q_out, K / V) rather than
// its dead inputs; launch_rope_store sets it at d 128 where those stores fit in the L2. On the
// H200 (reports/h200/issue20-rope9, same call against main, the same stored bytes): 0.97-0.99x
// the time at 64 MiB (8 of 9 rows; q4 p16 1.005x), 0.98-1.00x at 1 MiB, where the stores fit;
// 1.01-1.09x from 256 MiB up, where they do not (so not set there).
constexpr int kRopeFastEncode = 1, kRopeIlp = 2, kRopeEarlyFree = 4, kRopeEvictFirst = 8;
// MODE bits 16 / 32 / 64 (rope_store_ring_kernel), the table warp's pace; launch_rope_store sets
// all three for fp8 / q4 at d 128, whose consumers wait on the table warp where bf16's do not
// (reports/h200/issue20-rope10: on pages of 16 the warp's page-table load for kv_pos missed the
// L1 on every batch and waited for an L2 round trip right after its float64 cos / sin loop).
// kRopeTabEarly: each table lane loads its row of the next batch a batch ahead, and the batch's
// view and its page-table line (an L1 prefetch of the entry kv_pos reads) before the batch's
// cos / sin, so their latency hides behind the float64 work. kRopeTabIlp: the cos / sin loop
// unrolled 4 (else 2). kRopeTwoTables: two table warps take alternate batches (the block has one
// warp more: rope_ring_threads), and the consumers' start computes the first two batches' cos /
// sin (512 pairs at rot_dims 128: one per consumer thread, as the first batch's 256 took one
// round), so each table warp meets named barrier 1 (theta) after its first batch, at the one
// bar.sync of the table code. The stored bytes are the same in every mode. On the H200 (same
// call against main, three rounds interleaved, reports/h200/issue20-round9.md): fp8 / q4 from
// 64 MiB up 0.92-1.01x the time (fp8 9 of 9 rows >= 0.85 of the copy ceiling, was 8; q4 6, was
// 4), 1 MiB 1.03x.
constexpr int kRopeTabEarly = 16, kRopeTabIlp = 32, kRopeTwoTables = 64;
constexpr int rope_ring_threads(int mode) { return kRopeTmaThreads + ((mode & kRopeTwoTables) ? 32 : 0); }
// kRopeTabEarly: the L1 line of the page-table entry that kv_pos reads for position pos (a hint;
// windows have no page table).
__device__ __forceinline__ void rope_prefetch_page(const KvView& v, int pos) {
  if (v.pt)
    asm volatile("{\n .reg .u64 g;\n cvta.to.global.u64 g, %0;\n prefetch.global.L1 [g];\n}\n" ::"l"(
        v.pt + uint32_t(pos) / uint32_t(v.ptok)));
}
__device__ __forceinline__ uint32_t rope_mag_bits(float x) { return float_bits(x) & 0x7FFFFFFFu; }
// max(a, b), a NaN if either is one (max.NaN.f32, sm_80 and newer).
__device__ __forceinline__ float rope_max_nan(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
template <int D, Format F, int MODE = 0>
__device__ __forceinline__ void rope_kv_store(float (&y)[4 * (D >= 128 ? D / 128 : 1)], uint8_t* codes, uint8_t* scales,
                                              int lr, bool on) {
  constexpr int LPR = D / 4 < 32 ? D / 4 : 32, CPL = D >= 128 ? D / 128 : 1;
  if constexpr (F == Format::bf16) {  // RNE, 8 bytes a lane
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int j = 4 * (lr + LPR * c);
      const uint32_t w0 = uint32_t(bf16_from_float(y[4 * c])) | (uint32_t(bf16_from_float(y[4 * c + 1])) << 16);
      const uint32_t w1 = uint32_t(bf16_from_float(y[4 * c + 2])) | (uint32_t(bf16_from_float(y[4 * c + 3])) << 16);
      if (on) *reinterpret_cast<uint2*>(codes + 2 * j) = make_uint2(w0, w1);
    }
    (void)scales;
  } else if constexpr (F == Format::fp8) {
    // f(v) for each of the lane's values that the row's amax takes
    auto each = [&](auto&& f) {
#pragma unroll
      for (int c = 0; c < CPL; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
#ifdef KC_PLANT_FP8_STORE_AMAX_OFF_BY_ONE  // planted bug (test builds only): element d - 1 missed
          if (4 * (lr + LPR * c) + e == D - 1) continue;
#endif
          f(y[4 * c + e]);
        }
    };
    float amax = 0.0f;
    if constexpr ((MODE & kRopeFastEncode) != 0) {
      uint32_t m = 0;
      each([&](float v) { m = max(m, rope_mag_bits(v)); });
      if constexpr (LPR == 32) {
        m = __reduce_max_sync(0xFFFFFFFFu, m);
      } else {
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
      }
      amax = bits_float(m);
    } else {
      each([&](float v) { amax = amax_step(amax, v); });
#pragma unroll
      for (int o = LPR / 2; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    }
    const float scale = fp8_row_scale(amax);
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int j = 4 * (lr + LPR * c);
      uint32_t w = 0;
      if constexpr ((MODE & kRopeFastEncode) != 0) {  // fp8_code's rules, the row-uniform ones once
        if (!fp8_finite(scale)) {
          w = 0x01010101u * kE4M3NaN;
        } else if (scale != 0.0f) {
          const float* v = y + 4 * c;
          const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[0] / scale, v[1] / scale), __NV_SATFINITE, __NV_E4M3);
          const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[2] / scale, v[3] / scale), __NV_SATFINITE, __NV_E4M3);
          w = (lo & 0xFFFFu) | (hi << 16);
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) w |= uint32_t(fp8_code(y[4 * c + e], scale)) << (8 * e);
      }
#ifdef KC_PLANT_FP8_STORE_ZEROS  // planted bug (test builds only): zero codes and scale
      w = 0;
#endif
      if (on) *reinterpret_cast<uint32_t*>(codes + j) = w;
    }
#ifdef KC_PLANT_FP8_STORE_ZEROS
    const float sc = 0.0f;
#else
    const float sc = scale;
#endif
    if (on && lr == 0) *reinterpret_cast<float*>(scales) = sc;
  } else {
    static_assert(F == Format::q4, "rope_kv_store: bf16, fp8 or q4");
    // Group g of 32 elements is 8 lanes' four (lane bits 0..2 at the butterfly stages h = 4,
    // 8, 16; h = 1, 2 inside the lane): hadamard32_fwd's adds and subtracts (a + b at i,
    // a - b at i + h), times 2^-3, then q4_encode_group_rotated's amax, scale and nibbles.
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      float* v = y + 4 * c;
#pragma unroll
      for (int h = 1; h < 4; h <<= 1)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (e & h) continue;
          const float a = v[e], b = v[e + h];
          v[e] = a + b;
          v[e + h] = a - b;
        }
#pragma unroll
      for (int m = 1; m < 8; m <<= 1) {
        // o - v where lane bit m is set, else v + o: one fma(-+1, v, o) (-v is exact, then one
        // rounding of the same sum; signed zeros and NaN as the add and subtract give them).
        const float sg = (lr & m) ? -1.0f : 1.0f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float o = __shfl_xor_sync(0xFFFFFFFFu, v[e], m);
          v[e] = __fmaf_rn(sg, v[e], o);
        }
      }
      float amax = 0.0f;
      if constexpr ((MODE & kRopeFastEncode) != 0) {
        // The largest magnitude by max.NaN of |v| (a NaN anywhere gives a NaN amax, as the
        // magnitudes' bits do, and q4_finite tells the two cases alone; finite, the same value).
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = v[e] * 0.125f;
        amax = rope_max_nan(rope_max_nan(fabsf(v[0]), fabsf(v[1])), rope_max_nan(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
        for (int m = 4; m > 0; m >>= 1) amax = rope_max_nan(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, m));
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          v[e] = v[e] * 0.125f;
          amax = amax_step(amax, v[e]);
        }
#pragma unroll
        for (int m = 4; m > 0; m >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, m));
      }
      uint16_t h = kQ4ScaleNaN;
      uint32_t w = 0x0101u * kQ4PoisonCodes;
      if (q4_finite(amax)) {
        float s;
        if constexpr ((MODE & kRopeFastEncode) != 0) {  // q4_group_scale's value, then fp16_to_float's
          const float qs = fminf(q4_scale_quotient(amax), kQ4ScaleMax);
#ifdef KC_PLANT_Q4_STORE_SCALE_RZ  // planted bug (test builds only): the scale rounded toward zero
          h = __half_as_ushort(__float2half_rz(qs));
#else
          h = __half_as_ushort(__float2half_rn(qs));
#endif
          s = __half2float(__ushort_as_half(h));
        } else {
          h = q4_group_scale(amax);
          s = fp16_to_float(h);
        }
        if (s == 0.0f) {
          w = 0x0101u * kQ4ZeroCodes;
        } else {
          w = 0;
          if constexpr ((MODE & kRopeFastEncode) != 0) {
            // The four sums' low bytes are the nibbles n0..n3 (1 .. 15): z = [n0, n1, n2, n3]
            // by byte permutes, z | z >> 4 holds n0 | n1 << 4 in byte 0 and n2 | n3 << 4 in
            // byte 2, and one more permute packs those two bytes.
            const float r = __frcp_rn(s);
            const uint32_t lo = __byte_perm(q4_magic_bits_recip(v[0], s, r), q4_magic_bits_recip(v[1], s, r), 0x4040u);
            const uint32_t hi = __byte_perm(q4_magic_bits_recip(v[2], s, r), q4_magic_bits_recip(v[3], s, r), 0x4040u);
            const uint32_t z = __byte_perm(lo, hi, 0x5410u);
            w = __byte_perm(z | (z >> 4), 0u, 0x4420u);
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) w |= uint32_t(q4_nibble_of(v[e], s)) << (4 * e);  // element 2i low, 2i + 1 high
          }
        }
      }
      const int ch = lr + LPR * c;  // elements 4 ch .. 4 ch + 3: code bytes 2 ch, 2 ch + 1
      if (on) *reinterpret_cast<uint16_t*>(codes + 2 * ch) = uint16_t(w);
      if (on && (ch & 7) == 0) *reinterpret_cast<uint16_t*>(scales + 2 * (ch / 8)) = h;
    }
  }
}

// Persistent blocks (one per SM), block b taking rows b, b + grid, ..; one row is one stage.
// Warps 0 .. NCW - 1 (NCW = kRopeTmaConsumerWarps) consume, warp NCW loads (one lane: the row's
// q, k and v pieces by three bulk copies into the stage), warp NCW + 1 tabulates (the row's
// cos / sin for pairs 0 .. h2 - 1 by rope_cos_sin_theta with theta_i from rope_theta once
// per block, and the row's K / V code and scale addresses by kv_row / kv_scale) up to
// `stages` rows ahead. A stage is full when its bytes landed and the table warp arrived;
// empty when every consumer lane arrived. Consumers: a row's q slots in groups of RPW (a
// slot per LPR lanes, lane lr holding elements 4 (lr + LPR c) .. + 3), rotated and stored
// to q_out with 16-byte stores; then its K and V slots (K rotated) by rope_kv_store.
// rope_store_tma_kernel's theta_i (i < h2), by the consumer warps while the loader already
// copies; the table warp waits for them at named barrier 1 (consumers and table warp).
__device__ __forceinline__ void rope_theta_table(double* th, int h2, const RopeParams& p, int warp, int tid) {
  constexpr int ncw = kRopeTmaConsumerWarps;
  if (warp < ncw)
    for (int i = tid; i < h2; i += 32 * ncw) th[i] = rope_theta(i, p.rot_dims, p.base);
  asm volatile("bar.sync 1, %0;\n" ::"r"(32 * (ncw + 1)) : "memory");
}

// The persistent kernels' loader: row r's q, k and v (hq, hkv, hkv heads of D floats) into a
// stage by bulk copies that complete on the stage's full barrier (its expected bytes first).
// EF: the copies with an L2 evict-first policy (bulk_load_ef).
template <int D, bool EF = false>
__device__ __forceinline__ void rope_load_row(float* x, const float* q, const float* k, const float* vin, int r, int hq,
                                              int hkv, uint64_t* full) {
  auto load = [&](void* dst, const void* src, uint32_t bytes) {
    if constexpr (EF) bulk_load_ef(dst, src, bytes, full);
    else bulk_load(dst, src, bytes, full);
  };
  mbar_arrive_tx(full, uint32_t(hq + 2 * hkv) * D * 4u);
  if (hq) load(x, q + size_t(r) * hq * D, uint32_t(hq) * D * 4u);
  load(x + hq * D, k + size_t(r) * hkv * D, uint32_t(hkv) * D * 4u);
  load(x + (hq + hkv) * D, vin + size_t(r) * hkv * D, uint32_t(hkv) * D * 4u);
}

// A rotated q head h of row r to q_out [n][hq][D], 16 bytes a store (lane lr holds elements
// 4 (lr + LPR c) .. + 3 in y[4 c ..], c < CPL).
template <int D>
__device__ __forceinline__ void rope_store_q(float* q_out, int r, int hq, int h, int lr, const float* y) {
  constexpr int LPR = D / 4 < 32 ? D / 4 : 32, CPL = D >= 128 ? D / 128 : 1;
  float* o = q_out + (size_t(r) * hq + h) * D;
#pragma unroll
  for (int c = 0; c < CPL; ++c)
    *reinterpret_cast<float4*>(o + 4 * (lr + LPR * c)) = make_float4(y[4 * c], y[4 * c + 1], y[4 * c + 2], y[4 * c + 3]);
}

// One staged row's consumer work in the persistent kernels: warp w of the ncw consumers takes
// groups w, w + ncw, ... of RPW heads: q heads first (rotated, stored as float), then the K / V
// slots (rotated, encoded and stored by rope_kv_store). x is the row's stage (q, k, v), tc / ts
// its cos / sin, ptr its K / V code addresses then scale addresses.
template <int D, Format F, int MODE = 0>
__device__ __forceinline__ void rope_consume_row(const float* x, const float* tc, const float* ts, uint8_t* const* ptr,
                                                 int r, int hq, int hkv, int h2, int rot, float* q_out, int warp,
                                                 int lane) {
  constexpr int LPR = D / 4 < 32 ? D / 4 : 32, RPW = 32 / LPR, CPL = D >= 128 ? D / 128 : 1;
  constexpr int ncw = kRopeTmaConsumerWarps;
  const int lr = lane % LPR, sub = lane / LPR;
  const int qg = (hq + RPW - 1) / RPW, kvg = (2 * hkv + RPW - 1) / RPW;
    for (int g = warp; g < qg + kvg; g += ncw) {
      if (g < qg) {
        const int h = g * RPW + sub;
        if (h < hq) {
          float y[4 * CPL];
#pragma unroll
          for (int c = 0; c < CPL; ++c) rope4(x + h * D, tc, ts, 4 * (lr + LPR * c), h2, rot, true, y + 4 * c);
          rope_store_q<D>(q_out, r, hq, h, lr, y);
        }
      } else {
        const int t = (g - qg) * RPW + sub;  // K slot t < hkv, V slot t - hkv
        const bool on = t < 2 * hkv;
        float y[4 * CPL];
#pragma unroll
        for (int c = 0; c < CPL; ++c) {
          if (on) {
            rope4(x + (hq + t) * D, tc, ts, 4 * (lr + LPR * c), h2, rot, t < hkv, y + 4 * c);
          } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) y[4 * c + e] = 0.0f;
          }
        }
        rope_kv_store<D, F, MODE>(y, on ? ptr[t] : nullptr, on ? ptr[2 * hkv + t] : nullptr, lr, on);
      }
    }
}

// MODE bit 2 (kRopeIlp): rope_consume_row's groups, a warp's MG groups at a time: every slot's
// loads and rotation first (branch-free), then the q stores, then the K / V encodes, so the
// loads and arithmetic of a warp's groups overlap. With kRopeEarlyFree, each lane arrives on
// `empty` (the stage's empty barrier) once, after its last stage loads.
template <int D, Format F, int MODE>
__device__ __forceinline__ void rope_consume_row_ilp(const float* x, const float* tc, const float* ts,
                                                     uint8_t* const* ptr, int r, int hq, int hkv, int h2, int rot,
                                                     float* q_out, int warp, int lane, uint64_t* empty) {
  constexpr int LPR = D / 4 < 32 ? D / 4 : 32, RPW = 32 / LPR, CPL = D >= 128 ? D / 128 : 1;
  constexpr int NCW = kRopeTmaConsumerWarps, MG = 3;  // 3: every group of the bench shape's row (32 q, 16 K / V) at once
  const int lr = lane % LPR, sub = lane / LPR;
  const int qg = (hq + RPW - 1) / RPW, kvg = (2 * hkv + RPW - 1) / RPW, ng = qg + kvg;
  if constexpr ((MODE & kRopeEarlyFree) != 0)
    if (warp >= ng) mbar_arrive(empty);  // no group of this row
  for (int g0 = warp; g0 < ng; g0 += MG * NCW) {
    float y[MG][4 * CPL];
#pragma unroll
    for (int u = 0; u < MG; ++u) {
      const int g = g0 + u * NCW;
      const bool isq = g < qg;
      const int h = g * RPW + sub, t = (g - qg) * RPW + sub;  // q head, or K slot t < hkv, V slot t - hkv
      const bool on = isq ? h < hq : (g < ng && t < 2 * hkv);
      const float* xs = x + (on ? (isq ? h : hq + t) : 0) * D;
#pragma unroll
      for (int c = 0; c < CPL; ++c) rope4<true>(xs, tc, ts, 4 * (lr + LPR * c), h2, rot, isq || t < hkv, y[u] + 4 * c, on);
    }
    if constexpr ((MODE & kRopeEarlyFree) != 0)
      if (g0 + MG * NCW >= ng) mbar_arrive(empty);  // the lane's last stage loads: the loader may refill
#pragma unroll
    for (int u = 0; u < MG; ++u) {
      const int g = g0 + u * NCW;
      if (g >= ng) break;
      if (g < qg) {
        const int h = g * RPW + sub;
        if (h < hq) rope_store_q<D>(q_out, r, hq, h, lr, y[u]);
      } else {
        const int t = (g - qg) * RPW + sub;
        const bool on = t < 2 * hkv;
        rope_kv_store<D, F, MODE>(y[u], on ? ptr[t] : nullptr, on ? ptr[2 * hkv + t] : nullptr, lr, on);
      }
    }
  }
}
// MODE bit 128 (kRopePlan, with kRopeIlp and kRopeEarlyFree; d 128 only): where a row's groups
// fit one pass of rope_consume_row_ilp (hq + 2 hkv <= 3 ncw slots, a slot per warp), each lane's
// part of them is worked out once per block (RopePlan: its elements' offsets in a stage, its
// table index, the pair's sign, which groups are stored, rotated, q), and rope_consume_planned
// does only the row's loads, arithmetic, stores and encodes. The rotation's y_j = p -+ q is
// one fma(-+1, q, p) (the subtract's or add's bytes: Q4Group.SignedFmaIsTheAddAndTheSubtract).
// The same stored bytes as rope_consume_row_ilp. The consumers' instructions a row, per warp
// (ncu source counters, q4 at 64 MiB p16): 359 -> 284, and 6895 -> 5745 a row for the whole
// kernel (fp8 6042 -> 5321); 80 registers against 64 (one block per SM either way). On an H100
// (reports/h200/receipts-s47, calls 2 and 3, same call against d52f0af's kernels, the same
// bytes): with the encode's second round below, q4 at 64 MiB 0.964-0.977x the time (the encode
// alone 0.983-0.991x), fp8 and bf16 within the noise (0.99-1.02x).
constexpr int kRopePlan = 128, kRopePlanGroups = 3;
struct RopePlan {
  int a[kRopePlanGroups];   // float offset in a stage of the lane's four elements of group u (slot 0 where u is off)
  int ti[kRopePlanGroups];  // cos / sin index: i where group u is rotated, else 0 (any valid index)
  int pd;                   // offset of the pair's other elements: +h2 (j < h2) or -h2
  float sg;                 // y_j = p + sg q: -1 where j < h2
  uint32_t on, rr, isq;     // bit u: group u is stored / rotated / a q head
};
template <int D>
__device__ __forceinline__ RopePlan rope_plan(int hq, int hkv, int h2, int rot, int warp, int lane) {
  static_assert(D == 128, "rope_plan: a slot per warp, four elements a lane (d 128)");
  constexpr int NCW = kRopeTmaConsumerWarps;
  const int ng = hq + 2 * hkv, j = 4 * lane;
  const bool lo = j < h2;
  const int i = lo ? j : j - h2;
  RopePlan pl;
  pl.pd = lo ? h2 : -h2;
  pl.sg = lo ? -1.0f : 1.0f;
  pl.on = pl.rr = pl.isq = 0;
#pragma unroll
  for (int u = 0; u < kRopePlanGroups; ++u) {
    const int g = warp + u * NCW;  // slot g: q head g < hq, else K / V slot g - hq
    const bool on = g < ng, rr = on && g < hq + hkv && j < rot;
    pl.a[u] = (on ? g * D : 0) + j;
    pl.ti[u] = rr ? i : 0;
    pl.on |= uint32_t(on) << u;
    pl.rr |= uint32_t(rr) << u;
    pl.isq |= uint32_t(g < hq) << u;
  }
  return pl;
}
template <int D, Format F, int MODE>
__device__ __forceinline__ void rope_consume_planned(const float* x, const float* tc, const float* ts,
                                                     uint8_t* const* ptr, int r, int hq, int hkv, float* q_out,
                                                     const RopePlan& pl, int warp, int lane, uint64_t* empty) {
  static_assert((MODE & kRopeEarlyFree) != 0 && (MODE & kRopeIlp) != 0, "rope_consume_planned: the ILP consumer's early free");
  constexpr int NCW = kRopeTmaConsumerWarps;
  float y[kRopePlanGroups][4];
#pragma unroll
  for (int u = 0; u < kRopePlanGroups; ++u) {
    const float4 a = *reinterpret_cast<const float4*>(x + pl.a[u]);
    const float4 b = *reinterpret_cast<const float4*>(x + pl.a[u] + pl.pd);
    const float4 c = *reinterpret_cast<const float4*>(tc + pl.ti[u]), s = *reinterpret_cast<const float4*>(ts + pl.ti[u]);
    const float aa[4] = {a.x, a.y, a.z, a.w}, bb[4] = {b.x, b.y, b.z, b.w}, cc[4] = {c.x, c.y, c.z, c.w},
                ss[4] = {s.x, s.y, s.z, s.w};
    const bool on = (pl.on >> u) & 1u, rr = (pl.rr >> u) & 1u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float rv = __fmaf_rn(pl.sg, __fmul_rn(bb[e], ss[e]), __fmul_rn(aa[e], cc[e]));
      y[u][e] = !on ? 0.0f : (rr ? rv : aa[e]);
    }
  }
  mbar_arrive(empty);  // the lane's last stage loads: the loader may refill
#pragma unroll
  for (int u = 0; u < kRopePlanGroups; ++u) {
    if (!((pl.on >> u) & 1u)) break;  // groups are on in order
    const int g = warp + u * NCW;
    if ((pl.isq >> u) & 1u) {
      rope_store_q<D>(q_out, r, hq, g, lane, y[u]);
    } else {
      const int t = g - hq;
      rope_kv_store<D, F, MODE>(y[u], ptr[t], ptr[2 * hkv + t], lane, true);
    }
  }
}
template <int D, Format F, int MODE>
__device__ __forceinline__ void rope_consume(const float* x, const float* tc, const float* ts, uint8_t* const* ptr,
                                             int r, int hq, int hkv, int h2, int rot, float* q_out, int warp,
                                             int lane, uint64_t* empty) {
  static_assert((MODE & kRopeEarlyFree) == 0 || (MODE & kRopeIlp) != 0, "rope_consume: kRopeEarlyFree needs kRopeIlp");
  if constexpr ((MODE & kRopeIlp) != 0)
    rope_consume_row_ilp<D, F, MODE>(x, tc, ts, ptr, r, hq, hkv, h2, rot, q_out, warp, lane, empty);
  else
    rope_consume_row<D, F, MODE>(x, tc, ts, ptr, r, hq, hkv, h2, rot, q_out, warp, lane);
}

template <int D, Format F>
__global__ void __launch_bounds__(kRopeTmaThreads, 1)
    rope_store_tma_kernel(const KvView* views, RopeParams p, int hkv, const RopeRow* rows, int n, const float* q,
                          const float* k, const float* vin, float* q_out, int stages) {
  extern __shared__ __align__(16) uint8_t sm[];
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int hq = p.q_heads, slots = hq + 2 * hkv, h2 = p.rot_dims / 2, rot = p.rot_dims;
  constexpr int ncw = kRopeTmaConsumerWarps;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  const RopeTmaLayout L = rope_tma_layout(slots, D, h2, hkv, stages);
  uint64_t* full = reinterpret_cast<uint64_t*>(sm);
  uint64_t* empty = full + stages;
  double* th = reinterpret_cast<double*>(sm + L.theta_off);
  auto stage = [&](int s) { return sm + L.stage_off + size_t(s) * L.stage_bytes; };
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1 + 32);        // the loader's expect_tx arrival and the table warp's lanes
      mbar_init(&empty[s], 32 * ncw);     // every consumer lane
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int G = int(gridDim.x);
  if (warp == ncw) {  // the loader
    if (lane != 0) return;
    int it = 0;
    for (int r = int(blockIdx.x); r < n; r += G, ++it) {
      const int s = it % stages, use = it / stages;
      if (use > 0) mbar_wait(&empty[s], uint32_t(use - 1) & 1u);
      rope_load_row<D>(reinterpret_cast<float*>(stage(s)), q, k, vin, r, hq, hkv, &full[s]);
    }
    return;
  }
  rope_theta_table(th, h2, p, warp, tid);
  if (warp == ncw + 1) {  // the table warp
    int it = 0;
    for (int r = int(blockIdx.x); r < n; r += G, ++it) {
      const int s = it % stages, use = it / stages;
      if (use > 0) mbar_wait(&empty[s], uint32_t(use - 1) & 1u);
      const RopeRow row = rows[r];
      const KvView v = views[row.lane];
      uint8_t* st = stage(s);
      float* tc = reinterpret_cast<float*>(st + L.tab_off);
      uint8_t** ptr = reinterpret_cast<uint8_t**>(st + L.ptr_off);
      for (int i = lane; i < h2; i += 32) rope_cos_sin_theta(row.pos, th[i], &tc[i], &tc[h2 + i]);
      for (int t = lane; t < 2 * hkv; t += 32) {
        const int kv = t < hkv ? 0 : 1, head = t - kv * hkv;
        ptr[t] = kv_row(v, p.layer, kv, head, row.slot);
        ptr[2 * hkv + t] = v.lay.scale_bytes ? kv_scale(v, p.layer, kv, head, row.slot) : nullptr;
      }
      mbar_arrive(&full[s]);
    }
    return;
  }
  // Consumers.
  int it = 0;
  for (int r = int(blockIdx.x); r < n; r += G, ++it) {
    const int s = it % stages, use = it / stages;
    mbar_wait(&full[s], uint32_t(use) & 1u);
    const uint8_t* st = stage(s);
    const float* x = reinterpret_cast<const float*>(st);
    const float* tc = reinterpret_cast<const float*>(st + L.tab_off);
    const float* ts = tc + h2;
    uint8_t* const* ptr = reinterpret_cast<uint8_t* const*>(st + L.ptr_off);
    rope_consume_row<D, F>(x, tc, ts, ptr, r, hq, hkv, h2, rot, q_out, warp, lane);
    mbar_arrive(&empty[s]);
  }
}

// ---- rope_store_ring_kernel (bf16; fp8 and q4 at d 128 / 256) ----
// rope_store_tma_kernel's loader and consumers, with the table apart from the data ring: the
// table warp fills a ring of kRopeRingNtb batches of kRopeRingTb rows (up to 16 rows ahead),
// a batch's rows resolved at once (8 lanes per row: rows[r], views[lane], the page by kv_pos,
// then the row's K / V addresses by kv_plane_at), after the batch's cos / sin (its rows' and
// views' loads in flight meanwhile). A batch is full when the table warp's lanes arrived,
// free when every consumer lane and the loader (after the batch's last row) arrived.
// The block's start: the consumers compute theta_i and the first batch's cos / sin (a pair
// each: rope_theta, then rope_cos_sin_theta, the same calls), while the table warp resolves
// that batch's addresses without waiting for theta; then they meet at named barrier 2, and the
// table warp takes theta at barrier 1 before its second batch. On the H200 (reports/h200/
// issue20-rope7, same call against the start on the table warp alone, the same stored bytes):
// from 64 MiB up bf16 0.86-0.91 (mean 0.887) against 0.73-0.89 (0.830), fp8 0.80-0.91 (0.854)
// against 0.69-0.90 (0.800), q4 0.73-0.86 (0.803) against 0.65-0.85 (0.764); 0.85-1.00x the
// time on every row from 64 MiB up, 0.82x at most at 1 MiB.
// bf16 on the H200 (reports/h200/issue20-rope5, same call against rope_store_kernel, L2
// flushed): 0.73-0.90 of the copy ceiling from 64 MiB up, against 0.66-0.77; pages of 16 do
// not lose (rope_store_tma_kernel's per-row table did on bf16). fp8 / q4 (MODE 3, 3 data
// stages) on the H200 (reports/h200/issue20-rope6, same call against rope_store_tma_kernel):
// fp8 0.69-0.91 (mean 0.80) against 0.60-0.72 (0.68), q4 0.65-0.86 (0.77) against 0.58-0.70
// (0.64) from 64 MiB up. (issue20-rope4's slower fp8 / q4 on this ring was a build with
// run-time ring parameters; this compile-time kernel with main's encode was +0.08 / +0.06 over
// rope_store_tma_kernel in issue20-rope6's first call.)
constexpr int kRopeRingStages = 2, kRopeRingTb = 4, kRopeRingNtb = 4, kRopeRingSlots = kRopeRingTb * kRopeRingNtb;
// fp8 / q4 at d 256 on the ring kernel: 3 data stages (issue20-rope6, same call against 2 at d
// 128: fp8 / q4 mean +0.007 / +0.025 of the copy ceiling from 64 MiB up: +0.01-0.06 on windows
// and pages of 256, up to -0.05 on pages of 16 at 256 / 1024 MiB). At d 128 the stage freed
// early (kRopeEarlyFree) with 2 stages beat it (issue20-rope8, same call, the same stored bytes:
// from 64 MiB up fp8 0.81-0.92 (mean 0.874, 8 of 9 rows >= 0.85) against 0.79-0.91 (0.856, 5),
// q4 0.76-0.89 (0.832, 4) against 0.72-0.86 (0.803, 3); fp8 and q4 rows' mean: 2 stages with the
// early free 0.853, 3 with it 0.839, 3 without (before) 0.830, 4 with it or without 0.833, 2
// without 0.812). d 256 is not in the bench: it keeps 3 stages without the early free.
constexpr int kRopeRingQuantStages = 3;
// d 128 where the kernel's stores fit in the L2 (kRopeEvictFirst rows) and a block takes more than
// one row: bf16 3 data stages, fp8 / q4 4 (kernel path "rope-ring, deep"). On an H100
// (reports/h200/receipts-s48, the same stored bytes): against 2 stages in one binary (call 2), at
// 64 MiB bf16 0.947-0.974x the time with 3, q4 0.969-0.987x with 4 (fp8 0.991-1.000x), at 16 MiB
// bf16 0.93-0.96x; from 256 MiB up (stores past the L2) 3 or 4 were 1.00-1.03x slower, so those
// rows keep 2; 5 or 6 stages, bf16 at 4 and fp8 / q4 at 3 were slower or equal (call 6). The
// final rule against c3efaef's kernels in one call (call 5): 64 MiB q4 0.972-0.984x, bf16
// 0.962-0.988x, fp8 0.982-1.003x.
constexpr int kRopeRingStagesL2 = 3, kRopeRingQuantStagesL2 = 4;
struct RopeRingLayout {
  uint32_t theta_off, tab_off, tslot_bytes, tc_off, stage_off, stage_bytes;
};
KC_HD RopeRingLayout rope_ring_layout(int slots, int d, int h2, int hkv, int stages = kRopeRingStages) {
  RopeRingLayout L;
  L.theta_off = rope_align16(uint32_t(2 * stages + 2 * kRopeRingNtb) * 8u);
  L.tab_off = L.theta_off + rope_align16(uint32_t(h2) * 8u);
  L.tc_off = rope_align16(uint32_t(4 * hkv) * 8u);  // after codes[2 hkv], scales[2 hkv]: tc[h2], ts[h2]
  L.tslot_bytes = L.tc_off + rope_align16(uint32_t(2 * h2) * 4u);
  L.stage_off = L.tab_off + uint32_t(kRopeRingSlots) * L.tslot_bytes;
  L.stage_bytes = rope_align16(uint32_t(slots) * uint32_t(d) * 4u);
  return L;
}
template <int D, Format F, int MODE = 0, int S = kRopeRingStages>
__global__ void __launch_bounds__(rope_ring_threads(MODE), 1)
    rope_store_ring_kernel(const KvView* views, RopeParams p, int hkv, const RopeRow* rows, int n, const float* q,
                           const float* k, const float* vin, float* q_out) {
  extern __shared__ __align__(16) uint8_t sm[];
  constexpr int stages = S, tb = kRopeRingTb, ntb = kRopeRingNtb, TS = kRopeRingSlots;
  if (!q) p.q_heads = 0;  // no queries: store k and v only
  const int hq = p.q_heads, slots = hq + 2 * hkv, h2 = p.rot_dims / 2, rot = p.rot_dims;
  constexpr int ncw = kRopeTmaConsumerWarps, ntw = (MODE & kRopeTwoTables) ? 2 : 1;  // consumer, table warps
  const int tid = threadIdx.x, warp = tid / 32, lane = tid & 31;
  const RopeRingLayout L = rope_ring_layout(slots, D, h2, hkv, stages);
  uint64_t* full = reinterpret_cast<uint64_t*>(sm);
  uint64_t* empty = full + stages;
  uint64_t* tfull = empty + stages;
  uint64_t* tempty = tfull + ntb;
  double* th = reinterpret_cast<double*>(sm + L.theta_off);
  auto stage = [&](int s) { return sm + L.stage_off + size_t(s) * L.stage_bytes; };
  auto tslot = [&](int it) { return sm + L.tab_off + size_t(it % TS) * L.tslot_bytes; };
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1);          // the loader's expect_tx arrival
      mbar_init(&empty[s], 32 * ncw);  // every consumer lane
    }
    for (int b = 0; b < ntb; ++b) {
      mbar_init(&tfull[b], 32);             // the table warp's lanes
      mbar_init(&tempty[b], 32 * ncw + 1);  // every consumer lane and the loader
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  const int G = int(gridDim.x), bx = int(blockIdx.x);
  const int nb = (n - bx + G - 1) / G;  // this block's rows (grid <= n)
  const int nt = ntw == 1 ? 1 : min(ntw, (nb + tb - 1) / tb);  // the table warps with a batch: named barrier 1's
  if (warp == ncw) {  // the loader
    if (lane != 0) return;
    for (int it = 0; it < nb + stages; ++it) {
      const int s = it % stages, use = it / stages;
      if (use > 0) {  // the stage held row j: wait for the consumers, then free j's batch after its last row
        const int j = it - stages;
        mbar_wait(&empty[s], uint32_t(use - 1) & 1u);
        if (j % tb == tb - 1 || j == nb - 1) mbar_arrive(&tempty[(j / tb) % ntb]);
      }
      if (it < nb) {
        const int r = bx + it * G;
        rope_load_row<D, (MODE & kRopeEvictFirst) != 0>(reinterpret_cast<float*>(stage(s)), q, k, vin, r, hq, hkv,
                                                         &full[s]);
      }
    }
    return;
  }
  if (warp < ncw) {  // the consumers: theta and the first ntw batches' cos / sin, while the table warps resolve their addresses
#ifdef KC_PLANT_ROPE_TABLE_FIRST_BATCH  // planted bug (test builds only): the second batch's cos / sin left to no one
    for (int u = tid; u < min(tb, nb) * h2; u += 32 * ncw) {
#else
    for (int u = tid; u < min(ntw * tb, nb) * h2; u += 32 * ncw) {
#endif
      const int i = u / h2, e = u - i * h2;
      const double t = rope_theta(e, rot, p.base);
      if (i == 0) th[e] = t;
      float* tc = reinterpret_cast<float*>(tslot(i) + L.tc_off);
      rope_cos_sin_theta(rows[bx + i * G].pos, t, &tc[e], &tc[h2 + e]);
    }
    asm volatile("bar.arrive 1, %0;\n" ::"r"(32 * (ncw + nt)) : "memory");  // theta, for the table warps
    asm volatile("bar.sync 2, %0;\n" ::"r"(32 * ncw) : "memory");          // the first batches' cos / sin
  }
  if (warp == ncw + 1 || (ntw > 1 && warp > ncw)) {  // the table warp(s): warp ncw + 1 + tw takes batches tw, tw + ntw, ..
    constexpr int lpt = 32 / tb;
    constexpr bool early = (MODE & kRopeTabEarly) != 0;
    const int tw = ntw > 1 ? warp - ncw - 1 : 0;  // the warp's first batch
    const int ti = lane % tb, part = lane / tb;  // the lane's row in the batch and its part of the row's addresses
    RopeRow nrow{};  // early: the lane's row of this warp's next batch
    if (early && tw * tb + ti < nb) nrow = rows[bx + (tw * tb + ti) * G];
    for (int b = tw; b * tb < nb; b += ntw) {
      const int bi = b % ntb, use = b / ntb;
      RopeRow row{};
      KvView v;
      if constexpr (early) {  // this batch's view and its page-table line into the L1, then the next batch's row
        const int it = b * tb + ti;
        row = nrow;
        if (it < nb) {
          v = views[row.lane];
          rope_prefetch_page(v, row.slot);
        }
        if (it + ntw * tb < nb) nrow = rows[bx + (it + ntw * tb) * G];
      }
      if (use > 0) mbar_wait(&tempty[bi], uint32_t(use - 1) & 1u);
      const int it = b * tb + ti;
      const bool mine = it < nb;
      if constexpr (!early) {
        if (mine) {
          row = rows[bx + it * G];
          v = views[row.lane];
        }
      }
      const int nr = min(tb, nb - b * tb);
      if (b >= ntw) {  // the first ntw batches' cos / sin are the consumers'
        constexpr int un = (MODE & kRopeTabIlp) ? 4 : 2;
#pragma unroll un
        for (int u = lane; u < nr * h2; u += 32) {
          const int i = u / h2, e = u - i * h2;
          float* tc = reinterpret_cast<float*>(tslot(b * tb + i) + L.tc_off);
          rope_cos_sin_theta(rows[bx + (b * tb + i) * G].pos, th[e], &tc[e], &tc[h2 + e]);
        }
      }
      if (mine) {
        uint8_t** ptr = reinterpret_cast<uint8_t**>(tslot(it));
        const KvPos at = kv_pos(kv_plane(v, 0), row.slot);  // the page: the same for every plane of the view
        for (int t = part; t < 2 * hkv; t += lpt) {
          const int kv = t < hkv ? 0 : 1, head = t - kv * hkv;
          ptr[t] = kv_plane_at(kv_plane(v, p.layer, kv, head), at);
          ptr[2 * hkv + t] = v.lay.scale_bytes ? kv_plane_at(kv_plane(v, p.layer, kv, head, true), at) : nullptr;
        }
      }
      mbar_arrive(&tfull[bi]);
      if (b == tw) {  // theta, from the consumers, after the warp's first batch (one bar.sync for every table warp)
        if constexpr (ntw > 1) __syncwarp();  // (measured under synccheck with it; one table warp: as before)
        asm volatile("bar.sync 1, %0;\n" ::"r"(32 * (ncw + nt)) : "memory");
      }
    }
    return;
  }
  // Consumers (as in rope_store_tma_kernel).
  RopePlan pl{};
  bool planned = false;
  if constexpr ((MODE & kRopePlan) != 0) {
    planned = slots <= kRopePlanGroups * ncw;
    if (planned) pl = rope_plan<D>(hq, hkv, h2, rot, warp, lane);
  }
  for (int it = 0; it < nb; ++it) {
    const int r = bx + it * G, s = it % stages, use = it / stages, b = it / tb;
    if (it % tb == 0) mbar_wait(&tfull[b % ntb], uint32_t(b / ntb) & 1u);
    mbar_wait(&full[s], uint32_t(use) & 1u);
    const float* x = reinterpret_cast<const float*>(stage(s));
    const uint8_t* sl = tslot(it);
    const float* tc = reinterpret_cast<const float*>(sl + L.tc_off);
    const float* ts = tc + h2;
    uint8_t* const* ptr = reinterpret_cast<uint8_t* const*>(sl);
    if constexpr ((MODE & kRopePlan) != 0) {
      if (planned)
        rope_consume_planned<D, F, MODE>(x, tc, ts, ptr, r, hq, hkv, q_out, pl, warp, lane, &empty[s]);
      else
        rope_consume<D, F, MODE>(x, tc, ts, ptr, r, hq, hkv, h2, rot, q_out, warp, lane, &empty[s]);
    } else {
      rope_consume<D, F, MODE>(x, tc, ts, ptr, r, hq, hkv, h2, rot, q_out, warp, lane, &empty[s]);
    }
    if constexpr ((MODE & kRopeEarlyFree) == 0) mbar_arrive(&empty[s]);
    if (it % tb == tb - 1 || it == nb - 1) mbar_arrive(&tempty[b % ntb]);
  }
}

// The grid of a persistent rope store kernel (one block per SM, at most n blocks), its
// shared-memory limit raised where it needs more than 48 KiB; 0 where smem does not fit a block
// (the caller then takes the block-per-row kernel). dev: the current device's facts, which
// launch_rope_store fetches once per launch.
static Status rope_persistent_grid(const CudaDeviceFacts& dev, const void* kern, size_t smem, int n, int* grid) {
  *grid = 0;
  if (smem > size_t(dev.smem_optin)) return Status::Ok();
  if (smem > 48 * 1024) KC_RETURN_IF_ERROR(cuda_allow_smem(kern, smem));
  *grid = std::min(n, dev.sms);
  return Status::Ok();
}

Status launch_rope_store(const KvView* views, Format fmt, int hkv, int d, const RopeParams& p, const RopeRow* rows,
                         int n, const float* q, const float* k, const float* v, float* q_out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  if ((reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) & 15u)
    return Status::Error("rope_store: q, k and v must start 16-byte aligned (they are read 16 bytes at a time)");
  if (d != 32 && d != 64 && d != 128 && d != 256) return Status::Error("rope_store: head_dim must be 32, 64, 128 or 256");
  const int slots = (q ? p.q_heads : 0) + 2 * hkv;
  CudaDeviceFacts dev;
  KC_RETURN_IF_ERROR(cuda_device_facts(&dev));
  // The ring kernel: bf16 (MODE 0, 2 data stages); fp8 / q4 at d 128 (MODE 247: the fast encode,
  // the grouped consumer, the stage freed early, the table warps' pace bits and the consumers'
  // plan; 2 data stages; one warp more) and d 256 (MODE 3; kRopeRingQuantStages data stages),
  // where its rings fit a block's shared memory.
  const bool ring_q = (fmt == Format::fp8 || fmt == Format::q4) && (d == 128 || d == 256);
  if ((fmt == Format::bf16 || ring_q) && p.rot_dims % 8 == 0 && (reinterpret_cast<uintptr_t>(q_out) & 15u) == 0) {
    // At d 128 the inputs are read evict-first (kRopeEvictFirst) where the kernel's stores
    // (q_out, the K / V codes and scales) fit in the L2, and through more data stages
    // (kRopeRingStagesL2).
    const uint64_t row_stored =
        uint64_t(slots - 2 * hkv) * d * 4 + 2ull * hkv * (format_code_bytes(fmt, d) + format_scale_bytes(fmt, d));
    auto ring_smem = [&](int st) {
      const RopeRingLayout L = rope_ring_layout(slots, d, p.rot_dims / 2, hkv, st);
      return size_t(L.stage_off) + size_t(st) * L.stage_bytes;
    };
    const bool ef = d == 128 && uint64_t(n) * row_stored <= uint64_t(dev.l2_bytes);
    // The extra stages where a block takes more than one row (n <= the grid: nothing to overlap;
    // the 1 MiB rows took 1.01-1.04x the time with them) and they fit a block's shared memory.
    const int l2_stages = ring_q ? kRopeRingQuantStagesL2 : kRopeRingStagesL2;
    const bool deep = ef && n > dev.sms && ring_smem(l2_stages) <= size_t(dev.smem_optin);
    const int stages = ring_q && d == 256 ? kRopeRingQuantStages : deep ? l2_stages : kRopeRingStages;
    const size_t smem = ring_smem(stages);
    void (*kern)(const KvView*, RopeParams, int, const RopeRow*, int, const float*, const float*, const float*,
                 float*) = nullptr;
    int threads = kRopeTmaThreads;  // rope_ring_threads of the kernel's MODE
    with_format(fmt, [&](auto codec) {
      constexpr Format F = decltype(codec)::kFormat;
      constexpr int M = kRopeFastEncode | kRopeIlp;
      if constexpr (F == Format::bf16) {
        switch (d) {
          case 32: kern = rope_store_ring_kernel<32, F>; break;
          case 64: kern = rope_store_ring_kernel<64, F>; break;
          case 128:
            kern = deep ? rope_store_ring_kernel<128, F, kRopeEvictFirst, kRopeRingStagesL2>
                   : ef ? rope_store_ring_kernel<128, F, kRopeEvictFirst>
                        : rope_store_ring_kernel<128, F>;
            break;
          case 256: kern = rope_store_ring_kernel<256, F>; break;
        }
      } else if constexpr (F == Format::fp8 || F == Format::q4) {
        constexpr int MQ = M | kRopeEarlyFree | kRopeTabEarly | kRopeTabIlp | kRopeTwoTables | kRopePlan;  // 247
        threads = d == 128 ? rope_ring_threads(MQ) : kRopeTmaThreads;
        kern = d == 128 ? (deep ? rope_store_ring_kernel<128, F, MQ | kRopeEvictFirst, kRopeRingQuantStagesL2>
                           : ef ? rope_store_ring_kernel<128, F, MQ | kRopeEvictFirst>
                                : rope_store_ring_kernel<128, F, MQ>)
                        : rope_store_ring_kernel<256, F, M, kRopeRingQuantStages>;
      }
    });
    int grid = 0;
    KC_RETURN_IF_ERROR(rope_persistent_grid(dev, reinterpret_cast<const void*>(kern), smem, n, &grid));
    if (grid) {
      kern<<<unsigned(grid), unsigned(threads), smem, s>>>(views, p, hkv, rows, n, q, k, v, q_out);
      KC_LAUNCH_CHECK("rope_store_ring_kernel");
      // fp8 / q4 at d 128 without the consumers' plan: a row of more than one pass of groups;
      // deep: the extra data stages of kRopeRingStagesL2 / kRopeRingQuantStagesL2
      KernelPaths::note(ring_q && d == 128 && slots > kRopePlanGroups * kRopeTmaConsumerWarps ? "rope-ring, passes > 1"
                        : deep                                                               ? "rope-ring, deep"
                                                                                            : "rope-ring");
      return Status::Ok();
    }
  }
  // fp8 / q4 (d 32 / 64, or where the ring kernel does not fit): rope_store_tma_kernel, where its
  // ring fits a block's shared memory.
  if ((fmt == Format::fp8 || fmt == Format::q4) && p.rot_dims % 8 == 0 && (reinterpret_cast<uintptr_t>(q_out) & 15u) == 0) {
    const RopeTmaLayout L = rope_tma_layout(slots, d, p.rot_dims / 2, hkv, kRopeTmaStages);
    const size_t smem = size_t(L.stage_off) + size_t(kRopeTmaStages) * L.stage_bytes;
    void (*kern)(const KvView*, RopeParams, int, const RopeRow*, int, const float*, const float*, const float*,
                 float*, int) = nullptr;
    with_format(fmt, [&](auto codec) {
      constexpr Format F = decltype(codec)::kFormat;
      if constexpr (F == Format::fp8 || F == Format::q4) {
        switch (d) {
          case 32: kern = rope_store_tma_kernel<32, F>; break;
          case 64: kern = rope_store_tma_kernel<64, F>; break;
          case 128: kern = rope_store_tma_kernel<128, F>; break;
          case 256: kern = rope_store_tma_kernel<256, F>; break;
        }
      }
    });
    int grid = 0;
    KC_RETURN_IF_ERROR(rope_persistent_grid(dev, reinterpret_cast<const void*>(kern), smem, n, &grid));
    if (grid) {
      kern<<<unsigned(grid), kRopeTmaThreads, smem, s>>>(views, p, hkv, rows, n, q, k, v, q_out, kRopeTmaStages);
      KC_LAUNCH_CHECK("rope_store_tma_kernel");
      KernelPaths::note("rope-bulk");
      return Status::Ok();
    }
  }
  // rope_store_kernel. The stage: every head slot of a row, up to kRopeStageFloats floats.
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
  if (stage > 48 * 1024) KC_RETURN_IF_ERROR(cuda_allow_smem(reinterpret_cast<const void*>(kern), stage));
  kern<<<unsigned(n), kRopeThreads, stage, s>>>(views, p, rows, q, k, v, q_out, ws);
  KC_LAUNCH_CHECK("rope_store_kernel");
  KernelPaths::note(ws < slots ? "rope-block, stages > 1" : "rope-block");  // a row's head slots in stages of ws
  return Status::Ok();
}
}  // namespace kc
