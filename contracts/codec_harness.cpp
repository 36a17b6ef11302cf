#include "contracts/codec_harness.h"
#include "contracts/refusals.h"

#include <algorithm>
#include <cstring>

#include <rapidcheck.h>

#include "contracts/faulty_backend.h"

namespace kc {

std::string CodecCase::vars() const {
  std::ostringstream o;
  o << contract << "(ptok=" << ptok << ",d=" << head_dim << ",L=" << layers << ",H=" << kv_heads << ",len=" << len0
    << "+" << len1 << ",dist=" << dist << ",seed=" << seed << ")";
  return o.str();
}

CaseRows::CaseRows(const CodecCase& c_, Format format,
                   const std::function<std::vector<float>(const CodecCase&, size_t)>& make_rows)
    : c(c_),
      cv(c_.vars()),
      lay(c_.layers, c_.kv_heads, c_.head_dim, format),
      lens{c_.len0, c_.len1},
      d(c_.head_dim),
      g(c_.seed ^ 0xABCDull),
      paged(make_paged_cache(lay, c_.ptok, lens, 2, c_.seed)),
      window(make_window_cache(lay, lens, 3, c_.seed)) {
  for (int lane = 0; lane < 2; ++lane)
    for (int pos = 0; pos < lens[lane]; ++pos)
      for (int l = 0; l < c.layers; ++l)
        for (int kv = 0; kv < 2; ++kv)
          for (int h = 0; h < c.kv_heads; ++h) rows.push_back({lane, l, kv, h, pos});
  std::shuffle(rows.begin(), rows.end(), g);
  x = make_rows(c, rows.size());
}

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

std::string row_name(const RowRef& r) {
  std::ostringstream o;
  o << "row(lane=" << r.lane << ",layer=" << r.layer << ",kv=" << r.kv << ",head=" << r.head << ",pos=" << r.pos << ")";
  return o.str();
}

std::vector<uint8_t> row_bytes(const Cache& c, const RowRef& r) {
  const KvView v = c.view(r.lane);
  const uint8_t* p = kv_row(v, r.layer, r.kv, r.head, r.pos);
  std::vector<uint8_t> b(p, p + c.lay.code_bytes);
  const uint8_t* s = kv_scale(v, r.layer, r.kv, r.head, r.pos);
  b.insert(b.end(), s, s + c.lay.scale_bytes);
  return b;
}

CodecCase draw_codec_case(const RowCodec& codec, uint64_t seed, int index) {
  const CaseDraw& dr = codec.draw;
  rc::Random rnd(mix_seed(seed, index));
  const auto ptok_gen = rc::gen::weightedOneOf<int>(
      {{6, rc::gen::element(1, 3, 7, 16, 48, 512)}, {2, rc::gen::inRange(1, 700)}});
  const int drawn_ptok = ptok_gen(rnd.split(), 50).value();
  const int ptok = index < int(dr.fixed_ptok.size()) ? dr.fixed_ptok[index] : drawn_ptok;
  const int drawn_d = rc::gen::elementOf(dr.head_dims)(rnd.split(), 50).value();
  const int d = index < int(dr.fixed_d.size()) ? dr.fixed_d[index] : drawn_d;
  const int L = rc::gen::element(1, 2)(rnd.split(), 50).value();
  const int H = rc::gen::element(1, 2, 4)(rnd.split(), 50).value();
  std::mt19937_64 g(mix_seed(seed, index + 1000003));
  auto pick_len = [&](int k) {
    const int opts[] = {1, std::max(1, ptok - 1), ptok, ptok + 1, 2 * ptok + 1, int(1 + g() % dr.max_len)};
    return opts[(k + g()) % 6];
  };
  const int cap = std::max(1, dr.lane_rows / (L * 2 * H));
  const int len0 = std::min(cap, pick_len(index));
  const int len1 = std::min(cap, pick_len(index + 3));
  const char* dist = index < int(dr.fixed_dists.size()) ? dr.fixed_dists[index] : dr.dists[g() % dr.dists.size()];
  return CodecCase{codec.name, ptok, d, L, H, len0, len1, dist, mix_seed(seed, index + 7)};
}

namespace {

// The controls every codec runs on what was written.
enum class RowPlant { none, swap_page_table, planted_row, stray_write };

void run_case(Run& run, Backend& be, const RowCodec& codec, const CodecCase& c, RowPlant plant,
              const MakeChecks& make_checks) {
  CaseRows cr(c, codec.format, codec.make_rows);
  const std::unique_ptr<CodecChecks> checks = make_checks(cr);
  const std::string& cv = cr.cv;
  const std::vector<RowRef>& rows = cr.rows;
  const std::vector<float>& x = cr.x;
  const int n = cr.n();
  const int d = cr.d;
  Cache& paged = cr.paged;
  Cache& window = cr.window;
  const uint64_t x_hash = fnv1a(x.data(), x.size() * 4);
  const Cache paged0 = paged, window0 = window;
  std::vector<uint8_t> mask_p, mask_w;
  mark_rows(paged, rows, mask_p);
  mark_rows(window, rows, mask_w);

  auto fail = [&](const Status& st) {
    if (st.ok) return false;
    run.error(cv, st.message);
    return true;
  };
  auto encode = [&](Backend& b, Cache& cache, const float* xs, const RowRef* rs, int count) {
    return fail(b.encode_rows(codec.format, cache, xs, rs, count));
  };
  auto decode = [&](Backend& b, const Cache& cache, float* out) {
    return fail(b.decode_rows(codec.format, cache, rows.data(), n, out));
  };
  if (encode(be, paged, x.data(), rows.data(), n)) return;
  if (encode(be, window, x.data(), rows.data(), n)) return;
  run.check("inputs", fnv1a(x.data(), x.size() * 4) == x_hash, cv, "encode changed its input rows");

  // Repeats, rows==solo and the host twin use unplanted copies.
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      Cache again = paged0;
      if (encode(be, again, x.data(), rows.data(), n)) return;
      same = again.mem == paged.mem;
    }
    run.check("repeats", same, cv, "a repeated encode gave different bytes");
  }
  {
    bool same = true;
    std::string which;
    // The launch's first and last rows (where a launch-composition bug shows first),
    // then three drawn at random.
    for (int k = 0; k < std::min(n, 5) && same; ++k) {
      const int i = k == 0 ? 0 : (k == 1 ? n - 1 : int(cr.g() % n));
      Cache solo = paged0;
      if (encode(be, solo, cr.row_x(i), &rows[i], 1)) return;
      same = row_bytes(solo, rows[i]) == row_bytes(paged, rows[i]);
      if (!same) which = row_name(rows[i]);
    }
    run.check("rows==solo", same, cv, which);
  }
  if (run.twin) {
    Cache host = paged0;
    if (encode(*run.twin, host, x.data(), rows.data(), n)) return;
    run.check("device==host-twin", host.mem == paged.mem, cv, "device encode bytes differ from the host twin");
  }

