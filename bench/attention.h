// Benchmarks (cuda only): timings with CUDA events, warm-up, median of many runs, inputs
// rotated through more memory than the L2 holds.
#pragma once
#include <string>
#include <vector>

#include "kernels/layout/kv_layout.h"
#include "kernels/layout/status.h"

namespace kc {

struct AttnBenchConfig {
  int q_heads, kv_heads, head_dim, batch, ctx;
  Format fmt;
  int ptok;  // 0: window
  int chunk;
  // How a run is timed (CUDA events a, b around it in every mode):
  //  events  - a, launch_attention (partial + merge), b on an idle device: the host's enqueue
  //            of the partial is inside (the default, the receipts' method);
  //  gated   - the same launches enqueued behind a gate kernel the host opens after b is
  //            enqueued: the device's time alone;
  //  graph   - a CUDA graph of the two launches (one per cache copy), replayed between a and b;
  //  partial - gated, the partial alone (no merge).
  std::string timing = "events";
};
struct AttnBenchResult {
  double median_us = 0;
  double host_enqueue_us = 0;  // gated, partial: median host time of the enqueue (launch_attention)
  double bytes = 0;  // K and V bytes read (codes and scales), q and out
  // FNV-1a of the output's bytes after the last timed run (not in partial timing: no
  // output): the same in every build and path that gives the same bytes (KC_ATTN_SHORT A/B).
  std::string out_fnv1a;
  // The kernels the launch picked (KernelPaths' names: partial-mma, partial-short-cl2,
  // merge-kept, ...), from one untimed launch before the timed ones (the pick depends only on
  // the grid, the format and the device): what a row's time is of.
  std::vector<std::string> kernel_paths;
};
Status bench_attention_config(const AttnBenchConfig& c, int warmup, int reps, AttnBenchResult* r);
// The launch floor in the same timing mode: an empty kernel, then an empty kernel launched
// with the merge's programmatic dependency (the partial + merge launch pattern, no work).
Status bench_launch_floor(const std::string& timing, int reps, double* us);
// Read-only 16-byte-load kernel over `bytes` of device memory: the bandwidth ceiling.
Status bench_read_ceiling(size_t bytes, int reps, double* bytes_per_s);

}  // namespace kc
