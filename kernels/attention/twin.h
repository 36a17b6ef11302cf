// Host twins of the rope store, split-K attention (partial + merge) and keep kernels
// (attention/twin.cpp): the same helpers, the same key chunks, the same reduction and
// merge order. Every Backend argument is validated by the caller.
#pragma once
#include "kernels/attention/params.h"
#include "kernels/layout/cache.h"

namespace kc {

// Rope store: rotated queries to q_out (when q is not null), rotated k and plain v
// stored at each row's slot in the cache format.
void rope_store_host(Cache& cache, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                     const float* v, float* q_out);
// Split-K attention (partial per chunk, then the merge in chunk order).
void attention_host(const Cache& cache, const AttnParams& p, const AttnRow* rows, int n, const int32_t* tails,
                    const float* q, float* out);
// Compaction: every field's row src -> dst, the moves in order.
void keep_host(Cache& cache, const KeepMove* moves, int n);

}  // namespace kc
