// mxfp4 rows: the host twins of codecs/mxfp4_rows.cu. Row by row, group by group, through the
// same helpers (codecs/mxfp4.h) and the same addresses (kv_row / kv_scale), so their
// bytes equal the kernels' bytes.
#include <string>

#include "kernels/backend/backend.h"
#include "kernels/backend/entry_points.h"
#include "kernels/codecs/mxfp4.h"

namespace kc {

Status mxfp4_check_rows(const Cache& c, const RowRef* rows, int n, const char* op) {
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

Status mxfp4_encode_rows_cpu(Cache& c, const float* x, const RowRef* rows, int n) {
  KC_RETURN_IF_ERROR(mxfp4_check_rows(c, rows, n, "mxfp4_encode_rows"));
  const int d = c.lay.head_dim;
  for (int i = 0; i < n; ++i) {
    const RowRef& r = rows[i];
    const KvView v = c.view(r.lane);
    uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    const float* xr = x + size_t(i) * d;
    for (int g = 0; g < d / kMxGroup; ++g) mx_encode_group(xr + g * kMxGroup, codes + g * (kMxGroup / 2), exps + g);
  }
  return Status::Ok();
}

Status mxfp4_decode_rows_cpu(const Cache& c, const RowRef* rows, int n, float* out) {
  KC_RETURN_IF_ERROR(mxfp4_check_rows(c, rows, n, "mxfp4_decode_rows"));
  const int d = c.lay.head_dim;
  for (int i = 0; i < n; ++i) {
    const RowRef& r = rows[i];
    const KvView v = c.view(r.lane);
    const uint8_t* codes = kv_row(v, r.layer, r.kv, r.head, r.pos);
    const uint8_t* exps = kv_scale(v, r.layer, r.kv, r.head, r.pos);
    float* o = out + size_t(i) * d;
    for (int g = 0; g < d / kMxGroup; ++g) mx_decode_group(codes + g * (kMxGroup / 2), exps[g], o + g * kMxGroup);
  }
  return Status::Ok();
}

}  // namespace kc
