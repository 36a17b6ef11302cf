// Contract `scale-planes`: scale-plane packing (pack / unpack of a run of a lane's
// positions, every declared field, through the versioned host blob of pack/blob.h).
//
// A case: a source lane (paged with ptok in {1, 3, 7, 16, 48, 256, 512} or a window) of
// a two-lane poisoned cache, a run [src_pos0, src_pos0 + count); a destination lane of
// another cache with its own addressing and page size, restored at dst_pos0. Formats
// bf16, fp8, q4, mxfp4; the bytes are random (packing never interprets them), except
// that bf16 / fp8 sources hold finite rows so attention can run over them.
// Gates:
//   field-table         the blob (read here by an independent reader of the documented
//                       format) has the header, the field table (names, widths, kinds,
//                       offsets) and the checksum the layout declaration implies
//   blob==cache         every field's data in the blob equals the source rows
//   roundtrip           after unpack the destination rows equal the source rows, every
//                       field, bytes (every pair of addressing modes and page sizes)
//   repack==blob        packing the restored rows gives the same blob, bytes
//   attention-restored  (bf16, fp8) attention over a lane restored from two blobs equals
//                       attention over the original lane, bytes, every layer
//   guards              unpack changed no byte outside the destination rows (the mask
//                       covers exactly count * kv_bytes(1) bytes: every field)
//   inputs              pack leaves the cache, unpack leaves the blob unchanged
//   repeats             three packs give one blob; three unpacks one cache
//   refusals            each bad blob (magic, layout version, format, shape, field table
//                       name / width, truncated, oversized, checksum, range) is refused
//                       with its reason and the destination is byte-identical after
//   device==host-twin   (cuda) blob bytes and restored caches equal the host twin's
// Controls (must be red; PackFault, a broken packer path in pack/blob.cpp selected at
// run time): a dropped scale plane, K and V scales swapped, a stale layout version
// accepted, a truncated blob accepted, one corrupted byte accepted.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "contracts/arena.h"
#include "contracts/contracts.h"
#include "contracts/framework.h"
#include "contracts/refusals.h"
#include "kernels/pack/blob.h"

