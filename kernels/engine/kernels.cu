// The engine kernels on the device, in the order kernels/engine/rows.h fixes, so every
// output element has the bytes of the host twin (twin.cpp) except SwiGLU (CUDA's expf).
//
// Matrix product: one block of 4 warps per few output elements and tile of up to 8 batch
// rows; thread t holds partial t of rows.h's order for each of its (output, row) pairs
// (16-byte loads of 8 weights when K is a multiple of 8 and the pointers are aligned, one
// element at a time otherwise: the same operations). The batch only decides how many
// tiles there are, never the order of a reduction: a row's bytes do not depend on the
// rows beside it.
// Matrix product, staged (the default where it applies: batch <= 8, K a multiple of 8,
// 16-byte aligned operands, the batch's activations fit in shared memory): a persistent
// launch of as many blocks as are resident at once (one per multiprocessor where the
// activations take most of shared memory) whose blocks copy the batch's activation
// rows into shared memory once and then stream the weights, each group of 4 warps taking 4
// output rows at a time (several matrices that share the activations in one launch:
// q/k/v, gate/up). Each thread still holds partial t of rows.h's order and the tree is
// the same; only where x is read from (shared memory instead of L1/L2, once per block
// instead of once per output) and how many outputs a block walks change.
// RMSNorm: one block per row; the block stages the row in shared memory (coalesced), then
// lanes 0..7 of warp 0 hold the 8 accumulators (lane j takes k = j mod 8 in ascending k),
// the tree is the butterfly xor 4, 2, 1, which adds exactly the pairs of the fixed tree:
// (a_j + a_j^4), then (.. + ..^2), then (.. + ..^1). (The legacy kernel, one warp per row
// reading the row from global memory 32 bytes at a time, is kept for the timing option.)
// Argmax: one block per row; any order of comparisons under argmax_beats (a strict total
// order on (value, index) pairs over the non-NaN values) gives the lowest index of the
// maximum, as the sequential twin does.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/backend/kernel_fit.h"
#include "kernels/engine/launch.h"
#include "kernels/engine/rows.h"

namespace kc {
namespace {


// Rows i = blockIdx.y, + gridDim.y, ..: a grid's y is at most 65535, a launch takes any n.
__global__ void embed_kernel(const uint16_t* __restrict__ E, int64_t dim, const int32_t* __restrict__ tokens, int n,
                             float* __restrict__ out) {
  for (int i = blockIdx.y; i < n; i += gridDim.y) {
    const uint16_t* r = E + int64_t(tokens[i]) * dim;
    for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < dim; j += int64_t(gridDim.x) * blockDim.x)
      out[int64_t(i) * dim + j] = eng::bf16_to_f32(r[j]);
  }
}

// ss of a row by lanes 0..7 of a warp (every lane returns it).
__device__ float warp_sum_squares(const float* x, int dim) {
  const int lane = threadIdx.x & 31;
  float a = 0.0f;
  if (lane < 8)
    for (int k = lane; k < dim; k += 8) a = eng::fma_rn(x[k], x[k], a);
  a = eng::add_rn(a, __shfl_xor_sync(0xffffffffu, a, 4));
  a = eng::add_rn(a, __shfl_xor_sync(0xffffffffu, a, 2));
  a = eng::add_rn(a, __shfl_xor_sync(0xffffffffu, a, 1));
  return __shfl_sync(0xffffffffu, a, 0);
}

__global__ void rms_norm_kernel(const float* x, const float* __restrict__ w, int n, int dim, float eps, float* out) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= n) return;  // whole warps leave together
  const float* xi = x + int64_t(row) * dim;
  float* yi = out + int64_t(row) * dim;
  const float r = eng::rms_factor(warp_sum_squares(xi, dim), dim, eps);
  for (int j = threadIdx.x & 31; j < dim; j += 32) yi[j] = eng::rms_apply(xi[j], r, w[j]);
}

__global__ void gather_norm_kernel(const float* __restrict__ h, const int32_t* __restrict__ sel, int m, int dim,
                                   const float* __restrict__ w, float eps, float* __restrict__ out) {
  const int j = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (j >= m) return;
  const float* xi = h + int64_t(sel[j]) * dim;
  float* yi = out + int64_t(j) * dim;
  const float r = eng::rms_factor(warp_sum_squares(xi, dim), dim, eps);
  for (int k = threadIdx.x & 31; k < dim; k += 32) yi[k] = eng::rms_apply(xi[k], r, w[k]);
}

// RMSNorm of row sel[blockIdx.x] (GATHER) or blockIdx.x of x into row blockIdx.x of out
// (out may alias x: every element is read before the block writes it). The row is staged
// in shared memory kNormChunk floats at a time (chunks start at multiples of 8, so lane j
// keeps the elements k = j mod 8 of the row); the sum of squares is the chain of rows.h,
// then the same butterfly as warp_sum_squares.
constexpr int kNormThreads = 128;
constexpr int kNormChunk = 8192;  // 32 KiB of shared memory
static_assert(kNormChunk % 8 == 0, "a chunk keeps the residues mod 8");

// rows.h's chain of the sum of squares over buf[0, len), added to a: lane j < 8 of warp 0 takes
// the elements k = j mod 8 (a chunk starts at a multiple of 8, so a lane keeps its residue).
__device__ __forceinline__ float rms_chain(const float* buf, int len, float a) {
  if (threadIdx.x < 8) {
#pragma unroll 8
    for (int k = threadIdx.x; k < len; k += 8) a = eng::fma_rn(buf[k], buf[k], a);
  }
  return a;
}

// The chains' butterfly in warp 0 (lanes 8..31 hold 0 and never meet lanes 0..7: xor 4, 2, 1),
// then thread 0 stores the row's factor to *rfac (the caller's barrier publishes it).
__device__ __forceinline__ void rms_factor_to(float a, int dim, float eps, float* rfac) {
  if (threadIdx.x < 32) {
    a = eng::add_rn(a, __shfl_xor_sync(0xffffffffu, a, 4));
    a = eng::add_rn(a, __shfl_xor_sync(0xffffffffu, a, 2));
    a = eng::add_rn(a, __shfl_xor_sync(0xffffffffu, a, 1));
    if (threadIdx.x == 0) *rfac = eng::rms_factor(a, dim, eps);
  }
}

