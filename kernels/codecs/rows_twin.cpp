// Host twins of the row codec kernels (rows.cu): the same per-row helpers of each format's
// header, run row by row; every row's bytes depend on its own inputs only, so the order
// of rows does not matter. Also each codec's check(), shared by both backends.
#include <string>

#include "kernels/codecs/rows.h"

namespace kc {

Status Codec<Format::fp8>::check(const Cache& c, const RowRef* rows, int n, const char* op) {
  if (c.lay.format != Format::fp8) return Status::Error(std::string(op) + ": cache format is not fp8");
  return validate_rows(c, rows, n);
}

Status Codec<Format::q4>::check(const Cache& c, const RowRef* rows, int n, const char* op) {
  const std::string w = std::string(op) + ": ";
  if (c.lay.format != Format::q4)
    return Status::Error(w + "cache format is " + format_name(c.lay.format) + ", not q4");
  if (c.lay.head_dim <= 0 || c.lay.head_dim % kQ4Group != 0)
    return Status::Error(w + "head_dim " + std::to_string(c.lay.head_dim) + " is not a positive multiple of 32");
  if (n < 0) return Status::Error(w + "negative row count");
  return validate_rows(c, rows, n);
}

Status Codec<Format::mxfp4>::check(const Cache& c, const RowRef* rows, int n, const char* op) {
  const std::string who = std::string(op) + ": ";
  if (c.lay.format != Format::mxfp4)
    return Status::Error(who + "cache format is " + format_name(c.lay.format) + ", expected mxfp4");
  if (c.lay.head_dim <= 0 || c.lay.head_dim % kMxGroup != 0)
    return Status::Error(who + "head_dim " + std::to_string(c.lay.head_dim) +
                         " is not a positive multiple of 32 (one E8M0 exponent per 32 values)");
  if (n < 0) return Status::Error(who + "negative row count");
  if (n > 0 && (rows == nullptr)) return Status::Error(who + "null row list");
  const Status st = validate_rows(c, rows, n);
  if (!st.ok) return Status::Error(who + st.message);
  return Status::Ok();
}

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
