// q4 row kernels (Hadamard-rotated 4-bit groups; the rule is documented in codecs/q4.h).
//
// q4_encode_rows_kernel: one thread per (row, group). Thread t handles row t / G, group
//   t % G (G = head_dim / 32): it copies the group's 32 fp32 inputs from x ([n][d],
//   row-major) into registers, applies hadamard32_fwd (five butterfly stages, then 2^-3),
//   and writes 16 code bytes at kv_row(...) + 16 g and the fp16 scale at
//   kv_scale(...) + 2 g through the row's lane view. The helpers are the host twin's
//   (q4_encode_group): adds and subtracts, one exact power-of-two scaling, IEEE division
//   y / s, rintf (cvt.rni) and a software fp16 conversion, so nothing can be contracted
//   or rounded differently: device bytes == host-twin bytes.
// q4_decode_rows_kernel: one thread per (row, group); out[row][32 g + j] = the group
//   dequantized and inv-rotated (q4_decode_group; exact in fp32).
// Preconditions (checked by q4_validate before any copy): cache format q4, head_dim a
// positive multiple of 32, every row inside its lane's view. Rows may come from any
// lanes in any order; each group's bytes depend on its own inputs alone.
#include "kernels/backend/entry_points.h"
#include "kernels/codecs/q4.h"
#include "kernels/codecs/rows_launch.cuh"

namespace kc {

__global__ void q4_encode_rows_kernel(const KvView* views, const float* x, const RowRef* rows, int n, int d) {
  const int groups = d / kQ4Group;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= int64_t(n) * groups) return;
  const int row = int(t / groups), g = int(t % groups);
  const RowRef r = rows[row];
  const KvView v = views[r.lane];
  q4_encode_group(x + size_t(row) * d + kQ4Group * g, kv_row(v, r.layer, r.kv, r.head, r.pos) + 16 * g,
                  kv_scale(v, r.layer, r.kv, r.head, r.pos) + 2 * g);
}

__global__ void q4_decode_rows_kernel(const KvView* views, const RowRef* rows, int n, int d, float* out) {
  const int groups = d / kQ4Group;
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= int64_t(n) * groups) return;
  const int row = int(t / groups), g = int(t % groups);
  const RowRef r = rows[row];
  const KvView v = views[r.lane];
  q4_decode_group(kv_row(v, r.layer, r.kv, r.head, r.pos) + 16 * g, kv_scale(v, r.layer, r.kv, r.head, r.pos) + 2 * g,
                  out + size_t(row) * d + kQ4Group * g);
}

namespace {
int q4_blocks(int n, int d, int threads) {
  return int((int64_t(n) * (d / kQ4Group) + threads - 1) / threads);
}
}  // namespace

Status q4_encode_rows_cuda(Cache& c, const float* x, const RowRef* rows, int n) {
  KC_RETURN_IF_ERROR(q4_validate(c, rows, n, "q4_encode_rows"));
  const int d = c.lay.head_dim;
  return encode_rows_on_device(c, x, rows, n, [n, d](const KvView* views, const float* dx, const RowRef* dr) {
    const int threads = 128;
    q4_encode_rows_kernel<<<q4_blocks(n, d, threads), threads>>>(views, dx, dr, n, d);
    KC_LAUNCH_CHECK("q4_encode_rows_kernel");
    return Status::Ok();
  });
}

Status q4_decode_rows_cuda(const Cache& c, const RowRef* rows, int n, float* out) {
  KC_RETURN_IF_ERROR(q4_validate(c, rows, n, "q4_decode_rows"));
  const int d = c.lay.head_dim;
  return decode_rows_on_device(c, rows, n, out, [n, d](const KvView* views, const RowRef* dr, float* dout) {
    const int threads = 128;
    q4_decode_rows_kernel<<<q4_blocks(n, d, threads), threads>>>(views, dr, n, d, dout);
    KC_LAUNCH_CHECK("q4_decode_rows_kernel");
    return Status::Ok();
  });
}

}  // namespace kc
