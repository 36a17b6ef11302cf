// Row codec kernels, written once over Codec<F> (codec.h; each format's rule is in its
// header: fp8.h, q4.h, mxfp4.h). Host twins: rows_twin.cpp.
//
// encode_rows_kernel<F>: thread t of the grid does Codec<F>::encode_thread(.., t): row i
//   of x ([n][d] fp32, row-major) is encoded and stored through kv_row / kv_scale of the
//   row's lane view. Rows may come from any lanes in any order; each row's bytes depend on
//   that row's inputs alone.
// decode_rows_kernel<F>: out[i][j] = element j of row i, decoded (q4: back in original
//   space).
// e4m3_encode_bits_kernel: out[i] = E4M3(float with bits first + i), the device path of
//   the fp8 conversion (the fp8-rows contract compares it with the host's on all 2^32).
// Launchers: device pointers in, enqueued on the caller's stream, Status out. Preconditions
// (Codec<F>::check on the host image, by the caller): the cache format is F, the head_dim
// fits the codec, every row addresses inside its view.
#include <cuda_runtime.h>

#include "kernels/backend/cuda_check.h"
#include "kernels/codecs/rows.h"

namespace kc {
namespace {

template <class C>
__global__ void encode_rows_kernel(const KvView* views, const float* x, const RowRef* rows, int n, int d) {
  C::encode_thread(views, x, rows, n, d, int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
}

template <class C>
__global__ void decode_rows_kernel(const KvView* views, const RowRef* rows, int n, int d, float* out) {
  C::decode_thread(views, rows, n, d, out, int64_t(blockIdx.x) * blockDim.x + threadIdx.x);
}

__global__ void e4m3_encode_bits_kernel(uint64_t first, uint64_t count, uint8_t* out) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    out[i] = e4m3_encode(bits_float(uint32_t(first + i)));
}

template <class C>
unsigned codec_blocks(int n, int d) {
  return unsigned((C::threads(n, d) + C::kThreads - 1) / C::kThreads);
}

}  // namespace

Status launch_encode_rows(Format f, const KvView* views, const float* x, const RowRef* rows, int n, int d,
                         cudaStream_t s) {
  return with_row_codec(f, "encode_rows", [&](auto codec) {
    using C = decltype(codec);
    if (n == 0) return Status::Ok();
    encode_rows_kernel<C><<<codec_blocks<C>(n, d), C::kThreads, 0, s>>>(views, x, rows, n, d);
    KC_LAUNCH_CHECK("encode_rows_kernel");
    return Status::Ok();
  });
}

Status launch_decode_rows(Format f, const KvView* views, const RowRef* rows, int n, int d, float* out,
                         cudaStream_t s) {
  return with_row_codec(f, "decode_rows", [&](auto codec) {
    using C = decltype(codec);
    if (n == 0) return Status::Ok();
    decode_rows_kernel<C><<<codec_blocks<C>(n, d), C::kThreads, 0, s>>>(views, rows, n, d, out);
    KC_LAUNCH_CHECK("decode_rows_kernel");
    return Status::Ok();
  });
}

Status launch_e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out, cudaStream_t s) {
  if (count == 0) return Status::Ok();
  e4m3_encode_bits_kernel<<<4096, 256, 0, s>>>(first, count, out);
  KC_LAUNCH_CHECK("e4m3_encode_bits_kernel");
  return Status::Ok();
}

}  // namespace kc
