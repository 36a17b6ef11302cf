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
// Drafting (a draft model and draft_tokens d > 0 or a draft_tree): the draft model is the
// target truncated to its first k layers (make_draft_weights) or a checkpoint of its own
// with the same vocabulary; its own cache (the draft layout, `context` positions) is part
// "draft" of the lane's run, in the same arena. A draft is a tree (a chain is the tree
// {1, ..., 1}); its nodes are numbered breadth first, node i at tail slot C+1+i
// (C = prompt + max_tokens), the root (the lane's last committed token) at slot C. Per
// round the draft catches up on the lane's committed tokens and proposes the tree level
// by level: the top-k tokens (k = the depth's branching; ties to the lower id) of each
// node's logits, a node attending the committed positions and its own ancestors. Verify
// runs the target over the root and every node as tail rows of one batch, node at depth t
// at position L+t attending committed 0..L-1 and the tail [C, its ancestors' slots, its
// own slot] (logical positions L..L+t: the bytes a chain along that path gives); from
// the root it accepts the child whose token equals the target's argmax of the current row,
// as long as there is one, moves the kept rows (root and accepted path) to L, L+1, ...
// with Backend::keep and leaves the rest behind (rolled back: never part of the committed
// length).
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
  int draft_tokens = 0;      // chain drafts of this many tokens; 0 (and no draft_tree): drafting off
  // Tree drafts (overrides draft_tokens when non-empty): branching per depth, e.g. {2, 2, 1}:
  // the draft's top-2 at depth 1, the top-2 after each of those at depth 2, then one token
  // after each (10 nodes). A chain of d tokens is the tree {1, ..., 1} (d ones).
  std::vector<int> draft_tree;
  bool stop_after_first_token = false;  // end after the round that gave the first token (time-to-first-token runs)
  // Test-only planted bugs (the serve gate's controls).
  bool plant_paged_batch_chunk = false;        // a batch holding a paged lane: attention chunk 4 for every row
  bool plant_skip_keep = false;                // verify does not compact the kept rows
  bool plant_early_release = false;            // a paged lane's pages freed one step before its last
  bool plant_run_short = false;                // runs sized one part short
  bool plant_restore_without_scales = false;   // restore leaves the scale planes zero
  bool plant_tree_chain_tails = false;         // verify: a draft node attends every node before it (the
                                               // chain's rule), not only its ancestors
};

// The draft tree of a config: branching per depth (the chain's {1 x draft_tokens} when
// draft_tree is empty; empty when drafting is off).
std::vector<int> draft_shape(const ServeConfig& cfg);
// Nodes of a tree of that shape cut at `depth` levels (every node of depth <= depth); INT_MAX
// where there are more.
int draft_nodes(const std::vector<int>& shape, int depth);
// Cache positions a request holds: prompt + max_tokens, plus with drafting one verify
// window (the root and every draft node, at tail slots after the request's positions).
int64_t serve_positions(const ServeConfig& cfg, int64_t prompt, int64_t max_tokens);

// The arena serve() plans for a config: per lane the parts of its run (window lane:
// "window", `context` positions of the target's layout; drafting: "draft", `context`
// positions of the draft's layout), the largest run, and the arena (pool_pages pages of
// the target's page stride below `parallel` runs of the largest size).
struct ServeArena {
  std::vector<std::vector<RunPart>> parts;  // per lane, offsets not yet placed
  uint64_t run_bytes = 0;                   // fixed bytes per lane (the largest run)
  uint64_t page_stride = 0;
  uint64_t arena_bytes = 0;
  std::vector<bool> window;                 // per lane: a window lane (else paged)
};
ServeArena plan_serve_arena(const ServeConfig& cfg, const KvLayout& lay, const KvLayout* draft_lay);

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
  uint64_t eos_digest = 0;        // stopped_at_eos: FNV-1a of the logits row that chose <|eos|>
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
  int64_t drafted = 0, accepted = 0;  // draft nodes proposed (a chain: its tokens), draft tokens accepted
  int64_t verifies = 0;               // lane verifies (one per drafting lane per round)
  int64_t draft_depth = 0;            // sum over verifies of the levels proposed (a chain: = drafted)
  int64_t admission_waits = 0;       // rounds where a lane was free, requests queued, none fitted yet
  int64_t mixed_rounds = 0;           // rounds whose batch held a window and a paged lane
  int64_t prefill_decode_rounds = 0;  // rounds mixing prefill and decode rows
  std::vector<int> admitted;          // request indices in the order they took a lane
  std::vector<std::string> pool_violations;  // pool check failures (first few)
  std::vector<std::string> planning_errors;  // runs refused at planning
};

// The draft model: `target` truncated to its first `layers` layers (its embedding,
// final norm and head kept).
Status make_draft_weights(const Qwen3Weights& target, int layers, Qwen3Weights* out);

// Serves `reqs` (queued in order). `draft` is required when drafting (draft_tokens > 0 or a
// draft_tree); its vocabulary must be the target's.
// Returns an error for a bad config or a backend failure; per-request refusals are in
// the results.
Status serve(const Model& target, const Model* draft, Backend& be, const ServeConfig& cfg,
             const std::vector<ServeRequest>& reqs, std::vector<ServeResult>* out, ServeStats* stats);

}  // namespace kc::engine
