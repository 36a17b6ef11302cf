// Decorators' bases. ForwardingBackend forwards every Backend operation to another backend
// and ForwardingEngine every EngineBackend operation to another engine; a control's
// decorator (contracts/faulty_backend.h, contracts/refusals.cpp, the rows-invariant
// engines, engine/kv_plant_backend.h) overrides only the operations it plants in.
// ForwardingBackend has no engine of its own (engine() stays null): the engine then runs
// the host twins over the decorator and its KV steps go through the plants. A decorator may
// hand out a ForwardingEngine over the real engine instead (engine/kv_plant_backend.h), so
// that its plants act where the real engine runs.
#pragma once
#include <string>
#include <vector>

#include "kernels/backend/backend.h"
#include "kernels/engine/engine_backend.h"

namespace kc {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& real) : real_(real) {}
  std::string name() const override { return real_.name(); }
  DeviceInfo device() const override { return real_.device(); }
  AttnArith attention_arith(Format f, int d) const override { return real_.attention_arith(f, d); }
  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* r, int n) override {
    return real_.encode_rows(f, c, x, r, n);
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    return real_.decode_rows(f, c, r, n, o);
  }
  Status e4m3_encode_bits(uint64_t a, uint64_t n, uint8_t* o) override { return real_.e4m3_encode_bits(a, n, o); }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    return real_.rope_store(c, p, rows, n, q, k, v, q_out);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    return real_.attention(c, p, rows, n, tails, q, out);
  }
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    return real_.pack(c, lane, p0, n, b);
  }
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override { return real_.unpack(c, lane, p0, b); }
  Status keep(Cache& c, const KeepMove* m, int n) override { return real_.keep(c, m, n); }
  // fill and the fences keep Backend's defaults: a decorator holds nothing (engine() is
  // null), so its caches live in host memory and its work is done when a call returns.
  MemoryStats memory_stats() const override { return real_.memory_stats(); }
  void reset_peak_memory() override { real_.reset_peak_memory(); }

 protected:
  Backend& real_;
};

// The launches that join several kernels (matmul_parts, rms_norm_parts, add_rms_norm) keep
// EngineBackend's defaults here: through a decorator they run as the plain calls they join,
// so a plant in matmul, rms_norm or add reaches every part. A decorator that wants the
// inner engine's joined launch overrides them itself.
class ForwardingEngine : public EngineBackend {
 public:
  explicit ForwardingEngine(EngineBackend& in) : in_(in) {}
  std::string name() const override { return in_.name(); }
  bool on_device() const override { return in_.on_device(); }
  Status scratch(int slot, size_t bytes, void** p) override { return in_.scratch(slot, bytes, p); }
  Status weights(uint64_t o, const void* h, size_t b, const void** p) override { return in_.weights(o, h, b, p); }
  Status upload(void* dst, const void* h, size_t b) override { return in_.upload(dst, h, b); }
  Status download(void* h, const void* src, size_t b) override { return in_.download(h, src, b); }
  Status embed(const uint16_t* E, int64_t v, int64_t d, const int32_t* t, int n, float* out) override {
    return in_.embed(E, v, d, t, n, out);
  }
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    return in_.rms_norm(x, w, n, dim, eps, out);
  }
  Status matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) override {
    return in_.matmul(W, rows, cols, x, n, y);
  }
  Status swiglu(const float* g, const float* u, int64_t count, float* out) override { return in_.swiglu(g, u, count, out); }
  Status add(float* h, const float* t, int64_t count) override { return in_.add(h, t, count); }
  Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps, const uint16_t* W,
                int64_t vocab, float* out) override {
    return in_.logits(h, sel, m, dim, norm, eps, W, vocab, out);
  }
  Status argmax(const float* x, int n, int64_t len, int32_t* out) override { return in_.argmax(x, n, len, out); }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* r, int n, const float* q, const float* k,
                    const float* v, float* qo) override {
    return in_.rope_store(c, p, r, n, q, k, v, qo);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* r, int n, const std::vector<int32_t>& t,
                   const float* q, float* o) override {
    return in_.attention(c, p, r, n, t, q, o);
  }
  Status hold(Cache& c) override { return in_.hold(c); }
  Status release(Cache& c) override { return in_.release(c); }
  Status hold_alias(Cache& c, Cache& base) override { return in_.hold_alias(c, base); }

 protected:
  EngineBackend& in_;
};

}  // namespace kc
