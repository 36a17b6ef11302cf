// Contract `q4-rows`: the Hadamard-rotated 4-bit row codec (kernels/q4_rows.h) and its
// encode / decode kernels.
//
// Gates (every case):
//   paged==window       codes and scales written through a page table equal, byte for
//                       byte, those written to a window; decoded rows equal too
//   codes==reference    every group's 16 code bytes equal the float64 reference's
//                       prediction (reference/q4_ref.h)
//   scales==reference   every group's fp16 scale bytes equal the prediction
//   decode==reference   decoded fp32 values equal the reference's exact values (bits;
//                       NaN by predicate for poisoned groups)
//   roundtrip-bound     |decode(encode(x)) - x| <= the derived per-element bound, worst
//                       ratio recorded
//   qk-bound            q4_rotate_query(q) . dequantized rotated key == q . decoded key
//                       within the derived rotation-rounding bound, worst ratio recorded
//   repeats             three encodes and three decodes give identical bytes
//   rows==solo          a row encoded alone equals the same row in the mixed launch
//   guards              no byte outside the rows' code and scale entries changed (canary
//                       bands, unowned pages, unused slots, window slack, output canaries)
//   inputs              inputs hash the same after each launch
//   device==host-twin   (cuda) device bytes and decoded values equal the host twin's
// Once per run: every fp16 scale pattern (65,536) with every nibble decodes to the
// reference's value.
// Controls (must be red): swapped page table, planted row, each group decoded with the
// neighbouring group's scale, query rotation skipped, stray write into an unowned page.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include <rapidcheck.h>

#include "contracts/arena.h"
#include "contracts/contracts.h"
#include "contracts/faulty_backend.h"
#include "contracts/framework.h"
#include "kernels/q4_rows.h"
#include "reference/q4_ref.h"

