// mxfp4 row kernels (helpers and rules: codecs/mxfp4.h; host twins: codecs/mxfp4_twin.cpp).
//
// mxfp4_encode_rows_kernel: one warp per row. Row i of x ([n][d] fp32, row-major, d a
//   multiple of 32) is stored through kv_row (d/2 code bytes: element 2j in the low
//   nibble of byte j, 2j+1 in the high nibble) and kv_scale (d/32 E8M0 bytes) of the
//   row's lane view. Each lane owns one code byte (an element pair) per step; the 16
//   lanes of a half-warp hold one group of 32, whose amax is reduced with amax_step
//   over xor distances 8, 4, 2, 1 (a NaN-propagating max: exact and order-free, so it
//   equals the twin's sequential reduction bit for bit). Lane 16k writes the group's
//   exponent byte. Every byte depends on its own row's inputs only.
// mxfp4_decode_rows_kernel: one warp per row; lane j of a step decodes code byte j into
//   out[row][2j], out[row][2j+1] with its group's exponent (mx_value).
// Preconditions (checked by the launchers' callers through mxfp4_check_rows): the cache
// format is mxfp4, d is a positive multiple of 32, every row addresses inside its view.
#include "kernels/backend/entry_points.h"
#include "kernels/codecs/mxfp4.h"
#include "kernels/codecs/rows_launch.cuh"

namespace kc {
namespace {

__global__ void mxfp4_encode_rows_kernel(const KvView* views, const float* x, const RowRef* rows, int n) {
  const int row = int((blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (row >= n) return;  // whole warps leave together: blockDim is a multiple of 32
  const RowRef r = rows[row];
  const KvView v = views[r.lane];
  const int d = v.lay.head_dim;
  const int pairs = d / 2;  // a multiple of 16: a group never straddles two half-warps
  const float* xr = x + size_t(row) * d;
  uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
  uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
  for (int base = 0; base < pairs; base += 32) {
    const int j = base + lane;
    const bool active = j < pairs;
    const float x0 = active ? xr[2 * j] : 0.0f;
    const float x1 = active ? xr[2 * j + 1] : 0.0f;
    float amax = amax_step(amax_step(0.0f, x0), x1);
    for (int o = 8; o > 0; o >>= 1) amax = amax_step(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    if (!active) continue;  // an idle half-warp reduced only its own zeros
    const uint8_t e = mx_group_exponent(amax);
    codes[j] = uint8_t(mx_code(x0, e) | (mx_code(x1, e) << 4));
    if ((j & 15) == 0) exps[j >> 4] = e;
  }
}

__global__ void mxfp4_decode_rows_kernel(const KvView* views, const RowRef* rows, int n, float* out) {
  const int row = int((blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (row >= n) return;
  const RowRef r = rows[row];
  const KvView v = views[r.lane];
  const int d = v.lay.head_dim;
  const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
  const uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
  float* o = out + size_t(row) * d;
  for (int j = lane; j < d / 2; j += 32) {
    const uint8_t b = codes[j];
    const uint8_t e = exps[j >> 4];
    o[2 * j] = mx_value(uint8_t(b & 0xFu), e);
    o[2 * j + 1] = mx_value(uint8_t(b >> 4), e);
  }
}

}  // namespace

Status mxfp4_encode_rows_cuda(Cache& c, const float* x, const RowRef* rows, int n) {
  KC_RETURN_IF_ERROR(mxfp4_check_rows(c, rows, n, "mxfp4_encode_rows"));
  return encode_rows_on_device(c, x, rows, n, [n](const KvView* views, const float* dx, const RowRef* dr) {
    mxfp4_encode_rows_kernel<<<warp_row_blocks(n), kWarpRowThreads>>>(views, dx, dr, n);
    KC_LAUNCH_CHECK("mxfp4_encode_rows_kernel");
    return Status::Ok();
  });
}

Status mxfp4_decode_rows_cuda(const Cache& c, const RowRef* rows, int n, float* out) {
  KC_RETURN_IF_ERROR(mxfp4_check_rows(c, rows, n, "mxfp4_decode_rows"));
  return decode_rows_on_device(c, rows, n, out, [n](const KvView* views, const RowRef* dr, float* dout) {
    mxfp4_decode_rows_kernel<<<warp_row_blocks(n), kWarpRowThreads>>>(views, dr, n, dout);
    KC_LAUNCH_CHECK("mxfp4_decode_rows_kernel");
    return Status::Ok();
  });
}

}  // namespace kc
