// The refusals gate (refusals.h): argument boundaries of every kernel behind Backend.
#include "contracts/refusals.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "kernels/backend/forwarding.h"

namespace kc {
namespace {

constexpr int kLayers = 2, kKvHeads = 2, kHeadDim = 64;  // 64: every format's row width
constexpr int kWindowCap = 40, kPtok = 16, kPages = 3;   // lane 0: window of 40; lane 1: 3 pages of 16
constexpr int kPagedCap = kPtok * kPages;
constexpr int kMaxQHeads = 33 * kKvHeads;  // room for the first q_heads past the range

// Two lanes in one allocation: lane 1's pages (in reverse order, a free page between two
// of them), then lane 0's window, then a tail of spare bytes; every byte holds a pattern
// so that a write anywhere shows.
Cache make_cache(Format f) {
  Cache c;
  c.lay = KvLayout(kLayers, kKvHeads, kHeadDim, f);
  const uint64_t ps = c.lay.page_stride(kPtok);
  c.pts = {3, 1, 0};  // page 2 of the arena is nobody's
  ViewDesc paged;
  paged.base_off = 0, paged.pt_off = 0, paged.n_pages = kPages, paged.ptok = kPtok, paged.ps = ps;
  ViewDesc window;
  window.base_off = 4 * ps, window.ptok = kWindowCap;
  c.views = {window, paged};
  c.mem.resize(4 * ps + c.lay.kv_bytes(kWindowCap) + 256);
  for (size_t i = 0; i < c.mem.size(); ++i) c.mem[i] = uint8_t(i * 37 + 11);
  // Valid encodings everywhere (the valid calls read them): zero scales decode to zeros.
  if (c.lay.scale_bytes) std::fill(c.mem.begin(), c.mem.end(), uint8_t(0x11));
  return c;
}

// Buffers a kernel writes besides the cache, poisoned before each call and compared after.
struct Outputs {
  std::vector<float> out = std::vector<float>(size_t(4) * kMaxQHeads * kHeadDim, -12345.0f);
  std::vector<uint8_t> blob = std::vector<uint8_t>(7, 0xA5);
  bool operator==(const Outputs& o) const {
    return blob == o.blob && std::equal(out.begin(), out.end(), o.out.begin(), [](float a, float b) {
             return std::memcmp(&a, &b, sizeof a) == 0;
           });
  }
};

struct Probe {
  std::string arg, value;
  bool valid;           // the last valid value: must be accepted
  std::string names;    // the words a refusal must contain (any of them, '|'-separated)
  std::function<Status(Backend&, Cache&, Outputs&)> call;
};

std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = float(int(i % 29) - 14) * 0.25f;
  return x;
}

const char* op_name(RefusalOp op) {
  switch (op) {
    case RefusalOp::encode_rows: return "encode_rows";
    case RefusalOp::decode_rows: return "decode_rows";
    case RefusalOp::rope_store: return "rope_store";
    case RefusalOp::attention: return "attention";
    case RefusalOp::keep: return "keep";
    case RefusalOp::pack: return "pack";
    case RefusalOp::unpack: return "unpack";
  }
  return "?";
}

bool op_supports(RefusalOp op, Format f) {
  switch (op) {
    case RefusalOp::encode_rows:
    case RefusalOp::decode_rows: return f != Format::bf16;
    case RefusalOp::rope_store:
    case RefusalOp::attention:
    case RefusalOp::keep: return true;  // every cache format, mxfp4 included
    case RefusalOp::pack:
    case RefusalOp::unpack: return true;
  }
  return false;
}

// One row-codec call with row r and count n; `other` calls it with another format.
std::vector<Probe> row_probes(RefusalOp op, Format f) {
  const bool enc = op == RefusalOp::encode_rows;
  auto call = [enc](Format fmt, RowRef r, int n) {
    return [enc, fmt, r, n](Backend& be, Cache& c, Outputs& o) {
      const std::vector<float> x = ramp(kHeadDim);
      return enc ? be.encode_rows(fmt, c, x.data(), &r, n) : be.decode_rows(fmt, c, &r, n, o.out.data());
    };
  };
  const RowRef lo{0, 0, 0, 0, 0}, hi{1, kLayers - 1, 1, kKvHeads - 1, kPagedCap - 1};
  auto with = [](RowRef r, int RowRef::*m, int v) { r.*m = v; return r; };
  std::vector<Probe> p;
  p.push_back({"row", "lowest", true, "", call(f, lo, 1)});
  p.push_back({"row", "highest", true, "", call(f, hi, 1)});
  p.push_back({"pos", "window-last", true, "", call(f, with(lo, &RowRef::pos, kWindowCap - 1), 1)});
  p.push_back({"n", "0", true, "", call(f, lo, 0)});
  p.push_back({"lane", "-1", false, "lane", call(f, with(lo, &RowRef::lane, -1), 1)});
  p.push_back({"lane", "2", false, "lane", call(f, with(hi, &RowRef::lane, 2), 1)});
  p.push_back({"layer", "-1", false, "layer", call(f, with(lo, &RowRef::layer, -1), 1)});
  p.push_back({"layer", "2", false, "layer", call(f, with(hi, &RowRef::layer, kLayers), 1)});
  p.push_back({"kv", "-1", false, "kv", call(f, with(lo, &RowRef::kv, -1), 1)});
  p.push_back({"kv", "2", false, "kv", call(f, with(hi, &RowRef::kv, 2), 1)});
  p.push_back({"head", "-1", false, "head", call(f, with(lo, &RowRef::head, -1), 1)});
  p.push_back({"head", "2", false, "head", call(f, with(hi, &RowRef::head, kKvHeads), 1)});
  p.push_back({"pos", "-1", false, "position", call(f, with(lo, &RowRef::pos, -1), 1)});
  p.push_back({"pos", "paged-cap", false, "position", call(f, with(hi, &RowRef::pos, kPagedCap), 1)});
  p.push_back({"pos", "window-cap", false, "position", call(f, with(lo, &RowRef::pos, kWindowCap), 1)});
  p.push_back({"n", "-1", false, "count", call(f, lo, -1)});
  const Format other = f == Format::fp8 ? Format::q4 : Format::fp8;
  p.push_back({"format", format_name(other), false, "format", call(other, lo, 1)});
  return p;
}

std::vector<Probe> rope_probes() {
  struct Args {
    RopeParams p{2 * kKvHeads, kHeadDim, 1e4, kLayers - 1};
    RopeRow row{1, 0, kPagedCap - 1};
    int n = 1;
  };
  auto call = [](Args a) {
    return [a](Backend& be, Cache& c, Outputs& o) {
      const std::vector<float> q = ramp(size_t(kMaxQHeads) * kHeadDim), kv = ramp(size_t(kKvHeads) * kHeadDim);
      return be.rope_store(c, a.p, &a.row, a.n, q.data(), kv.data(), kv.data(), o.out.data());
    };
  };
  auto mod = [](std::function<void(Args&)> f) { Args a; f(a); return a; };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<Probe> p;
  p.push_back({"row", "paged-last", true, "", call(Args{})});
  p.push_back({"q_heads", "kv_heads", true, "", call(mod([](Args& a) { a.p.q_heads = kKvHeads; }))});
  p.push_back({"q_heads", "32*kv_heads", true, "", call(mod([](Args& a) { a.p.q_heads = 32 * kKvHeads; }))});
  p.push_back({"rot_dims", "2", true, "", call(mod([](Args& a) { a.p.rot_dims = 2; }))});
  p.push_back({"layer", "0", true, "", call(mod([](Args& a) { a.p.layer = 0; }))});
  p.push_back({"slot", "0", true, "", call(mod([](Args& a) { a.row = {0, 0, 0}; }))});
  p.push_back({"slot", "window-last", true, "", call(mod([](Args& a) { a.row = {0, 5, kWindowCap - 1}; }))});
  p.push_back({"pos", "2^31-1", true, "", call(mod([](Args& a) { a.row.pos = std::numeric_limits<int32_t>::max(); }))});
  p.push_back({"n", "0", true, "", call(mod([](Args& a) { a.n = 0; }))});
  p.push_back({"q_heads", "0", false, "q_heads", call(mod([](Args& a) { a.p.q_heads = 0; }))});
  p.push_back({"q_heads", "kv_heads+1", false, "q_heads", call(mod([](Args& a) { a.p.q_heads = kKvHeads + 1; }))});
  p.push_back({"q_heads", "33*kv_heads", false, "q_heads", call(mod([](Args& a) { a.p.q_heads = 33 * kKvHeads; }))});
  p.push_back({"rot_dims", "0", false, "rot_dims", call(mod([](Args& a) { a.p.rot_dims = 0; }))});
  p.push_back({"rot_dims", "odd", false, "rot_dims", call(mod([](Args& a) { a.p.rot_dims = 3; }))});
  p.push_back({"rot_dims", "head_dim+2", false, "rot_dims", call(mod([](Args& a) { a.p.rot_dims = kHeadDim + 2; }))});
  p.push_back({"base", "0", false, "base", call(mod([](Args& a) { a.p.base = 0; }))});
  p.push_back({"base", "nan", false, "base", call(mod([nan](Args& a) { a.p.base = nan; }))});
  p.push_back({"base", "inf", false, "base", call(mod([inf](Args& a) { a.p.base = inf; }))});
  p.push_back({"layer", "-1", false, "layer", call(mod([](Args& a) { a.p.layer = -1; }))});
  p.push_back({"layer", "2", false, "layer", call(mod([](Args& a) { a.p.layer = kLayers; }))});
  p.push_back({"lane", "-1", false, "lane", call(mod([](Args& a) { a.row.lane = -1; }))});
  p.push_back({"lane", "2", false, "lane", call(mod([](Args& a) { a.row.lane = 2; }))});
  p.push_back({"pos", "-1", false, "position", call(mod([](Args& a) { a.row.pos = -1; }))});
  p.push_back({"slot", "-1", false, "slot", call(mod([](Args& a) { a.row.slot = -1; }))});
  p.push_back({"slot", "paged-cap", false, "slot", call(mod([](Args& a) { a.row.slot = kPagedCap; }))});
  p.push_back({"slot", "window-cap", false, "slot", call(mod([](Args& a) { a.row = {0, 0, kWindowCap}; }))});
  p.push_back({"n", "-1", false, "count", call(mod([](Args& a) { a.n = -1; }))});
  return p;
}

std::vector<Probe> attention_probes() {
  struct Args {
    AttnParams p{2 * kKvHeads, kLayers - 1, 16, 0.125f};
    std::vector<AttnRow> rows{{1, kPagedCap, 0, 0}, {0, 3, 0, 2}};
    std::vector<int32_t> tails{kWindowCap - 1, 5};
    int n = 2;
  };
  auto call = [](Args a) {
    return [a](Backend& be, Cache& c, Outputs& o) {
      const std::vector<float> q = ramp(size_t(2) * kMaxQHeads * kHeadDim);
      return be.attention(c, a.p, a.rows.data(), a.n, a.tails, q.data(), o.out.data());
    };
  };
  auto mod = [](std::function<void(Args&)> f) { Args a; f(a); return a; };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<Probe> p;
  p.push_back({"rows", "full-and-tail", true, "", call(Args{})});
  p.push_back({"chunk", "1", true, "", call(mod([](Args& a) { a.p.chunk = 1; }))});
  p.push_back({"chunk", "1024", true, "", call(mod([](Args& a) { a.p.chunk = 1024; }))});
  p.push_back({"q_heads", "32*kv_heads", true, "", call(mod([](Args& a) { a.p.q_heads = 32 * kKvHeads; }))});
  p.push_back({"layer", "0", true, "", call(mod([](Args& a) { a.p.layer = 0; }))});
  p.push_back({"len", "0", true, "", call(mod([](Args& a) { a.rows[1] = {0, 0, 0, 0}; }))});
  p.push_back({"tail_slot", "0", true, "", call(mod([](Args& a) { a.tails[1] = 0; }))});
  p.push_back({"scale", "0", true, "", call(mod([](Args& a) { a.p.scale = 0.0f; }))});
  p.push_back({"n", "0", true, "", call(mod([](Args& a) { a.n = 0; }))});
  p.push_back({"chunk", "0", false, "chunk", call(mod([](Args& a) { a.p.chunk = 0; }))});
  p.push_back({"chunk", "1025", false, "chunk", call(mod([](Args& a) { a.p.chunk = 1025; }))});
  p.push_back({"q_heads", "0", false, "q_heads", call(mod([](Args& a) { a.p.q_heads = 0; }))});
  p.push_back({"q_heads", "33*kv_heads", false, "q_heads", call(mod([](Args& a) { a.p.q_heads = 33 * kKvHeads; }))});
  p.push_back({"layer", "-1", false, "layer", call(mod([](Args& a) { a.p.layer = -1; }))});
  p.push_back({"layer", "2", false, "layer", call(mod([](Args& a) { a.p.layer = kLayers; }))});
  p.push_back({"scale", "nan", false, "scale", call(mod([nan](Args& a) { a.p.scale = nan; }))});
  p.push_back({"scale", "inf", false, "scale", call(mod([inf](Args& a) { a.p.scale = inf; }))});
  p.push_back({"lane", "-1", false, "lane", call(mod([](Args& a) { a.rows[1].lane = -1; }))});
  p.push_back({"lane", "2", false, "lane", call(mod([](Args& a) { a.rows[1].lane = 2; }))});
  p.push_back({"len", "-1", false, "length", call(mod([](Args& a) { a.rows[0].len = -1; }))});
  p.push_back({"len", "paged-cap+1", false, "length", call(mod([](Args& a) { a.rows[0].len = kPagedCap + 1; }))});
  p.push_back({"len", "window-cap+1", false, "length", call(mod([](Args& a) { a.rows[1].len = kWindowCap + 1; }))});
  p.push_back({"tail_off", "-1", false, "tail", call(mod([](Args& a) { a.rows[1].tail_off = -1; }))});
  p.push_back({"tail_off", "past-list", false, "tail", call(mod([](Args& a) { a.rows[1].tail_off = 1; }))});
  p.push_back({"tail_len", "-1", false, "tail", call(mod([](Args& a) { a.rows[1].tail_len = -1; }))});
  p.push_back({"tail_len", "past-list", false, "tail", call(mod([](Args& a) { a.rows[1].tail_len = 3; }))});
  p.push_back({"tail_slot", "-1", false, "tail slot", call(mod([](Args& a) { a.tails[1] = -1; }))});
  p.push_back({"tail_slot", "window-cap", false, "tail slot", call(mod([](Args& a) { a.tails[0] = kWindowCap; }))});
  p.push_back({"n", "-1", false, "count", call(mod([](Args& a) { a.n = -1; }))});
  return p;
}

std::vector<Probe> keep_probes() {
  auto call = [](std::vector<KeepMove> m, int n) {
    return [m, n](Backend& be, Cache& c, Outputs&) { return be.keep(c, m.data(), n); };
  };
  std::vector<Probe> p;
  p.push_back({"moves", "edges", true, "", call({{1, kPagedCap - 1, 0}, {0, kWindowCap - 1, kWindowCap - 2}}, 2)});
  p.push_back({"n", "0", true, "", call({{1, 1, 0}}, 0)});
  p.push_back({"moves", "ascending-in-a-lane", true, "", call({{1, 5, 2}, {1, 6, 3}}, 2)});
  p.push_back({"lane", "-1", false, "lane", call({{-1, 1, 0}}, 1)});
  p.push_back({"lane", "2", false, "lane", call({{2, 1, 0}}, 1)});
  p.push_back({"src", "paged-cap", false, "src", call({{1, kPagedCap, 0}}, 1)});
  p.push_back({"src", "window-cap", false, "src", call({{0, kWindowCap, 0}}, 1)});
  p.push_back({"dst", "-1", false, "dst", call({{1, 1, -1}}, 1)});
  p.push_back({"dst", "src", false, "dst", call({{1, 4, 4}}, 1)});
  p.push_back({"n", "-1", false, "count", call({{1, 1, 0}}, -1)});
  // Two moves of one lane must ascend strictly in src and in dst (an equal one leaves the
  // device kernel's order undefined).
  p.push_back({"moves", "equal-src", false, "ascend", call({{1, 5, 2}, {1, 5, 3}}, 2)});
  p.push_back({"moves", "equal-dst", false, "ascend", call({{1, 5, 2}, {1, 6, 2}}, 2)});
  return p;
}

std::vector<Probe> pack_probes() {
  auto call = [](int lane, int64_t pos0, int64_t count) {
    return [=](Backend& be, Cache& c, Outputs& o) { return be.pack(c, lane, pos0, count, &o.blob); };
  };
  std::vector<Probe> p;
  p.push_back({"range", "whole-paged-lane", true, "", call(1, 0, kPagedCap)});
  p.push_back({"range", "last-window-position", true, "", call(0, kWindowCap - 1, 1)});
  p.push_back({"count", "0", true, "", call(1, kPagedCap, 0)});
  p.push_back({"lane", "-1", false, "lane", call(-1, 0, 1)});
  p.push_back({"lane", "2", false, "lane", call(2, 0, 1)});
  p.push_back({"pos0", "-1", false, "positions", call(1, -1, 1)});
  p.push_back({"pos0", "paged-cap+1", false, "positions", call(1, kPagedCap + 1, 0)});
  p.push_back({"count", "-1", false, "positions", call(1, 0, -1)});
  p.push_back({"count", "one-past", false, "positions", call(1, 1, kPagedCap)});
  p.push_back({"count", "window-one-past", false, "positions", call(0, 0, kWindowCap + 1)});
  return p;
}

std::vector<Probe> unpack_probes() {
  // A blob of 5 positions of the paged lane, packed from the same cache each time.
  auto call = [](int lane, int64_t pos0) {
    return [=](Backend& be, Cache& c, Outputs&) {
      std::vector<uint8_t> blob;
      KC_RETURN_IF_ERROR(be.pack(c, 1, 2, 5, &blob));
      return be.unpack(c, lane, pos0, blob);
    };
  };
  std::vector<Probe> p;
  p.push_back({"pos0", "0", true, "", call(0, 0)});
  p.push_back({"pos0", "last-fit", true, "", call(1, kPagedCap - 5)});
  p.push_back({"lane", "-1", false, "lane", call(-1, 0)});
  p.push_back({"lane", "2", false, "lane", call(2, 0)});
  p.push_back({"pos0", "-1", false, "positions", call(1, -1)});
  p.push_back({"pos0", "one-past-fit", false, "positions", call(1, kPagedCap - 4)});
  p.push_back({"pos0", "window-one-past-fit", false, "positions", call(0, kWindowCap - 4)});
  return p;
}

std::vector<Probe> probes_of(RefusalOp op, Format f) {
  switch (op) {
    case RefusalOp::encode_rows:
    case RefusalOp::decode_rows: return row_probes(op, f);
    case RefusalOp::rope_store: return rope_probes();
    case RefusalOp::attention: return attention_probes();
    case RefusalOp::keep: return keep_probes();
    case RefusalOp::pack: return pack_probes();
    case RefusalOp::unpack: return unpack_probes();
  }
  return {};
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool names_any(const std::string& message, const std::string& names) {
  const std::string m = lower(message) + " ";
  size_t start = 0;
  while (start <= names.size()) {
    const size_t bar = names.find('|', start);
    const std::string w = names.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    if (!w.empty() && m.find(w) != std::string::npos) return true;
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return false;
}

// The controls' backend: forwards to the real one and misbehaves on calls the real one
// refuses (it asks the real backend first, on a copy of the cache).
enum class RefusalFault { accepts_invalid, unnamed, writes_then_refuses, writes_output_then_refuses, paged_edge_accepted };

class RefusalFaultBackend final : public ForwardingBackend {
 public:
  RefusalFaultBackend(Backend& real, RefusalFault f) : ForwardingBackend(real), fault_(f) {}
  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* r, int n) override {
    const Status st = apply(c, [&](Cache& cc) { return real_.encode_rows(f, cc, x, r, n); });
    if (st.ok || !off_by_one_at_paged_cap(c, r, n)) return st;
    Cache scratch = c;
    const std::vector<RowRef> back = one_back(c, r, n);
    return real_.encode_rows(f, scratch, x, back.data(), n).ok ? Status::Ok() : st;
  }
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override {
    Cache cc = c;
    const Status st =
        apply(cc, [&](Cache& x) { return real_.decode_rows(f, x, r, n, o); }, [&] { o[0] = 1.0f; });
    if (st.ok || !off_by_one_at_paged_cap(c, r, n)) return st;
    std::vector<float> scratch(size_t(n) * c.lay.head_dim);
    const std::vector<RowRef> back = one_back(c, r, n);
    return real_.decode_rows(f, c, back.data(), n, scratch.data()).ok ? Status::Ok() : st;
  }
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* rows, int n, const float* q, const float* k,
                    const float* v, float* q_out) override {
    return apply(
        c, [&](Cache& cc) { return real_.rope_store(cc, p, rows, n, q, k, v, q_out); },
        [&] { if (q_out) q_out[0] = 1.0f; });
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* rows, int n, const std::vector<int32_t>& t,
                   const float* q, float* out) override {
    Cache cc = c;
    return apply(cc, [&](Cache& x) { return real_.attention(x, p, rows, n, t, q, out); }, [&] { out[0] = 1.0f; });
  }
  Status pack(const Cache& c, int lane, int64_t p0, int64_t n, std::vector<uint8_t>* b) override {
    Cache cc = c;
    return apply(cc, [&](Cache& x) { return real_.pack(x, lane, p0, n, b); }, [&] { b->push_back(0); });
  }
  Status unpack(Cache& c, int lane, int64_t p0, const std::vector<uint8_t>& b) override {
    return apply(c, [&](Cache& cc) { return real_.unpack(cc, lane, p0, b); });
  }
  Status keep(Cache& c, const KeepMove* m, int n) override {
    return apply(c, [&](Cache& cc) { return real_.keep(cc, m, n); });
  }

 private:
  // write_output: what writes_output_then_refuses writes (the call's output, not the cache).
  Status apply(Cache& c, const std::function<Status(Cache&)>& call, const std::function<void()>& write_output = {}) {
    Status st = call(c);
    if (st.ok) return st;
    switch (fault_) {
      case RefusalFault::accepts_invalid: return Status::Ok();
      case RefusalFault::unnamed: return Status::Error("refused");
      case RefusalFault::writes_then_refuses: c.mem[c.mem.size() / 2] ^= 1; return st;
      case RefusalFault::writes_output_then_refuses:
        if (write_output) write_output();
        return st;
      case RefusalFault::paged_edge_accepted: return st;  // the row calls above
    }
    return st;
  }
  // paged_edge_accepted: a row at a paged lane's capacity, as a range check of pos > capacity
  // would let through (the call is accepted when it is valid with those rows one back).
  bool off_by_one_at_paged_cap(const Cache& c, const RowRef* r, int n) const {
    if (fault_ != RefusalFault::paged_edge_accepted) return false;
    for (int i = 0; i < n; ++i)
      if (at_paged_cap(c, r[i])) return true;
    return false;
  }
  static bool at_paged_cap(const Cache& c, const RowRef& r) {
    return r.lane >= 0 && r.lane < int(c.views.size()) && c.views[r.lane].paged() && r.pos == c.views[r.lane].capacity();
  }
  static std::vector<RowRef> one_back(const Cache& c, const RowRef* r, int n) {
    std::vector<RowRef> b(r, r + n);
    for (RowRef& x : b)
      if (at_paged_cap(c, x)) --x.pos;
    return b;
  }
  RefusalFault fault_;
};

void run_probes(Run& run, Backend& be, const std::vector<RefusalOp>& ops, const std::vector<Format>& formats) {
  for (RefusalOp op : ops)
    for (Format f : formats) {
      if (!op_supports(op, f)) continue;
      for (const Probe& pr : probes_of(op, f)) {
        const std::string cv = std::string("refusals(op=") + op_name(op) + ",fmt=" + format_name(f) + ",arg=" + pr.arg +
                               ",value=" + pr.value + (pr.valid ? ",valid" : "") + ")";
        if (!run.selected(cv)) {
          // A probe left out by a selection (or left to another shard) is not a generated case either.
          if (run.last_out_by_shard()) {
            // Another shard runs it: uncounted there too in a run with no selection; a selected
            // probe is a counted case, so it stays among this shard's other_shards (run +
            // other_shards = matched; session 63's audit found it left out).
            if (!run.narrowed()) --run.cases_other_shard, ++run.matched_uncounted;
          } else {
            --run.cases_filtered;
          }
          continue;
        }
        // A probe is a case of this gate (its line replays with --case), but only counts as a
        // generated case when a selection picked it.
        if (!run.narrowed()) --run.cases_run, ++run.matched_uncounted, ++run.uncounted_run;
        run.numbers["refusal_probes"] = run.numbers.value("refusal_probes", 0) + 1;
        Cache c = make_cache(f);
        const Cache before = c;
        Outputs o;
        const Outputs o_before = o;
        const Status st = pr.call(be, c, o);
        if (pr.valid) {
          run.check("refusals", st.ok, cv, "the last valid value was refused: " + st.message);
          continue;
        }
        const bool named = !st.ok && names_any(st.message, pr.names);
        const bool untouched = c.mem == before.mem && o == o_before;
        run.check("refusals", named && untouched, cv,
                  st.ok ? "accepted"
                        : (!named ? "refused without naming " + pr.names + ": " + st.message
                                  : "refused, but wrote before refusing: " + st.message));
      }
    }
}

}  // namespace