namespace kc {
namespace {

enum class Plant { none, swap_page_table, planted_row, neighbour_scale, query_unrotated, stray_write };

struct Q4Case {
  const int ptok;
  const int head_dim;
  const int layers;
  const int kv_heads;
  const int len0;
  const int len1;
  const std::string dist;  // value distribution of the rows, see make_rows
  const uint64_t seed;
  std::string vars() const {
    std::ostringstream o;
    o << "q4-rows(ptok=" << ptok << ",d=" << head_dim << ",L=" << layers << ",H=" << kv_heads << ",len=" << len0
      << "+" << len1 << ",dist=" << dist << ",seed=" << seed << ")";
    return o.str();
  }
};

const char* kDists[] = {"normal", "outlier", "ties", "zeros", "tiny", "large", "nonfinite", "wide"};
constexpr int kNumDists = 8;

// Cases aimed at the edges: pages of 1, 3, 7, 16, 48, 512 and odd sizes; head_dim 32
// (one group), 64, 128, 256; last pages holding one position or a full page; every
// distribution among the first eight cases.
Q4Case draw_case(uint64_t seed, int index) {
  rc::Random rnd(mix_seed(seed, index));
  const auto ptok_gen = rc::gen::weightedOneOf<int>(
      {{6, rc::gen::element(1, 3, 7, 16, 48, 512)}, {2, rc::gen::inRange(1, 700)}});
  const int drawn_ptok = ptok_gen(rnd.split(), 50).value();
  const int fixed_ptok[] = {1, 3, 7, 16, 48, 512, 16, 7};
  const int ptok = index < 8 ? fixed_ptok[index] : drawn_ptok;
  const int drawn_d = rc::gen::element(32, 64, 128, 256)(rnd.split(), 50).value();
  const int fixed_d[] = {64, 128, 256, 64, 128, 256, 32, 256};
  const int d = index < 8 ? fixed_d[index] : drawn_d;
  const int L = rc::gen::element(1, 2)(rnd.split(), 50).value();
  const int H = rc::gen::element(1, 2, 4)(rnd.split(), 50).value();
  std::mt19937_64 g(mix_seed(seed, index + 1000003));
  auto pick_len = [&](int k) {
    const int opts[] = {1, std::max(1, ptok - 1), ptok, ptok + 1, 2 * ptok + 1, int(1 + g() % 600)};
    return opts[(k + g()) % 6];
  };
  // At most ~2,400 rows a case so a cpu run stays well under a minute.
  const int cap = std::max(1, 1200 / (L * 2 * H));
  const int len0 = std::min(cap, pick_len(index));
  const int len1 = std::min(cap, pick_len(index + 3));
  const std::string dist = index < kNumDists ? kDists[index] : kDists[g() % kNumDists];
  return Q4Case{ptok, d, L, H, len0, len1, dist, mix_seed(seed, index + 7)};
}

// Row values; each group has its own magnitude and kind.
std::vector<float> make_rows(const Q4Case& c, size_t n_rows) {
  const int d = c.head_dim;
  std::vector<float> x(n_rows * d);
  std::mt19937_64 g(c.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(-30.f, 30.f);
  for (size_t r = 0; r < n_rows; ++r) {
    for (int g0 = 0; g0 < d; g0 += 32) {
      float* v = x.data() + r * d + g0;
      const float mag = std::ldexp(1.0f, int(g() % 9) - 4);
      for (int i = 0; i < 32; ++i) v[i] = nd(g) * mag;
      const uint64_t kind = g() % 8;
      if (c.dist == "outlier") {
        // One huge value: the rotation spreads it over all 32 rotated values.
        v[g() % 32] = (g() & 1 ? -1.f : 1.f) * mag * std::ldexp(1.0f, 8 + int(g() % 8));
      } else if (c.dist == "ties") {
        // Rotated values chosen on the code grid: y_i = m_i s / 2 with |m_i| <= 13 (odd m:
        // a tie between two codes), one |y| = 7 s so that amax / 7 = s exactly, s a power
        // of two. x = 2^-2 H y is exact in fp32 and the fp32 fwd rotation returns y
        // exactly (every partial sum is a multiple of s / 8 below 2^11 s).
        const double s = std::ldexp(1.0, int(g() % 30) - 15);
        double y[32], hx[32];
        for (int i = 0; i < 32; ++i) y[i] = (int(g() % 27) - 13) * s / 2;
        y[g() % 32] = (g() & 1 ? -7.0 : 7.0) * s;
        ref::h32_apply(y, hx);
        for (int i = 0; i < 32; ++i) v[i] = float(0.25 * hx[i]);
      } else if (c.dist == "zeros" && kind < 5) {
        for (int i = 0; i < 32; ++i) v[i] = (kind == 0 || kind == 3) ? 0.0f : -0.0f;
        if (kind == 2) v[g() % 32] = std::ldexp(1.0f, -126);
        if (kind == 3) v[g() % 32] = std::ldexp(1.0f, -149);
      } else if (c.dist == "tiny" && kind < 6) {
        // amax / 7 from the fp16 normal range down through its subnormals (coarse
        // scales, clamped codes) to below 2^-25 (scale 0), and fp32-subnormal rotations.
        const int e = kind < 5 ? -14 - int(g() % 14) : -128 - int(g() % 20);
        for (int i = 0; i < 32; ++i) v[i] = std::ldexp(nd(g), e);
      } else if (c.dist == "large" && kind < 6) {
        // amax / 7 around and past 65504: saturated scales and clamped codes; kind 5
        // overflows the fp32 rotation (a poisoned group).
        const int e = kind < 5 ? 15 + int(g() % 10) : 124 + int(g() % 3);
        for (int i = 0; i < 32; ++i) v[i] = std::ldexp(nd(g), e);
        if (kind == 5) v[0] = std::numeric_limits<float>::max();
      } else if (c.dist == "nonfinite" && kind < 2) {
        const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity()};
        v[g() % 32] = bad[g() % 3];
      } else if (c.dist == "wide") {
        for (int i = 0; i < 32; ++i) v[i] = std::ldexp(nd(g), int(ud(g)));
      }
    }
  }
  return x;
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

// Bytes of a row (codes then scales) as read through the cache's own view.
std::vector<uint8_t> row_bytes(const Cache& c, const RowRef& r) {
  const KvView v = c.view(r.lane);
  const uint8_t* p = kv_row(v, r.layer, r.kv, r.head, r.pos);
  std::vector<uint8_t> b(p, p + c.lay.code_bytes);
  const uint8_t* s = kv_scale(v, r.layer, r.kv, r.head, r.pos);
  b.insert(b.end(), s, s + c.lay.scale_bytes);
  return b;
}

double ratio_of(double err, double bound) {
  if (std::isnan(err)) return std::numeric_limits<double>::quiet_NaN();
  if (err == 0) return 0;
  return err / bound;  // bound 0 with err > 0 gives Inf
}

void run_case(Run& run, Backend& be, const Q4Case& c, Plant plant) {
  const std::string cv = c.vars();
  const KvLayout lay(c.layers, c.kv_heads, c.head_dim, Format::q4);
  const std::vector<int> lens = {c.len0, c.len1};
  std::vector<RowRef> rows;
  for (int lane = 0; lane < 2; ++lane)
    for (int pos = 0; pos < lens[lane]; ++pos)
      for (int l = 0; l < c.layers; ++l)
        for (int kv = 0; kv < 2; ++kv)
          for (int h = 0; h < c.kv_heads; ++h) rows.push_back({lane, l, kv, h, pos});
  std::mt19937_64 g(c.seed ^ 0xABCDull);
  std::shuffle(rows.begin(), rows.end(), g);
  const int n = int(rows.size());
  const int d = c.head_dim;
  const int G = d / 32;
  const std::vector<float> x = make_rows(c, rows.size());
  const uint64_t x_hash = fnv1a(x.data(), x.size() * 4);
  std::vector<std::vector<ref::Q4GroupRef>> want(n);
  for (int i = 0; i < n; ++i) want[i] = ref::q4_row(x.data() + size_t(i) * d, d);

  Cache paged = make_paged_cache(lay, c.ptok, lens, 2, c.seed);
  Cache window = make_window_cache(lay, lens, 3, c.seed);
  const Cache paged0 = paged, window0 = window;
  std::vector<uint8_t> mask_p, mask_w;
  mark_rows(paged, rows, mask_p);
  mark_rows(window, rows, mask_w);

  auto fail = [&](const Status& st) {
    if (st.ok) return false;
    run.error(cv, st.message);
    return true;
  };
  if (fail(be.q4_encode_rows(paged, x.data(), rows.data(), n))) return;
  if (fail(be.q4_encode_rows(window, x.data(), rows.data(), n))) return;
  run.check("inputs", fnv1a(x.data(), x.size() * 4) == x_hash, cv, "encode changed its input rows");

  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      Cache again = paged0;
      if (fail(be.q4_encode_rows(again, x.data(), rows.data(), n))) return;
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
      const int i = k == 0 ? 0 : (k == 1 ? n - 1 : int(g() % n));
      Cache solo = paged0;
      if (fail(be.q4_encode_rows(solo, x.data() + size_t(i) * d, &rows[i], 1))) return;
      same = row_bytes(solo, rows[i]) == row_bytes(paged, rows[i]);
      if (!same) which = row_name(rows[i]);
    }
    run.check("rows==solo", same, cv, which);
  }
  if (run.twin) {
    Cache host = paged0;
    if (fail(run.twin->q4_encode_rows(host, x.data(), rows.data(), n))) return;
    run.check("device==host-twin", host.mem == paged.mem, cv, "device encode bytes differ from the host twin");
  }

