// The host engine: the twins of kernels/engine/twin.h on host memory; the KV steps go
// through a Backend (the cpu backend, or any decorator of one).
#include <cstring>

#include "kernels/backend/backend.h"
#include "kernels/engine/engine_backend.h"
#include "kernels/engine/twin.h"

namespace kc {

namespace {

class HostEngine final : public EngineBackend {
 public:
  explicit HostEngine(Backend& kv) : kv_(kv) {}
  std::string name() const override { return "host"; }
  bool on_device() const override { return false; }

  Status scratch(int slot, size_t bytes, void** p) override {
    if (slot < 0 || slot >= kScratchSlots) return Status::Error("engine scratch: slot out of range");
    std::vector<float>& b = bufs_[slot];
    if (b.size() * sizeof(float) < bytes) b.resize((bytes + sizeof(float) - 1) / sizeof(float));
    *p = b.data();
    return Status::Ok();
  }
  Status weights(uint64_t, const void* host, size_t, const void** p) override {
    *p = host;
    return Status::Ok();
  }
  Status upload(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memmove(dst, host, bytes);
    return Status::Ok();
  }
  Status download(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memmove(host, src, bytes);
    return Status::Ok();
  }
  Status embed(const uint16_t* E, int64_t vocab, int64_t dim, const int32_t* tokens, int n, float* out) override {
    KC_RETURN_IF_ERROR(validate_embed(E, vocab, dim, tokens, n, out));
    for (int i = 0; i < n; ++i)
      if (tokens[i] < 0 || tokens[i] >= vocab)
        return Status::Error("embed: tokens[" + std::to_string(i) + "] " + std::to_string(tokens[i]) + ": outside 0.." +
                             std::to_string(vocab - 1));
    engine_embed_host(E, dim, tokens, n, out);
    return Status::Ok();
  }
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    KC_RETURN_IF_ERROR(validate_rms_norm(x, w, n, dim, eps, out));
    engine_rms_norm_host(x, w, n, dim, eps, out);
    return Status::Ok();
  }
  Status matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) override {
    KC_RETURN_IF_ERROR(validate_matmul(W, rows, cols, x, n, y));
    engine_matmul_host(W, rows, cols, x, n, y);
    return Status::Ok();
  }
  Status swiglu(const float* gate, const float* up, int64_t count, float* out) override {
    KC_RETURN_IF_ERROR(validate_swiglu(gate, up, count, out));
    engine_swiglu_host(gate, up, count, out);
    return Status::Ok();
  }
  Status add(float* h, const float* t, int64_t count) override {
    KC_RETURN_IF_ERROR(validate_add(h, t, count));
    for (int64_t i = 0; i < count; ++i) h[i] += t[i];
    return Status::Ok();
  }
  Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps, const uint16_t* W,
                int64_t vocab, float* out) override {
    KC_RETURN_IF_ERROR(validate_logits(h, sel, m, dim, norm, eps, W, vocab, out));
    tmp_.resize(size_t(dim));
    engine_logits_host(h, sel, m, dim, norm, eps, W, vocab, tmp_.data(), out);
    return Status::Ok();
  }
  Status argmax(const float* x, int n, int64_t len, int32_t* out) override {
    KC_RETURN_IF_ERROR(validate_argmax(x, n, len, out));
    engine_argmax_host(x, n, len, out);
    return Status::Ok();
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    return kv_.rope_store(c, p, rows, n, q, k, v, q_out);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    return kv_.attention(c, p, rows, n, tails, q, out);
  }
  Status hold(Cache&) override { return Status::Ok(); }
  Status release(Cache&) override { return Status::Ok(); }

 private:
  Backend& kv_;
  std::vector<float> bufs_[kScratchSlots];
  std::vector<float> tmp_;
};

}  // namespace

std::unique_ptr<EngineBackend> make_host_engine(Backend& kv) { return std::make_unique<HostEngine>(kv); }

}  // namespace kc