// The block's row: xi into yi (the body of rms_rows_kernel and rms_parts_kernel).
__device__ __forceinline__ void rms_row(const float* xi, int dim, const float* __restrict__ w, float eps, float* yi) {
  __shared__ float4 buf4[kNormChunk / 4];
  __shared__ float rfac;
  float* buf = reinterpret_cast<float*>(buf4);
  const bool vec = dim % 4 == 0 && reinterpret_cast<uintptr_t>(xi) % 16 == 0;
  float a = 0.0f;
  for (int c0 = 0; c0 < dim; c0 += kNormChunk) {
    const int len = min(kNormChunk, dim - c0);
    if (c0) __syncthreads();  // the previous chunk is consumed
    if (vec) {
      const float4* src = reinterpret_cast<const float4*>(xi + c0);
      for (int i = threadIdx.x; i < len / 4; i += kNormThreads) buf4[i] = src[i];
    } else {
      for (int i = threadIdx.x; i < len; i += kNormThreads) buf[i] = xi[c0 + i];
    }
    __syncthreads();
    a = rms_chain(buf, len, a);
  }
  rms_factor_to(a, dim, eps, &rfac);
  __syncthreads();
  const float r = rfac;
  if (dim <= kNormChunk) {
    for (int j = threadIdx.x; j < dim; j += kNormThreads) yi[j] = eng::rms_apply(buf[j], r, w[j]);
  } else {
    for (int j = threadIdx.x; j < dim; j += kNormThreads) yi[j] = eng::rms_apply(xi[j], r, w[j]);
  }
}

template <bool GATHER>
__global__ void __launch_bounds__(kNormThreads) rms_rows_kernel(const float* x, const int32_t* __restrict__ sel, int dim,
                                                               const float* __restrict__ w, float eps, float* out) {
  const int row = blockIdx.x;
  rms_row(x + int64_t(GATHER ? sel[row] : row) * dim, dim, w, eps, out + int64_t(row) * dim);
}

// Several row sets of one dim in one launch (EngineBackend::rms_norm_parts: q_norm and
// k_norm): block b takes row b - end[p - 1] of the last part p with end[p - 1] <= b (an empty
// part is never the last such: the part after it qualifies too), each row by rms_row as
// rms_rows_kernel gives it. The part is picked by selects, not by indexing the parameter
// arrays (which would copy them to local memory). On the 27B preset (H100, receipts-s45) the
// 4 calls of a step took 24.9 us at parallel 8 against 34.5 with two launches a call.
struct NormPartsArg {
  const float* x[kNormPartsMax];
  const float* w[kNormPartsMax];
  float* out[kNormPartsMax];
  int end[kNormPartsMax];  // rows of parts 0..p, summed
  int count;
};

__global__ void __launch_bounds__(kNormThreads) rms_parts_kernel(const NormPartsArg a, int dim, float eps) {
  const int b = blockIdx.x;
  const float* x = a.x[0];
  const float* w = a.w[0];
  float* out = a.out[0];
  int start = 0;
#pragma unroll
  for (int i = 1; i < kNormPartsMax; ++i)
    if (i < a.count && b >= a.end[i - 1]) x = a.x[i], w = a.w[i], out = a.out[i], start = a.end[i - 1];
  const int64_t row = b - start;
  rms_row(x + row * dim, dim, w, eps, out + row * dim);
}

// The residual add and the RMSNorm after it in one launch (EngineBackend::add_rms_norm), a
// block per row (dim % 4 == 0, dim <= kNormChunk, 16-byte aligned rows, out apart from h and
// t: launch_engine_add_rms_norm_fits): each thread loads up to 8 float4 of h and of t before it
// stores h + t (add_rn, add_kernel's operation) to h and to shared memory, then the row's norm
// as rms_row (rows.h's chain by lanes 0..7, the butterfly, rms_apply) into out, up to 16 float4
// of w loaded before the stores. One launch instead of two, and the norm reads the sums from
// shared memory: on the 27B preset at parallel 8 (H100, reports/h200/receipts-s45) a step's
// adds and dim-5120 norms took 78 us (7 joined calls, one add, one norm) against 108.5 (8 + 8).
constexpr int kAddNormIlp = 8, kAddNormApplyIlp = 16;
__global__ void __launch_bounds__(kNormThreads) add_rms_rows_kernel(float* h, const float* t, int dim,
                                                                   const float* __restrict__ w, float eps,
                                                                   float* __restrict__ out) {
  __shared__ float4 buf4[kNormChunk / 4];
  __shared__ float rfac;
  const float* buf = reinterpret_cast<const float*>(buf4);
  const int64_t row0 = int64_t(blockIdx.x) * dim;
  float4* h4 = reinterpret_cast<float4*>(h + row0);
  const float4* t4 = reinterpret_cast<const float4*>(t + row0);
  const int n4 = dim / 4;
  for (int i0 = threadIdx.x; i0 < n4; i0 += kAddNormIlp * kNormThreads) {
    float4 a[kAddNormIlp], b[kAddNormIlp];
#pragma unroll
    for (int u = 0; u < kAddNormIlp; ++u)
      if (i0 + u * kNormThreads < n4) a[u] = h4[i0 + u * kNormThreads], b[u] = t4[i0 + u * kNormThreads];
#pragma unroll
    for (int u = 0; u < kAddNormIlp; ++u) {
      const int i = i0 + u * kNormThreads;
      if (i >= n4) break;
      const float4 v = make_float4(eng::add_rn(a[u].x, b[u].x), eng::add_rn(a[u].y, b[u].y),
                                   eng::add_rn(a[u].z, b[u].z), eng::add_rn(a[u].w, b[u].w));
      h4[i] = v;
      buf4[i] = v;
    }
  }
  __syncthreads();
  rms_factor_to(rms_chain(buf, dim, 0.0f), dim, eps, &rfac);  // as rms_row
  __syncthreads();
  const float r = rfac;
  const float4* w4 = reinterpret_cast<const float4*>(w);
  float4* y4 = reinterpret_cast<float4*>(out + row0);
  for (int i0 = threadIdx.x; i0 < n4; i0 += kAddNormApplyIlp * kNormThreads) {
    float4 wv[kAddNormApplyIlp];
#pragma unroll
    for (int u = 0; u < kAddNormApplyIlp; ++u)
      if (i0 + u * kNormThreads < n4) wv[u] = __ldg(w4 + i0 + u * kNormThreads);
#pragma unroll
    for (int u = 0; u < kAddNormApplyIlp; ++u) {
      const int i = i0 + u * kNormThreads;
      if (i >= n4) break;
      const float4 v = buf4[i];
      y4[i] = make_float4(eng::rms_apply(v.x, r, wv[u].x), eng::rms_apply(v.y, r, wv[u].y),
                          eng::rms_apply(v.z, r, wv[u].z), eng::rms_apply(v.w, r, wv[u].w));
    }
  }
}