  if (plant == Plant::planted_row) {
    const RowRef& r = rows[g() % n];
    kv_row(paged.view(r.lane), r.layer, r.kv, r.head, r.pos)[g() % lay.code_bytes] ^= 0x01;
  } else if (plant == Plant::stray_write) {
    const auto spare = unowned_pages(paged);
    if (!spare.empty()) paged.mem[kGuardBytes + spare[0] * paged.views[0].ps + g() % paged.views[0].ps] ^= 0x40;
  } else if (plant == Plant::swap_page_table && paged.views[0].n_pages >= 2) {
    std::swap(paged.pts[paged.views[0].pt_off], paged.pts[paged.views[0].pt_off + 1]);
  }

  {
    int64_t bad_pw = 0, bad_codes = 0, bad_scales = 0;
    std::string first_pw, first_codes, first_scales;
    for (int i = 0; i < n; ++i) {
      const RowRef& r = rows[i];
      const auto bp = row_bytes(paged, r);
      if (bp != row_bytes(window, r) && bad_pw++ == 0) first_pw = row_name(r);
      for (int gi = 0; gi < G; ++gi) {
        const ref::Q4GroupRef& w = want[i][gi];
        if (!std::equal(w.codes.begin(), w.codes.end(), bp.begin() + 16 * gi) && bad_codes++ == 0)
          first_codes = row_name(r) + " group " + std::to_string(gi);
        uint16_t h;
        std::memcpy(&h, bp.data() + lay.code_bytes + 2 * gi, 2);
        if (h != w.scale_bits && bad_scales++ == 0) {
          std::ostringstream o;
          o << row_name(r) << " group " << gi << ": 0x" << std::hex << h << " want 0x" << w.scale_bits;
          first_scales = o.str();
        }
      }
    }
    run.check("paged==window", bad_pw == 0, cv, std::to_string(bad_pw) + " rows differ, first " + first_pw);
    run.check("codes==reference", bad_codes == 0, cv, std::to_string(bad_codes) + " groups differ, first " + first_codes);
    run.check("scales==reference", bad_scales == 0, cv, std::to_string(bad_scales) + " groups differ, first " + first_scales);
    std::string where;
    const int64_t gp = guard_violations(paged, paged0.mem, mask_p, &where);
    const int64_t gw = guard_violations(window, window0.mem, mask_w, &where);
    run.check("guards", gp == 0 && gw == 0, cv,
              std::to_string(gp) + " paged / " + std::to_string(gw) + " window bytes; " + where);
  }

