// Synthetic Qwen3 checkpoints: config.json + model.safetensors (bf16 weights) in the
// Hugging Face layout, deterministic from a seed, for tests, speed and memory runs.
//
// Presets (vocabulary 260 in both: 256 bytes and 4 specials, the byte-level fixture's):
//   tiny             hidden 128, 2 layers, 4 q heads / 2 KV heads x head_dim 32, full
//                    rotary, intermediate 384, rope_theta 1e6, tied embeddings
//   qwen35-27b-attn  the attention shape of Qwen3.5-27B: hidden 5120, 24 q heads / 4 KV
//                    heads x head_dim 256, partial rotary 0.25 (64 of 256 dims),
//                    rope_theta 1e7, max positions 262,144, separate lm_head; 2 layers by
//                    default; the MLP is cut to intermediate 1024 (the real model's is
//                    17,408) so a layer stays about 178 MB of bf16 and quick to write
// Both: rms_norm_eps 1e-6, dtype bfloat16.
//
// Weights (each tensor drawn from its own stream, seeded by the seed and the tensor name,
// so the first layers of a 4-layer model equal those of a 2-layer one): uniform with
// standard deviation 1/sqrt(in_features) for every linear weight (lm_head included) and
// for the embedding (1/sqrt(hidden_size)), so each projection of an O(1) input stays O(1)
// and tied logits stay O(1); every norm weight is 1 + U(-0.25, 0.25), far enough from 1
// that a forward which skipped a norm weight would show. Values are rounded to bf16
// (nearest even) when written.
#pragma once
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "contracts/signals.h"
#include "engine/qwen3_config.h"
#include "engine/safetensors.h"
#include "kernels/layout/status.h"

namespace kc::engine {

const std::vector<std::string>& qwen3_preset_names();

// The preset's config with `layers` layers (0: the preset's default, 2 for both).
// Refuses an unknown preset and layers outside 0..64.
Status qwen3_preset(const std::string& preset, int layers, Qwen3Config* out);

// Writes config.json and model.safetensors into `out_dir` (created if missing; refused if
// it exists and is not an empty directory). The safetensors metadata records format "pt",
// the preset name and the seed.
// Before writing a checkpoint of config c into out_dir: c checked, out_dir created or an
// existing empty folder (else "DIR: (output directory): reason"); *dtype: c.dtype's storage type.
Status prepare_checkpoint_dir(const Qwen3Config& c, const std::string& out_dir, Dtype* dtype);

// make-model's and make-draft's output folder. claim() makes the missing folders one at a time
// (recording those this run made), takes the folder's lock (kCheckpointLock, created
// exclusively: a second run into the same folder is refused, exit 2) and checks the folder holds
// nothing else. cleanup() (a failed command) removes what this run wrote there (config.json,
// model.safetensors and their .tmp), the lock, and the folders it made, each only when empty:
// never a folder another run filled meanwhile (a remove_all of "the folder that was missing at the
// start" once took another run's finished checkpoint). release() (success) removes the lock.
inline constexpr const char* kCheckpointLock = ".kc-writing";
class CheckpointDirGuard {
 public:
  explicit CheckpointDirGuard(const std::string& out_dir) : dir_(out_dir) {}
  CheckpointDirGuard(const CheckpointDirGuard&) = delete;
  CheckpointDirGuard& operator=(const CheckpointDirGuard&) = delete;
  ~CheckpointDirGuard() { release(); }
  Status claim();
  void cleanup();
  void release();

 private:
  std::string dir_;
  std::vector<std::string> made_;  // the folders this run created, outermost first
  bool locked_ = false;
  // From claim() to release() or cleanup(): a SIGINT or SIGTERM stops the write (write_safetensors
  // polls it), cleanup() removes what was written, and the signal then takes effect (a make-model
  // killed part way once left its folder locked, with temp files).
  std::unique_ptr<HoldSignals> hold_;
};

Status write_synthetic_checkpoint(const Qwen3Config& c, uint64_t seed, const std::string& out_dir,
                                  const std::string& preset = "custom");

// `tf-cuda-test make-model --preset P --layers N --seed S --out DIR`: 0 when written (a
// one-line summary on `out`), 2 with the reason on `err` otherwise (unknown preset, bad
// layer count, unusable directory, write failure).
int make_model_command(const std::string& preset, int layers, uint64_t seed, const std::string& out_dir,
                       std::ostream& out, std::ostream& err);

}  // namespace kc::engine