void refusal_gate(Run& run, const std::vector<RefusalOp>& ops, const std::vector<Format>& formats) {
  std::string description =
      "each argument of each kernel at its range's edges: the last valid value accepted, the first invalid one "
      "refused with a message naming the argument, and nothing written (cache, outputs, blob)";
  for (const GateStat& g : run.gates())  // a contract's own refusals (scale-planes: bad blobs) come first
    if (g.name == "refusals" && !g.description.empty() && g.description.find(description) == std::string::npos)
      description = g.description + "; and " + description;
  run.declare("refusals", description);
  run_probes(run, run.be, ops, formats);
  if (run.in_control) return;
  const std::vector<Format> one{formats.front()};
  const std::vector<RefusalOp> first{ops.front()};
  run.control("refusal-accepts-one-past", "the backend returns Ok for calls it should refuse (a missing range check)",
              [&](Run& sub) {
                RefusalFaultBackend fb(sub.be, RefusalFault::accepts_invalid);
                run_probes(sub, fb, first, one);
              });
  run.control("refusal-unnamed", "the backend refuses without naming the argument", [&](Run& sub) {
    RefusalFaultBackend fb(sub.be, RefusalFault::unnamed);
    run_probes(sub, fb, first, one);
  });
  run.control("refusal-writes-first", "the backend changes one cache byte before it refuses", [&](Run& sub) {
    RefusalFaultBackend fb(sub.be, RefusalFault::writes_then_refuses);
    run_probes(sub, fb, first, one);
  });
  // The first of the operations that write an output besides the cache (decode's floats,
  // rope's rotated queries, attention's rows, pack's blob).
  const auto with_output = std::find_if(ops.begin(), ops.end(), [](RefusalOp op) {
    return op == RefusalOp::decode_rows || op == RefusalOp::rope_store || op == RefusalOp::attention ||
           op == RefusalOp::pack;
  });
  if (with_output != ops.end())
    run.control("refusal-writes-output-first", "the backend writes its output (not the cache) before it refuses",
                [&](Run& sub) {
                  RefusalFaultBackend fb(sub.be, RefusalFault::writes_output_then_refuses);
                  run_probes(sub, fb, {*with_output}, one);
                });
  // A paged lane's position check off by one (pos > capacity): only the probe at the
  // capacity itself can see it (the window lane's probe is another edge).
  const auto row_op = std::find_if(ops.begin(), ops.end(), [](RefusalOp op) {
    return op == RefusalOp::encode_rows || op == RefusalOp::decode_rows;
  });
  if (row_op != ops.end())
    run.control("refusal-paged-edge-accepted", "the backend accepts a row at a paged lane's capacity (pos > capacity)",
                [&](Run& sub) {
                  RefusalFaultBackend fb(sub.be, RefusalFault::paged_edge_accepted);
                  run_probes(sub, fb, {*row_op}, one);
                });
}

}  // namespace kc
