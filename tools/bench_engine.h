#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/bench_attention.h"

namespace kc {
class Backend;
// `tf-cuda-test bench engine`: decode tok/s of the engine (greedy `generate`, every lane
// decoding exactly the same number of tokens) on the trained fixture model and on the
// synthetic qwen35-27b-attn preset (written into a temporary folder), at --parallel 1, 4
// and 8, bf16 and fp8 caches, a window and pages of 256 and 16; transformers' `generate`
// on the same models and batches (tools/transformers_decode_bench.py through
// o.transformers; "none" skips it and its targets read "not measured"); attention's share
// of a decode step at 32K. Targets (issue 16), each met or not: paged(256)/window decode
// time <= 1.02 and paged(16)/window <= 1.05 at parallel 8 (each model and cache format),
// ours >= 2x transformers' tok/s at parallel 8 (each model).
// Returns 0 every target met, 1 a target missed or not measured, 2 bad input.
// The median the bench reports (step times, paged / window ratios): the middle value, or the
// mean of the two middle values of an even count; 0 for none.
double bench_median(std::vector<double> v);
int bench_engine_main(const BenchOptions& o, Backend& be, Receipt* receipt);
}  // namespace kc