namespace kc {
namespace {

const int kModes[] = {0, 1, 3, 7, 16, 48, 256, 512};  // 0: window

struct PackCase {
  const Format fmt;
  const int layers, kv_heads, head_dim;
  const int src_ptok, dst_ptok;  // 0: window
  const int src_lane;            // 0 or 1 of the source cache (the destination lane is 1 - src_lane)
  const int src_pos0, dst_pos0, count;
  const uint64_t seed;
  std::string vars() const {
    auto mode = [](int p) { return p ? "p" + std::to_string(p) : std::string("window"); };
    std::ostringstream o;
    o << "scale-planes(fmt=" << format_name(fmt) << ",L=" << layers << ",H=" << kv_heads << ",d=" << head_dim
      << ",src=" << mode(src_ptok) << ",dst=" << mode(dst_ptok) << ",lane=" << src_lane << ",pos0=" << src_pos0
      << "->" << dst_pos0 << ",count=" << count << ",seed=" << seed << ")";
    return o.str();
  }
};

// Case i < 64 covers every ordered pair of addressing modes once (source i % 8,
// destination (i / 8 + i) % 8) with the four formats interleaved; later cases draw.
// Counts aim at page edges (1, a page minus one, a page, a page plus one, two pages plus
// one) and random runs; offsets are random or one before a page boundary.
PackCase draw_case(uint64_t seed, int index) {
  std::mt19937_64 g(mix_seed(seed, index));
  const int a = index < 64 ? index % 8 : int(g() % 8);
  const int b = index < 64 ? (index / 8 + index) % 8 : int(g() % 8);
  const Format fmt = Format(index < 64 ? (index + index / 8) % 4 : int(g() % 4));
  const int L = 1 + int(g() % 2);
  const int H = std::array{1, 2, 4}[g() % 3];
  const int d = std::array{32, 64, 128}[g() % 3];
  const int p = std::max(1, std::max(kModes[a], kModes[b]) % 600);
  const int opts[] = {1, std::max(1, p - 1), p, p + 1, 2 * p + 1, 1 + int(g() % 600)};
  const int count = std::min(1100, opts[g() % 6]);
  auto offset = [&](int ptok) {
    if (ptok > 1 && g() % 3 == 0) return ptok - 1;
    return int(g() % 41);
  };
  return PackCase{fmt, L, H, d, kModes[a], kModes[b], int(g() % 2), offset(kModes[a]), offset(kModes[b]), count,
                  mix_seed(seed, index + 11)};
}

// The contract's own reader of the documented blob format (shares no code with
// pack/blob.cpp beyond the constants).
uint32_t rd32(const std::vector<uint8_t>& b, uint64_t off) {
  uint32_t v = 0;
  if (off + 4 <= b.size()) std::memcpy(&v, b.data() + off, 4);
  return v;
}
uint64_t rd64(const std::vector<uint8_t>& b, uint64_t off) {
  uint64_t v = 0;
  if (off + 8 <= b.size()) std::memcpy(&v, b.data() + off, 8);
  return v;
}
void wr32(std::vector<uint8_t>& b, uint64_t off, uint32_t v) {
  if (off + 4 <= b.size()) std::memcpy(b.data() + off, &v, 4);  // as rd32: a short blob is never written past
}
uint64_t up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
std::string declared_name(const FieldInfo& fi) {
  std::ostringstream o;
  o << "L" << fi.layer << "." << (fi.kv ? "V" : "K") << ".h" << fi.head << "." << (fi.kind == FieldKind::scales ? "scales" : "codes");
  return o.str();
}
std::string entry_name(const std::vector<uint8_t>& b, uint64_t e) {
  if (e + 32 > b.size()) return "";
  const char* p = reinterpret_cast<const char*>(b.data() + e);
  return std::string(p, strnlen(p, 32));
}
// Recomputes the checksum trailer after an edit.
void reseal(std::vector<uint8_t>& b) {
  const uint64_t h = fnv1a(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &h, 8);
}

// Checks the blob against the layout declaration; returns "" or the first mismatch.
std::string check_table(const std::vector<uint8_t>& b, const KvLayout& lay, int64_t count,
                        std::vector<uint64_t>* offsets) {
  const int F = lay.field_count();
  if (b.size() < 64 + 8) return "blob shorter than a header";
  if (std::memcmp(b.data(), "KCPLANES", 8) != 0) return "magic";
  if (rd32(b, 8) != kPackLayoutVersion) return "layout version " + std::to_string(rd32(b, 8));
  if (rd32(b, 12) != 64 || rd32(b, 36) != 48) return "header / entry sizes";
  if (rd32(b, 16) != uint32_t(lay.format) || rd32(b, 20) != uint32_t(lay.layers) ||
      rd32(b, 24) != uint32_t(lay.kv_heads) || rd32(b, 28) != uint32_t(lay.head_dim))
    return "format / shape in the header";
  if (rd32(b, 32) != uint32_t(F)) return "field count " + std::to_string(rd32(b, 32)) + ", declared " + std::to_string(F);
  if (rd64(b, 40) != uint64_t(count)) return "count";
  uint64_t off = up(64 + 48 * uint64_t(F), 256);
  if (rd64(b, 48) != off) return "data offset";
  offsets->clear();
  for (int f = 0; f < F; ++f) {
    const FieldInfo fi = lay.field(f);
    const uint64_t e = 64 + 48 * uint64_t(f);
    const std::string want = declared_name(fi), got = entry_name(b, e);
    if (got != want) return "field " + std::to_string(f) + " named '" + got + "', declared '" + want + "'";
    if (rd32(b, e + 32) != fi.bytes_per_pos) return "field " + want + " width";
    if (rd32(b, e + 36) != uint32_t(fi.kind)) return "field " + want + " kind";
    if (rd64(b, e + 40) != off) return "field " + want + " offset";
    offsets->push_back(off);
    off = up(off + uint64_t(count) * fi.bytes_per_pos, 16);
  }
  if (rd64(b, 56) != off + 8 || b.size() != off + 8) return "total bytes";
  if (rd64(b, off) != fnv1a(b.data(), off)) return "checksum";
  return "";
}

// Finite rows for attention: bf16 values in +-[0.5, 2), fp8 codes with bit 6 clear (never
// NaN) and positive finite scales. Written through kv_field_row, every layer, K and V.
void write_finite_rows(Cache& c, int lane, int n, std::mt19937_64& g) {
  const KvView v = c.view(lane);
  const KvLayout& lay = c.lay;
  for (int f = 0; f < lay.field_count(); ++f) {
    const FieldInfo fi = lay.field(f);
    for (int p = 0; p < n; ++p) {
      uint8_t* row = kv_field_row(v, f, p);
      if (fi.kind == FieldKind::scales) {
        const float s = std::ldexp(1.0f + float(g() % 1000) / 1000.0f, -int(g() % 6) - 4);
        std::memcpy(row, &s, 4);
      } else if (lay.format == Format::bf16) {
        for (uint32_t j = 0; j < fi.bytes_per_pos; j += 2) {
          const uint16_t x = uint16_t(0x3F00u | (g() & 0x807Fu)) + uint16_t((g() % 2) << 7);
          std::memcpy(row + j, &x, 2);
        }
      } else {
        for (uint32_t j = 0; j < fi.bytes_per_pos; ++j) row[j] = uint8_t(g()) & 0xBF;
      }
    }
  }
}

Cache make_cache(const KvLayout& lay, int ptok, const std::vector<int>& lens, uint64_t seed) {
  return ptok ? make_paged_cache(lay, ptok, lens, 2, seed) : make_window_cache(lay, lens, 3, seed);
}

void run_case(Run& run, const PackCase& c) {
  const std::string cv = c.vars();
  const KvLayout lay(c.layers, c.kv_heads, c.head_dim, c.fmt);
  std::mt19937_64 g(c.seed);
  auto fail = [&](const Status& st) {
    if (st.ok) return false;
    run.error(cv, st.message);
    return true;
  };
  const int src_end = c.src_pos0 + c.count;
  std::vector<int> src_lens = {1 + int(g() % 90), 1 + int(g() % 90)};
  src_lens[c.src_lane] = src_end + int(g() % 4);
  Cache src = make_cache(lay, c.src_ptok, src_lens, c.seed);
  const bool attn = c.fmt == Format::bf16 || c.fmt == Format::fp8;
  if (attn) write_finite_rows(src, c.src_lane, src_end, g);
  const int dl = 1 - c.src_lane;  // destination lane index (its cache holds another lane too)
  std::vector<int> dst_lens = {1 + int(g() % 90), 1 + int(g() % 90)};
  dst_lens[dl] = c.dst_pos0 + c.count + int(g() % 4);
  const Cache dst0 = make_cache(lay, c.dst_ptok, dst_lens, c.seed ^ 0xD57ull);

  // Pack, three times.
  const uint64_t src_hash = fnv1a(src.mem.data(), src.mem.size());
  std::vector<uint8_t> blob;
  if (fail(run.be.pack(src, c.src_lane, c.src_pos0, c.count, &blob))) return;
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      std::vector<uint8_t> again;
      if (fail(run.be.pack(src, c.src_lane, c.src_pos0, c.count, &again))) return;
      same = again == blob;
    }
    run.check("repeats", same, cv, "a repeated pack gave a different blob");
  }
  run.check("inputs", fnv1a(src.mem.data(), src.mem.size()) == src_hash, cv, "pack changed the cache");
  if (run.twin) {
    std::vector<uint8_t> host;
    if (fail(run.twin->pack(src, c.src_lane, c.src_pos0, c.count, &host))) return;
    run.check("device==host-twin", host == blob, cv, "device blob differs from the host twin's");
  }

