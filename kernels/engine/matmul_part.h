// One matrix of a product launch that several matrices share (EngineBackend::matmul_parts):
// y = x W^T over the batch, W [rows][cols] bf16, y [n][rows] fp32; every part has the
// launch's cols and x.
#pragma once
#include <cstdint>

namespace kc {
struct MatmulPart {
  const uint16_t* W;
  int64_t rows;
  float* y;
};
}  // namespace kc