// Matrix product (the order of rows.h): one block of 4 warps per OPW output elements and tile
// of up to R batch rows. Warp w, lane l holds partial p = 32w + l of each (output, row) pair
// and walks the octets b = p, p + 128, ... of the weight row: a warp reads 512 contiguous
// bytes of a row per step (16 bytes per lane), the batch rows' activations are read once
// per octet and used for all OPW outputs. Then the tree: levels h = 64, 32 across the warps
// through shared memory, h = 16 .. 1 by xor shuffles.
constexpr int kMatWarps = eng::kDotParts / 32;
static_assert(kMatWarps * 32 == eng::kDotParts, "one partial per thread of the block");

template <bool VEC>
__device__ __forceinline__ void load_w8(const uint16_t* w, float* f) {
  if constexpr (VEC) {
    const uint4 v = __ldcs(reinterpret_cast<const uint4*>(w));  // weights stream through once
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      f[2 * j] = __uint_as_float(u[j] << 16);
      f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = eng::bf16_to_f32(w[j]);
  }
}
template <bool VEC>
__device__ __forceinline__ void load_x8(const float* x, float* f) {
  if constexpr (VEC) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(x)), b = __ldg(reinterpret_cast<const float4*>(x) + 1);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = x[j];
  }
}

template <int R, int OPW, bool VEC>
__global__ void __launch_bounds__(eng::kDotParts) matmul_kernel(const uint16_t* __restrict__ W, int64_t rows,
                                                                int64_t cols, const float* __restrict__ x, int n,
                                                                float* __restrict__ y) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int part = threadIdx.x;  // = 32 warp + lane
  const int64_t o0 = int64_t(blockIdx.x) * OPW;
  const int r0 = blockIdx.y * R;
  const int nr = min(R, n - r0);
  const int no = int(min(int64_t(OPW), rows - o0));
  float acc[OPW][R];
#pragma unroll
  for (int o = 0; o < OPW; ++o)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[o][r] = 0.0f;
  const int64_t full = cols / eng::kDotOctet;  // whole octets
  const uint16_t* wrow = W + o0 * cols;
  const float* xrow = x + int64_t(r0) * cols;
#pragma unroll 2
  for (int64_t b = part; b < full; b += eng::kDotParts) {
    const int64_t k = b * eng::kDotOctet;
    float wf[OPW][8];
#pragma unroll
    for (int o = 0; o < OPW; ++o)
      if (o < no) load_w8<VEC>(wrow + o * cols + k, wf[o]);
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < nr) {
        float xf[8];
        load_x8<VEC>(xrow + r * cols + k, xf);
#pragma unroll
        for (int o = 0; o < OPW; ++o)
          if (o < no)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[o][r] = eng::fma_rn(wf[o][j], xf[j], acc[o][r]);
      }
  }
  // The short last octet (K not a multiple of 8): its partial's last elements.
  if (cols > full * eng::kDotOctet && part == int(full % eng::kDotParts)) {
    for (int64_t k = full * eng::kDotOctet; k < cols; ++k)
#pragma unroll
      for (int o = 0; o < OPW; ++o)
        if (o < no) {
          const float wv = eng::bf16_to_f32(wrow[o * cols + k]);
#pragma unroll
          for (int r = 0; r < R; ++r)
            if (r < nr) acc[o][r] = eng::fma_rn(wv, xrow[r * cols + k], acc[o][r]);
        }
  }
  // Levels h = 64 and 32: s_l + s_{l+64} (warps 0 and 2), s_{l+32} + s_{l+96} (warps 1 and 3),
  // then their sum; levels 16 .. 1 within the warp.
  __shared__ float sp[kMatWarps][OPW * R][32];
#pragma unroll
  for (int o = 0; o < OPW; ++o)
#pragma unroll
    for (int r = 0; r < R; ++r) sp[warp][o * R + r][lane] = acc[o][r];
  __syncthreads();
  for (int j = warp; j < OPW * R; j += kMatWarps) {
    const int o = j / R, r = j % R;
    if (o >= no || r >= nr) continue;  // whole warps skip together
    float v = eng::add_rn(eng::add_rn(sp[0][j][lane], sp[2][j][lane]), eng::add_rn(sp[1][j][lane], sp[3][j][lane]));
#pragma unroll
    for (int h = 16; h >= 1; h /= 2) v = eng::add_rn(v, __shfl_xor_sync(0xffffffffu, v, h));
    if (lane == 0) y[int64_t(r0 + r) * rows + o0 + o] = v;
  }
}

