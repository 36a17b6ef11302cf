// Serving on the engine: a pool (engine/pool.h), admission of queued requests into
// `parallel` lanes, rounds that put every active lane's prefill chunk, decode row or
// verify rows into ONE target forward batch, chain drafting from the target's first
// layers, and the prompt cache (Backend::pack / unpack).
//
// Lanes. Lane l is a window (its positions contiguous in its run, part "window") when the
// pool is off (all_windows) or when l == 0 and window_first and not pages_all; otherwise
// it is paged (pages of `page` positions from the pool's bottom). A request needs
// prompt + max_tokens positions plus, with drafting, one draft window (draft_tokens + 1
// tail slots for verify). It is admitted when a lane is free, its run can be claimed and,
// on a paged lane, its pages are free; otherwise it waits. One that can never fit (more
// positions than `context`, more pages than the pool) is refused with a message while the
// others go on.
//
// Drafting (draft_layers k > 0, draft_tokens d > 0): the draft model is the target
// truncated to its first k layers; its own cache (the draft layout, `context` positions)
// is part "draft" of the lane's run, in the same arena. Per round the draft catches up on
// the lane's committed tokens and proposes up to d tokens greedily; verify runs the target
// over [last token, d_1 .. d_n] at positions L .. L+n as tails stored at slots C .. C+n
// (C = prompt + max_tokens), accepts the longest prefix where d_{i+1} equals the
// target's argmax of row i, moves the kept rows C+i -> L+i with Backend::keep and leaves
// the rest behind (rolled back: never part of the committed length).
//
// Prompt cache: a request with `save` packs positions [0, n-1) of its prompt (all but the
// last token) once its prefill finished; one with `restore` unpacks such a blob into its
// lane (any lane kind, page size) and prefills only the last prompt token.
//
// Residency: the arena is held on the backend's device for the whole call
// (EngineBackend::hold; the drafter's cache an alias of it, hold_alias), so no round
// copies the cache; the pool's page moves are page-table updates, its poison of freed
// pages and the controls' erasures are Backend::fill on the held memory. Each round ends
// with Backend::fence(step); released pages and runs are retired only up to the step the
// backend says finished (cpu: the step just run; cuda: the last whose event completed).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/pool.h"

namespace kc::engine {

struct ServeConfig {
  int parallel = 1;
  int page = 16;
  bool window_first = true;
  bool pages_all = false;
  bool all_windows = false;  // pool off: every lane a window in its run
  int context = 0;           // positions a lane holds at most (window capacity, draft cache)
  int pool_pages = 0;        // pages of the arena's page region
  int prefill_chunk = 16;
  int draft_tokens = 0;      // 0: drafting off
  bool stop_after_first_token = false;  // end after the round that gave the first token (time-to-first-token runs)
  // Test-only planted bugs (the serve gate's controls).
  bool plant_paged_batch_chunk = false;        // a batch holding a paged lane: attention chunk 4 for every row
  bool plant_skip_keep = false;                // verify does not compact the kept rows
  bool plant_early_release = false;            // a paged lane's pages freed one step before its last
  bool plant_run_short = false;                // runs sized one part short
  bool plant_restore_without_scales = false;   // restore leaves the scale planes zero
};

struct ServeRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 0;
  const std::vector<uint8_t>* restore = nullptr;
  bool save = false;
};

struct ServeResult {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> digests;  // FNV-1a of the logits row behind each token
  bool stopped_at_eos = false;
  std::string refused;            // non-empty: never admitted, why
  std::vector<uint8_t> saved;     // save: the packed prompt state
  double ttft_s = 0;              // admission to first token
  int lane = -1;
  bool paged = false;
  int pages = 0;
};

struct ServeStats {
  double wall_s = 0;
  double first_token_s = 0;  // run start (before the cache goes to the device) to the first token of any request
  int64_t tokens = 0;
  int64_t rounds = 0;
  int peak_pages = 0;
  uint64_t arena_bytes = 0;
  uint64_t fixed_bytes_per_lane = 0;  // a lane's run
  int64_t drafted = 0, accepted = 0;
  int64_t admission_waits = 0;       // rounds where a lane was free, requests queued, none fitted yet
  int64_t mixed_rounds = 0;           // rounds whose batch held a window and a paged lane
  int64_t prefill_decode_rounds = 0;  // rounds mixing prefill and decode rows
  std::vector<std::string> pool_violations;  // pool check failures (first few)
  std::vector<std::string> planning_errors;  // runs refused at planning
};

// The draft model: `target` truncated to its first `layers` layers.
Status make_draft_weights(const Qwen3Weights& target, int layers, Qwen3Weights* out);

// Serves `reqs` (queued in order). `draft` is required when cfg.draft_tokens > 0.
// Returns an error for a bad config or a backend failure; per-request refusals are in
// the results.
Status serve(const Model& target, const Model* draft, Backend& be, const ServeConfig& cfg,
             const std::vector<ServeRequest>& reqs, std::vector<ServeResult>* out, ServeStats* stats);

}  // namespace kc::engine
