// Parameters and row descriptors of the rope store, split-K attention and keep kernels.
#pragma once
#include <cstdint>

namespace kc {

struct RopeParams {
  int q_heads;    // query heads (GQA: a multiple of the cache's kv heads)
  int rot_dims;   // rotary dims r (even, <= head_dim); dims >= r pass through
  double base;    // theta base (1e6, 1e7)
  int layer;      // the cache layer the rotated k and v rows are stored to
};
// One new row of a round: its lane, its logical position (the RoPE angle) and the cache
// position its k and v go to (equal to pos for committed rows; a free slot for tails).
struct RopeRow {
  int32_t lane;
  int32_t pos;
  int32_t slot;
};

struct AttnParams {
  int q_heads;
  int layer;
  int chunk;    // split-K chunk width in logical key positions, the same for every row
  float scale;  // softmax scale, 1/sqrt(head_dim) typically
};
// One query row: its lane, the committed length (keys at cache positions 0..len-1), and
// a tail of tail_len keys at logical positions len.. whose cache positions are
// tails[tail_off ..].
struct AttnRow {
  int32_t lane;
  int32_t len;
  int32_t tail_off;
  int32_t tail_len;
};

// One compaction move inside a lane: every field's row at src is copied to dst.
// A lane's moves are ascending with dst < src; they run as sequential in-order moves.
struct KeepMove {
  int32_t lane;
  int32_t src;
  int32_t dst;
};

}  // namespace kc
