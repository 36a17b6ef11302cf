// arena-offsets: every kernel addresses rows past 2^31 and 2^32 bytes into its arena.
//
// A 32-bit byte offset in the addressing helper (an `int` page offset, a `uint32_t` product
// of page and stride) is invisible in every other contract: their arenas are megabytes.
// Here one arena of about 4.3 GB (the far arena) holds a paged lane whose pages lie below
// 2^31, between 2^31 and 2^32 and past 2^32, interleaved in its page table, and a window
// lane that starts past 2^32. A near arena holds the same two lanes in its first pages.
// Each case (one cache format) runs, on both arenas: rope store of every position of both
// lanes, split-K attention over committed keys and tails of both lanes in one launch, keep
// with moves of both lanes in one call, the row codecs on far rows, and pack of both lanes;
// then Backend::fill of six byte ranges in one call (0xA5: 300 bytes of lane 0's page past
// 2^32, the last owned byte of its page between 2^31 and 2^32, the whole of another page
// past 2^32, 3 bytes of a page below 2^31, 777 bytes of the window lane, 0 bytes at the
// memory's end), on a backend with an engine with the cache held (EngineBackend::hold: on
// cuda the device kernel fills the device copy, release copies it back), and pack of both
// lanes again.
//   far==near        rotated q, attention output, decoded rows and the packed blobs before
//                    and after the fill (position-ordered, so layout-free) are byte-equal on
//                    both arenas
//   guards           every byte of the far arena that no lane owns is still zero, so a
//                    write that lands 4 GB too low shows even where nothing reads it back
//   fill             every filled byte holds 0xA5 in the host image after the release; a
//                    fill of no range is accepted; a call of one valid range and one that
//                    ends one byte past the memory is refused naming that range and writes
//                    nothing, both while held (the device's check) and not held (the host's)
// (Rope store and attention promise bounds, not the host twin's bytes, on the device, so
// the twin is not compared here; far==near is exact on one backend.)
// Controls: far-page-lost (one far page's bytes lost after the rope store) and
// fill-drops-last-byte (a decorator whose fill leaves each range's last byte unwritten:
// contracts/faulty_backend.h, host path) must be red; the planted bugs kv-offset-32bit
// (host twins) and kv-offset-32bit-device (kernels) in kernels/layout/CMakeLists.txt must
// turn the contract red on their backend. Memory: one 4.3 GB host copy, and on cuda the
// device's (the cache held for the fill, per call otherwise).
#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "contracts/contracts.h"
#include "contracts/faulty_backend.h"
#include "contracts/framework.h"
#include "kernels/engine/engine_backend.h"

