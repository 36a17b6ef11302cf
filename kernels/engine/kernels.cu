// The engine kernels on the device, in the order kernels/engine/rows.h fixes, so every
// output element has the bytes of the host twin (twin.cpp) except SwiGLU (CUDA's expf).
//
// Matrix product: one thread per output element o and tile of up to kRowTile batch rows;
// the thread keeps the 8 accumulators of each of its rows and walks K in order (16-byte
// loads of 8 weights when K is a multiple of 8, one element at a time otherwise: the same
// operations). The batch only decides how many tiles there are, never the order of a
// reduction: a row's bytes do not depend on the rows beside it.
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

constexpr int kMatThreads = 128;
constexpr int kRowTile = 4;

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

template <bool VEC>
__global__ void __launch_bounds__(kMatThreads) matmul_kernel(const uint16_t* __restrict__ W, int64_t rows,
                                                             int64_t cols, const float* __restrict__ x, int n,
                                                             float* __restrict__ y) {
  const int64_t o = blockIdx.x * int64_t(kMatThreads) + threadIdx.x;
  const int r0 = blockIdx.y * kRowTile;
  if (o >= rows) return;
  const int nr = min(kRowTile, n - r0);
  const uint16_t* w = W + o * cols;
  float a[kRowTile][8];
#pragma unroll
  for (int r = 0; r < kRowTile; ++r)
#pragma unroll
    for (int j = 0; j < 8; ++j) a[r][j] = 0.0f;
  int64_t k = 0;
  if constexpr (VEC) {
    for (; k + 8 <= cols; k += 8) {
      const uint4 wv = __ldg(reinterpret_cast<const uint4*>(w + k));
      float wf[8];
      const uint32_t wu[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wf[2 * j] = __uint_as_float(wu[j] << 16);
        wf[2 * j + 1] = __uint_as_float(wu[j] & 0xffff0000u);
      }
#pragma unroll
      for (int r = 0; r < kRowTile; ++r) {
        if (r < nr) {
          const float4* xp = reinterpret_cast<const float4*>(x + int64_t(r0 + r) * cols + k);
          const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
          const float xf[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
          for (int j = 0; j < 8; ++j) a[r][j] = eng::fma_rn(wf[j], xf[j], a[r][j]);
        }
      }
    }
  } else {
    for (; k + 8 <= cols; k += 8) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float wf = eng::bf16_to_f32(w[k + j]);
#pragma unroll
        for (int r = 0; r < kRowTile; ++r)
          if (r < nr) a[r][j] = eng::fma_rn(wf, x[int64_t(r0 + r) * cols + k + j], a[r][j]);
      }
    }
  }
  for (; k < cols; ++k) {
    const float wf = eng::bf16_to_f32(w[k]);
    const int j = int(k % 8);
#pragma unroll
    for (int r = 0; r < kRowTile; ++r)
      if (r < nr) {
        // a[r][j] with a runtime j: select through the unrolled index so a stays in registers.
#pragma unroll
        for (int jj = 0; jj < 8; ++jj)
          if (jj == j) a[r][jj] = eng::fma_rn(wf, x[int64_t(r0 + r) * cols + k], a[r][jj]);
      }
  }
#pragma unroll
  for (int r = 0; r < kRowTile; ++r)
    if (r < nr) y[int64_t(r0 + r) * rows + o] = eng::tree8(a[r]);
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

Status launch_engine_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y,
                            cudaStream_t s) {
  if (n == 0) return Status::Ok();
  const int64_t tiles = (n + kRowTile - 1) / kRowTile;
  const int64_t blocks = (rows + kMatThreads - 1) / kMatThreads;
  if (tiles > 65535 || blocks > 0x7fffffff) return Status::Error("engine matmul: launch too large");
  const bool vec = cols % 8 == 0 && reinterpret_cast<uintptr_t>(W) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  const dim3 grid{unsigned(blocks), unsigned(tiles), 1u};
  if (vec)
    matmul_kernel<true><<<grid, kMatThreads, 0, s>>>(W, rows, cols, x, n, y);
  else
    matmul_kernel<false><<<grid, kMatThreads, 0, s>>>(W, rows, cols, x, n, y);
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
