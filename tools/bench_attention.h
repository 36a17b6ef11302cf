#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contracts/receipt.h"

namespace kc {
struct BenchOptions {
  bool quick = false;
  int reps = 30;
  int chunk = 512;  // split-K chunk width (H200, 32K: 512 beat 256 and 1024 at batch 1 and 8)
  std::string script_dir = "tools";  // bench_sdpa.py, transformers_decode_bench.py
  // attention: the python that runs tools/bench_sdpa.py ("none": SDPA not measured, as an A/B
  // of two builds in one call needs no baseline)
  std::string sdpa = "python3";
  // attention: how each run is timed (AttnBenchConfig::timing: events, gated, graph, partial)
  std::string timing = "events";
  std::string filter;  // attention: only rows whose "config/format/addressing" matches (a valid ECMAScript regex)
  // rope-store, compact: the L2 rule (the receipt's l2_policy): "flush" (default: the L2 read
  // out, untimed, before every timed run of the kernel and the ceiling) or "warm" (runs back
  // to back, the rule of receipts without l2_policy)
  std::string l2 = "flush";
  // engine: the trained model's folder, the synthetic preset's layers, the python that runs
  // tools/transformers_decode_bench.py ("none": transformers not measured), tokens per lane
  std::string engine_model = "fixtures/models/stdlib-bytes-3m";
  int engine_layers = 4;
  std::string transformers = "python3";
  int engine_tokens = 0;  // 0: 128 (quick: 64)
  // engine: instead of the bench, the timing option (bench_engine.cpp: profile_engine):
  // where a decode step's time goes, per kernel, legacy kernels against the current ones;
  // a JSON summary (not a receipt) is written to this path.
  std::string engine_profile;
  std::vector<std::string> argv;
  nlohmann::json device;
};
// One target of a bench receipt: {name, value, limit, at_least, met, measured}. A value of 0
// (or below) is a ratio that was not measured (its rows not timed) and is never met; otherwise
// met is value >= limit (at_least) or value <= limit, the limit itself included.
nlohmann::json bench_target(const std::string& name, double value, double limit, bool at_least);
// Returns the exit code: 0 every target met, 1 a target missed, 2 bad input.
int bench_attention_main(const BenchOptions& o, Receipt* receipt);
}  // namespace kc
