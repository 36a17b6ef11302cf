// fp8 row kernels.
//
// fp8_encode_rows_kernel: one warp per row. Row i of x ([n][d] fp32, row-major) is
//   encoded with the helpers of codecs/fp8.h (NaN-propagating amax, scale = amax/448,
//   codes = E4M3(x/scale) satfinite RNE) and stored through kv_row / kv_scale of the
//   row's lane view. Rows may come from any lanes in any order; each row's bytes depend
//   on that row's inputs alone (amax is a max, exact in any order).
// fp8_decode_rows_kernel: one warp per row; out[i][j] = E4M3(code_j) * scale in fp32.
// e4m3_encode_bits_kernel: out[i] = E4M3(float with bits first + i), the device path.
// Preconditions (checked by the launchers' callers through validate_rows): every row's
// lane, layer, kv, head and pos address inside its view; the cache format is fp8.
#include "kernels/codecs/fp8_launch.h"
#include "kernels/codecs/rows_launch.cuh"

namespace kc {

__global__ void fp8_encode_rows_kernel(const KvView* views, const float* x, const RowRef* rows, int n) {
  const int row = int((blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (row >= n) return;
  const RowRef r = rows[row];
  const KvView v = views[r.lane];
  const int d = v.lay.head_dim;
  const float* xr = x + size_t(row) * d;
  float amax = 0.0f;
  for (int i = lane; i < d; i += 32) amax = amax_step(amax, xr[i]);
  for (int o = 16; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float scale = fp8_row_scale(amax);
  uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
  for (int i = lane; i < d; i += 32) codes[i] = fp8_code(xr[i], scale);
  if (lane == 0) memcpy(kv_scale(v, r.layer, r.kv, r.head, r.pos), &scale, sizeof(float));
}

__global__ void fp8_decode_rows_kernel(const KvView* views, const RowRef* rows, int n, float* out) {
  const int row = int((blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (row >= n) return;
  const RowRef r = rows[row];
  const KvView v = views[r.lane];
  const int d = v.lay.head_dim;
  float scale;
  memcpy(&scale, kv_scale(v, r.layer, r.kv, r.head, r.pos), sizeof(float));
  const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
  for (int i = lane; i < d; i += 32) out[size_t(row) * d + i] = fp8_value(codes[i], scale);
}

__global__ void e4m3_encode_bits_kernel(uint64_t first, uint64_t count, uint8_t* out) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    out[i] = e4m3_encode(bits_float(uint32_t(first + i)));
}

Status launch_fp8_encode_rows(const KvView* views, const float* x, const RowRef* rows, int n) {
  if (n == 0) return Status::Ok();
  fp8_encode_rows_kernel<<<warp_row_blocks(n), kWarpRowThreads>>>(views, x, rows, n);
  KC_LAUNCH_CHECK("fp8_encode_rows_kernel");
  return Status::Ok();
}

Status launch_fp8_decode_rows(const KvView* views, const RowRef* rows, int n, float* out) {
  if (n == 0) return Status::Ok();
  fp8_decode_rows_kernel<<<warp_row_blocks(n), kWarpRowThreads>>>(views, rows, n, out);
  KC_LAUNCH_CHECK("fp8_decode_rows_kernel");
  return Status::Ok();
}

Status launch_e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) {
  if (count == 0) return Status::Ok();
  e4m3_encode_bits_kernel<<<4096, 256>>>(first, count, out);
  KC_LAUNCH_CHECK("e4m3_encode_bits_kernel");
  return Status::Ok();
}

}  // namespace kc
