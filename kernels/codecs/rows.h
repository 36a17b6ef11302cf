// Row codecs: encode n rows of x ([n][head_dim] fp32) into a cache through kv_row /
// kv_scale, and decode n rows back, for every format with a row codec (fp8, q4, mxfp4).
// with_row_codec is the one switch from a runtime Format to its Codec<F> (codec.h); the
// host twins (rows_twin.cpp) and the kernels (rows.cu) are written once over the codec.
// References: reference/e4m3_ref.h, q4_ref.h, mxfp4_ref.h; contracts: fp8-rows, q4-rows,
// mxfp4-rows.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/codecs/fp8.h"
#include "kernels/codecs/mxfp4.h"
#include "kernels/codecs/q4.h"

namespace kc {

// fn(Codec<F>{}) for the cache format f; a format without a row codec is an error that
// names `op`. A new format is one line here.
template <class Fn>
Status with_row_codec(Format f, const char* op, Fn&& fn) {
  switch (f) {
    case Format::fp8: return fn(Codec<Format::fp8>{});
    case Format::q4: return fn(Codec<Format::q4>{});
    case Format::mxfp4: return fn(Codec<Format::mxfp4>{});
    case Format::bf16: break;
  }
  return Status::Error(std::string(op) + ": format " + format_name(f) + " has no row codec");
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
// The kernels (rows.cu): the cache and the rows to the device, one launch, the results back.
Status encode_rows_cuda(Format f, Cache& c, const float* x, const RowRef* rows, int n);
Status decode_rows_cuda(Format f, const Cache& c, const RowRef* rows, int n, float* out);
// E4M3 conversion of the floats whose bit patterns are first .. first + count - 1, on the
// device (device pointer out).
Status launch_e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out);
#endif

}  // namespace kc
