// Contract `fp8-rows`: the fp8 row helpers and their encode / decode kernels.
//
// Gates (every case):
//   paged==window      codes and scales written through a page table equal, byte for
//                      byte, those written to a window; decoded rows equal too
//   codes==reference   codes and scale equal the float64 reference's prediction
//   decode==reference  decoded values equal the reference's fp32 prediction (bits;
//                      NaN by predicate)
//   decode-bound       |decode(encode(x)) - x| <= the derived per-element bound
//                      (reference/e4m3_ref.h), worst ratio recorded
//   repeats            three encodes and three decodes give identical bytes
//   rows==solo         a row encoded alone equals the same row in the mixed launch
//   guards             no byte outside the rows written changed (canary bands, unowned
//                      pages, unused slots of owned pages, window slack, output canaries)
//   inputs             inputs hash the same after each launch
//   device==host-twin  (cuda) device bytes equal the host twin's
// Once per run: all 256 codes decode to the reference value; a sample of E4M3
// conversions equals the reference; (cuda) all 2^32 float inputs convert to the same
// code on the device and in the host twin, and the host twin equals the reference.
// Controls (must be red): swapped page table, planted row, scale read from the
// neighbouring row, a stray write into an unowned page.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include <rapidcheck.h>

#include "contracts/arena.h"
#include "contracts/contracts.h"
#include "contracts/faulty_backend.h"
#include "contracts/framework.h"
#include "reference/e4m3_ref.h"

