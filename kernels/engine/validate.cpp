// Argument checks of the engine kernels, shared by every engine: a refusal names the
// kernel, the argument and its value, and comes before anything is written.
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/engine/engine_backend.h"

namespace kc {
namespace {

Status at_least(const char* op, const char* arg, int64_t v, int64_t lo) {
  if (v >= lo) return Status::Ok();
  return Status::Error(std::string(op) + ": " + arg + " " + std::to_string(v) + ": must be at least " + std::to_string(lo));
}

// A pointer the call reads or writes (work > 0) must not be null.
Status present(const char* op, const char* arg, const void* p, int64_t work) {
  if (p || work <= 0) return Status::Ok();
  return Status::Error(std::string(op) + ": " + arg + ": null pointer");
}

Status eps_ok(const char* op, float eps) {
  if (std::isfinite(eps) && eps >= 0.0f) return Status::Ok();
  return Status::Error(std::string(op) + ": eps " + std::to_string(eps) + ": must be finite and not negative");
}

}  // namespace

Status validate_embed(const uint16_t* E, int64_t vocab, int64_t dim, const int32_t* tokens, int n, const float* out) {
  KC_RETURN_IF_ERROR(at_least("embed", "vocab", vocab, 1));
  KC_RETURN_IF_ERROR(at_least("embed", "dim", dim, 1));
  KC_RETURN_IF_ERROR(at_least("embed", "n", n, 0));
  KC_RETURN_IF_ERROR(present("embed", "E", E, n));
  KC_RETURN_IF_ERROR(present("embed", "tokens", tokens, n));
  return present("embed", "out", out, n);
}

Status validate_rms_norm(const float* x, const float* w, int n, int dim, float eps, const float* out) {
  KC_RETURN_IF_ERROR(at_least("rms_norm", "dim", dim, 1));
  KC_RETURN_IF_ERROR(at_least("rms_norm", "n", n, 0));
  KC_RETURN_IF_ERROR(eps_ok("rms_norm", eps));
  KC_RETURN_IF_ERROR(present("rms_norm", "x", x, n));
  KC_RETURN_IF_ERROR(present("rms_norm", "w", w, n));
  return present("rms_norm", "out", out, n);
}

Status validate_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, const float* y) {
  KC_RETURN_IF_ERROR(at_least("matmul", "rows", rows, 1));
  KC_RETURN_IF_ERROR(at_least("matmul", "cols", cols, 1));
  KC_RETURN_IF_ERROR(at_least("matmul", "n", n, 0));
  KC_RETURN_IF_ERROR(present("matmul", "W", W, n));
  KC_RETURN_IF_ERROR(present("matmul", "x", x, n));
  return present("matmul", "y", y, n);
}

Status validate_add_rms_norm(const float* h, const float* t, const float* w, int n, int dim, float eps,
                             const float* out) {
  KC_RETURN_IF_ERROR(at_least("add_rms_norm", "dim", dim, 1));
  KC_RETURN_IF_ERROR(at_least("add_rms_norm", "n", n, 0));
  KC_RETURN_IF_ERROR(eps_ok("add_rms_norm", eps));
  KC_RETURN_IF_ERROR(present("add_rms_norm", "h", h, n));
  KC_RETURN_IF_ERROR(present("add_rms_norm", "t", t, n));
  KC_RETURN_IF_ERROR(present("add_rms_norm", "w", w, n));
  return present("add_rms_norm", "out", out, n);
}

Status EngineBackend::add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out) {
  KC_RETURN_IF_ERROR(validate_add_rms_norm(h, t, w, n, dim, eps, out));
  KC_RETURN_IF_ERROR(add(h, t, int64_t(n) * dim));
  return rms_norm(h, w, n, dim, eps, out);
}

Status validate_rms_norm_parts(const NormPart* parts, int count, int dim, float eps) {
  KC_RETURN_IF_ERROR(at_least("rms_norm_parts", "count", count, 1));
  if (count > kNormPartsMax)
    return Status::Error("rms_norm_parts: count " + std::to_string(count) + ": must be at most " +
                         std::to_string(kNormPartsMax));
  if (!parts) return Status::Error("rms_norm_parts: parts: null pointer");
  int64_t rows = 0;
  for (int i = 0; i < count; ++i) {
    const Status st = validate_rms_norm(parts[i].x, parts[i].w, parts[i].n, dim, eps, parts[i].out);
    if (!st.ok) return Status::Error("rms_norm_parts: part " + std::to_string(i) + ": " + st.message);
    rows += parts[i].n;
  }
  if (rows > INT32_MAX)
    return Status::Error("rms_norm_parts: " + std::to_string(rows) + " rows in all: must be at most " +
                         std::to_string(INT32_MAX));
  // One launch runs the parts at once, the default one after another: a part's output may
  // be its own x, but no other part's x or output (the two would give different bytes).
  const auto bytes = [&](const NormPart& p) { return uintptr_t(p.n) * uintptr_t(dim) * sizeof(float); };
  for (int j = 1; j < count; ++j)
    for (int i = 0; i < j; ++i) {
      const NormPart &a = parts[i], &b = parts[j];
      const uintptr_t na = bytes(a), nb = bytes(b);
      const char* what = byte_ranges_overlap(a.out, na, b.out, nb) ? "out overlaps part "
                         : byte_ranges_overlap(a.out, na, b.x, nb) ? "x overlaps the out of part "
                         : byte_ranges_overlap(b.out, nb, a.x, na) ? "out overlaps the x of part "
                                                                   : nullptr;
      if (what) return Status::Error("rms_norm_parts: part " + std::to_string(j) + ": " + what + std::to_string(i));
    }
  return Status::Ok();
}

