// EngineBackend: the engine kernels (embedding, RMSNorm, bf16-weight matrix product,
// SwiGLU, residual add, logits, greedy argmax) and the KV steps of a forward, on buffers
// that live in the backend's own memory (host memory on cpu, device memory on cuda), so
// a forward keeps its activations where its kernels run. A Backend hands out its engine
// through Backend::engine(); make_host_engine wraps any Backend (a test's decorator) with
// the host twins.
//
// Pointers: every float / uint16_t / int32_t pointer argument of a kernel is in this
// backend's memory (from scratch() or weights()), except the small row tables named
// "host" (RopeRow, AttnRow, tails, selected rows), which the call copies itself.
//
// The cache (residency): a Cache passed to rope_store / attention is copied to the device
// and back around each call (the host image stays current), unless it is held: hold(c)
// puts it on the device once; while held, every operation of the owning Backend on `c`
// (rope_store, attention, encode/decode_rows, keep, pack, unpack) works on the device copy
// without copying the cache, and the host image is stale; release(c) copies it back and
// ends the hold. The cpu backend holds nothing (its image is the cache). hold_alias lets
// a second Cache (another layout) address the held memory.
//
// Batch invariance: every kernel computes each output row from its own input row in the
// order of kernels/engine/rows.h; nothing splits a reduction by the batch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention/params.h"
#include "kernels/attention/rows.h"
#include "kernels/engine/matmul_part.h"
#include "kernels/engine/norm_part.h"
#include "kernels/layout/cache.h"
#include "kernels/layout/status.h"

namespace kc {

class Backend;

class EngineBackend {
 public:
  virtual ~EngineBackend() = default;
  virtual std::string name() const = 0;
  // True when pointers are device pointers (cuda).
  virtual bool on_device() const = 0;

  // Memory. scratch: a grow-only buffer of at least `bytes` for slot 0..kScratchSlots-1,
  // kept across calls (contents kept while it does not grow). weights: `bytes` of host
  // memory at `host`, owned by `owner` (a model), in this backend's memory: uploaded on
  // first use and kept for the backend's life (the host bytes must not change); on cpu
  // the host pointer itself.
  static constexpr int kScratchSlots = 24;
  virtual Status scratch(int slot, size_t bytes, void** p) = 0;
  virtual Status weights(uint64_t owner, const void* host, size_t bytes, const void** p) = 0;
  // Copies between the host and this backend's memory; download returns once the bytes
  // are on the host (and so waits for every kernel enqueued before it).
  virtual Status upload(void* dst, const void* host, size_t bytes) = 0;
  virtual Status download(void* host, const void* src, size_t bytes) = 0;

