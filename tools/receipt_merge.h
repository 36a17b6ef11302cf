// Shards: `kernel-contract --shard i/n` runs every n-th selected case, from the i-th
// (controls and checks outside the generated cases run in every shard). `report`
// merges the shard receipts of one contract into one receipt (and --merge-out DIR writes
// it as DIR/<contract>.json, which diff and premerge read like any receipt).
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/layout/status.h"

namespace kc {

// Parses "i/n" (1 <= i <= n, n >= 1); false with the reason otherwise.
bool parse_shard(const std::string& text, int* i, int* n, std::string* why);

// Merges the receipts of every shard of one contract run (`paths` name them in messages).
// Refused, naming the file and the mismatch: receipts of other contracts, backends,
// commits, seeds, case counts or filters; a shard missing or given twice. The merge:
//   gates      counts summed (checks outside the generated cases ran in every shard and
//              are counted once per shard), worst ratio the worst of the shards', failures
//              kept (first 8), times summed;
//   controls   red only when red in every shard, caught_by the union;
//   cases      run summed, filtered_out those no shard ran; "merged_shards": n;
//   verdict    pass only when every shard passed (reasons prefixed with their shard);
//   timings    total_s the longest shard's (they run side by side), shards_total_s the sum.
Status merge_shards(const std::vector<nlohmann::json>& shards, const std::vector<std::string>& paths,
                    nlohmann::json* merged);

// `tf-cuda-test report FILES [--format md|text|html] [--merge-out DIR] [--junit FILE]`:
// every file read and checked first; shard receipts of one contract (two or more) are
// merged and shown once; --merge-out writes each merged receipt to DIR/<contract>.json;
// --junit writes the receipts shown as JUnit XML (e.g. receipts made on a GPU machine).
// Exit 0 every verdict pass, 1 a verdict fail, 2 bad input (a file, a merge, an output
// path), nothing printed.
int report_main(const std::vector<std::string>& files, const std::string& format, const std::string& merge_out,
                const std::string& junit, std::ostream& out, std::ostream& err);

}  // namespace kc