namespace kc {
namespace {

enum class Plant { none, swap_page_table, planted_row, neighbour_scale, stray_write };

// One generated case. Its vars() line is its log line, receipt key and filter.
struct Fp8Case {
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
    o << "fp8-rows(ptok=" << ptok << ",d=" << head_dim << ",L=" << layers << ",H=" << kv_heads << ",len=" << len0
      << "+" << len1 << ",dist=" << dist << ",seed=" << seed << ")";
    return o.str();
  }
};

const char* kDists[] = {"normal", "wide", "edges", "zeros", "tiny", "nonfinite"};

// Draws a case aimed at the edges: page sizes 1, 3, 7, 16, 48, 512 and odd ones; a last
// page holding one position or a full one; rows of zeros, of values at 448 ratios and
// at the subnormal thresholds, tiny rows whose scale underflows, non-finite rows.
Fp8Case draw_case(uint64_t seed, int index) {
  rc::Random rnd(mix_seed(seed, index));
  const auto ptok_gen = rc::gen::weightedOneOf<int>(
      {{6, rc::gen::element(1, 3, 7, 16, 48, 512)}, {2, rc::gen::inRange(1, 700)}});
  const int drawn_ptok = ptok_gen(rnd.split(), 50).value();
  const int ptok = index < 5 ? std::array{1, 3, 16, 48, 512}[index] : drawn_ptok;
  const int d = rc::gen::element(32, 64, 128, 256)(rnd.split(), 50).value();
  const int L = rc::gen::element(1, 2)(rnd.split(), 50).value();
  const int H = rc::gen::element(1, 2, 4)(rnd.split(), 50).value();
  std::mt19937_64 g(mix_seed(seed, index + 1000003));
  // Lengths: 1, a page minus one, a page, a page plus one, two pages plus one, random.
  auto pick_len = [&](int k) {
    const int opts[] = {1, std::max(1, ptok - 1), ptok, ptok + 1, 2 * ptok + 1, int(1 + g() % 700)};
    return opts[(k + g()) % 6];
  };
  // Keep a case under ~12k rows so a cpu run stays fast.
  const int cap = std::max(1, 6000 / (L * 2 * H));
  const int len0 = std::min(cap, pick_len(index));
  const int len1 = std::min(cap, pick_len(index + 3));
  const std::string dist = index < 5 ? kDists[index % 3] : kDists[g() % 6];
  return Fp8Case{ptok, d, L, H, len0, len1, dist, mix_seed(seed, index + 7)};
}

// Row values. Every row has its own magnitude; distributions aim at the edges.
std::vector<float> make_rows(const Fp8Case& c, size_t n_rows) {
  const int d = c.head_dim;
  std::vector<float> x(n_rows * d);
  std::mt19937_64 g(c.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> ud(-30.f, 30.f);
  for (size_t r = 0; r < n_rows; ++r) {
    float* row = x.data() + r * d;
    const float mag = std::ldexp(1.0f, int(g() % 9) - 4);
    for (int i = 0; i < d; ++i) row[i] = nd(g) * mag;
    const uint64_t kind = g() % 8;
    if (c.dist == "wide") {
      for (int i = 0; i < d; ++i) row[i] = std::ldexp(nd(g), int(ud(g)));
    } else if (c.dist == "edges") {
      // Values at exact E4M3 ties and thresholds relative to the row's amax: with
      // amax = 448 * s, x = t * s hits the conversion at t.
      const float s = std::ldexp(1.0f, int(g() % 40) - 20);
      const float ts[] = {448, 464, 2.0f, 0.001953125f, 0.0009765625f, 0.0029296875f, 1.0625f, 1.1875f,
                          17.0f, 19.0f, 0.015625f, 0.013671875f, 232.f, 240.f, 0.5f, 0.0f};
      for (int i = 0; i < d; ++i) row[i] = ts[g() % 16] * s * ((g() & 1) ? -1.f : 1.f);
      row[g() % d] = 448.f * s;  // amax exactly 448 s
    } else if (c.dist == "zeros" && kind < 3) {
      for (int i = 0; i < d; ++i) row[i] = (kind == 0) ? 0.0f : -0.0f;
      if (kind == 2) row[g() % d] = std::ldexp(1.0f, -126);
    } else if (c.dist == "tiny" && kind < 4) {
      // amax near and below 448 * 2^-149: the scale is subnormal or underflows to 0.
      for (int i = 0; i < d; ++i) row[i] = std::ldexp(nd(g), -137 - int(g() % 14));
    } else if (c.dist == "nonfinite" && kind < 2) {
      const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
      row[g() % d] = bad[g() % 3];
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

// Bytes of a row (codes then scale) as read through the cache's own view.
std::vector<uint8_t> row_bytes(const Cache& c, const RowRef& r) {
  const KvView v = c.view(r.lane);
  const uint8_t* p = kv_row(v, r.layer, r.kv, r.head, r.pos);
  std::vector<uint8_t> b(p, p + c.lay.code_bytes);
  const uint8_t* s = kv_scale(v, r.layer, r.kv, r.head, r.pos);
  b.insert(b.end(), s, s + c.lay.scale_bytes);
  return b;
}

void run_case(Run& run, Backend& be, const Fp8Case& c, Plant plant) {
  const std::string cv = c.vars();
  const KvLayout lay(c.layers, c.kv_heads, c.head_dim, Format::fp8);
  const std::vector<int> lens = {c.len0, c.len1};
  std::vector<RowRef> rows;
  for (int lane = 0; lane < 2; ++lane)
    for (int pos = 0; pos < lens[lane]; ++pos)
      for (int l = 0; l < c.layers; ++l)
        for (int kv = 0; kv < 2; ++kv)
          for (int h = 0; h < c.kv_heads; ++h) rows.push_back({lane, l, kv, h, pos});
  std::mt19937_64 g(c.seed ^ 0xABCDull);
  std::shuffle(rows.begin(), rows.end(), g);  // one launch mixes both lanes in any order
  const int n = int(rows.size());
  const int d = c.head_dim;
  const std::vector<float> x = make_rows(c, rows.size());
  const uint64_t x_hash = fnv1a(x.data(), x.size() * 4);

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
  if (fail(be.fp8_encode_rows(paged, x.data(), rows.data(), n))) return;
  if (fail(be.fp8_encode_rows(window, x.data(), rows.data(), n))) return;
  run.check("inputs", fnv1a(x.data(), x.size() * 4) == x_hash, cv, "encode changed its input rows");

  // Repeats and the host twin use unplanted copies.
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      Cache again = paged0;
      if (fail(be.fp8_encode_rows(again, x.data(), rows.data(), n))) return;
      same = again.mem == paged.mem;
    }
    run.check("repeats", same, cv, "a repeated encode gave different bytes");
  }
  {
    // rows == solo: up to five rows, each encoded alone into a fresh cache.
    bool same = true;
    std::string which;
    // The launch's first and last rows (where a launch-composition bug shows first),
    // then three drawn at random.
    for (int k = 0; k < std::min(n, 5) && same; ++k) {
      const int i = k == 0 ? 0 : (k == 1 ? n - 1 : int(g() % n));
      Cache solo = paged0;
      if (fail(be.fp8_encode_rows(solo, x.data() + size_t(i) * d, &rows[i], 1))) return;
      same = row_bytes(solo, rows[i]) == row_bytes(paged, rows[i]);
      if (!same) which = row_name(rows[i]);
    }
    run.check("rows==solo", same, cv, which);
  }
  if (run.twin) {
    Cache host = paged0;
    if (fail(run.twin->fp8_encode_rows(host, x.data(), rows.data(), n))) return;
    run.check("device==host-twin", host.mem == paged.mem, cv, "device encode bytes differ from the host twin");
  }

  // Plants that break the written cache (controls only).
  if (plant == Plant::planted_row) {
    const RowRef& r = rows[g() % n];
    kv_row(paged.view(r.lane), r.layer, r.kv, r.head, r.pos)[g() % d] ^= 0x01;
  } else if (plant == Plant::stray_write) {
    const auto spare = unowned_pages(paged);
    if (!spare.empty()) paged.mem[kGuardBytes + spare[0] * paged.views[0].ps + g() % paged.views[0].ps] ^= 0x40;
  } else if (plant == Plant::swap_page_table && paged.views[0].n_pages >= 2) {
    std::swap(paged.pts[paged.views[0].pt_off], paged.pts[paged.views[0].pt_off + 1]);
  }

  // Byte gates on what was written.
  {
    int64_t bad_pw = 0, bad_ref = 0;
    std::string first_pw, first_ref;
    for (int i = 0; i < n; ++i) {
      const RowRef& r = rows[i];
      const auto bp = row_bytes(paged, r);
      if (bp != row_bytes(window, r) && bad_pw++ == 0) first_pw = row_name(r);
      const ref::Fp8RowRef want = ref::fp8_row(x.data() + size_t(i) * d, d);
      // Compare the scale by value class so NaN payloads do not matter.
      float got_scale;
      std::memcpy(&got_scale, bp.data() + d, 4);
      const bool ok = std::equal(bp.begin(), bp.begin() + d, want.codes.begin()) && same_float(got_scale, want.scale);
      if (!ok && bad_ref++ == 0) first_ref = row_name(r);
    }
    run.check("paged==window", bad_pw == 0, cv, std::to_string(bad_pw) + " rows differ, first " + first_pw);
    run.check("codes==reference", bad_ref == 0, cv, std::to_string(bad_ref) + " rows differ, first " + first_ref);
    std::string where;
    const int64_t gp = guard_violations(paged, paged0.mem, mask_p, &where);
    const int64_t gw = guard_violations(window, window0.mem, mask_w, &where);
    run.check("guards", gp == 0 && gw == 0, cv,
              std::to_string(gp) + " paged / " + std::to_string(gw) + " window bytes; " + where);
  }

  if (plant == Plant::neighbour_scale) {
    // Every row's scale replaced by its neighbour's (pos + 1) in both layouts, as a
    // decoder reading the wrong scale row would see it; ascending pos reads originals.
    std::vector<RowRef> sorted = rows;
    std::sort(sorted.begin(), sorted.end(), [](const RowRef& a, const RowRef& b) { return a.pos < b.pos; });
    for (Cache* cc : {&paged, &window})
      for (const RowRef& r : sorted)
        if (r.pos + 1 < lens[r.lane]) {
          const KvView v = cc->view(r.lane);
          std::memcpy(kv_scale(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos + 1), 4);
        }
  }

  // Decode: both layouts, guarded outputs, repeats, bound and reference.
  const uint64_t paged_hash = fnv1a(paged.mem.data(), paged.mem.size());
  Guarded<float> outp(size_t(n) * d), outw(size_t(n) * d);
  if (fail(be.fp8_decode_rows(paged, rows.data(), n, outp.data()))) return;
  if (fail(be.fp8_decode_rows(window, rows.data(), n, outw.data()))) return;
  run.check("inputs", fnv1a(paged.mem.data(), paged.mem.size()) == paged_hash, cv, "decode changed the cache");
  run.check("guards", outp.guards_intact() && outw.guards_intact(), cv, "decode wrote past its output");
  run.check("paged==window", std::memcmp(outp.data(), outw.data(), size_t(n) * d * 4) == 0, cv,
            "decoded rows differ between paged and window");
  {
    bool same = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      std::vector<float> again(size_t(n) * d);
      if (fail(be.fp8_decode_rows(paged, rows.data(), n, again.data()))) return;
      same = std::memcmp(again.data(), outp.data(), again.size() * 4) == 0;
    }
    run.check("repeats", same, cv, "a repeated decode gave different values");
  }
  if (run.twin) {
    std::vector<float> host(size_t(n) * d);
    if (fail(run.twin->fp8_decode_rows(paged, rows.data(), n, host.data()))) return;
    run.check("device==host-twin", std::memcmp(host.data(), outp.data(), host.size() * 4) == 0, cv,
              "device decode differs from the host twin");
  }
  double worst = 0;
  std::string worst_at;
  int64_t bad_val = 0;
  std::string first_val;
  for (int i = 0; i < n; ++i) {
    const float* xr = x.data() + size_t(i) * d;
    const ref::Fp8RowRef want = ref::fp8_row(xr, d);
    const float* got = outp.data() + size_t(i) * d;
    for (int j = 0; j < d; ++j) {
      if (!same_float(got[j], want.values[j]) && bad_val++ == 0) first_val = row_name(rows[i]) + "[" + std::to_string(j) + "]";
      double ratio;
      if (want.poisoned) ratio = std::isnan(got[j]) ? 0.0 : std::numeric_limits<double>::infinity();
      else if (std::isnan(got[j])) ratio = std::numeric_limits<double>::quiet_NaN();
      else ratio = std::fabs(double(got[j]) - double(xr[j])) / want.bound[j];
      if (!(ratio <= worst)) {
        worst = ratio;
        std::ostringstream o;
        o << row_name(rows[i]) << "[" << j << "] x=" << xr[j] << " got=" << got[j] << " bound=" << want.bound[j];
        worst_at = o.str();
        if (std::isnan(ratio)) break;
      }
    }
  }
  run.check("decode==reference", bad_val == 0, cv, std::to_string(bad_val) + " values differ, first " + first_val);
  run.check_ratio("decode-bound", worst, cv, worst_at);
}

// All 256 codes through the backend's decode (one row of codes 0..255 with scale 1).
void check_all_codes(Run& run) {
  const KvLayout lay(1, 1, 256, Format::fp8);
  Cache c = make_window_cache(lay, {1}, 0, 1);
  const RowRef r{0, 0, 0, 0, 0};
  uint8_t* codes = kv_row(c.view(0), 0, 0, 0, 0);
  for (int i = 0; i < 256; ++i) codes[i] = uint8_t(i);
  const float one = 1.0f;
  std::memcpy(kv_scale(c.view(0), 0, 0, 0, 0), &one, 4);
  std::vector<float> out(256);
  const Status st = run.be.fp8_decode_rows(c, &r, 1, out.data());
  if (!st.ok) return run.error("e4m3-all-codes", st.message);
  int bad = 0;
  for (int i = 0; i < 256; ++i) {
    const double want = ref::e4m3_value(uint8_t(i));
    const bool ok = std::isnan(want) ? std::isnan(out[i]) : double(out[i]) == want && std::signbit(out[i]) == std::signbit(want);
    bad += !ok;
  }
  run.check("e4m3-decode-all-codes", bad == 0, "e4m3(codes=0..255)", std::to_string(bad) + " codes decode wrong");
}

// A sample of conversions against the reference: 1024 blocks of 4096 consecutive bit
// patterns spread over all 2^32, plus blocks around the thresholds (448, 464, 2^-10,
// 2^-6, the largest subnormal step) of both signs.
void check_sampled_conversion(Run& run) {
  std::vector<uint64_t> bases;
  for (uint64_t k = 0; k < 1024; ++k) bases.push_back(k * (uint64_t(1) << 22) + (k * 2654435761u) % 4096);
  for (uint32_t edge : {0x43E00000u, 0x43E80000u, 0x3A800000u, 0x3C800000u, 0x3B000000u, 0x7F800000u})
    for (uint32_t sign : {0u, 0x80000000u}) bases.push_back((edge | sign) - 2048);
  const uint64_t block = 4096;
  std::vector<uint8_t> out(block);
  int64_t bad = 0, total = 0;
  std::string first;
  for (uint64_t base : bases) {
    const Status st = run.be.e4m3_encode_bits(base, block, out.data());
    if (!st.ok) return run.error("e4m3-sampled", st.message);
    for (uint64_t i = 0; i < block; ++i, ++total) {
      const uint8_t want = ref::e4m3_from_double(bits_float(uint32_t(base + i)));
      if (out[i] != want && bad++ == 0) {
        std::ostringstream o;
        o << "bits 0x" << std::hex << base + i << ": got 0x" << int(out[i]) << " want 0x" << int(want);
        first = o.str();
      }
    }
  }
  run.check("e4m3-sampled==reference", bad == 0, "e4m3(blocks=" + std::to_string(bases.size()) + "x4096)", first);
  run.numbers["e4m3_sampled_inputs"] = total;
}

// All 2^32 inputs: device path against the host twin's software path, and the host
// path against the reference, in chunks, compared on all host threads.
void check_exhaustive(Run& run) {
  if (!run.twin) {
    run.skip("e4m3-exhaustive:device==host", "needs a device: compares the device conversion with the host's");
    run.skip("e4m3-exhaustive:host==reference", "runs with the device gate (2^32 conversions on the host)");
    return;
  }
  const uint64_t chunk = uint64_t(1) << 28;
  std::vector<uint8_t> dev(chunk);
  std::atomic<int64_t> bad_dev{0}, bad_ref{0};
  std::atomic<uint64_t> first_dev{~0ull}, first_ref{~0ull};
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += chunk) {
    const Status st = run.be.e4m3_encode_bits(base, chunk, dev.data());
    if (!st.ok) return run.error("e4m3-exhaustive", st.message);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < nt; ++t)
      ts.emplace_back([&, t] {
        for (uint64_t i = t; i < chunk; i += nt) {
          const float f = bits_float(uint32_t(base + i));
          const uint8_t host = e4m3_encode(f);
          if (host != dev[i]) {
            ++bad_dev;
            uint64_t e = ~0ull;
            first_dev.compare_exchange_strong(e, base + i);
          }
          if (host != ref::e4m3_from_double(f)) {
            ++bad_ref;
            uint64_t e = ~0ull;
            first_ref.compare_exchange_strong(e, base + i);
          }
        }
      });
    for (auto& t : ts) t.join();
    run.progress("e4m3 exhaustive: " + std::to_string((base + chunk) >> 28) + "/16");
  }
  std::ostringstream a, b;
  a << bad_dev << " of 2^32 differ; first bits 0x" << std::hex << first_dev;
  b << bad_ref << " of 2^32 differ; first bits 0x" << std::hex << first_ref;
  run.check("e4m3-exhaustive:device==host", bad_dev == 0, "e4m3(all 2^32)", a.str());
  run.check("e4m3-exhaustive:host==reference", bad_ref == 0, "e4m3(all 2^32)", b.str());
  run.numbers["e4m3_exhaustive_inputs"] = uint64_t(1) << 32;
  run.numbers["e4m3_exhaustive_device_host_mismatches"] = bad_dev.load();
  run.numbers["e4m3_exhaustive_host_reference_mismatches"] = bad_ref.load();
}

