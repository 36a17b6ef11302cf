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
// Preconditions (Codec<F>::check, before anything is copied): the cache format is F, the
// head_dim fits the codec, every row addresses inside its view.
#include <cuda_runtime.h>

#include "kernels/backend/cuda_check.h"
#include "kernels/backend/device_cache.h"
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

Status encode_rows_cuda(Format f, Cache& c, const float* x, const RowRef* rows, int n) {
  return with_row_codec(f, "encode_rows", [&](auto codec) {
    using C = decltype(codec);
    KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>("encode_rows").c_str()));
    if (n == 0) return Status::Ok();
    const int d = c.lay.head_dim;
    DeviceCache dc;
    DevBuf<float> dx;
    DevBuf<RowRef> dr;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dx.upload(x, size_t(n) * d));
    KC_RETURN_IF_ERROR(dr.upload(rows, size_t(n)));
    encode_rows_kernel<C><<<codec_blocks<C>(n, d), C::kThreads>>>(dc.views.get(), dx.get(), dr.get(), n, d);
    KC_LAUNCH_CHECK("encode_rows_kernel");
    return dc.download(c);
  });
}

Status decode_rows_cuda(Format f, const Cache& c, const RowRef* rows, int n, float* out) {
  return with_row_codec(f, "decode_rows", [&](auto codec) {
    using C = decltype(codec);
    KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>("decode_rows").c_str()));
    if (n == 0) return Status::Ok();
    const int d = c.lay.head_dim;
    DeviceCache dc;
    DevBuf<RowRef> dr;
    DevBuf<float> dout;
    KC_RETURN_IF_ERROR(dc.upload(c));
    KC_RETURN_IF_ERROR(dr.upload(rows, size_t(n)));
    KC_RETURN_IF_ERROR(dout.alloc(size_t(n) * d));
    decode_rows_kernel<C><<<codec_blocks<C>(n, d), C::kThreads>>>(dc.views.get(), dr.get(), n, d, dout.get());
    KC_LAUNCH_CHECK("decode_rows_kernel");
    return dout.download(out, size_t(n) * d);
  });
}

Status launch_e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out) {
  if (count == 0) return Status::Ok();
  e4m3_encode_bits_kernel<<<4096, 256>>>(first, count, out);
  KC_LAUNCH_CHECK("e4m3_encode_bits_kernel");
  return Status::Ok();
}

}  // namespace kc