  if (plant == Plant::neighbour_scale) {
    // Each group decoded with the next group's scale (cyclic in the row), in both
    // layouts, as a decoder indexing the scale plane wrongly would see it.
    for (Cache* cc : {&paged, &window})
      for (const RowRef& r : rows) {
        uint8_t* s = kv_scale(cc->view(r.lane), r.layer, r.kv, r.head, r.pos);
        std::rotate(s, s + 2, s + lay.scale_bytes);
      }
  }

  const uint64_t paged_hash = fnv1a(paged.mem.data(), paged.mem.size());
  Guarded<float> outp(size_t(n) * d), outw(size_t(n) * d);
  if (fail(be.q4_decode_rows(paged, rows.data(), n, outp.data()))) return;
  if (fail(be.q4_decode_rows(window, rows.data(), n, outw.data()))) return;
  run.check("inputs", fnv1a(paged.mem.data(), paged.mem.size()) == paged_hash, cv, "decode changed the cache");
  run.check("guards", outp.guards_intact() && outw.guards_intact(), cv, "decode wrote past its output");
  run.check("paged==window", std::memcmp(outp.data(), outw.data(), size_t(n) * d * 4) == 0, cv,
            "decoded rows differ between paged and window");
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      std::vector<float> again(size_t(n) * d);
      if (fail(be.q4_decode_rows(paged, rows.data(), n, again.data()))) return;
      same = std::memcmp(again.data(), outp.data(), again.size() * 4) == 0;
    }
    run.check("repeats", same, cv, "a repeated decode gave different values");
  }
  if (run.twin) {
    std::vector<float> host(size_t(n) * d);
    if (fail(run.twin->q4_decode_rows(paged, rows.data(), n, host.data()))) return;
    run.check("device==host-twin", std::memcmp(host.data(), outp.data(), host.size() * 4) == 0, cv,
              "device decode differs from the host twin");
  }

  // Decoded values against the reference (computed from x, never from the cache).
  {
    double worst = 0, worst_unclipped = 0;
    std::string worst_at;
    int64_t bad_val = 0;
    std::string first_val;
    for (int i = 0; i < n && !std::isnan(worst); ++i) {
      const float* xr = x.data() + size_t(i) * d;
      const float* got = outp.data() + size_t(i) * d;
      for (int j = 0; j < d; ++j) {
        const ref::Q4GroupRef& w = want[i][j / 32];
        if (!same_float(got[j], w.values[j % 32]) && bad_val++ == 0)
          first_val = row_name(rows[i]) + "[" + std::to_string(j) + "]";
        double ratio;
        if (w.poisoned) ratio = std::isnan(got[j]) ? 0.0 : std::numeric_limits<double>::infinity();
        else ratio = ratio_of(std::fabs(double(got[j]) - double(xr[j])), w.bound[j % 32]);
        if (!w.poisoned && !w.clipped && ratio > worst_unclipped) worst_unclipped = ratio;
        if (!(ratio <= worst)) {
          worst = ratio;
          std::ostringstream o;
          o << row_name(rows[i]) << "[" << j << "] x=" << xr[j] << " got=" << got[j] << " bound=" << w.bound[j % 32];
          worst_at = o.str();
          if (std::isnan(ratio)) break;
        }
      }
    }
    run.check("decode==reference", bad_val == 0, cv, std::to_string(bad_val) + " values differ, first " + first_val);
    run.check_ratio("roundtrip-bound", worst, cv, worst_at);
    // The worst ratio over groups whose codes stayed inside -7..7 without clipping
    // (clipped groups, saturated or fp16-subnormal scales, reach ~1 by construction:
    // their clip terms are exact).
    const double before = run.numbers.value("roundtrip_worst_ratio_unclipped", 0.0);
    run.numbers["roundtrip_worst_ratio_unclipped"] = std::max(before, worst_unclipped);
  }

  // q.k through the rotation: the query rotated by the helper attention uses, the key
  // read as attention reads it (dequantized, rotated space), against q . decoded key.
  {
    std::vector<float> qs(size_t(4) * d);
    std::mt19937_64 gq(c.seed ^ 0x9E3779B97F4A7C15ull);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (float& v : qs) v = nd(gq);
    double worst = 0;
    std::string worst_at;
    int64_t rows_checked = 0;
    std::vector<float> qrot(d), z(d);
    for (int i = 0; i < n && !std::isnan(worst); ++i) {
      const RowRef& r = rows[i];
      const KvView v = paged.view(r.lane);
      q4_decode_row_rotated(kv_row(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos), d,
                            z.data());
      if (!std::all_of(z.begin(), z.end(), [](float f) { return std::isfinite(f); })) continue;
      const float* q = qs.data() + size_t(i % 4) * d;
      std::copy(q, q + d, qrot.begin());
      if (plant != Plant::query_unrotated) q4_rotate_query(qrot.data(), d);
      const ref::Q4DotRef dr = ref::q4_dot(q, qrot.data(), z.data(), d);
      const double ratio = ratio_of(std::fabs(dr.got - dr.want), dr.bound);
      ++rows_checked;
      if (!(ratio <= worst)) {
        worst = ratio;
        std::ostringstream o;
        o << row_name(r) << " q.k=" << dr.want << " rotated=" << dr.got << " bound=" << dr.bound;
        worst_at = o.str();
      }
    }
    if (rows_checked) run.check_ratio("qk-bound", worst, cv, worst_at);
    else run.skip("qk-bound", "every row has a poisoned group");
  }
}