  // Kernels (see kernels/engine/twin.h for the layouts).
  virtual Status embed(const uint16_t* E, int64_t vocab, int64_t dim, const int32_t* tokens, int n, float* out) = 0;
  virtual Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) = 0;
  // Several row sets of one dim (q_norm and k_norm): each part's rows the bytes rms_norm gives
  // them (one launch on cuda). Every part is checked (validate_rms_norm_parts) before anything
  // runs. Default: one rms_norm per part.
  virtual Status rms_norm_parts(const NormPart* parts, int count, int dim, float eps);
  virtual Status matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) = 0;
  // Several products over the same x (q/k/v, gate/up): parts[i].y = x parts[i].W^T, every
  // element the bytes matmul gives it (one launch on cuda where the staged kernel applies).
  // Every part is checked (validate_matmul_parts) before anything runs. Default: one matmul
  // per part.
  virtual Status matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n);
  virtual Status swiglu(const float* gate, const float* up, int64_t count, float* out) = 0;
  // h[i] += t[i] (fp32, one rounding), count elements.
  virtual Status add(float* h, const float* t, int64_t count) = 0;
  // The residual add and the RMSNorm after it: h += t over n rows of dim, then out = RMSNorm of
  // those sums (weights w), with the bytes of add(h, t, n * dim) followed by rms_norm(h, w, n,
  // dim, eps, out) (one launch on cuda where rows fit). Every argument is checked
  // (validate_add_rms_norm) before anything runs. Default: those two calls.
  virtual Status add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out);
  // out[j][:] = W . RMSNorm(h[sel[j]]; norm) for j < m (sel: host array of row indices).
  virtual Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps,
                        const uint16_t* W, int64_t vocab, float* out) = 0;
  virtual Status argmax(const float* x, int n, int64_t len, int32_t* out) = 0;

  // KV steps of a forward (Backend::rope_store / Backend::attention with q, k, v, out in
  // this backend's memory; rows and tails on the host).
  virtual Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                            const float* v, float* q_out) = 0;
  virtual Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n,
                           const std::vector<int32_t>& tails, const float* q, float* out) = 0;

  // Residency (see above). hold refuses a second cache while one is held.
  virtual Status hold(Cache& c) = 0;
  virtual Status release(Cache& c) = 0;
  // A second cache over the held cache's memory: `c` has its own layout, page tables and
  // views, and its views address the same arena bytes as `base` (serving: the drafter's
  // cache lives in runs of the target's arena). While `base` is held, every operation on
  // `c` works on base's device memory (c's tables follow its image as a held cache's do);
  // release(c) ends the alias, release(base) ends both. Refused when `base` is not held.
  // Default: nothing to alias where nothing is held (host memory); refused on a device.
  virtual Status hold_alias(Cache& c, Cache& base) {
    (void)c, (void)base;
    return on_device() ? Status::Error("engine hold_alias: not supported by " + name()) : Status::Ok();
  }

  // Timing option (`bench engine --profile`; cuda only, a no-op elsewhere). legacy_kernels:
  // the engine kernels before the staged product and RMSNorm (the same bytes). profile: each
  // step (engine calls up to the download that ends it) is held on the device until the host
  // has enqueued all of it (a gate kernel that waits at most 200 ms for the download), then
  // runs back to back with an event pair around each kernel call; take_profile returns the
  // sums since the last take and resets them.
  // tree_passes: how many passes the staged product's tree takes through shared memory (the
  // same bytes in all): 0 the default (KC_ENGINE_TREE, else two only where one would leave
  // fewer output groups per block), 1 or 2 that many wherever it fits.
  struct Debug {
    bool legacy_kernels = false;
    bool profile = false;
    int tree_passes = 0;
  };
  struct ProfileKind {
    std::string kind;  // kernel and shape, e.g. "matmul 6144+1024+1024 x 5120"
    int64_t calls = 0;
    double us = 0;     // summed event time
  };
  struct Profile {
    int64_t steps = 0;
    double gpu_span_us = 0;     // first to last event of each step, summed
    double host_enqueue_us = 0; // host time from a step's first engine call to its download
    std::vector<ProfileKind> kinds;  // most time first
  };
  virtual Status set_debug(const Debug& d) {
    (void)d;
    return Status::Ok();
  }
  virtual Status take_profile(Profile* p) {
    *p = Profile{};
    return Status::Ok();
  }
};

// The host twins over host memory, the KV steps through `kv` (which must outlive it).
std::unique_ptr<EngineBackend> make_host_engine(Backend& kv);

// Argument checks shared by the implementations (kernels/engine/validate.cpp): sizes at
// least 1 (row counts at least 0), eps finite and >= 0, no null pointer a call would
// touch, logits' sel entries >= 0. A refusal names the kernel, the argument and its value
// and comes before anything is written. Token ranges are checked by the host engine
// (tokens in host memory) and by Model::forward_rows before any engine runs.
Status validate_embed(const uint16_t* E, int64_t vocab, int64_t dim, const int32_t* tokens, int n, const float* out);
Status validate_rms_norm(const float* x, const float* w, int n, int dim, float eps, const float* out);
// add_rms_norm: dim >= 1, n >= 0, eps as rms_norm's, h, t, w, out present.
Status validate_add_rms_norm(const float* h, const float* t, const float* w, int n, int dim, float eps,
                             const float* out);
// count in 1..kNormPartsMax, parts not null, the parts' rows summed at most INT_MAX, each part
// as validate_rms_norm (the refusal names the part), and no part's output overlapping another
// part's x or output (its own x it may be).
Status validate_rms_norm_parts(const NormPart* parts, int count, int dim, float eps);
Status validate_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, const float* y);
// count in 1..3, parts not null, each part as validate_matmul (the refusal names the part).
Status validate_matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n);
Status validate_swiglu(const float* gate, const float* up, int64_t count, const float* out);
Status validate_add(const float* h, const float* t, int64_t count);
Status validate_logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps,
                       const uint16_t* W, int64_t vocab, const float* out);
Status validate_argmax(const float* x, int n, int64_t len, const int32_t* out);

}  // namespace kc
