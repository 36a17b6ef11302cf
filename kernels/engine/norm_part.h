// One row set of an RMSNorm launch that several row sets of one dim share
// (EngineBackend::rms_norm_parts: q_norm and k_norm): out = RMSNorm(x; w) over n rows of the
// launch's dim, out may be x.
#pragma once

namespace kc {
constexpr int kNormPartsMax = 4;
struct NormPart {
  const float* x;
  const float* w;
  int n;
  float* out;
};
}  // namespace kc