namespace kc {
namespace {

constexpr int kLayers = 2, kKvHeads = 2, kHeadDim = 128, kQHeads = 8;
constexpr int kPtok = 16, kPagedPages = 8, kWindowCap = 64;

struct OffsetCase {
  Format fmt;
  uint64_t seed;
  std::string vars() const {
    return std::string("arena-offsets(fmt=") + format_name(fmt) + ",seed=" + std::to_string(seed) + ")";
  }
};

// Lane 0: 8 pages of 16; lane 1: a window of 64. Far: lane 0 at arena pages
// {H, 0, M, 1, H + 1, M + 1, 2, H + 2} where M is the first page past 2^31 and H the first
// past 2^32, lane 1 after page H + 3 (64 bytes in, so the window is not page-aligned).
// Near: lane 0 at pages {4, 0, 2, 1, 5, 3, 6, 7}, lane 1 after page 8.
Cache make_cache(Format f, bool far) {
  Cache c;
  c.lay = KvLayout(kLayers, kKvHeads, kHeadDim, f);
  const uint64_t ps = c.lay.page_stride(kPtok);
  const int32_t M = far ? int32_t(((uint64_t(1) << 31) + ps - 1) / ps) + 1 : 2;
  const int32_t H = far ? int32_t(((uint64_t(1) << 32) + ps - 1) / ps) + 1 : 4;
  c.pts = far ? std::vector<int32_t>{H, 0, M, 1, H + 1, M + 1, 2, H + 2} : std::vector<int32_t>{4, 0, 2, 1, 5, 3, 6, 7};
  ViewDesc paged;
  paged.base_off = 0, paged.pt_off = 0, paged.n_pages = kPagedPages, paged.ptok = kPtok, paged.ps = ps;
  ViewDesc window;
  window.base_off = uint64_t(far ? H + 3 : 8) * ps + 64, window.ptok = kWindowCap;
  c.views = {paged, window};
  c.mem.assign(window.base_off + c.lay.kv_bytes(kWindowCap) + 4096, 0);
  return c;
}

std::vector<float> normal(std::mt19937_64& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// What one arena's run produced besides its bytes.
struct Outputs {
  std::vector<float> q_rot, attn, decoded;
  std::vector<uint8_t> blob0, blob1;            // packs after the other kernels
  std::vector<uint8_t> blob0_fill, blob1_fill;  // packs after the fill
  std::vector<std::string> fill_refusals;       // what the fill's refusal probes found wrong (empty: right)
};

constexpr uint8_t kFill = 0xA5, kRefusedFill = 0x5A;

// The ranges filled, at the same logical places on both arenas, every byte owned by a
// lane (the guards scan still holds): in lane 0's page 0 (far: past 2^32), the last owned
// byte of its page 2 (far: between 2^31 and 2^32), the whole of its page 4 (far: past
// 2^32), inside its page 3 (below 2^31 on both), inside the window lane, and 0 bytes at
// the memory's end (the last offset a range may start at).
std::vector<ByteRange> fill_ranges(const Cache& c) {
  const ViewDesc& pv = c.views[0];
  const ViewDesc& wv = c.views[1];
  auto page = [&](int i) { return pv.base_off + uint64_t(c.pts[size_t(pv.pt_off + i)]) * pv.ps; };
  const uint64_t owned = c.lay.kv_bytes(uint64_t(pv.ptok));
  return {{page(0) + 100, 300}, {page(2) + owned - 1, 1}, {page(4), owned},
          {page(3) + owned / 2 + 1, 3}, {wv.base_off + 1000, 777}, {c.mem.size(), 0}};
}

// The fill that must be refused: a valid range (range 0 of fill_ranges) and one that ends
// one byte past the memory.
std::vector<ByteRange> refused_ranges(const Cache& c) { return {fill_ranges(c)[0], {c.mem.size() - 7, 8}}; }

// The refused fill (kRefusedFill) must name range 1 and write nothing; a fill of no range
// must be accepted. `where`: held or not.
void fill_refusals(Backend& b, Cache& c, const std::string& where, Outputs* o) {
  const std::vector<ByteRange> bad = refused_ranges(c);
  const Status st = b.fill(c, bad.data(), 2, kRefusedFill);
  if (st.ok)
    o->fill_refusals.push_back(where + ": a range ending one byte past the memory accepted");
  else if (st.message.find("range 1") == std::string::npos)
    o->fill_refusals.push_back(where + ": the refusal does not name range 1: " + st.message);
  const Status none = b.fill(c, nullptr, 0, kRefusedFill);
  if (!none.ok) o->fill_refusals.push_back(where + ": a fill of no range refused: " + none.message);
}

// The refused fill wrote no byte of its ranges (a held cache: read after the release;
// before it range 0 holds kFill, the memory's last bytes are unowned zeros).
void check_untouched(const Cache& c, const std::string& where, Outputs* o) {
  for (const ByteRange& r : refused_ranges(c))
    for (uint64_t i = 0; i < r.bytes && r.offset + i < c.mem.size(); ++i)
      if (c.mem[r.offset + i] == kRefusedFill) {
        o->fill_refusals.push_back(where + ": the refused fill wrote byte " + std::to_string(r.offset + i));
        return;
      }
}

// Fills the ranges (held on a backend with an engine), probes the refusals on the held and
// the host path, and packs both lanes again.
Status fill_and_pack(Backend& b, Cache& c, Outputs* o) {
  const std::vector<ByteRange> ranges = fill_ranges(c);
  EngineBackend* eb = b.engine();
  if (eb) KC_RETURN_IF_ERROR(eb->hold(c));
  Status st = b.fill(c, ranges.data(), int(ranges.size()), kFill);
  if (st.ok && eb) fill_refusals(b, c, "held", o);
  if (eb) {
    const Status rel = eb->release(c);
    if (st.ok) st = rel;
  }
  KC_RETURN_IF_ERROR(st);
  if (eb) check_untouched(c, "held", o);
  fill_refusals(b, c, "not held", o);
  check_untouched(c, "not held", o);
  KC_RETURN_IF_ERROR(b.pack(c, 0, 0, kPagedPages * kPtok, &o->blob0_fill));
  return b.pack(c, 1, 0, kWindowCap, &o->blob1_fill);
}

Status run_ops(Backend& b, Cache& c, const OffsetCase& oc, bool lose_far_page, Outputs* o) {
  std::mt19937_64 rng(oc.seed);
  const int n = kPagedPages * kPtok + kWindowCap;
  std::vector<RopeRow> rows;
  for (int p = 0; p < kPagedPages * kPtok; ++p) rows.push_back({0, p, p});
  for (int p = 0; p < kWindowCap; ++p) rows.push_back({1, p, p});
  const auto q = normal(rng, size_t(n) * kQHeads * kHeadDim);
  const auto k = normal(rng, size_t(n) * kKvHeads * kHeadDim), v = normal(rng, k.size());
  o->q_rot.assign(q.size(), 0.0f);
  KC_RETURN_IF_ERROR(b.rope_store(c, RopeParams{kQHeads, 64, 1e6, 1}, rows.data(), n, q.data(), k.data(), v.data(),
                                  o->q_rot.data()));
  if (lose_far_page) {  // the control: lane 0's first page (past 2^32) comes back empty
    const uint64_t off = c.views[0].base_off + uint64_t(c.pts[0]) * c.views[0].ps;
    std::fill(c.mem.begin() + off, c.mem.begin() + off + c.lay.kv_bytes(kPtok), uint8_t(0));
  }
  // Both lanes in one launch, committed keys and tails that reach the far pages.
  const std::vector<int32_t> tails{127, 64, 120, 63, 40};
  const std::vector<AttnRow> arows{{0, 128, 0, 0}, {1, 64, 0, 0}, {0, 60, 0, 3}, {1, 30, 3, 2}, {0, 17, 1, 1}};
  const size_t qn = arows.size() * kQHeads * kHeadDim;
  o->attn.assign(qn, -1.0f);
  KC_RETURN_IF_ERROR(b.attention(c, AttnParams{kQHeads, 1, 32, 0.0883883476f}, arows.data(), int(arows.size()), tails,
                                 o->q_rot.data() + (size_t(n) * kQHeads * kHeadDim - qn), o->attn.data()));
  // Moves of both lanes in one call, from the far pages down.
  const std::vector<KeepMove> moves{{0, 40, 2}, {1, 60, 5}, {0, 127, 3}, {1, 63, 6}};
  KC_RETURN_IF_ERROR(b.keep(c, moves.data(), int(moves.size())));
  if (oc.fmt != Format::bf16) {  // the row codecs of the cache's own format
    const std::vector<RowRef> rr{{0, 1, 0, 1, 0}, {0, 0, 1, 0, 80}, {1, 1, 1, 1, 63}, {0, 1, 1, 0, 33}};
    const auto x = normal(rng, rr.size() * kHeadDim);
    KC_RETURN_IF_ERROR(b.encode_rows(oc.fmt, c, x.data(), rr.data(), int(rr.size())));
    o->decoded.assign(x.size(), 0.0f);
    KC_RETURN_IF_ERROR(b.decode_rows(oc.fmt, c, rr.data(), int(rr.size()), o->decoded.data()));
  }
  KC_RETURN_IF_ERROR(b.pack(c, 0, 0, kPagedPages * kPtok, &o->blob0));
  KC_RETURN_IF_ERROR(b.pack(c, 1, 0, kWindowCap, &o->blob1));
  return fill_and_pack(b, c, o);
}

bool same_floats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The fill gate on one arena: every filled byte holds kFill, the refusal probes found nothing.
void check_fill(Run& run, const Cache& c, const Outputs& o, const std::string& at) {
  uint64_t wrong = 0;
  std::string first;
  for (const ByteRange& r : fill_ranges(c))
    for (uint64_t i = 0; i < r.bytes; ++i)
      if (c.mem[r.offset + i] != kFill && wrong++ == 0)
        first = ", the first at offset " + std::to_string(r.offset + i) + " (range at " + std::to_string(r.offset) +
                ", +" + std::to_string(r.bytes) + ")";
  run.check("fill", wrong == 0, at + " filled bytes", wrong ? std::to_string(wrong) + " bytes not filled" + first : "");
  std::string why;
  for (const std::string& s : o.fill_refusals) why += (why.empty() ? "" : "; ") + s;
  run.check("fill", o.fill_refusals.empty(), at + " refusals", why);
}

void run_case(Run& run, Backend& b, const OffsetCase& oc, bool lose_far_page) {
  const std::string cv = oc.vars();
  Outputs far_out, near_out;
  Cache near = make_cache(oc.fmt, false);
  Status st = run_ops(b, near, oc, false, &near_out);
  Cache far = make_cache(oc.fmt, true);
  if (st.ok) st = run_ops(b, far, oc, lose_far_page, &far_out);
  if (!st.ok) return run.error(cv, st.message);
  run.check("far==near", same_floats(far_out.q_rot, near_out.q_rot), cv + " rotated q");
  run.check("far==near", same_floats(far_out.attn, near_out.attn), cv + " attention");
  if (oc.fmt != Format::bf16) run.check("far==near", same_floats(far_out.decoded, near_out.decoded), cv + " decoded rows");
  run.check("far==near", far_out.blob0 == near_out.blob0, cv + " pack of the paged lane");
  run.check("far==near", far_out.blob1 == near_out.blob1, cv + " pack of the window lane");
  run.check("far==near", far_out.blob0_fill == near_out.blob0_fill, cv + " pack of the paged lane after the fill");
  run.check("far==near", far_out.blob1_fill == near_out.blob1_fill, cv + " pack of the window lane after the fill");
  check_fill(run, near, near_out, cv + " near arena");
  check_fill(run, far, far_out, cv + " far arena");
  // Every byte that no lane owns (the pages between and below the far ones, each page's
  // padding, the bytes around the window) is still zero: a write that lands 2^32 bytes too
  // low shows here even where nothing reads it back.
  std::vector<std::pair<uint64_t, uint64_t>> owned;
  const ViewDesc& pv = far.views[0];
  for (int32_t i = 0; i < pv.n_pages; ++i) {
    const uint64_t a = pv.base_off + uint64_t(far.pts[pv.pt_off + i]) * pv.ps;
    owned.push_back({a, a + far.lay.kv_bytes(uint64_t(pv.ptok))});
  }
  const ViewDesc& wv = far.views[1];
  owned.push_back({wv.base_off, wv.base_off + far.lay.kv_bytes(uint64_t(wv.ptok))});
  std::sort(owned.begin(), owned.end());
  uint64_t at = 0, stray = 0, first_stray = 0;
  // 4 KiB at a time: a block whose 8-byte words are all zero is skipped, any other is counted
  // byte by byte (a byte loop over the 4.3 GB took about 4 s a case on cpu; this about 0.5 s).
  const uint8_t* mem = far.mem.data();
  auto scan = [&](uint64_t a, uint64_t b) {
    for (uint64_t i = a; i < b;) {
      const uint64_t e = std::min(b, (i / 4096 + 1) * 4096);
      uint64_t any = 0, j = i;
      for (; j + 8 <= e; j += 8) {
        uint64_t w;
        std::memcpy(&w, mem + j, 8);
        any |= w;
      }
      for (; j < e; ++j) any |= mem[j];
      if (any)
        for (uint64_t t = i; t < e; ++t)
          if (mem[t] != 0) {
            if (!stray) first_stray = t;
            ++stray;
          }
      i = e;
    }
  };
  for (const auto& [a, b] : owned) {
    scan(at, a);
    at = std::max(at, b);
  }
  scan(at, far.mem.size());
  run.check("guards", stray == 0, cv + " unowned bytes of the far arena",
            stray ? std::to_string(stray) + " bytes changed, the first at offset " + std::to_string(first_stray) : "");
}

void arena_offsets_body(Run& run) {
  run.declare("far==near", "rotated q, attention output, decoded rows and packed blobs of a 4.3 GB arena whose rows lie "
                           "past 2^31 and 2^32 bytes equal those of the same lanes at the arena's start");
  run.declare("guards", "every byte of the far arena that no lane owns (pages between and below the far ones, page "
                        "padding, the bytes around the window) is still zero after the run");
  run.declare("fill", "Backend::fill of byte ranges in far and near pages and the window (one call, the cache held "
                      "where the backend has an engine): every byte filled; no range accepted; a range one byte past "
                      "the memory refused naming it, nothing written");
  const Format formats[] = {Format::bf16, Format::fp8, Format::q4};
  run.control("far-page-lost", "lane 0's page past 2^32 comes back empty after the rope store",
              [&](Run& r) { run_case(r, r.be, {Format::fp8, 77}, true); });
  run.control("fill-drops-last-byte", "fill leaves the last byte of every range unwritten (a decorator: host path)",
              [&](Run& r) {
                FaultyBackend fb(r.be, Fault::fill_drops_last_byte);
                run_case(r, fb, {Format::bf16, 78}, false);
              });
  for (int i = 0; i < run.cases; ++i) {
    const OffsetCase oc{formats[i % 3], mix_seed(run.seed, uint64_t(i))};
    if (!run.selected(oc.vars())) continue;
    run.progress("case " + std::to_string(i + 1) + "/" + std::to_string(run.cases) + " " + oc.vars());
    run.cover_case({{"format", format_name(oc.fmt)}});  // what ran (numbers.coverage)
    run_case(run, run.be, oc, false);
  }
}

}  // namespace

ContractDef arena_offsets_contract() {
  return {"arena-offsets",
          "every kernel on rows past 2^31 and 2^32 bytes of a 4.3 GB arena: outputs equal those of a near arena; "
          "no stray byte in the arena; byte-range fills (held cache on cuda) land and refuse past the memory", 3,
          arena_offsets_body};
}

}  // namespace kc
