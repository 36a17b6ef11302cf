// Row codecs: encode n rows of x ([n][head_dim] fp32) into a cache through kv_row /
// kv_scale, and decode n rows back, for every format with a row codec (fp8, q4, mxfp4).
// with_row_codec is the one switch from a runtime Format to its Codec<F> (codec.h); the
// host twins (rows_twin.cpp) and the kernels (rows.cu) are written once over the codec.
// References: reference/e4m3_ref.h, q4_ref.h, mxfp4_ref.h; contracts: fp8-rows, q4-rows,
// mxfp4-rows.
#pragma once
#include <cstdint>
#include <string>

#ifdef KC_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "kernels/codecs/bf16.h"
#include "kernels/codecs/fp8.h"
#include "kernels/codecs/mxfp4.h"
#include "kernels/codecs/q4.h"

namespace kc {

// fn(Codec<F>{}) for the cache format f: the one switch from a runtime Format to its codec
// traits (codec.h), on the host and on the device. A new format is one line here. Callers
// pass a checked format (Cache::validate, the blob parser); any other value runs bf16's.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Fn>
KC_HD decltype(auto) with_format(Format f, Fn&& fn) {
  switch (f) {
    case Format::fp8: return fn(Codec<Format::fp8>{});
    case Format::q4: return fn(Codec<Format::q4>{});
    case Format::mxfp4: return fn(Codec<Format::mxfp4>{});
    case Format::bf16: break;
  }
  return fn(Codec<Format::bf16>{});
}

// fn(Codec<F>{}) for a format with a row codec (kRowCodec); any other format is an error
// that names `op`.
template <class Fn>
Status with_row_codec(Format f, const char* op, Fn&& fn) {
  return with_format(f, [&](auto codec) -> Status {
    if constexpr (decltype(codec)::kRowCodec) return fn(codec);
    else return Status::Error(std::string(op) + ": format " + format_name(f) + " has no row codec");
  });
}

// The operation's name in messages: "<format>_encode_rows" / "<format>_decode_rows".
template <class C>
std::string codec_op(const char* what) {
  return std::string(C::kName) + "_" + what;
}

// Host twins: row by row through Codec<F>::encode_row / decode_row.
Status encode_rows_host(Format f, Cache& c, const float* x, const RowRef* rows, int n);
Status decode_rows_host(Format f, const Cache& c, const RowRef* rows, int n, float* out);

#ifdef KC_HAVE_CUDA
// The kernels (rows.cu) on device pointers, enqueued on s: n rows of x ([n][d]) into the
// views' cache, or out of it into out ([n][d]); E4M3 conversion of the floats whose bit
// patterns are first .. first + count - 1.
Status launch_encode_rows(Format f, const KvView* views, const float* x, const RowRef* rows, int n, int d,
                         cudaStream_t s);
Status launch_decode_rows(Format f, const KvView* views, const RowRef* rows, int n, int d, float* out,
                         cudaStream_t s);
Status launch_e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out, cudaStream_t s);
#endif

}  // namespace kc
