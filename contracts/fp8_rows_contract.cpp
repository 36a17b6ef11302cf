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
//   repeats, rows==solo, guards, inputs, device==host-twin: contracts/codec_harness.h
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

#include "contracts/codec_harness.h"
#include "contracts/contracts.h"
#include "reference/e4m3_ref.h"

namespace kc {
namespace {

// Row values. Every row has its own magnitude; distributions aim at the edges.
std::vector<float> make_rows(const CodecCase& c, size_t n_rows) {
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

class Fp8Checks final : public CodecChecks {
 public:
  explicit Fp8Checks(bool neighbour_scale = false) : neighbour_scale_(neighbour_scale) {}

  void check_bytes(Run& run, const CaseRows& cr) override {
    int64_t bad_ref = 0;
    std::string first_ref;
    for (int i = 0; i < cr.n(); ++i) {
      const auto bp = row_bytes(cr.paged, cr.rows[i]);
      const ref::Fp8RowRef want = ref::fp8_row(cr.row_x(i), cr.d);
      // Compare the scale by value class so NaN payloads do not matter.
      float got_scale;
      std::memcpy(&got_scale, bp.data() + cr.d, 4);
      const bool ok =
          std::equal(bp.begin(), bp.begin() + cr.d, want.codes.begin()) && same_float(got_scale, want.scale);
      if (!ok && bad_ref++ == 0) first_ref = row_name(cr.rows[i]);
    }
    run.check("codes==reference", bad_ref == 0, cr.cv, std::to_string(bad_ref) + " rows differ, first " + first_ref);
  }

  void plant_decode(CaseRows& cr) override {
    if (!neighbour_scale_) return;
    // Every row's scale replaced by its neighbour's (pos + 1) in both layouts, as a
    // decoder reading the wrong scale row would see it; ascending pos reads originals.
    std::vector<RowRef> sorted = cr.rows;
    std::sort(sorted.begin(), sorted.end(), [](const RowRef& a, const RowRef& b) { return a.pos < b.pos; });
    for (Cache* cc : {&cr.paged, &cr.window})
      for (const RowRef& r : sorted)
        if (r.pos + 1 < cr.lens[r.lane]) {
          const KvView v = cc->view(r.lane);
          std::memcpy(kv_scale(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos + 1), 4);
        }
  }

  void check_values(Run& run, const CaseRows& cr, const float* out) override {
    check_decoded(
        run, cr, out, "decode-bound", [&](int i) { return ref::fp8_row(cr.row_x(i), cr.d); },
        [](const ref::Fp8RowRef& w, int) { return w.poisoned; });
  }

 private:
  const bool neighbour_scale_;
};

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
  const Status st = run.be.decode_rows(Format::fp8, c, &r, 1, out.data());
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
  if (!run.twin) return;  // skipped with their reasons (device_gate)
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

void fp8_rows_body(Run& run) {
  const RowCodec codec{
      .name = "fp8-rows",
      .format = Format::fp8,
      // Page sizes 1, 3, 16, 48, 512 first; the first cases' rows normal, wide, at the
      // E4M3 edges; rows of zeros, tiny rows whose scale underflows, non-finite rows.
      // Lengths capped to keep a case under ~12k rows so a cpu run stays fast.
      .draw = {.fixed_ptok = {1, 3, 16, 48, 512},
               .head_dims = {32, 64, 128, 256},
               .fixed_d = {},
               .max_len = 700,
               .lane_rows = 6000,
               .dists = {"normal", "wide", "edges", "zeros", "tiny", "nonfinite"},
               .fixed_dists = {"normal", "wide", "edges", "normal", "wide"}},
      .control_head_dim = 64,
      .make_rows = make_rows,
      .checks = [](const CaseRows&) { return std::make_unique<Fp8Checks>(); },
      .reference_gates =
          {{"codes==reference", "codes and scale equal the float64 reference's exact prediction"},
           {"decode==reference", "decoded fp32 values equal the reference's prediction (NaN by predicate)"},
           {"decode-bound", "|decode(encode(x)) - x| <= derived per-element bound (reference/e4m3_ref.h)"}},
      .guards_description = "no byte outside the rows written changed; output canaries intact",
      .planted_row_description = "one byte of one row flipped in the paged cache only",
      .own_controls = {{"scale-from-neighbour", "every row decoded with the scale of the row at pos + 1", {7, 16},
                        "normal", 31, [](const CaseRows&) { return std::make_unique<Fp8Checks>(true); }}},
      .stray_seed_base = 41,
      .once_per_run =
          [](Run& r) {
            r.declare("e4m3-decode-all-codes", "all 256 E4M3 codes decode (scale 1) to the reference's value, sign and NaN included");
            r.declare("e4m3-sampled==reference",
                      "1,036 blocks of 4,096 float bit patterns (all 2^32 spread, and both signs around 448, 464, 2^-10, "
                      "2^-6, the subnormal step, Inf) convert to the reference's code");
            r.device_gate("e4m3-exhaustive:device==host", "all 2^32 float bit patterns: the device conversion equals the host's",
                          "needs a CUDA device: compares the device conversion with the host's");
            r.device_gate("e4m3-exhaustive:host==reference",
                          "all 2^32 float bit patterns: the host conversion equals the reference (runs with the device gate)",
                          "runs with the device gate (2^32 conversions on the host); needs a CUDA device");
            check_all_codes(r);
            check_sampled_conversion(r);
            check_exhaustive(r);
          },
  };
  run_codec_contract(run, codec);
}

}  // namespace

ContractDef fp8_rows_contract() {
  return {"fp8-rows", "fp8 row helpers: E4M3 conversion, per-row scale, encode/decode through kv_row", 48,
          fp8_rows_body};
}

}  // namespace kc