// Every fp16 scale pattern with every nibble through the backend's decode: 8,192 rows of
// 8 groups, group k of row r carrying scale bits 8 r + k and a code pattern that holds
// all 16 nibbles (shifted per group), against the reference's exact values (compared by
// value: foreign negative scales may produce zeros of either sign; NaN by predicate).
void check_all_scales(Run& run) {
  const KvLayout lay(1, 1, 256, Format::q4);
  const int n = 65536 / 8;
  Cache c = make_window_cache(lay, {n}, 0, 5);
  std::vector<RowRef> rows(n);
  for (int r = 0; r < n; ++r) {
    rows[r] = RowRef{0, 0, 0, 0, r};
    const KvView v = c.view(0);
    uint8_t* codes = kv_row(v, 0, 0, 0, r);
    uint8_t* scales = kv_scale(v, 0, 0, 0, r);
    for (int k = 0; k < 8; ++k) {
      const uint16_t h = uint16_t(8 * r + k);
      std::memcpy(scales + 2 * k, &h, 2);
      for (int b = 0; b < 16; ++b) codes[16 * k + b] = uint8_t(((2 * b + k) & 15) | (((2 * b + 1 + 3 * k) & 15) << 4));
    }
  }
  std::vector<float> out(size_t(n) * 256);
  const Status st = run.be.q4_decode_rows(c, rows.data(), n, out.data());
  if (!st.ok) return run.error("q4-all-scales", st.message);
  int64_t bad = 0;
  std::string first;
  for (int r = 0; r < n; ++r) {
    const KvView v = c.view(0);
    for (int k = 0; k < 8; ++k) {
      uint16_t h;
      std::memcpy(&h, kv_scale(v, 0, 0, 0, r) + 2 * k, 2);
      const auto want = ref::q4_decode_bytes(kv_row(v, 0, 0, 0, r) + 16 * k, h);
      for (int j = 0; j < 32; ++j) {
        const float got = out[size_t(r) * 256 + 32 * k + j];
        const bool ok = std::isnan(want[j]) ? std::isnan(got) : double(got) == want[j];
        if (!ok && bad++ == 0) {
          std::ostringstream o;
          o << "scale 0x" << std::hex << h << std::dec << " element " << j << ": got " << got << " want " << want[j];
          first = o.str();
        }
      }
    }
  }
  run.check("decode-all-scales", bad == 0, "q4(scales=0..65535,nibbles=0..15)", std::to_string(bad) + " values; " + first);
}

