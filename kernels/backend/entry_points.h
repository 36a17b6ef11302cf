// The backends' entry points for the row codecs (q4, mxfp4) and scale-plane packing.
// Each feature lives in its own files: *_cpu.cpp (host twins, always built) and *.cu
// (CUDA kernels, built with the cuda backend). CpuBackend / CudaBackend forward to these.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/layout/cache.h"
#include "kernels/codecs/fp8.h"
#include "kernels/layout/status.h"

namespace kc {

Status q4_encode_rows_cpu(Cache& c, const float* x, const RowRef* rows, int n);
Status q4_decode_rows_cpu(const Cache& c, const RowRef* rows, int n, float* out);
Status mxfp4_encode_rows_cpu(Cache& c, const float* x, const RowRef* rows, int n);
Status mxfp4_decode_rows_cpu(const Cache& c, const RowRef* rows, int n, float* out);
Status pack_cpu(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob);
Status unpack_cpu(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob);

#ifdef KC_HAVE_CUDA
Status q4_encode_rows_cuda(Cache& c, const float* x, const RowRef* rows, int n);
Status q4_decode_rows_cuda(const Cache& c, const RowRef* rows, int n, float* out);
Status mxfp4_encode_rows_cuda(Cache& c, const float* x, const RowRef* rows, int n);
Status mxfp4_decode_rows_cuda(const Cache& c, const RowRef* rows, int n, float* out);
Status pack_cuda(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob);
Status unpack_cuda(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob);
#endif

}  // namespace kc
