// Launchers of the fp8 row kernels (device pointers in, Status out).
#pragma once
#include "kernels/backend/cuda_check.h"
#include "kernels/codecs/fp8.h"
#include "kernels/layout/kv_layout.h"

namespace kc {
Status launch_fp8_encode_rows(const KvView* views, const float* x, const RowRef* rows, int n);
Status launch_fp8_decode_rows(const KvView* views, const RowRef* rows, int n, float* out);
Status launch_e4m3_encode_bits(uint64_t first, uint64_t count, uint8_t* out);
}  // namespace kc
