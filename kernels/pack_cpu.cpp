// scale-plane packing: host twins. (Skeleton: the scale-plane packing work replaces this file.)
#include "kernels/codec_backends.h"

namespace kc {

Status pack_cpu(const Cache&, int, int64_t, int64_t, std::vector<uint8_t>*) {
  return Status::Error("pack: not built yet");
}

Status unpack_cpu(Cache&, int, int64_t, const std::vector<uint8_t>&) {
  return Status::Error("unpack: not built yet");
}

}  // namespace kc
