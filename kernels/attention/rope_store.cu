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

// Blocks per SM of rope_store_q4_kernel<D> at a dynamic shared size, per device: asked once
// (the launch path stays free of the occupancy query). The kernel's dynamic shared limit is
// raised once to the most any launch asks (kRopeQ4SmemMax), never lowered.
struct RopeOcc {
  const void* kern;
  int dev;
  size_t smem;
  int per_sm;
};
static Status rope_q4_blocks_per_sm(const void* kern, size_t smem, int* per_sm, int* sms) {
  static std::mutex mu;
  static std::vector<RopeOcc> known;  // smem 0: the limit is raised on that device
  int dev = 0;
  KC_CUDA_TRY(cudaGetDevice(&dev));
  KC_CUDA_TRY(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev));
  std::lock_guard<std::mutex> lock(mu);
  bool raised = false;
  for (const RopeOcc& o : known) {
    if (o.kern != kern || o.dev != dev) continue;
    raised = raised || o.smem == 0;
    if (o.smem == smem && smem != 0) {
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
    KC_RETURN_IF_ERROR(rope_q4_blocks_per_sm(reinterpret_cast<const void*>(kern), smem, &per_sm, &sms));
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
  if (stage > 48 * 1024) KC_RETURN_IF_ERROR(cuda_allow_smem(reinterpret_cast<const void*>(kern), stage));
  kern<<<unsigned(n), kRopeThreads, stage, s>>>(views, p, rows, q, k, v, q_out, ws);
  KC_LAUNCH_CHECK("rope_store_kernel");
  return Status::Ok();
}
}  // namespace kc
