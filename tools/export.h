// `tf-cuda-test export CONTRACT --out DIR`: a contract's kind of inputs and our outputs for
// an independent oracle (tools/oracle_torch.py). Today: qwen-pages (rope store then split-K
// attention over the stored rows, bf16 and fp8 caches, window and paged), one safetensors
// file per case (fp32 inputs q, k, v; our rotated q and attention output; the cache rows as
// stored: bf16 rows, or fp8 codes and row scales) and manifest.json with every parameter.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend/backend.h"

namespace kc {
// Returns the exit code: 0 written, 1 a kernel refused a case, 2 bad arguments or unwritable.
int export_command(Backend& be, const std::string& contract, const std::string& out_dir, int cases, uint64_t seed,
                   const std::vector<std::string>& argv);
}  // namespace kc
