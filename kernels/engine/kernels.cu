// The engine kernels on the device, in the order kernels/engine/rows.h fixes, so every
// output element has the bytes of the host twin (twin.cpp) except SwiGLU (CUDA's expf).
//
// Matrix product: one block of 4 warps per few output elements and tile of up to 8 batch
// rows; thread t holds partial t of rows.h's order for each of its (output, row) pairs
// (16-byte loads of 8 weights when K is a multiple of 8 and the pointers are aligned, one
// element at a time otherwise: the same operations). The batch only decides how many
// tiles there are, never the order of a reduction: a row's bytes do not depend on the
// rows beside it.
// RMSNorm: one warp per row; lanes 0..7 hold the 8 accumulators (lane j takes k = j mod 8
// in ascending k), the tree is the butterfly xor 4, 2, 1, which adds exactly the pairs of
// the fixed tree: (a_j + a_j^4), then (.. + ..^2), then (.. + ..^1).
// Argmax: one block per row; any order of comparisons under argmax_beats (a strict total
// order on (value, index) pairs over the non-NaN values) gives the lowest index of the
// maximum, as the sequential twin does.
#include "kernels/engine/launch.h"
#include "kernels/engine/rows.h"

namespace kc {
namespace {


__global__ void embed_kernel(const uint16_t* __restrict__ E, int64_t dim, const int32_t* __restrict__ tokens,
                             float* __restrict__ out) {
  const int i = blockIdx.y;
  const uint16_t* r = E + int64_t(tokens[i]) * dim;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < dim; j += int64_t(gridDim.x) * blockDim.x)
    out[int64_t(i) * dim + j] = eng::bf16_to_f32(r[j]);
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

__global__ void swiglu_kernel(const float* gate, const float* __restrict__ up, int64_t count, float* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = eng::mul_rn(eng::div_rn(g, eng::add_rn(1.0f, expf(-g))), up[i]);
  }
}

__global__ void add_kernel(float* h, const float* __restrict__ t, int64_t count) {
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
  if (n == 0) return Status::Ok();
  if (n > 65535) return Status::Error("engine embed: more than 65535 rows in one launch");
  embed_kernel<<<dim3(grid_for(dim, 256) < 64 ? grid_for(dim, 256) : 64, n), 256, 0, s>>>(E, dim, tokens, out);
  KC_LAUNCH_CHECK("embed_kernel");
  return Status::Ok();
}

Status launch_engine_rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out, cudaStream_t s) {
  if (n == 0) return Status::Ok();
  rms_norm_kernel<<<(n + 3) / 4, 128, 0, s>>>(x, w, n, dim, eps, out);
  KC_LAUNCH_CHECK("rms_norm_kernel");
  return Status::Ok();
}

Status launch_engine_gather_norm(const float* h, const int32_t* sel, int m, int dim, const float* w, float eps,
                                 float* out, cudaStream_t s) {
  if (m == 0) return Status::Ok();
  gather_norm_kernel<<<(m + 3) / 4, 128, 0, s>>>(h, sel, m, dim, w, eps, out);
  KC_LAUNCH_CHECK("gather_norm_kernel");
  return Status::Ok();
}

template <int R, int OPW>
void launch_matmul_shape(bool vec, dim3 grid, const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n,
                         float* y, cudaStream_t s) {
  if (vec)
    matmul_kernel<R, OPW, true><<<grid, eng::kDotParts, 0, s>>>(W, rows, cols, x, n, y);
  else
    matmul_kernel<R, OPW, false><<<grid, eng::kDotParts, 0, s>>>(W, rows, cols, x, n, y);
}

Status launch_engine_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y,
                            cudaStream_t s) {
  if (n == 0) return Status::Ok();
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