  // The blob against the declaration, then its data against the source rows.
  std::vector<uint64_t> offs;
  const std::string table = check_table(blob, lay, c.count, &offs);
  run.check("field-table", table.empty(), cv, table);
  const KvView sv = src.view(c.src_lane);
  if (table.empty()) {
    int64_t bad = 0;
    std::string first;
    for (int f = 0; f < lay.field_count(); ++f) {
      const uint32_t w = lay.field(f).bytes_per_pos;
      for (int i = 0; i < c.count; ++i)
        if (std::memcmp(blob.data() + offs[f] + uint64_t(i) * w, kv_field_row(sv, f, c.src_pos0 + i), w) != 0 &&
            bad++ == 0)
          first = declared_name(lay.field(f)) + " pos " + std::to_string(c.src_pos0 + i);
    }
    run.check("blob==cache", bad == 0, cv, std::to_string(bad) + " rows differ, first " + first);
  }

  // Unpack into the destination, three times from the same start.
  const uint64_t blob_hash = fnv1a(blob.data(), blob.size());
  Cache dst = dst0;
  if (fail(run.be.unpack(dst, dl, c.dst_pos0, blob))) return;
  run.check("inputs", fnv1a(blob.data(), blob.size()) == blob_hash, cv, "unpack changed the blob");
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      Cache again = dst0;
      if (fail(run.be.unpack(again, dl, c.dst_pos0, blob))) return;
      same = again.mem == dst.mem;
    }
    run.check("repeats", same, cv, "a repeated unpack gave different bytes");
  }
  if (run.twin) {
    Cache host = dst0;
    if (fail(run.twin->unpack(host, dl, c.dst_pos0, blob))) return;
    run.check("device==host-twin", host.mem == dst.mem, cv, "device unpack differs from the host twin's");
  }
  {
    const KvView dv = dst.view(dl);
    int64_t bad = 0;
    std::string first;
    for (int f = 0; f < lay.field_count(); ++f)
      for (int i = 0; i < c.count; ++i)
        if (std::memcmp(kv_field_row(dv, f, c.dst_pos0 + i), kv_field_row(sv, f, c.src_pos0 + i),
                        lay.field(f).bytes_per_pos) != 0 &&
            bad++ == 0)
          first = declared_name(lay.field(f)) + " pos " + std::to_string(c.src_pos0 + i) + " -> " +
                  std::to_string(c.dst_pos0 + i);
    run.check("roundtrip", bad == 0, cv, std::to_string(bad) + " rows differ, first " + first);
  }
  {
    std::vector<RowRef> rows;
    for (int i = 0; i < c.count; ++i)
      for (int l = 0; l < lay.layers; ++l)
        for (int kv = 0; kv < 2; ++kv)
          for (int h = 0; h < lay.kv_heads; ++h) rows.push_back({dl, l, kv, h, c.dst_pos0 + i});
    std::vector<uint8_t> mask;
    mark_rows(dst, rows, mask);
    const int64_t marked = std::count(mask.begin(), mask.end(), uint8_t(1));
    std::string where;
    const int64_t bad = guard_violations(dst, dst0.mem, mask, &where);
    run.check("guards", bad == 0 && uint64_t(marked) == lay.kv_bytes(c.count), cv,
              std::to_string(bad) + " bytes changed outside the destination rows; " + where + "; mask covers " +
                  std::to_string(marked) + " of " + std::to_string(lay.kv_bytes(c.count)) + " field bytes");
  }
  {
    std::vector<uint8_t> again;
    if (fail(run.be.pack(dst, dl, c.dst_pos0, c.count, &again))) return;
    run.check("repack==blob", again == blob, cv,
              "packing the restored rows gave a different blob");
  }

  // Attention over a lane restored from two blobs ([0, src_pos0) and the run) equals
  // attention over the source lane, every layer.
  if (attn) {
    std::vector<uint8_t> prefix;
    if (fail(run.be.pack(src, c.src_lane, 0, c.src_pos0, &prefix))) return;
    Cache rest = make_cache(lay, c.dst_ptok, {src_end + 1}, c.seed ^ 0xA77ull);
    if (fail(run.be.unpack(rest, 0, 0, prefix)) || fail(run.be.unpack(rest, 0, c.src_pos0, blob))) return;
    const int group = 2, hq = lay.kv_heads * group, d = lay.head_dim;
    std::normal_distribution<float> nd;
    std::vector<float> q(size_t(2) * hq * d);
    for (float& x : q) x = nd(g);
    bool same = true;
    std::string which;
    for (int layer = 0; layer < lay.layers && same; ++layer) {
      const AttnParams ap{hq, layer, 64, float(1.0 / std::sqrt(double(d)))};
      const std::vector<AttnRow> r_src = {{c.src_lane, src_end, 0, 0}, {c.src_lane, std::max(1, src_end / 2), 0, 0}};
      const std::vector<AttnRow> r_rest = {{0, src_end, 0, 0}, {0, std::max(1, src_end / 2), 0, 0}};
      std::vector<float> o1(q.size()), o2(q.size());
      const std::vector<int32_t> tails;
      if (fail(run.be.attention(src, ap, r_src.data(), 2, tails, q.data(), o1.data()))) return;
      if (fail(run.be.attention(rest, ap, r_rest.data(), 2, tails, q.data(), o2.data()))) return;
      same = std::memcmp(o1.data(), o2.data(), o1.size() * 4) == 0;
      bool finite = true;
      for (float x : o1) finite = finite && std::isfinite(x);
      if (!finite) {
        run.error(cv, "attention over the source rows is not finite (setup)");
        return;
      }
      if (!same) which = "layer " + std::to_string(layer);
    }
    run.check("attention-restored", same, cv, "attention over the restored lane differs: " + which);
  }

  // The refusal edits below rewrite the blob where the layout puts its field table and checksum.
  // A packer that wrote a shorter blob (a field left out) fails the refusals here: the edits
  // once wrote past the blob's end (heap corruption that mangled the receipt's replay line).
  if (const uint64_t need = 64 + 48 * uint64_t(lay.field_count()) + 8; blob.size() < need) {
    run.check("refusals", false, cv,
              "the packed blob is " + std::to_string(blob.size()) + " bytes, fewer than its header and the layout's " +
                  std::to_string(lay.field_count()) + "-field table need (" + std::to_string(need) +
                  "): no refusal edit can be made");
    return;
  }
  // Refusals: each bad blob is refused with its reason; the destination is unchanged.
  auto expect_refused = [&](const std::string& kind, const std::vector<uint8_t>& bad, int64_t pos0,
                            const std::string& reason, const std::string& also = "") {
    Cache t = dst0;
    const Status st = run.be.unpack(t, dl, pos0, bad);
    const bool named = !st.ok && st.message.find(reason) != std::string::npos &&
                       (also.empty() || st.message.find(also) != std::string::npos);
    run.check("refusals", named && t.mem == dst0.mem, cv,
              kind + ": " + (st.ok ? std::string("accepted") : "refused with '" + st.message + "'") +
                  (t.mem == dst0.mem ? "" : "; the destination changed"));
  };
  {
    std::vector<uint8_t> b = blob;
    b[g() % 8] ^= uint8_t(1 + g() % 255);
    expect_refused("bad magic", b, c.dst_pos0, "bad magic");
  }
  {
    std::vector<uint8_t> b = blob;
    wr32(b, 8, kPackLayoutVersion - 1);
    reseal(b);
    expect_refused("stale layout version", b, c.dst_pos0, "layout version");
  }
  {
    const Format other = Format((int(c.fmt) + 1 + int(g() % 3)) % 4);
    const Cache oc = make_window_cache(KvLayout(c.layers, c.kv_heads, c.head_dim, other), {c.count}, 0, c.seed);
    std::vector<uint8_t> b;
    if (fail(run.be.pack(oc, 0, 0, c.count, &b))) return;
    expect_refused("other format", b, c.dst_pos0, "format");
    const Cache sc = make_window_cache(KvLayout(c.layers, c.kv_heads + 1, c.head_dim, c.fmt), {c.count}, 0, c.seed);
    if (fail(run.be.pack(sc, 0, 0, c.count, &b))) return;
    expect_refused("other shape", b, c.dst_pos0, "shape");
  }
  {
    // Table entries of two fields' names swapped (layer 0 head 0: K codes <-> V codes;
    // for formats with scales, K scales <-> V scales), resealed.
    const int F = lay.field_count(), Hh = lay.kv_heads;
    const int fa = F > lay.planes() ? lay.planes() : 0, fb = fa + Hh;
    std::vector<uint8_t> b = blob;
    std::swap_ranges(b.begin() + 64 + 48 * fa, b.begin() + 64 + 48 * fa + 32, b.begin() + 64 + 48 * fb);
    reseal(b);
    expect_refused("field names swapped", b, c.dst_pos0, "field table", declared_name(lay.field(fa)));
    b = blob;
    const int fl = F - 1;
    wr32(b, 64 + 48 * uint64_t(fl) + 32, lay.field(fl).bytes_per_pos + 1);
    reseal(b);
    expect_refused("field width changed", b, c.dst_pos0, "field table", declared_name(lay.field(fl)));
  }
  {
    std::vector<uint8_t> b = blob;
    b.resize(b.size() - 1 - g() % 16);
    expect_refused("truncated", b, c.dst_pos0, "truncated");
    b.resize(20);
    expect_refused("truncated into the header", b, c.dst_pos0, "truncated");
    b = blob;
    b.resize(b.size() + 1 + g() % 64, 0);
    expect_refused("oversized", b, c.dst_pos0, "oversized");
  }
  {
    std::vector<uint8_t> b = blob;
    const uint64_t end = b.size() - 8;
    b[64 + g() % (end - 64)] ^= uint8_t(1u << (g() % 8));
    expect_refused("one corrupted byte", b, c.dst_pos0, "checksum");
  }
  {
    const int64_t cap = dst0.views[dl].capacity();
    expect_refused("range past the lane", blob, cap - c.count + 1, "outside the lane");
    expect_refused("negative position", blob, -1, "outside the lane");
    std::vector<uint8_t> b;
    const Status st = run.be.pack(src, c.src_lane, src.views[c.src_lane].capacity() - c.count + 1, c.count, &b);
    run.check("refusals", !st.ok && st.message.find("outside the lane") != std::string::npos &&
                              fnv1a(src.mem.data(), src.mem.size()) == src_hash,
              cv, "pack past the lane: " + (st.ok ? std::string("accepted") : st.message));
  }
}

