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
};
struct AttnBenchResult {
  double median_us = 0;
  double bytes = 0;  // K and V bytes read (codes and scales), q and out
};
Status bench_attention_config(const AttnBenchConfig& c, int warmup, int reps, AttnBenchResult* r);
// Read-only 16-byte-load kernel over `bytes` of device memory: the bandwidth ceiling.
Status bench_read_ceiling(size_t bytes, int reps, double* bytes_per_s);

}  // namespace kc