// The staged product (see the top of this file). Block: G groups of 128 threads (G <= 4);
// thread `part` of a group holds partial `part` of rows.h's order. Shared memory: the
// activations of the batch's nr rows, xs[(r * 2 + h) * F + b] = x[r][8b + 4h .. 8b + 4h + 3]
// (F = K / 8 octets; consecutive threads read consecutive float4: no bank conflicts), then
// per group the 4 warps' partial sums for the tree (all of a group's sums at once, or half of
// them in each of two passes where that leaves room for more groups per block). Output groups
// (kXsOPW rows of one matrix) are numbered across the parts; group slot blockIdx.x * G + g
// takes groups slot, slot + gridDim.x * G, ...
constexpr int kXsOPW = 4;
constexpr int kXsMaxGroups = 4;
constexpr int kXsMaxParts = 3;
constexpr int kXsThreads = kXsMaxGroups * eng::kDotParts;
struct XsPart {
  const uint16_t* W;
  float* y;
  int64_t rows;
  int64_t g_end;  // output groups of parts 0..this one
};
struct XsParts {
  XsPart p[kXsMaxParts];
  int count;
};

__device__ __forceinline__ void bar_group(int id) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(eng::kDotParts) : "memory"); }

__device__ __forceinline__ void unpack8(const uint4 v, float* f) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f[2 * j] = __uint_as_float(u[j] << 16);
    f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
  }
}

// The batch's activation rows into shared memory (the layout above). x's nr rows are one run
// of nr * 2F float4 (row r at r * cols floats = r * 2F float4); a thread loads up to kXsStageIlp
// of its float4 before it stores any, so a block's staging waits for about
// ceil(nr * 2F / (kXsStageIlp * threads)) round trips to the L2, not one per float4.
constexpr int kXsStageIlp = 8;
__device__ __forceinline__ void xs_stage(float4* xs, const float* __restrict__ x, int nr, int F) {
  const float4* src = reinterpret_cast<const float4*>(x);
  const int row4 = 2 * F, total = nr * row4, step = int(blockDim.x);
  for (int i0 = int(threadIdx.x); i0 < total; i0 += kXsStageIlp * step) {
    float4 v[kXsStageIlp];
#pragma unroll
    for (int u = 0; u < kXsStageIlp; ++u)
      if (i0 + u * step < total) v[u] = __ldg(src + i0 + u * step);
#pragma unroll
    for (int u = 0; u < kXsStageIlp; ++u) {
      const int i = i0 + u * step;
      if (i >= total) break;
      const int r = i / row4, j = i - r * row4;
      xs[(r * 2 + (j & 1)) * F + (j >> 1)] = v[u];
    }
  }
}

// One octet b of a thread's partial for all R batch rows and kXsOPW outputs of its group (a
// full tile): the eight products of each (output, row) pair added in ascending k, one fused
// multiply-add each, without a branch, so the compiler may request a row's activations before
// the previous row's multiply-adds.
template <int R>
__device__ __forceinline__ void xs_octet_full(const uint4 (&w)[kXsOPW], const float4* xs, int F, int b,
                                              float (&acc)[kXsOPW][R]) {
  constexpr int OPW = kXsOPW;
  float wf[OPW][8];
#pragma unroll
  for (int o = 0; o < OPW; ++o) unpack8(w[o], wf[o]);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float4 lo = xs[(r * 2) * F + b], hi = xs[(r * 2 + 1) * F + b];
    const float xf[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int o = 0; o < OPW; ++o)
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[o][r] = eng::fma_rn(wf[o][k], xf[k], acc[o][r]);
  }
}

// The same for the group's no outputs and nr batch rows of a partial tile (the same products
// and order as xs_octet_full where nr == R and no == kXsOPW).
template <int R>
__device__ __forceinline__ void xs_octet(const uint4 (&w)[kXsOPW], const float4* xs, int F, int b, int nr, int no,
                                         float (&acc)[kXsOPW][R]) {
  constexpr int OPW = kXsOPW;
  if constexpr (R >= 4) {
    float wf[OPW][8];
#pragma unroll
    for (int o = 0; o < OPW; ++o)
      if (o < no) unpack8(w[o], wf[o]);
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < nr) {
        const float4 lo = xs[(r * 2) * F + b], hi = xs[(r * 2 + 1) * F + b];
        const float xf[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int o = 0; o < OPW; ++o)
          if (o < no)
#pragma unroll
            for (int k = 0; k < 8; ++k) acc[o][r] = eng::fma_rn(wf[o][k], xf[k], acc[o][r]);
      }
  } else {
    float xf[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (r < nr) {
        const float4 lo = xs[(r * 2) * F + b], hi = xs[(r * 2 + 1) * F + b];
        xf[r][0] = lo.x, xf[r][1] = lo.y, xf[r][2] = lo.z, xf[r][3] = lo.w;
        xf[r][4] = hi.x, xf[r][5] = hi.y, xf[r][6] = hi.z, xf[r][7] = hi.w;
      }
#pragma unroll
    for (int o = 0; o < OPW; ++o)
      if (o < no) {
        float wf[8];
        unpack8(w[o], wf);
#pragma unroll
        for (int r = 0; r < R; ++r)
          if (r < nr)
#pragma unroll
            for (int k = 0; k < 8; ++k) acc[o][r] = eng::fma_rn(wf[k], xf[r][k], acc[o][r]);
      }
  }
}

