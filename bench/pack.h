// Scale-plane packing benchmark (cuda only): the gather (cache -> device blob data) and
// scatter (device blob data -> cache) kernels of pack/pack.cu timed with CUDA events (warm-up,
// median of many runs), against a device-to-device copy ceiling measured in the same
// call over the same byte count (16-byte loads and stores). All rates count bytes read
// plus bytes written.
#pragma once
#include <cstdint>

#include "kernels/layout/kv_layout.h"
#include "kernels/layout/status.h"

namespace kc {

struct PackBenchConfig {
  Format fmt;
  int ptok;             // 0: window
  uint64_t blob_bytes;  // target size of the blob's data region
  int layers, kv_heads, head_dim;
};
struct PackBenchResult {
  int64_t count = 0;       // positions packed
  double data_bytes = 0;   // bytes of field data moved one way (codes and scales)
  double pack_us = 0;      // median
  double unpack_us = 0;    // median
  double copy_bytes = 0;   // bytes the ceiling copies (the blob's data region, 16-byte padded)
  double copy_us = 0;      // median of the copy ceiling over copy_bytes
  bool verified = false;   // the blob data is A's field rows (a host walk), and B's field
                           // rows are A's after unpack (see bench/pack.cu)
  std::string verify_detail;  // what was compared, and the first difference when one was found
};
Status bench_pack_config(const PackBenchConfig& c, int warmup, int reps, PackBenchResult* r);

}  // namespace kc
