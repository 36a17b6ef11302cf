// The benches' device-side hash (the murmur3 finaliser) for filling memory with
// reproducible random bytes. nvcc only.
#pragma once
#include <cstdint>

namespace kc {

__device__ inline uint32_t bench_hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return uint32_t(x);
}

}  // namespace kc