// The tree of a group's sums: levels h = 64 and 32 across the group's warps through shared
// memory ((s_l + s_{l+64}) + (s_{l+32} + s_{l+96})), then 16 .. 1 by xor shuffles; lane 0
// writes y[r * rows + o] (y at the group's first output). The group's P = 4R sums (q = oR + r)
// go through sp in `passes` passes (1 or 2) of P / passes sums each: the same additions, fewer
// bytes of shared memory per group. Where a warp holds K = PH / 4 sums of a pass (2, 4 or 8),
// levels 16 .. 1 go by exchanging halves (xs_tree_exchange): the same pairs, fewer shuffles.
// xs_tree_exchange: levels 16 .. 1 of a warp's K sums by exchanging halves: at level h a lane
// keeps half of its values and sends the other half to lane ^ h, so each lane adds the pair
// (s_p, s_{p+h}) of rows.h's tree for half the values
// (IEEE addition is commutative: both lanes of a pair get its bytes); once a lane holds one
// value, plain butterflies. Lane l ends with value l / (32 / K), written by lanes l % (32 / K)
// == 0. K - 1 + log2(32 / K) shuffles for K sums instead of 5 K. (A lane-array model of the
// pairs: reports/h200/receipts-s44/tree_exchange_model.cpp. With the unguarded octet step, the
// products at parallel 8 on the 27B preset took 441 us a step against 546: receipts-s45.)
template <int K>
__device__ __forceinline__ void xs_tree_exchange(const float* sp, int PH, int lo, int warp, int lane, int R, int nr,
                                                 int no, float* y, int64_t rows) {
  float v[K];
#pragma unroll
  for (int j = 0; j < K; ++j) {
    const int i = warp + 4 * j;
    v[j] = eng::add_rn(eng::add_rn(sp[(0 * PH + i) * 32 + lane], sp[(2 * PH + i) * 32 + lane]),
                       eng::add_rn(sp[(1 * PH + i) * 32 + lane], sp[(3 * PH + i) * 32 + lane]));
  }
  int h = 16;
#pragma unroll
  for (int cnt = K; cnt > 1; cnt /= 2, h /= 2) {
    const bool upper = (lane & h) != 0;
#pragma unroll
    for (int j = 0; j < cnt / 2; ++j) {
      const float send = upper ? v[j] : v[j + cnt / 2];
      const float keep = upper ? v[j + cnt / 2] : v[j];
      v[j] = eng::add_rn(keep, __shfl_xor_sync(0xffffffffu, send, h));
    }
  }
#pragma unroll
  for (; h >= 1; h /= 2) v[0] = eng::add_rn(v[0], __shfl_xor_sync(0xffffffffu, v[0], h));
  constexpr int span = 32 / K;
  if (lane % span == 0) {
    const int q = lo + warp + 4 * (lane / span), o = q / R, r = q % R;
    if (o < no && r < nr) y[int64_t(r) * rows + o] = v[0];
  }
}

template <int R>
__device__ __forceinline__ void xs_tree(const float (&acc)[kXsOPW][R], float* sp, int g, int warp, int lane, int nr,
                                        int no, float* y, int64_t rows, int passes) {
  constexpr int OPW = kXsOPW, P = OPW * R;
  const int PH = P / passes;
  for (int lo = 0; lo < P; lo += PH) {
    bar_group(1 + g);  // the group's previous sums are read
#pragma unroll
    for (int q = 0; q < P; ++q)
      if (q >= lo && q < lo + PH) sp[(warp * PH + q - lo) * 32 + lane] = acc[q / R][q % R];
    bar_group(1 + g);
    if (PH % 4 == 0 && PH / 4 >= 2 && PH / 4 <= 8) {
      if (PH / 4 == 2) xs_tree_exchange<2>(sp, PH, lo, warp, lane, R, nr, no, y, rows);
      else if (PH / 4 == 4) xs_tree_exchange<4>(sp, PH, lo, warp, lane, R, nr, no, y, rows);
      else xs_tree_exchange<8>(sp, PH, lo, warp, lane, R, nr, no, y, rows);
      continue;
    }
    for (int q = lo + warp; q < lo + PH; q += 4) {
      const int o = q / R, r = q % R, i = q - lo;
      if (o >= no || r >= nr) continue;  // whole warps skip together
      float v = eng::add_rn(eng::add_rn(sp[(0 * PH + i) * 32 + lane], sp[(2 * PH + i) * 32 + lane]),
                            eng::add_rn(sp[(1 * PH + i) * 32 + lane], sp[(3 * PH + i) * 32 + lane]));
#pragma unroll
      for (int h = 16; h >= 1; h /= 2) v = eng::add_rn(v, __shfl_xor_sync(0xffffffffu, v, h));
      if (lane == 0) y[int64_t(r) * rows + o] = v;
    }
  }
}

