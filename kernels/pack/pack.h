// Scale-plane packing entry points of the host twin (pack/twin.cpp; the device path's are
// in pack/launch.h). The blob format
// and its host-side code: pack/blob.h.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/layout/cache.h"
#include "kernels/layout/status.h"

namespace kc {

Status pack_cpu(const Cache& c, int lane, int64_t pos0, int64_t count, std::vector<uint8_t>* blob);
Status unpack_cpu(Cache& c, int lane, int64_t pos0, const std::vector<uint8_t>& blob);

}  // namespace kc
