#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench_attention.h"

namespace kc {
// `tf-cuda-test bench rope-store` and `bench compact`. Each returns the exit code: 0 every
// target it covers met, 1 a target missed or a row not verified, 2 bad input or a device
// error before any measurement.
// The rows a run times, as printed ("256MiB/q4/p16"): sizes x formats x addressing.
std::vector<std::string> bench_moves_configs(bool quick);
// The target entry of one timed row ("256MiB/q4/p16", its size, achieved / ceiling, whether its
// bytes were verified): null below 64 MiB (the target covers 64 MiB up); met when the row is
// verified and at least 0.85 of the ceiling.
nlohmann::json bench_moves_target(const std::string& cfg, uint64_t mib, double of_ceiling, bool verified);
int bench_rope_store_main(const BenchOptions& o, Receipt* receipt);
int bench_compact_main(const BenchOptions& o, Receipt* receipt);
}  // namespace kc