// The staged product's kernel. Every output group of a thread-group takes nb = ceil(F / 128)
// steps (step k reads octet part + 128 k where it is < F; the others load and add nothing), so
// a thread's loads form one stream over its groups, and the weights of step s + 1 are
// requested before step s is added: the next group's first octets are in flight during this
// group's tree. (Measured against the kernel that requested a group's first two octet steps
// together and none across groups: reports/h200/receipts-s43/.)
template <int R>
__global__ void __launch_bounds__(kXsThreads, 1) matmul_xs_kernel(const XsParts parts, int F, const float* __restrict__ x,
                                                                   int n, int passes) {
  constexpr int OPW = kXsOPW, P = OPW * R;
  extern __shared__ float4 xs_smem[];
  const int G = blockDim.x / eng::kDotParts;
  const int g = threadIdx.x / eng::kDotParts, part = threadIdx.x % eng::kDotParts;
  const int warp = part >> 5, lane = threadIdx.x & 31;
  const int nr = min(R, n);
  const int64_t cols = int64_t(F) * eng::kDotOctet;
  float4* xs = xs_smem;
  float* sp = reinterpret_cast<float*>(xs + 2 * R * F) + g * (4 * (P / passes) * 32);
  const int64_t total = parts.count == 1 ? parts.p[0].g_end : parts.count == 2 ? parts.p[1].g_end : parts.p[2].g_end;
  const int64_t stride = int64_t(gridDim.x) * G;
  const int64_t j0 = int64_t(blockIdx.x) * G + g;
  const int nb = (F + eng::kDotParts - 1) / eng::kDotParts;
  const int64_t ng = j0 < total ? (total - j0 + stride - 1) / stride : 0;
  // Group j's first weight row, its output column o0 in y, and how many of its 4 rows exist.
  const auto resolve = [&](int64_t j, const uint16_t** wrow, float** yo, int64_t* rows, int* no) {
    const bool in0 = j < parts.p[0].g_end, in1 = !in0 && (parts.count < 3 || j < parts.p[1].g_end);
    const uint16_t* W = in0 ? parts.p[0].W : in1 ? parts.p[1].W : parts.p[2].W;
    float* y = in0 ? parts.p[0].y : in1 ? parts.p[1].y : parts.p[2].y;
    *rows = in0 ? parts.p[0].rows : in1 ? parts.p[1].rows : parts.p[2].rows;
    const int64_t gb = in0 ? 0 : in1 ? parts.p[0].g_end : parts.p[1].g_end;
    const int64_t o0 = (j - gb) * OPW;
    *no = int(min(int64_t(OPW), *rows - o0));
    *wrow = W + o0 * cols;
    *yo = y + o0;
  };
  // The load cursor: group lt of this thread-group, step lk.
  int64_t lt = 0;
  int lk = 0, lno = 0;
  const uint16_t* lw = nullptr;
  {
    float* yo;
    int64_t rows;
    if (ng > 0) resolve(j0, &lw, &yo, &rows, &lno);
  }
  uint4 wq[2][OPW];
  const auto issue = [&](uint4(&dst)[OPW]) {
    if (lt >= ng) return;
    const int b = part + lk * eng::kDotParts;
#pragma unroll
    for (int o = 0; o < OPW; ++o)
      if (o < lno && b < F) dst[o] = __ldcs(reinterpret_cast<const uint4*>(lw + o * cols) + b);
    if (++lk == nb) {
      lk = 0;
      if (++lt < ng) {
        float* yo;
        int64_t rows;
        resolve(j0 + lt * stride, &lw, &yo, &rows, &lno);
      }
    }
  };
  // The activations are staged before the first step's weights are requested. (The other order,
  // e1f8268, overlapped the staging with the first weights' trip to memory: 4 % faster products
  // at parallel 8 alone; beside the unguarded octet step and the exchange tree it read 1-2 %
  // slower at parallel 1, 4 and 8 on the 27B preset: receipts-s45, modes 31 and 30.)
  xs_stage(xs, x, nr, F);
  __syncthreads();
  issue(wq[0]);
  // The compute cursor: group ct, step ck.
  int64_t ct = 0, crows = 0;
  int ck = 0, cno = 0;
  float* cy = nullptr;
  {
    const uint16_t* w;
    if (ng > 0) resolve(j0, &w, &cy, &crows, &cno);
  }
  float acc[OPW][R];
#pragma unroll
  for (int o = 0; o < OPW; ++o)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[o][r] = 0.0f;
  const int64_t steps = ng * nb;
  for (int64_t st = 0; st < steps; ++st) {
    issue(wq[1]);
    const int b = part + ck * eng::kDotParts;
    if (b < F) {
      if (R >= 4 && nr == R && cno == OPW)
        xs_octet_full<R>(wq[0], xs, F, b, acc);
      else
        xs_octet<R>(wq[0], xs, F, b, nr, cno, acc);
    }
#pragma unroll
    for (int o = 0; o < OPW; ++o) wq[0][o] = wq[1][o];
    if (++ck < nb) continue;
    // The group's last step: the tree (every thread of the group is here at the same step:
    // the steps per group are the same for all of them).
    xs_tree<R>(acc, sp, g, warp, lane, nr, cno, cy, crows, passes);
#pragma unroll
    for (int o = 0; o < OPW; ++o)
#pragma unroll
      for (int r = 0; r < R; ++r) acc[o][r] = 0.0f;
    ck = 0;
    if (++ct < ng) {
      const uint16_t* w;
      resolve(j0 + ct * stride, &w, &cy, &crows, &cno);
    }
  }
}

__global__ void swiglu_kernel(const float* gate, const float* __restrict__ up, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = eng::mul_rn(eng::div_rn(g, eng::add_rn(1.0f, expf(-g))), up[i]);
  }
}

__global__ void add_kernel(float* h, const float* __restrict__ t, int64_t count) {
#ifdef KC_PLANT_ENGINE_ADD_TAIL
  count -= count > 1;  // planted bug (test builds only): the last element of a launch skipped
#endif
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    h[i] = eng::add_rn(h[i], t[i]);
}

constexpr int kArgThreads = 256;

__global__ void __launch_bounds__(kArgThreads) argmax_kernel(const float* __restrict__ x, int64_t len,
                                                             int32_t* __restrict__ out) {
  const float* xi = x + int64_t(blockIdx.x) * len;
  float b = 0.0f;
  int64_t bi = 0;
  bool has = false;
  for (int64_t i = threadIdx.x; i < len; i += kArgThreads)
    if (eng::argmax_beats(xi[i], i, has, b, bi)) b = xi[i], bi = i, has = true;
  __shared__ float sb[kArgThreads];
  __shared__ int64_t si[kArgThreads];
  __shared__ bool sh[kArgThreads];
  sb[threadIdx.x] = b, si[threadIdx.x] = bi, sh[threadIdx.x] = has;
  __syncthreads();
  for (int step = kArgThreads / 2; step > 0; step /= 2) {
    if (int(threadIdx.x) < step) {
      const int o = threadIdx.x + step;
      if (sh[o] && eng::argmax_beats(sb[o], si[o], sh[threadIdx.x], sb[threadIdx.x], si[threadIdx.x]))
        sb[threadIdx.x] = sb[o], si[threadIdx.x] = si[o], sh[threadIdx.x] = true;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = int32_t(sh[0] ? si[0] : 0);
}

int grid_for(int64_t count, int threads) {
  const int64_t b = (count + threads - 1) / threads;
  return int(b < 4096 ? (b < 1 ? 1 : b) : 4096);
}

}  // namespace

Status launch_engine_embed(const uint16_t* E, int64_t dim, const int32_t* tokens, int n, float* out, cudaStream_t s) {
  if (n <= 0) return Status::Ok();
  const int gx = grid_for(dim, 256) < 64 ? grid_for(dim, 256) : 64;
  embed_kernel<<<dim3(gx, n < 65535 ? n : 65535), 256, 0, s>>>(E, dim, tokens, n, out);
  KC_LAUNCH_CHECK("embed_kernel");
  return Status::Ok();
}

Status launch_engine_rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out, cudaStream_t s,
                              bool legacy) {
  if (n == 0) return Status::Ok();
  if (legacy) {
    rms_norm_kernel<<<(n + 3) / 4, 128, 0, s>>>(x, w, n, dim, eps, out);
    KC_LAUNCH_CHECK("rms_norm_kernel");
    return Status::Ok();
  }
  rms_rows_kernel<false><<<n, kNormThreads, 0, s>>>(x, nullptr, dim, w, eps, out);
  KC_LAUNCH_CHECK("rms_rows_kernel");
  return Status::Ok();
}

