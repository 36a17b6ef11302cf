// The benches' device-side hash (the murmur3 finaliser): reproducible random bytes for filling
// memory, and the mix of bench_bytes_hash's words. nvcc only.
#pragma once
#include <cstdint>

namespace kc {

__host__ __device__ inline uint64_t bench_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}
__device__ inline uint32_t bench_hash32(uint64_t x) { return uint32_t(bench_mix64(x)); }

}  // namespace kc
