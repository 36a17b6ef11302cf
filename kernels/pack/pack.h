// Scale-plane packing entry points of the backends: the host twin (pack/twin.cpp, always
// built) and the device path (pack/pack.cu, built with the cuda backend). The blob format
// and its host-side code: pack/blob.h.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/layout/cache.h"
#include "kernels/layout/status.h"

namespace kc {

Status pack_cpu(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob);
Status unpack_cpu(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob);

#ifdef KC_HAVE_CUDA
Status pack_cuda(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob);
Status unpack_cuda(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob);
#endif

}  // namespace kc
