// q4 rows: host twins of the kernels in codecs/q4_rows.cu. The same per-group helpers
// (kernels/q4_rows.h), run row by row and group by group; every group's bytes depend on
// its own 32 inputs only, so the order of rows and groups does not matter.
#include <string>

#include "kernels/backend/backend.h"
#include "kernels/backend/entry_points.h"
#include "kernels/codecs/q4.h"

namespace kc {

// Checks shared by the cpu and cuda entry points (declared in codecs/q4.h).
Status q4_validate(const Cache& c, const RowRef* rows, int n, const char* who) {
  const std::string w = std::string(who) + ": ";
  if (c.lay.format != Format::q4)
    return Status::Error(w + "cache format is " + format_name(c.lay.format) + ", not q4");
  if (c.lay.head_dim <= 0 || c.lay.head_dim % kQ4Group != 0)
    return Status::Error(w + "head_dim " + std::to_string(c.lay.head_dim) + " is not a positive multiple of 32");
  if (n < 0) return Status::Error(w + "negative row count");
  return validate_rows(c, rows, n);
}

Status q4_encode_rows_cpu(Cache& c, const float* x, const RowRef* rows, int n) {
  KC_RETURN_IF_ERROR(q4_validate(c, rows, n, "q4_encode_rows"));
  const int d = c.lay.head_dim;
  for (int i = 0; i < n; ++i) {
    const RowRef& r = rows[i];
    const KvView v = c.view(r.lane);
    q4_encode_row(x + size_t(i) * d, d, kv_row(v, r.layer, r.kv, r.head, r.pos),
                  kv_scale(v, r.layer, r.kv, r.head, r.pos));
  }
  return Status::Ok();
}

Status q4_decode_rows_cpu(const Cache& c, const RowRef* rows, int n, float* out) {
  KC_RETURN_IF_ERROR(q4_validate(c, rows, n, "q4_decode_rows"));
  const int d = c.lay.head_dim;
  for (int i = 0; i < n; ++i) {
    const RowRef& r = rows[i];
    const KvView v = c.view(r.lane);
    q4_decode_row(kv_row(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos), d,
                  out + size_t(i) * d);
  }
  return Status::Ok();
}

}  // namespace kc
