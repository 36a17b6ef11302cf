#pragma once
#include <nlohmann/json.hpp>

#include "tools/bench_attention.h"

namespace kc {
// `tf-cuda-test bench pack`. Returns the exit code: 0 the target met on every
// configuration it covers, 1 missed (or a configuration failed its verification),
// 2 bad input / device error before any measurement.
int bench_pack_main(const BenchOptions& o, Receipt* receipt);
}  // namespace kc