Status EngineBackend::rms_norm_parts(const NormPart* parts, int count, int dim, float eps) {
  KC_RETURN_IF_ERROR(validate_rms_norm_parts(parts, count, dim, eps));
  for (int i = 0; i < count; ++i)
    KC_RETURN_IF_ERROR(rms_norm(parts[i].x, parts[i].w, parts[i].n, dim, eps, parts[i].out));
  return Status::Ok();
}

Status validate_matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n) {
  KC_RETURN_IF_ERROR(at_least("matmul_parts", "count", count, 1));
  if (count > 3) return Status::Error("matmul_parts: count " + std::to_string(count) + ": must be at most 3");
  if (!parts) return Status::Error("matmul_parts: parts: null pointer");
  for (int i = 0; i < count; ++i) {
    const Status st = validate_matmul(parts[i].W, parts[i].rows, cols, x, n, parts[i].y);
    if (!st.ok) return Status::Error("matmul_parts: part " + std::to_string(i) + ": " + st.message);
  }
  return Status::Ok();
}

Status EngineBackend::matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n) {
  KC_RETURN_IF_ERROR(validate_matmul_parts(parts, count, cols, x, n));
  for (int i = 0; i < count; ++i) KC_RETURN_IF_ERROR(matmul(parts[i].W, parts[i].rows, cols, x, n, parts[i].y));
  return Status::Ok();
}

Status validate_swiglu(const float* gate, const float* up, int64_t count, const float* out) {
  KC_RETURN_IF_ERROR(at_least("swiglu", "count", count, 0));
  KC_RETURN_IF_ERROR(present("swiglu", "gate", gate, count));
  KC_RETURN_IF_ERROR(present("swiglu", "up", up, count));
  return present("swiglu", "out", out, count);
}

Status validate_add(const float* h, const float* t, int64_t count) {
  KC_RETURN_IF_ERROR(at_least("add", "count", count, 0));
  KC_RETURN_IF_ERROR(present("add", "h", h, count));
  return present("add", "t", t, count);
}

Status validate_logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps,
                       const uint16_t* W, int64_t vocab, const float* out) {
  KC_RETURN_IF_ERROR(at_least("logits", "vocab", vocab, 1));
  KC_RETURN_IF_ERROR(at_least("logits", "dim", dim, 1));
  KC_RETURN_IF_ERROR(at_least("logits", "m", m, 0));
  KC_RETURN_IF_ERROR(eps_ok("logits", eps));
  KC_RETURN_IF_ERROR(present("logits", "h", h, m));
  KC_RETURN_IF_ERROR(present("logits", "sel", sel, m));
  KC_RETURN_IF_ERROR(present("logits", "norm", norm, m));
  KC_RETURN_IF_ERROR(present("logits", "W", W, m));
  KC_RETURN_IF_ERROR(present("logits", "out", out, m));
  for (int j = 0; j < m; ++j)  // sel is a host array
    if (sel[j] < 0)
      return Status::Error("logits: sel[" + std::to_string(j) + "] " + std::to_string(sel[j]) + ": must be at least 0");
  return Status::Ok();
}

Status validate_argmax(const float* x, int n, int64_t len, const int32_t* out) {
  KC_RETURN_IF_ERROR(at_least("argmax", "len", len, 1));
  // out holds int32 indices: a row longer than 2^31 would give an index that does not fit.
  if (len > (int64_t(1) << 31))
    return Status::Error("argmax: len " + std::to_string(len) + ": must be at most 2147483648 (the index is an int32)");
  KC_RETURN_IF_ERROR(at_least("argmax", "n", n, 0));
  KC_RETURN_IF_ERROR(present("argmax", "x", x, n));
  return present("argmax", "out", out, n);
}

}  // namespace kc
