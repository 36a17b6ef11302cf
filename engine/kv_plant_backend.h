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
// Where the real backend has an engine (cpu, cuda), engine() is a KvPlantBackend::Engine over it, and
// the plants act there too: the planted arm then runs on the real engine (on cuda with the
// cache held on the device, as the gate's own arms run) instead of the host twins over a
// cache copied to the device and back in every call. On that path a planted query is
// downloaded, changed on the host and uploaded to the engine's scratch slot
// kKvPlantScratchSlot (the model's forward uses slots 0-11); the neighbour scales are moved
// in a pack of the stored rows' range (Backend::pack, which reads a held cache's device copy),
// resealed and unpacked. Both paths give the same bytes (tests/engine/kv_gate_test.cpp).
#pragma once
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend/forwarding.h"
#include "kernels/codecs/q4.h"
#include "kernels/engine/engine_backend.h"
#include "kernels/pack/blob.h"

namespace kc::engine {

enum class KvPlant { none, q4_query_unrotated, scales_from_neighbour_row, probe_query_zeroed };

// The engine scratch slot a planted query is uploaded to (engine path).
constexpr int kKvPlantScratchSlot = EngineBackend::kScratchSlots - 1;

class KvPlantBackend final : public ForwardingBackend {
 public:
  KvPlantBackend(Backend& real, KvPlant p) : ForwardingBackend(real), plant_(p) {
    if (EngineBackend* e = real.engine()) engine_ = std::make_unique<Engine>(*e, *this);
  }
  EngineBackend* engine() override { return engine_.get(); }

  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    KC_RETURN_IF_ERROR(real_.rope_store(c, p, rows, n, q, k, v, q_out));
    if (!plants_scales(c, n)) return Status::Ok();
    for (const RopeRow& r : ascending(rows, n)) {  // ascending: slot - 1 still holds its own scale when read below
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
    if (!plants_query(c, rows, n)) return real_.attention(c, p, rows, n, tails, q, out);
    ++planted_;
    std::vector<float> qq(q, q + size_t(n) * p.q_heads * c.lay.head_dim);
    plant_query(c, p, rows, n, qq.data());
    return real_.attention(c, p, rows, n, tails, qq.data(), out);
  }

  // Calls in which the plant acted (a control whose plant never acted is reported as such).
  int planted() const { return planted_; }

 private:
  // The plants on the real engine: the same changes to the same bytes, on its memory.
  class Engine final : public ForwardingEngine {
   public:
    Engine(EngineBackend& in, KvPlantBackend& owner) : ForwardingEngine(in), o_(owner) {}
    // The joined launches stay joined (ForwardingEngine splits them into plain calls).
    Status rms_norm_parts(const NormPart* parts, int count, int dim, float eps) override {
      return in_.rms_norm_parts(parts, count, dim, eps);
    }
    Status matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n) override {
      return in_.matmul_parts(parts, count, cols, x, n);
    }
    Status add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out) override {
      return in_.add_rms_norm(h, t, w, n, dim, eps, out);
    }
    Status set_debug(const Debug& d) override { return in_.set_debug(d); }
    Status take_profile(Profile* p) override { return in_.take_profile(p); }

    Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                      const float* v, float* q_out) override {
      KC_RETURN_IF_ERROR(in_.rope_store(c, p, rows, n, q, k, v, q_out));
      if (!o_.plants_scales(c, n)) return Status::Ok();
      const std::vector<RopeRow> order = ascending(rows, n);
      const uint32_t sb = c.lay.scale_bytes;
      for (size_t i = 0; i < order.size();) {  // one pack per lane: its rows' slots and the slot before
        size_t j = i;
        while (j < order.size() && order[j].lane == order[i].lane) ++j;
        const int64_t lo = std::max<int32_t>(0, order[i].slot - 1), count = order[j - 1].slot - lo + 1;
        std::vector<uint8_t> blob;
        KC_RETURN_IF_ERROR(o_.real_.pack(c, order[i].lane, lo, count, &blob));
        const PackPlan plan = pack_plan(c.lay, uint64_t(count));
        for (size_t r = i; r < j; ++r) {  // ascending, as the host path
          if (order[r].slot == 0) continue;
          for (int kv = 0; kv < 2; ++kv)
            for (int h = 0; h < c.lay.kv_heads; ++h) {
              uint8_t* f = blob.data() + plan.fields[size_t(c.lay.planes() + c.lay.plane_index(p.layer, kv, h))].offset;
              std::memcpy(f + (order[r].slot - 1 - lo) * sb, f + (order[r].slot - lo) * sb, sb);
            }
        }
        pack_seal(blob);
        KC_RETURN_IF_ERROR(o_.real_.unpack(c, order[i].lane, lo, blob));
        i = j;
      }
      ++o_.planted_;
      return Status::Ok();
    }

    Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& t,
                     const float* q, float* out) override {
      if (!o_.plants_query(c, rows, n)) return in_.attention(c, p, rows, n, t, q, out);
      ++o_.planted_;
      const size_t bytes = size_t(n) * p.q_heads * c.lay.head_dim * sizeof(float);
      std::vector<float> qq(bytes / sizeof(float));
      KC_RETURN_IF_ERROR(in_.download(qq.data(), q, bytes));
      o_.plant_query(c, p, rows, n, qq.data());
      void* dq;
      KC_RETURN_IF_ERROR(in_.scratch(kKvPlantScratchSlot, bytes, &dq));
      KC_RETURN_IF_ERROR(in_.upload(dq, qq.data(), bytes));
      return in_.attention(c, p, rows, n, t, static_cast<const float*>(dq), out);
    }

   private:
    KvPlantBackend& o_;
  };

  static std::vector<RopeRow> ascending(const RopeRow* rows, int n) {
    std::vector<RopeRow> order(rows, rows + n);
    std::sort(order.begin(), order.end(),
              [](const RopeRow& a, const RopeRow& b) { return a.lane != b.lane ? a.lane < b.lane : a.slot < b.slot; });
    return order;
  }
  bool plants_scales(const Cache& c, int n) const {
    return plant_ == KvPlant::scales_from_neighbour_row && c.lay.scale_bytes != 0 && n > 0;
  }
  // Whether this attention call's query is planted (a call counts as planted where it is).
  bool plants_query(const Cache& c, const AttnRow* rows, int n) const {
    if (plant_ == KvPlant::probe_query_zeroed)
      return std::any_of(rows, rows + n, [](const AttnRow& r) { return r.lane == 1; });
    return plant_ == KvPlant::q4_query_unrotated && c.lay.format == Format::q4 && n > 0;
  }
  // The planted query in host memory ([n][q_heads][head_dim]).
  void plant_query(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, float* q) const {
    const size_t per_row = size_t(p.q_heads) * c.lay.head_dim;
    if (plant_ == KvPlant::probe_query_zeroed) {
      for (int i = 0; i < n; ++i)
        if (rows[i].lane == 1) std::fill(q + i * per_row, q + (i + 1) * per_row, 0.0f);
      return;
    }
    for (size_t off = 0; off < size_t(n) * per_row; off += kQ4Group) hadamard32_fwd(q + off);
  }

  KvPlant plant_;
  int planted_ = 0;
  std::unique_ptr<Engine> engine_;
};

}  // namespace kc::engine
