// The kv-gate's controls at the backend boundary (the contracts/faulty_backend.h pattern):
// a Backend that forwards every operation to the real one and misbehaves in one named way.
// No kernel is edited; the engine runs unchanged on top.
//   q4_query_unrotated        q4 attention scores the query in original space against keys
//                             stored Hadamard-rotated: the query handed to attention is
//                             pre-rotated with hadamard32_fwd per group of 32, which the
//                             kernel's own inverse rotation (q4_rotate_query) undoes
//                             exactly (2^-2 H 2^-3 H = I), so the kernel sees q unrotated.
//   scales_from_neighbour_row after every rope store, the scale entry of the row before each
//                             stored row (slot - 1) is overwritten with the stored row's own
//                             scale, so every committed row is decoded with the scale of the
//                             row after it (the last row stored keeps its own).
//   probe_query_zeroed        attention rows of lane 1 (the recall probes' lane) score a zero
//                             query: every key weighs the same, so the probe attends its
//                             whole context uniformly and cannot pick the passphrase out.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/backend/forwarding.h"
#include "kernels/codecs/q4.h"

namespace kc::engine {

enum class KvPlant { none, q4_query_unrotated, scales_from_neighbour_row, probe_query_zeroed };

class KvPlantBackend final : public ForwardingBackend {
 public:
  KvPlantBackend(Backend& real, KvPlant p) : ForwardingBackend(real), plant_(p) {}

  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    KC_RETURN_IF_ERROR(real_.rope_store(c, p, rows, n, q, k, v, q_out));
    if (plant_ != KvPlant::scales_from_neighbour_row || c.lay.scale_bytes == 0) return Status::Ok();
    std::vector<RopeRow> order(rows, rows + n);
    std::sort(order.begin(), order.end(),
              [](const RopeRow& a, const RopeRow& b) { return a.lane != b.lane ? a.lane < b.lane : a.slot < b.slot; });
    for (const RopeRow& r : order) {  // ascending: slot - 1 still holds its own scale when read below
      if (r.slot == 0) continue;
      const KvView view = c.view(r.lane);
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < c.lay.kv_heads; ++h)
          std::memcpy(kv_scale(view, p.layer, kv, h, r.slot - 1), kv_scale(view, p.layer, kv, h, r.slot),
                      c.lay.scale_bytes);
    }
    ++planted_;
    return Status::Ok();
  }

  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    if (plant_ == KvPlant::probe_query_zeroed) {
      const size_t per_row = size_t(p.q_heads) * c.lay.head_dim;
      std::vector<float> qq(q, q + size_t(n) * per_row);
      bool acted = false;
      for (int i = 0; i < n; ++i)
        if (rows[i].lane == 1) {
          std::fill(qq.begin() + ptrdiff_t(i * per_row), qq.begin() + ptrdiff_t((i + 1) * per_row), 0.0f);
          acted = true;
        }
      planted_ += acted;
      return real_.attention(c, p, rows, n, tails, qq.data(), out);
    }
    if (plant_ != KvPlant::q4_query_unrotated || c.lay.format != Format::q4)
      return real_.attention(c, p, rows, n, tails, q, out);
    const int d = c.lay.head_dim;
    std::vector<float> qq(q, q + size_t(n) * p.q_heads * d);
    for (size_t off = 0; off < qq.size(); off += kQ4Group) hadamard32_fwd(qq.data() + off);
    ++planted_;
    return real_.attention(c, p, rows, n, tails, qq.data(), out);
  }

  // Calls in which the plant acted (a control whose plant never acted is reported as such).
  int planted() const { return planted_; }

 private:
  KvPlant plant_;
  int planted_ = 0;
};

}  // namespace kc::engine
