// The engine's model forward: a Qwen3 dense decoder over a batch of rows from several
// lanes, on a KV cache behind the Backend interface (cpu: host twins; cuda later).
//
// A row is (lane, token, position). Per layer, for the whole batch at once:
//   a = RMSNorm(h; input_layernorm)
//   q = a Wq^T, k = a Wk^T, v = a Wv^T; per head RMSNorm(q_h; q_norm), RMSNorm(k_g; k_norm)
//   Backend::rope_store: RoPE (neox pairing) on q and k over rot_dims = config.rotary_dim
//     with base = config.rope_theta; the rotated k and the plain v of row r are stored in
//     the cache at (lane_r, slot = pos_r) in the cache's format (bf16, fp8, q4, mxfp4)
//   Backend::attention with scale 1/sqrt(head_dim) over committed keys 0..pos_r of the
//     row's lane (len = pos_r + 1, no tail): every row of the batch is stored before any
//     row attends, so prefill rows of one lane see each other causally
//   h += o Wo^T; m = RMSNorm(h; post_attention_layernorm); h += (silu(m Wg^T) * m Wu^T) Wd^T
// then RMSNorm(h; norm) and logits = W_head h for the rows that ask for logits.
//
// Preconditions (the caller's, checked where cheap): a lane's rows in one batch have
// distinct positions; every position below a row's position in its lane was stored by an
// earlier forward or is in the same batch; positions lie inside the lane's capacity.
//
// Where it runs: on the backend's engine (Backend::engine(), kernels/engine/engine_backend.h):
// the host twins on cpu, the CUDA engine kernels on cuda with activations and weights in
// device memory (weights uploaded on first use and kept by the backend); the cache is
// copied per call unless the caller holds it on the device (EngineBackend::hold, as
// generate does). A backend without an engine (a test's decorator) gets the host twins.
//
// Batch invariance: every step is row-wise (engine/ops.h) or a Backend kernel whose
// per-row result depends only on the row and its lane's cache contents, so a row's
// logits bytes do not depend on the other rows of the batch, on the batch size, or on
// whether the lane is paged or a window (attention reads the same values through either
// address).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/ops.h"
#include "kernels/backend/backend.h"

namespace kc::engine {

struct ModelLayer {
  std::vector<float> input_norm, q_norm, k_norm, post_norm;  // norm weights (bf16 values, kept as fp32)
  Bf16Matrix q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
};

struct ForwardRow {
  int32_t lane = 0;
  int32_t token = 0;
  int32_t pos = 0;
  bool logits = false;  // compute this row's logits
};

// How a lane's cache is laid out: a window of `capacity` positions (page == 0) or pages
// of `page` positions, enough of them to hold `capacity`.
struct LaneSpec {
  int32_t capacity = 0;
  int32_t page = 0;
};

// One arena for every lane: paged lanes of one page size share a region whose pages are
// dealt round-robin over those lanes (lane a's page 0, lane b's page 0, ..., lane a's
// page 1, ...), so pages of different lanes interleave; windows follow, each
// contiguous. Memory is zero-filled. Refuses a non-positive capacity or page size.
Status make_engine_cache(const KvLayout& lay, const std::vector<LaneSpec>& lanes, Cache* out);

struct ModelOptions {
  Format kv_format = Format::bf16;  // bf16, fp8, q4 or mxfp4
  int attn_chunk = 256;             // split-K chunk width of attention (keys)
  double rope_theta = 0;            // 0: the config's; otherwise overrides it (tests' controls)
  // Test-only planted bug (a control of the batch-invariance tests): attention's chunk
  // becomes 4 whenever a forward batch holds more than one row, as a split-K tuned to the
  // batch size would; a row's bytes then depend on its batch.
  bool plant_batch_dependent_chunk = false;
};

class Model {
 public:
  // Keeps `w`'s weights as bf16 (norm weights as fp32). Refuses a config the kernels cannot
  // run (check_engine_config), an unknown kv format, a head_dim the format cannot hold (q4,
  // mxfp4: a multiple of 32), a chunk outside 1..1024.
  static Status create(const Qwen3Weights& w, const ModelOptions& opts, Model* out);

  const Qwen3Config& config() const { return config_; }
  const ModelOptions& options() const { return opts_; }
  KvLayout kv_layout() const;

  // Runs `rows` through the model. `logits` receives [rows with .logits][vocab] fp32, in
  // row order. Refuses an out-of-range token, lane or position, or two rows of one lane
  // at the same position (no cache byte written then).
  Status forward(Backend& be, Cache& cache, const std::vector<ForwardRow>& rows, std::vector<float>* logits) const;

  // The general form (serving, engine/serve.h): each row names the cache slot its k and v
  // go to and what it attends (`attn`: committed length and a tail into `tails`, see
  // Backend::attention); `chunk` > 0 overrides the attention chunk for this batch. A
  // committed row is {slot = pos, attn = {lane, pos + 1, 0, 0}}; forward() is that case.
  // Checks tokens and lanes; the Backend checks slots and tails.
  Status forward_rows(Backend& be, Cache& cache, const std::vector<ForwardRow>& rows, const std::vector<int32_t>& slots,
                      const std::vector<AttnRow>& attn, const std::vector<int32_t>& tails, int chunk,
                      std::vector<float>* logits) const;

 private:
  Qwen3Config config_;
  ModelOptions opts_;
  Bf16Matrix embed_, head_;
  std::vector<ModelLayer> layers_;
  std::vector<float> final_norm_;
  uint64_t id_ = 0;  // names this model's weights in an engine's weight store (EngineBackend::weights)
};

}  // namespace kc::engine
