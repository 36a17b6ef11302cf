// Host twins of the row codec kernels (rows.cu): the same per-row helpers of each format's
// header, run row by row; every row's bytes depend on its own inputs only, so the order
// of rows does not matter.
#include <string>

#include "kernels/codecs/rows.h"

namespace kc {

Status encode_rows_host(Format f, Cache& c, const float* x, const RowRef* rows, int n) {
  return with_row_codec(f, "encode_rows", [&](auto codec) {
    using C = decltype(codec);
    KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>("encode_rows").c_str()));
    for (int i = 0; i < n; ++i) C::encode_row(c.view(rows[i].lane), x + size_t(i) * c.lay.head_dim, rows[i]);
    return Status::Ok();
  });
}

Status decode_rows_host(Format f, const Cache& c, const RowRef* rows, int n, float* out) {
  return with_row_codec(f, "decode_rows", [&](auto codec) {
    using C = decltype(codec);
    KC_RETURN_IF_ERROR(C::check(c, rows, n, codec_op<C>("decode_rows").c_str()));
    for (int i = 0; i < n; ++i) C::decode_row(c.view(rows[i].lane), rows[i], out + size_t(i) * c.lay.head_dim);
    return Status::Ok();
  });
}

}  // namespace kc
