#include <cmath>
#include <cstring>
#include <string>

#include "kernels/backend/backend.h"

namespace kc {

namespace {
Status check_count(int n, const char* who) {
  if (n < 0) return Status::Error(std::string(who) + ": row count " + std::to_string(n) + " is negative");
  return Status::Ok();
}
}  // namespace

Status validate_rows(const Cache& cache, const RowRef* rows, int n) {
  KC_RETURN_IF_ERROR(check_count(n, "rows"));
  KC_RETURN_IF_ERROR(cache.validate());
  const KvLayout& L = cache.lay;
  for (int i = 0; i < n; ++i) {
    const RowRef& r = rows[i];
    const std::string who = "row " + std::to_string(i) + ": ";
    if (r.lane < 0 || r.lane >= int(cache.views.size())) return Status::Error(who + "lane out of range");
    if (r.layer < 0 || r.layer >= L.layers) return Status::Error(who + "layer out of range");
    if (r.kv < 0 || r.kv > 1) return Status::Error(who + "kv must be 0 (K) or 1 (V)");
    if (r.head < 0 || r.head >= L.kv_heads) return Status::Error(who + "head out of range");
    if (r.pos < 0 || r.pos >= cache.views[r.lane].capacity())
      return Status::Error(who + "position " + std::to_string(r.pos) + " outside the lane's capacity " +
                           std::to_string(cache.views[r.lane].capacity()));
  }
  return Status::Ok();
}

namespace {
Status check_shape(const Cache& c, int q_heads, const char* who) {
  const KvLayout& L = c.lay;
  const auto w = [who] { return std::string(who) + ": "; };  // built only for a refusal (a decode step calls this per layer)
  // Every cache format (codecs/: Codec<F> traits) has a rope store and attention.
  if (uint8_t(L.format) > uint8_t(kLastFormat))
    return Status::Error(w() + "cache format " + std::to_string(int(L.format)) + " is not a known format");
  if (L.head_dim != 32 && L.head_dim != 64 && L.head_dim != 128 && L.head_dim != 256)
    return Status::Error(w() + "head_dim must be 32, 64, 128 or 256");
  if (q_heads <= 0 || q_heads % L.kv_heads != 0 || q_heads / L.kv_heads > 32)
    return Status::Error(w() + "q_heads must be a multiple of kv_heads, at most 32 per kv head");
  return c.validate();
}
}  // namespace

Status validate_rope(const Cache& c, const RopeParams& p, const RopeRow* rows, int n) {
  KC_RETURN_IF_ERROR(check_count(n, "rope_store"));
  KC_RETURN_IF_ERROR(check_shape(c, p.q_heads, "rope_store"));
#ifndef KC_PLANT_VALIDATE_NO_BASE_CHECK  // planted bug (test builds only): any RoPE base is accepted
  if (!(p.base > 0.0) || !std::isfinite(p.base))
#else
  if (false)
#endif
    return Status::Error("rope_store: base must be positive and finite (got " + std::to_string(p.base) + ")");
  if (p.rot_dims <= 0 || p.rot_dims % 2 || p.rot_dims > c.lay.head_dim)
    return Status::Error("rope_store: rot_dims must be even, positive and <= head_dim");
  if (p.layer < 0 || p.layer >= c.lay.layers) return Status::Error("rope_store: layer out of range");
  for (int i = 0; i < n; ++i) {
    const RopeRow& r = rows[i];
    if (r.lane < 0 || r.lane >= int(c.views.size())) return Status::Error("rope_store: row " + std::to_string(i) + ": lane out of range");
    if (r.pos < 0) return Status::Error("rope_store: row " + std::to_string(i) + ": negative position");
    if (r.slot < 0 || r.slot >= c.views[r.lane].capacity())
      return Status::Error("rope_store: row " + std::to_string(i) + ": slot outside the lane");
  }
  return Status::Ok();
}

Status validate_attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n,
                          const std::vector<int32_t>& tails) {
  KC_RETURN_IF_ERROR(check_count(n, "attention"));
  KC_RETURN_IF_ERROR(check_shape(c, p.q_heads, "attention"));
  if (!std::isfinite(p.scale)) return Status::Error("attention: scale must be finite");
  if (p.chunk <= 0 || p.chunk > 1024) return Status::Error("attention: chunk must be in 1..1024");
  if (p.layer < 0 || p.layer >= c.lay.layers) return Status::Error("attention: layer out of range");
  for (int i = 0; i < n; ++i) {
    const AttnRow& r = rows[i];
    const auto w = [i] { return "attention: row " + std::to_string(i) + ": "; };  // built only for a refusal
    if (r.lane < 0 || r.lane >= int(c.views.size())) return Status::Error(w() + "lane out of range");
    const int64_t cap = c.views[r.lane].capacity();
    if (r.len < 0 || r.len > cap) return Status::Error(w() + "committed length outside the lane");
    if (r.tail_len < 0 || r.tail_off < 0 || size_t(r.tail_off) + r.tail_len > tails.size())
      return Status::Error(w() + "tail outside the tail list");
    for (int t = 0; t < r.tail_len; ++t)
      if (tails[r.tail_off + t] < 0 || tails[r.tail_off + t] >= cap) return Status::Error(w() + "tail slot outside the lane");
  }
  return Status::Ok();
}

Status validate_keep(const Cache& c, const KeepMove* moves, int n) {
  KC_RETURN_IF_ERROR(check_count(n, "keep"));
  KC_RETURN_IF_ERROR(c.validate());
  for (int i = 0; i < n; ++i) {
    const KeepMove& m = moves[i];
    const std::string w = "keep: move " + std::to_string(i) + ": ";
    if (m.lane < 0 || m.lane >= int(c.views.size())) return Status::Error(w + "lane out of range");
    const int64_t cap = c.views[m.lane].capacity();
    if (m.src < 0 || m.src >= cap)
      return Status::Error(w + "src " + std::to_string(m.src) + " outside the lane (capacity " + std::to_string(cap) + ")");
    if (m.dst < 0 || m.dst >= cap)
      return Status::Error(w + "dst " + std::to_string(m.dst) + " outside the lane (capacity " + std::to_string(cap) + ")");
    if (m.dst >= m.src) return Status::Error(w + "dst must come before src");
    for (int j = i - 1; j >= 0; --j)
      if (moves[j].lane == m.lane) {
        if (moves[j].src >= m.src || moves[j].dst >= m.dst) return Status::Error(w + "moves of a lane must ascend");
        break;
      }
  }
  return Status::Ok();
}

Status validate_fill(const Cache& c, const ByteRange* ranges, int n) {
  if (n < 0) return Status::Error("fill: n " + std::to_string(n) + " must be at least 0");
  if (n > 0 && !ranges) return Status::Error("fill: ranges is null");
  for (int i = 0; i < n; ++i)
    if (ranges[i].offset > c.mem.size() || ranges[i].bytes > c.mem.size() - ranges[i].offset)
      return Status::Error("fill: range " + std::to_string(i) + " [" + std::to_string(ranges[i].offset) + ", +" +
                           std::to_string(ranges[i].bytes) + ") outside the cache memory (" +
                           std::to_string(c.mem.size()) + " bytes)");
  return Status::Ok();
}

Status Backend::fill(Cache& c, const ByteRange* ranges, int n, uint8_t value) {
  KC_RETURN_IF_ERROR(validate_fill(c, ranges, n));
  for (int i = 0; i < n; ++i)
    if (ranges[i].bytes) std::memset(c.mem.data() + ranges[i].offset, value, ranges[i].bytes);
  return Status::Ok();
}

}  // namespace kc