void declare_gates(Run& run) {
  run.declare("paged==window", "rows written through a page table equal rows written to a window, bytes; decoded rows too");
  run.declare("codes==reference", "codes and scale equal the float64 reference's exact prediction");
  run.declare("decode==reference", "decoded fp32 values equal the reference's prediction (NaN by predicate)");
  run.declare("decode-bound", "|decode(encode(x)) - x| <= derived per-element bound (reference/e4m3_ref.h)");
  run.declare("repeats", "three encodes and three decodes give identical bytes");
  run.declare("rows==solo", "a row encoded alone equals the same row in a mixed two-lane launch");
  run.declare("guards", "no byte outside the rows written changed; output canaries intact");
  run.declare("inputs", "input rows and the decoded cache hash the same after each launch");
}

Fp8Case control_case(int ptok, const char* dist, uint64_t seed) {
  return Fp8Case{ptok, 64, 1, 2, 3 * ptok + 1, 2 * ptok, dist, seed};
}

void fp8_rows_body(Run& run) {
  // Controls first: the contract proves it can fail before it reports passes.
  run.control("swapped-page-table", "lane 0's first two page-table entries swapped over correctly placed pages",
              [](Run& r) {
                for (int p : {3, 16}) run_case(r, r.be, control_case(p, "normal", 11 + p), Plant::swap_page_table);
              });
  run.control("planted-row", "one byte of one row flipped in the paged cache only", [](Run& r) {
    for (int p : {1, 48}) run_case(r, r.be, control_case(p, "normal", 21 + p), Plant::planted_row);
  });
  run.control("scale-from-neighbour", "every row decoded with the scale of the row at pos + 1", [](Run& r) {
    for (int p : {7, 16}) run_case(r, r.be, control_case(p, "normal", 31 + p), Plant::neighbour_scale);
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
  check_all_codes(run);
  check_sampled_conversion(run);
  check_exhaustive(run);
  for (int i = 0; i < run.cases; ++i) {
    const Fp8Case c = draw_case(run.seed, i);
    if (!run.selected(c.vars())) continue;
    run.progress("case " + std::to_string(i + 1) + "/" + std::to_string(run.cases) + " " + c.vars());
    run_case(run, run.be, c, Plant::none);
  }
}

}  // namespace

ContractDef fp8_rows_contract() {
  return {"fp8-rows", "fp8 row helpers: E4M3 conversion, per-row scale, encode/decode through kv_row", 48,
          fp8_rows_body};
}

}  // namespace kc