Status launch_engine_rms_norm_parts(const NormPart* parts, int count, int dim, float eps, cudaStream_t s) {
  if (count < 1 || count > kNormPartsMax) return Status::Error("engine rms_norm_parts: count out of range");
  NormPartsArg a{};
  int64_t rows = 0;
  for (int i = 0; i < count; ++i) {
    a.x[i] = parts[i].x, a.w[i] = parts[i].w, a.out[i] = parts[i].out;
    rows += parts[i].n;
    if (rows > INT32_MAX) return Status::Error("engine rms_norm_parts: launch too large");
    a.end[i] = int(rows);
  }
  a.count = count;
  if (rows == 0) return Status::Ok();
  rms_parts_kernel<<<unsigned(rows), kNormThreads, 0, s>>>(a, dim, eps);
  KC_LAUNCH_CHECK("rms_parts_kernel");
  return Status::Ok();
}

Status launch_engine_gather_norm(const float* h, const int32_t* sel, int m, int dim, const float* w, float eps,
                                 float* out, cudaStream_t s, bool legacy) {
  if (m == 0) return Status::Ok();
  if (legacy) {
    gather_norm_kernel<<<(m + 3) / 4, 128, 0, s>>>(h, sel, m, dim, w, eps, out);
    KC_LAUNCH_CHECK("gather_norm_kernel");
    return Status::Ok();
  }
  rms_rows_kernel<true><<<m, kNormThreads, 0, s>>>(h, sel, dim, w, eps, out);
  KC_LAUNCH_CHECK("rms_rows_kernel (gather)");
  return Status::Ok();
}

namespace {

template <int R, int OPW>
void launch_matmul_shape(bool vec, dim3 grid, const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n,
                         float* y, cudaStream_t s) {
  if (vec)
    matmul_kernel<R, OPW, true><<<grid, eng::kDotParts, 0, s>>>(W, rows, cols, x, n, y);
  else
    matmul_kernel<R, OPW, false><<<grid, eng::kDotParts, 0, s>>>(W, rows, cols, x, n, y);
}

// The per-output-block product (every batch size and shape).
Status launch_matmul_blocks(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y,
                            cudaStream_t s) {
  // Batch tile R and outputs per block OPW decide only which thread computes what; every
  // element is reduced in the order of rows.h whatever they are.
  const int R = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
  const int OPW = R < 4 ? 1 : rows >= 8192 ? 4 : rows >= 2048 ? 2 : 1;
  const int64_t tiles = (n + R - 1) / R;
  const int64_t blocks = (rows + OPW - 1) / OPW;
  if (tiles > 65535 || blocks > 0x7fffffff) return Status::Error("engine matmul: launch too large");
  const bool vec = cols % 8 == 0 && reinterpret_cast<uintptr_t>(W) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const dim3 grid{unsigned(blocks), unsigned(tiles), 1u};
  switch (R * 10 + OPW) {
    case 11: launch_matmul_shape<1, 1>(vec, grid, W, rows, cols, x, n, y, s); break;
    case 21: launch_matmul_shape<2, 1>(vec, grid, W, rows, cols, x, n, y, s); break;
    case 41: launch_matmul_shape<4, 1>(vec, grid, W, rows, cols, x, n, y, s); break;
    case 42: launch_matmul_shape<4, 2>(vec, grid, W, rows, cols, x, n, y, s); break;
    case 44: launch_matmul_shape<4, 4>(vec, grid, W, rows, cols, x, n, y, s); break;
    case 81: launch_matmul_shape<8, 1>(vec, grid, W, rows, cols, x, n, y, s); break;
    case 82: launch_matmul_shape<8, 2>(vec, grid, W, rows, cols, x, n, y, s); break;
    default: launch_matmul_shape<8, 4>(vec, grid, W, rows, cols, x, n, y, s); break;
  }
  KC_LAUNCH_CHECK("matmul_kernel");
  return Status::Ok();
}

template <int R>
Status launch_xs(const XsParts& xp, int F, const float* x, int n, int G, int passes, size_t smem,
                 int64_t blocks_wanted, cudaStream_t s) {
  auto* kern = matmul_xs_kernel<R>;
  CudaDeviceFacts dev;
  KC_RETURN_IF_ERROR(cuda_device_facts(&dev));
  int per_sm = 0;
  KC_RETURN_IF_ERROR(cuda_blocks_per_sm(reinterpret_cast<const void*>(kern), G * eng::kDotParts, smem, &per_sm));
  const int64_t blocks = std::min<int64_t>(blocks_wanted, int64_t(dev.sms) * per_sm);
  kern<<<unsigned(blocks), G * eng::kDotParts, smem, s>>>(xp, F, x, n, passes);
  KC_LAUNCH_CHECK("matmul_xs_kernel");
  return Status::Ok();
}

// KC_ENGINE_TREE (read once): "1" or "2" passes of the tree wherever the staged product runs,
// anything else the rule of launch_engine_matmul_parts. An experiment's switch: the bytes are
// the same (the order of every sum is rows.h's).
int engine_tree_env() {
  static const int passes = [] {
    const char* e = std::getenv("KC_ENGINE_TREE");
    const std::string v = e ? e : "";
    return v == "1" ? 1 : v == "2" ? 2 : 0;
  }();
  return passes;
}

}  // namespace

