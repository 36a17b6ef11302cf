// A backend decorator that plants one defect at the backend boundary, for controls: it
// forwards every operation to the real backend, then misbehaves in one named way. A
// contract runs a normal case through it and the gate named beside each fault must turn
// red (the control proves that gate can fail on a defect of that kind).
#pragma once
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backend/forwarding.h"

namespace kc {

enum class Fault {
  input_write,        // attention writes into the cache it reads            -> inputs
  launch_dependent,   // a row's result depends on the launch's other rows   -> rows==solo
  nondeterministic,   // every second attention differs in one bit           -> repeats
  write_past_output,  // attention writes one float past its output          -> guards
  rope_position,      // rope store rotates by position + 1                  -> rope-bound
  empty_row_nan,      // a row with no keys comes out NaN                    -> empty-rows
  encode_input_write,       // a row encode writes into its input rows        -> inputs
  encode_launch_dependent,  // a batched encode alters the first row's codes  -> rows==solo
  decode_nondeterministic,  // every second row decode differs in one bit     -> repeats
  decode_cache_write,       // a row decode flips a cache byte no row owns     -> inputs
  keep_skips_layer0,        // keep leaves layer 0 of lane 0's last move unwritten -> keep==reference
  fill_drops_last_byte,     // fill leaves the last byte of every range unwritten  -> fill (arena-offsets)
};

class FaultyBackend final : public ForwardingBackend {
 public:
  FaultyBackend(Backend& real, Fault f) : ForwardingBackend(real), fault_(f) {}
  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* r, int n) override {
    return after_encode(real_.encode_rows(f, c, x, r, n), c, x, r, n);
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    return after_decode(real_.decode_rows(f, c, r, n, o), c, n, o);
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    if (fault_ != Fault::rope_position) return real_.rope_store(c, p, rows, n, q, k, v, q_out);
    std::vector<RopeRow> shifted(rows, rows + n);
    for (RopeRow& r : shifted) r.pos += 1;
    return real_.rope_store(c, p, shifted.data(), n, q, k, v, q_out);
  }

  Status keep(Cache& c, const KeepMove* moves, int n) override {
    if (fault_ != Fault::keep_skips_layer0) return real_.keep(c, moves, n);
    const Cache before = c;
    KC_RETURN_IF_ERROR(real_.keep(c, moves, n));
    // Lane 0's last move: layer 0's rows (K and V, every head) keep their old bytes. The
    // attention of qwen-pages reads layer 1 only, so only keep==reference can see it.
    for (int i = n - 1; i >= 0; --i) {
      if (moves[i].lane != 0) continue;
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < c.lay.kv_heads; ++h) {
          const int pos = moves[i].dst;
          std::memcpy(kv_row(c.view(0), 0, kv, h, pos), kv_row(before.view(0), 0, kv, h, pos), c.lay.code_bytes);
          if (c.lay.scale_bytes)
            std::memcpy(kv_scale(c.view(0), 0, kv, h, pos), kv_scale(before.view(0), 0, kv, h, pos), c.lay.scale_bytes);
        }
      break;
    }
    return Status::Ok();
  }

  // The ranges checked as given (a refusal stays right), then each filled one byte short
  // (the host image: a decorator holds nothing).
  Status fill(Cache& c, const ByteRange* ranges, int n, uint8_t value) override {
    if (fault_ != Fault::fill_drops_last_byte) return Backend::fill(c, ranges, n, value);
    KC_RETURN_IF_ERROR(validate_fill(c, ranges, n));
    std::vector<ByteRange> short_by_one(ranges, ranges + n);
    for (ByteRange& r : short_by_one) r.bytes -= r.bytes > 0;
    return Backend::fill(c, short_by_one.data(), n, value);
  }

  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& tails,
                   const float* q, float* out) override {
    KC_RETURN_IF_ERROR(real_.attention(c, p, rows, n, tails, q, out));
    const size_t elems = size_t(n) * p.q_heads * c.lay.head_dim;
    switch (fault_) {
      case Fault::input_write:
        const_cast<Cache&>(c).mem[c.mem.size() / 2] ^= 0x01;
        break;
      case Fault::launch_dependent:
        if (n > 1) flip(out[0]);
        break;
      case Fault::nondeterministic:
        if (calls_++ % 2 == 1 && elems > 0) flip(out[elems - 1]);
        break;
      case Fault::write_past_output:
        std::memset(out + elems, 0, sizeof(float));
        break;
      case Fault::empty_row_nan:  // as an unguarded 0 / 0 in the merge would
        for (int r = 0; r < n; ++r)
          if (rows[r].len + rows[r].tail_len == 0)
            std::fill_n(out + elems / n * r, elems / n, std::numeric_limits<float>::quiet_NaN());
        break;
      default:
        break;
    }
    return Status::Ok();
  }

 private:
  Status after_encode(Status st, Cache& c, const float* x, const RowRef* r, int n) {
    if (!st.ok || n == 0) return st;
    if (fault_ == Fault::encode_input_write) const_cast<float*>(x)[0] += 1.0f;  // never undone by a later call
    if (fault_ == Fault::encode_launch_dependent && n > 1)
      kv_row(c.view(r[0].lane), r[0].layer, r[0].kv, r[0].head, r[0].pos)[0] ^= 0x01;
    return st;
  }
  Status after_decode(Status st, const Cache& c, int n, float* o) {
    if (!st.ok || n == 0) return st;
    if (fault_ == Fault::decode_nondeterministic && calls_++ % 2 == 1) flip(o[size_t(n) * c.lay.head_dim - 1]);
    // The arena's first byte (the leading guard band): no row reads it, so the decoded
    // values stay right and only the cache's hash changes.
    if (fault_ == Fault::decode_cache_write) const_cast<Cache&>(c).mem[0] ^= 0x01;
    return st;
  }
  static void flip(float& x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u ^= 1u;
    std::memcpy(&x, &u, 4);
  }
  Fault fault_;
  int calls_ = 0;
};

}  // namespace kc