void declare_gates(Run& run) {
  run.declare("paged==window", "rows written through a page table equal rows written to a window, bytes; decoded rows too");
  run.declare("codes==reference", "every group's 16 code bytes equal the float64 reference's exact prediction");
  run.declare("scales==reference", "every group's fp16 scale equals the reference's exact prediction");
  run.declare("decode==reference", "decoded fp32 values equal the reference's exact values (NaN by predicate)");
  run.declare("roundtrip-bound", "|decode(encode(x)) - x| <= derived per-element bound (reference/q4_ref.cpp)");
  run.declare("qk-bound", "rotated query . dequantized rotated key == q . decoded key within the derived bound");
  run.declare("repeats", "three encodes and three decodes give identical bytes");
  run.declare("rows==solo", "a row encoded alone equals the same row in a mixed two-lane launch");
  run.declare("guards", "no byte outside the rows' codes and scales changed; output canaries intact");
  run.declare("inputs", "input rows and the decoded cache hash the same after each launch");
  run.declare("decode-all-scales", "all 65,536 fp16 scale patterns with all 16 nibbles decode to the reference value");
}

Q4Case control_case(int ptok, const char* dist, uint64_t seed) {
  return Q4Case{ptok, 64, 1, 2, 3 * ptok + 1, 2 * ptok, dist, seed};
}

void q4_rows_body(Run& run) {
  run.control("swapped-page-table", "lane 0's first two page-table entries swapped over correctly placed pages",
              [](Run& r) {
                for (int p : {3, 16}) run_case(r, r.be, control_case(p, "normal", 11 + p), Plant::swap_page_table);
              });
  run.control("planted-row", "one code byte of one row flipped in the paged cache only", [](Run& r) {
    for (int p : {1, 48}) run_case(r, r.be, control_case(p, "normal", 21 + p), Plant::planted_row);
  });
  run.control("scale-from-neighbour-group", "every group decoded with the scale of the next group of its row",
              [](Run& r) {
                for (int p : {7, 16}) run_case(r, r.be, control_case(p, "normal", 31 + p), Plant::neighbour_scale);
              });
  run.control("query-rotation-skipped", "the query left unrotated while keys are stored rotated", [](Run& r) {
    for (int p : {16, 7}) run_case(r, r.be, control_case(p, "normal", 51 + p), Plant::query_unrotated);
  });
  run.control("stray-write", "one byte written into an arena page that no lane owns", [](Run& r) {
    for (int p : {16, 3}) run_case(r, r.be, control_case(p, "normal", 41 + p), Plant::stray_write);
  });

  // Defects at the backend boundary (contracts/faulty_backend.h) aimed at the gates no
  // other control turns red.
  auto faulty = [](Fault f, int seed) {
    return [f, seed](Run& r) {
      FaultyBackend fb(r.be, f);
      run_case(r, fb, control_case(16, "normal", seed), Plant::none);
    };
  };
  run.control("encode-writes-its-input", "a row encode flips a bit of its input rows", faulty(Fault::encode_input_write, 71));
  run.control("launch-dependent-encode", "a batched encode alters the first row's codes (a lone row is unaffected)",
              faulty(Fault::encode_launch_dependent, 72));
  run.control("nondeterministic-decode", "every second decode differs in the last bit of one value",
              faulty(Fault::decode_nondeterministic, 73));
  declare_gates(run);
  check_all_scales(run);
  for (int i = 0; i < run.cases; ++i) {
    const Q4Case c = draw_case(run.seed, i);
    if (!run.selected(c.vars())) continue;
    run.progress("case " + std::to_string(i + 1) + "/" + std::to_string(run.cases) + " " + c.vars());
    run_case(run, run.be, c, Plant::none);
  }
}

}  // namespace

ContractDef q4_rows_contract() {
  return {"q4-rows", "q4 rows: Hadamard-rotated 4-bit groups with fp16 scales, encode/decode through kv_row",
          64, q4_rows_body};
}

}  // namespace kc
