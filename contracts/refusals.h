// The `refusals` gate: every argument of every kernel behind Backend, at the edges of its
// valid range. For each argument, the last valid value on each side must be accepted, and
// the first invalid value on each side must be refused with a Status whose message names
// the argument. A refused call must write nothing: the cache bytes (every lane, every
// page, the bytes between them), the output buffers and the blob are compared with their
// state before the call.
//
// A contract calls refusal_gate with the operations it covers and the cache formats it
// runs. The gate's controls wrap the backend so that it fails in one of these ways, and
// each must turn the gate red:
//   accepts-one-past  a call whose arguments validation refuses returns Ok anyway
//                     (a missing or off-by-one range check);
//   unnamed-refusal   the refusal's message names no argument;
//   writes-then-refuses  one cache byte changes before the refusal;
//   writes-output-first  the call's output (floats or blob, not the cache) changes before
//                     the refusal (contracts with decode, rope store, attention or pack);
//   paged-edge-accepted  a row at a paged lane's capacity is accepted, as a check of
//                     pos > capacity would (the row-codec contracts).
#pragma once
#include <vector>

#include "contracts/framework.h"

namespace kc {

enum class RefusalOp { encode_rows, decode_rows, rope_store, attention, keep, pack, unpack };

void refusal_gate(Run& run, const std::vector<RefusalOp>& ops, const std::vector<Format>& formats);

}  // namespace kc
