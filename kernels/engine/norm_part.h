// One row set of an RMSNorm launch that several row sets of one dim share
// (EngineBackend::rms_norm_parts: q_norm and k_norm): out = RMSNorm(x; w) over n rows of the
// launch's dim, out may be x.
#pragma once

#include <cstdint>

namespace kc {
constexpr int kNormPartsMax = 4;
struct NormPart {
  const float* x;
  const float* w;
  int n;
  float* out;
};

// Whether the byte ranges [a, a + na) and [b, b + nb) share a byte (an empty range shares
// none): the joined norm launches' check that one launch and the plain calls read and write
// the same bytes (validate_rms_norm_parts, launch_engine_add_rms_norm_fits).
inline bool byte_ranges_overlap(const void* a, uintptr_t na, const void* b, uintptr_t nb) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return na && nb && x < y + nb && y < x + na;
}
}  // namespace kc