Status launch_engine_matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n,
                                  cudaStream_t s, bool legacy, int tree_passes) {
  if (!engine_tree_passes_known(tree_passes))
    return Status::Error("engine matmul: tree passes " + std::to_string(tree_passes) + " is not 0, 1 or 2");
  if (n == 0 || count == 0) return Status::Ok();
  CudaDeviceFacts dev;
  KC_RETURN_IF_ERROR(cuda_device_facts(&dev));
  bool staged = !legacy && n <= 8 && count <= kXsMaxParts && cols % 8 == 0 &&
                reinterpret_cast<uintptr_t>(x) % 16 == 0 && cols / 8 <= 0x3fffffff;
  for (int i = 0; i < count && staged; ++i) staged = reinterpret_cast<uintptr_t>(parts[i].W) % 16 == 0;
  const int R = n == 1 ? 1 : n == 2 ? 2 : n <= 4 ? 4 : 8;
  const size_t xbytes = size_t(R) * size_t(cols) * sizeof(float);
  const size_t gbytes = size_t(4) * kXsOPW * R * 32 * sizeof(float);  // a group's partial sums, one pass
  // Groups per block that shared memory allows with the tree in `passes` passes.
  const auto groups_fit = [&](int passes) {
    const size_t per = gbytes / size_t(passes);
    if (!staged || xbytes + per > size_t(dev.smem_optin)) return 0;
    return int(std::min<size_t>(kXsMaxGroups, (size_t(dev.smem_optin) - xbytes) / per));
  };
  if (groups_fit(2) < 1) {
    for (int i = 0; i < count; ++i)
      KC_RETURN_IF_ERROR(launch_matmul_blocks(parts[i].W, parts[i].rows, cols, x, n, parts[i].y, s));
    return Status::Ok();
  }
  XsParts xp{};
  int64_t groups = 0;
  for (int i = 0; i < count; ++i) {
    groups += (parts[i].rows + kXsOPW - 1) / kXsOPW;
    xp.p[i] = {parts[i].W, parts[i].y, parts[i].rows, groups};
  }
  xp.count = count;
  // Groups per block: enough to spread the output groups over every multiprocessor, at
  // most what shared memory allows. The tree takes two passes only where one would leave
  // fewer groups per block than that (unless told: tree_passes, KC_ENGINE_TREE).
  const int64_t per_sm = (groups + dev.sms - 1) / dev.sms;
  const int want = int(std::min<int64_t>(kXsMaxGroups, per_sm));
  int passes = tree_passes != 0 ? tree_passes : engine_tree_env();
  if (passes == 0 || groups_fit(passes) < 1) passes = groups_fit(1) >= want ? 1 : 2;
  const int G = std::max(1, std::min(groups_fit(passes), want));
  const size_t smem = xbytes + size_t(G) * (gbytes / size_t(passes));
  const int64_t blocks = (groups + G - 1) / G;
  const int F = int(cols / 8);
  switch (R) {
    case 1: return launch_xs<1>(xp, F, x, n, G, passes, smem, blocks, s);
    case 2: return launch_xs<2>(xp, F, x, n, G, passes, smem, blocks, s);
    case 4: return launch_xs<4>(xp, F, x, n, G, passes, smem, blocks, s);
    default: return launch_xs<8>(xp, F, x, n, G, passes, smem, blocks, s);
  }
}

Status launch_engine_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y,
                            cudaStream_t s, bool legacy, int tree_passes) {
  const MatmulPart p{W, rows, y};
  return launch_engine_matmul_parts(&p, 1, cols, x, n, s, legacy, tree_passes);
}

bool launch_engine_add_rms_norm_fits(const float* h, const float* t, const float* w, int n, int dim, const float* out) {
  if (n <= 0 || dim <= 0 || dim % 4 != 0 || dim > kNormChunk) return false;
  if (!h || !t || !w || !out) return false;
  for (const void* p : {static_cast<const void*>(h), static_cast<const void*>(t), static_cast<const void*>(w),
                        static_cast<const void*>(out)})
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  const auto bytes = uintptr_t(n) * uintptr_t(dim) * sizeof(float);
  const auto apart = [&](const float* a, const float* b) { return !byte_ranges_overlap(a, bytes, b, bytes); };
  // out apart from h and t (other blocks read them); t is h or apart from it.
  return apart(out, h) && apart(out, t) && (t == h || apart(t, h));
}

Status launch_engine_add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out,
                                  cudaStream_t s) {
  add_rms_rows_kernel<<<n, kNormThreads, 0, s>>>(h, t, dim, w, eps, out);
  KC_LAUNCH_CHECK("add_rms_rows_kernel");
  return Status::Ok();
}

Status launch_engine_swiglu(const float* gate, const float* up, int64_t count, float* out, cudaStream_t s) {
  if (count == 0) return Status::Ok();
  swiglu_kernel<<<grid_for(count, 256), 256, 0, s>>>(gate, up, count, out);
  KC_LAUNCH_CHECK("swiglu_kernel");
  return Status::Ok();
}

Status launch_engine_add(float* h, const float* t, int64_t count, cudaStream_t s) {
  if (count == 0) return Status::Ok();
  add_kernel<<<grid_for(count, 256), 256, 0, s>>>(h, t, count);
  KC_LAUNCH_CHECK("add_kernel");
  return Status::Ok();
}

Status launch_engine_argmax(const float* x, int n, int64_t len, int32_t* out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  argmax_kernel<<<n, kArgThreads, 0, s>>>(x, len, out);
  KC_LAUNCH_CHECK("argmax_kernel");
  return Status::Ok();
}

}  // namespace kc