void declare_gates(Run& run) {
  run.declare("field-table", "the blob's header, field table and checksum equal what the layout declaration implies (independent reader)");
  run.declare("blob==cache", "every field's data in the blob equals the source rows, bytes");
  run.declare("roundtrip", "pack -> unpack: destination rows equal source rows, every field, every pair of addressing modes");
  run.declare("repack==blob", "packing the restored rows gives the same blob, bytes");
  run.declare("attention-restored", "attention over a lane restored from blobs equals attention over the original (bf16, fp8), bytes");
  run.declare("guards", "unpack changed no byte outside the destination rows; the mask covers every field");
  run.declare("inputs", "pack leaves the cache and unpack the blob unchanged");
  run.declare("repeats", "three packs give one blob, three unpacks one cache");
  run.declare("refusals", "each bad blob kind is refused with its reason, and the destination is unchanged");
  run.device_gate("device==host-twin", "device blob and restored cache equal the host twin's");
}

PackCase control_case(Format f, int src_ptok, int dst_ptok, int count, uint64_t seed) {
  return PackCase{f, 2, 2, 64, src_ptok, dst_ptok, 1, 5, 9, count, seed};
}

void scale_planes_body(Run& run) {
  run.control("dropped-scale-plane", "the packer leaves one scale plane out of the blob (its data zero)", [](Run& r) {
    PackFaultScope f(PackFault::drop_scale_plane);
    run_case(r, control_case(Format::fp8, 16, 0, 40, 201));
    run_case(r, control_case(Format::q4, 7, 48, 30, 202));
  });
  run.control("kv-scales-swapped", "the packer writes each V scale plane as the K one and back", [](Run& r) {
    PackFaultScope f(PackFault::swap_kv_scales);
    run_case(r, control_case(Format::fp8, 0, 3, 25, 203));
    run_case(r, control_case(Format::mxfp4, 256, 16, 50, 204));
  });
  run.control("stale-version-accepted", "the unpacker skips the layout-version check", [](Run& r) {
    PackFaultScope f(PackFault::accept_stale_version);
    run_case(r, control_case(Format::bf16, 16, 0, 20, 205));
    run_case(r, control_case(Format::fp8, 1, 512, 20, 206));
  });
  run.control("truncated-accepted", "the unpacker reads a short blob leniently (missing bytes as zero)", [](Run& r) {
    PackFaultScope f(PackFault::accept_truncated);
    run_case(r, control_case(Format::fp8, 48, 7, 33, 207));
  });
  run.control("corrupted-byte-accepted", "the unpacker skips the checksum", [](Run& r) {
    PackFaultScope f(PackFault::skip_checksum);
    run_case(r, control_case(Format::bf16, 0, 16, 17, 208));
    run_case(r, control_case(Format::q4, 3, 0, 17, 209));
  });
  declare_gates(run);
  run.numbers["layout_version"] = kPackLayoutVersion;
  for (int i = 0; i < run.cases; ++i) {
    const PackCase c = draw_case(run.seed, i);
    if (!run.selected(c.vars())) continue;
    run.progress("case " + std::to_string(i + 1) + "/" + std::to_string(run.cases) + " " + c.vars());
    auto mode = [](int p) { return p ? "pages of " + std::to_string(p) : std::string("window"); };
    run.cover_case({{"format", format_name(c.fmt)}, {"head_dim", std::to_string(c.head_dim)},
                    {"source", mode(c.src_ptok)}, {"destination", mode(c.dst_ptok)},
                    {"count", c.count == 0 ? "0" : c.count == 1 ? "1" : c.count < 64 ? "2..63" : "64+"}});
    run_case(run, c);
  }
  refusal_gate(run, {RefusalOp::unpack, RefusalOp::pack}, {Format::bf16, Format::fp8, Format::q4, Format::mxfp4});
}

}  // namespace

ContractDef scale_planes_contract() {
  return {"scale-planes",
          "scale-plane packing: pack -> unpack byte-equal across window / page sizes, all formats, field table, refusals",
          128, scale_planes_body};
}

}  // namespace kc