  if (plant == RowPlant::planted_row) {
    const RowRef& r = rows[cr.g() % n];
    kv_row(paged.view(r.lane), r.layer, r.kv, r.head, r.pos)[cr.g() % cr.lay.code_bytes] ^= 0x01;
  } else if (plant == RowPlant::stray_write) {
    const auto spare = unowned_pages(paged);
    if (!spare.empty()) paged.mem[kGuardBytes + spare[0] * paged.views[0].ps + cr.g() % paged.views[0].ps] ^= 0x40;
  } else if (plant == RowPlant::swap_page_table && paged.views[0].n_pages >= 2) {
    std::swap(paged.pts[paged.views[0].pt_off], paged.pts[paged.views[0].pt_off + 1]);
  }
  checks->plant_written(cr);

  // Byte gates on what was written.
  {
    int64_t bad_pw = 0;
    std::string first_pw;
    for (const RowRef& r : rows)
      if (row_bytes(paged, r) != row_bytes(window, r) && bad_pw++ == 0) first_pw = row_name(r);
    run.check("paged==window", bad_pw == 0, cv, std::to_string(bad_pw) + " rows differ, first " + first_pw);
    checks->check_bytes(run, cr);
    std::string where;
    const int64_t gp = guard_violations(paged, paged0.mem, mask_p, &where);
    const int64_t gw = guard_violations(window, window0.mem, mask_w, &where);
    run.check("guards", gp == 0 && gw == 0, cv,
              std::to_string(gp) + " paged / " + std::to_string(gw) + " window bytes; " + where);
  }
  checks->plant_decode(cr);

  // Decode: both layouts, guarded outputs, repeats, then the contract's value gates.
  const uint64_t paged_hash = fnv1a(paged.mem.data(), paged.mem.size());
  Guarded<float> outp(size_t(n) * d), outw(size_t(n) * d);
  if (decode(be, paged, outp.data())) return;
  if (decode(be, window, outw.data())) return;
  run.check("inputs", fnv1a(paged.mem.data(), paged.mem.size()) == paged_hash, cv, "decode changed the cache");
  run.check("guards", outp.guards_intact() && outw.guards_intact(), cv, "decode wrote past its output");
  run.check("paged==window", std::memcmp(outp.data(), outw.data(), size_t(n) * d * 4) == 0, cv,
            "decoded rows differ between paged and window");
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      std::vector<float> again(size_t(n) * d);
      if (decode(be, paged, again.data())) return;
      same = std::memcmp(again.data(), outp.data(), again.size() * 4) == 0;
    }
    run.check("repeats", same, cv, "a repeated decode gave different values");
  }
  if (run.twin) {
    std::vector<float> host(size_t(n) * d);
    if (decode(*run.twin, paged, host.data())) return;
    run.check("device==host-twin", std::memcmp(host.data(), outp.data(), host.size() * 4) == 0, cv,
              "device decode differs from the host twin");
  }
  checks->check_values(run, cr, outp.data());
}

}  // namespace

