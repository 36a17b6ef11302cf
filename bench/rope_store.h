// Rope-store and compaction benchmarks on the device (cuda only): the kernels of
// attention/rope_store.cu and attention/keep.cu timed with CUDA events (warm-up, median),
// each against a copy ceiling of the same bytes measured in the same call
// (bench/copy_ceiling.h). All rates count bytes read plus bytes written.
#pragma once
#include <cstdint>
#include <string>

#include "bench/copy_ceiling.h"
#include "kernels/layout/kv_layout.h"
#include "kernels/layout/status.h"

namespace kc {

struct MoveBenchConfig {
  Format fmt;
  int ptok;              // 0: window
  uint64_t target_bytes;  // bytes the kernel should read plus write (rows are whole: about this)
  int layers, q_heads, kv_heads, head_dim, lanes;
  // The L2 rule (bench rope-store|compact --l2): true (flush, the default) reads a buffer of
  // twice the L2 (untimed) before every timed run of the kernel, the reference and both
  // copies of the ceiling, so every run starts from DRAM; false (warm, the rule before):
  // runs back to back, where a run whose rows fit in L2 finds its previous run's lines.
  bool flush_l2 = true;
};
struct MoveBenchResult {
  int64_t rows = 0;          // rope store: rows stored; compact: moves (positions moved)
  double read_bytes = 0;     // bytes the kernel reads (inputs, cache rows; descriptors)
  double write_bytes = 0;    // bytes the kernel writes
  double us = 0;             // median of the kernel
  double reference_us = 0;   // compact: the sequential reference (the previous kernel's scheme)
  CopyCeiling ceiling;       // over (read + write) / 2 bytes
  bool verified = false;
  std::string verify_detail;  // what was compared, or what differed
  std::string out_hash;       // the verified run's bytes hashed (bench_bytes_hash): the arena's, then rope store's q_out's
};
// Rope store: `lanes` lanes of rows at positions 30000 + i, slots 0 .. (pages shuffled
// through one arena, or a window per lane), q_heads q, kv_heads k and v rows each, full
// rotary, base 1e6, into layer layers - 1. Verified against the host twin on a sample of
// rows: the first and last 8, and every 131st (V bytes exactly; K decoded and q within the
// fma contraction's difference).
Status bench_rope_store_config(const MoveBenchConfig& c, int warmup, int reps, MoveBenchResult* r);
// Compact: per lane, moves j: 2j + 1 -> j (every other row kept; overlapping moves), every
// field. Verified: the kernel's arena equals a sequential reference's, byte for byte.
Status bench_compact_config(const MoveBenchConfig& c, int warmup, int reps, MoveBenchResult* r);

}  // namespace kc