void run_codec_contract(Run& run, const RowCodec& codec) {
  auto control_case = [&codec](int ptok, const char* dist, uint64_t seed) {
    return CodecCase{codec.name, ptok, codec.control_head_dim, 1, 2, 3 * ptok + 1, 2 * ptok, dist, seed};
  };
  // A control of two cases: pages ptoks[k], seeds seed_base + ptoks[k].
  auto planted = [&](std::vector<int> ptoks, const char* dist, int seed_base, RowPlant plant, MakeChecks checks) {
    return [&, ptoks, dist, seed_base, plant, checks](Run& r) {
      for (int p : ptoks) run_case(r, r.be, codec, control_case(p, dist, seed_base + p), plant, checks);
    };
  };
  // Controls first: the contract proves it can fail before it reports passes.
  run.control("swapped-page-table", "lane 0's first two page-table entries swapped over correctly placed pages",
              planted({3, 16}, "normal", 11, RowPlant::swap_page_table, codec.checks));
  run.control("planted-row", codec.planted_row_description,
              planted({1, 48}, "normal", 21, RowPlant::planted_row, codec.checks));
  for (const CodecControl& k : codec.own_controls)
    run.control(k.name, k.description, planted(k.ptoks, k.dist, k.seed_base, RowPlant::none, k.checks));
  run.control("stray-write", "one byte written into an arena page that no lane owns",
              planted({16, 3}, "normal", codec.stray_seed_base, RowPlant::stray_write, codec.checks));

  // Defects at the backend boundary (contracts/faulty_backend.h) aimed at the gates no
  // other control turns red.
  auto faulty = [&](Fault f, int seed) {
    return [&, f, seed](Run& r) {
      FaultyBackend fb(r.be, f);
      run_case(r, fb, codec, control_case(16, "normal", seed), RowPlant::none, codec.checks);
    };
  };
  run.control("encode-writes-its-input", "a row encode flips a bit of its input rows", faulty(Fault::encode_input_write, 71));
  run.control("launch-dependent-encode", "a batched encode alters the first row's codes (a lone row is unaffected)",
              faulty(Fault::encode_launch_dependent, 72));
  run.control("nondeterministic-decode", "every second decode differs in the last bit of one value",
              faulty(Fault::decode_nondeterministic, 73));
  run.control("decode-writes-the-cache", "a row decode flips a cache byte that no row owns (the values stay right)",
              faulty(Fault::decode_cache_write, 74));

  run.declare("paged==window", "rows written through a page table equal rows written to a window, bytes; decoded rows too");
  for (const auto& [gate, description] : codec.reference_gates) run.declare(gate, description);
  run.declare("repeats", "three encodes and three decodes give identical bytes");
  run.declare("rows==solo", "a row encoded alone equals the same row in a mixed two-lane launch");
  run.declare("guards", codec.guards_description);
  run.declare("inputs", "input rows and the decoded cache hash the same after each launch");
  run.device_gate("device==host-twin", "device encode bytes and decoded values equal the host twin's");
  codec.once_per_run(run);
  for (int i = 0; i < run.cases; ++i) {
    const CodecCase c = draw_codec_case(codec, run.seed, i);
    if (!run.selected(c.vars())) continue;
    run.progress("case " + std::to_string(i + 1) + "/" + std::to_string(run.cases) + " " + c.vars());
    auto rel = [&c](int len) {
      return std::string(len < c.ptok ? "under a page" : len == c.ptok ? "one page" : len % c.ptok == 0 ? "whole pages" : "pages and a part");
    };
    // What ran, per dimension (numbers.coverage); both lanes' lengths (pages interleaved).
    run.cover_case({{"page_size", std::to_string(c.ptok)}, {"head_dim", std::to_string(c.head_dim)},
                    {"layers", std::to_string(c.layers)}, {"kv_heads", std::to_string(c.kv_heads)},
                    {"dist", c.dist}, {"lane_length", rel(c.len0)}, {"lane_length", rel(c.len1)}});
    run_case(run, run.be, codec, c, RowPlant::none, codec.checks);
  }
  refusal_gate(run, {RefusalOp::encode_rows, RefusalOp::decode_rows}, {codec.format});
}

}  // namespace kc
