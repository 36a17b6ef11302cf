// Contract `q4-rows`: the Hadamard-rotated 4-bit row codec (kernels/codecs/q4.h) and its
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
//   qk-bound            the rotated-space decode (what attention reads) equals the
//                       reference's code x scale exactly, and q4_rotate_query(q) .
//                       dequantized rotated key == q . decoded key within the derived
//                       rotation-rounding bound, worst ratio recorded
//   repeats, rows==solo, guards, inputs, device==host-twin: contracts/codec_harness.h
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

#include "contracts/codec_harness.h"
#include "contracts/contracts.h"
#include "kernels/codecs/q4.h"
#include "reference/q4_ref.h"

namespace kc {
namespace {

enum class Plant { none, neighbour_scale, query_unrotated };

const std::vector<const char*> kDists = {"normal", "outlier", "ties", "zeros", "tiny", "large", "nonfinite", "wide"};

// Row values; each group has its own magnitude and kind.
std::vector<float> make_rows(const CodecCase& c, size_t n_rows) {
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
      } else if (c.dist == "ties" && kind < 4) {
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
      } else if (c.dist == "ties") {
        // The scale on an fp16 tie: y_i = n_i 2^(e - 11), |n_i| < 7 M, one n = +-7 M, M =
        // 2049 + 2 j with j even, 2809 <= M < 4096, so that amax / 7 = M 2^(e - 11) exactly, the
        // midpoint of two fp16 values whose tie goes down to the even one. amax * fl32(1 / 7)
        // (7 fl32(1 / 7) = 1 + 4.47e-8) rounds to 1 ulp above it here, and to the upper fp16:
        // the divide the format names is checked. x = 2^-2 H y is exact in fp32 (sums of 32
        // integers below 2^15 times 2^(e - 13)), and so is the fwd rotation.
        const int M = 2049 + 4 * (190 + int(g() % 322)), e = int(g() % 30) - 14;  // m from 2^-14 (fp16 normals)
        double y[32], hx[32];
        for (int i = 0; i < 32; ++i)
          y[i] = std::ldexp(double(int64_t(g() % uint64_t(14 * M - 1)) - (7 * M - 1)), e - 11);
        y[g() % 32] = std::ldexp(double(g() & 1 ? -7 * M : 7 * M), e - 11);
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

class Q4Checks final : public CodecChecks {
 public:
  Q4Checks(const CaseRows& cr, Plant plant) : plant_(plant), want_(cr.n()) {
    for (int i = 0; i < cr.n(); ++i) want_[i] = ref::q4_row(cr.row_x(i), cr.d);
  }

  void check_bytes(Run& run, const CaseRows& cr) override {
    int64_t bad_codes = 0, bad_scales = 0;
    std::string first_codes, first_scales;
    for (int i = 0; i < cr.n(); ++i) {
      const RowRef& r = cr.rows[i];
      const auto bp = row_bytes(cr.paged, r);
      for (int gi = 0; gi < cr.d / 32; ++gi) {
        const ref::Q4GroupRef& w = want_[i][gi];
        if (!std::equal(w.codes.begin(), w.codes.end(), bp.begin() + 16 * gi) && bad_codes++ == 0)
          first_codes = row_name(r) + " group " + std::to_string(gi);
        uint16_t h;
        std::memcpy(&h, bp.data() + cr.lay.code_bytes + 2 * gi, 2);
        if (h != w.scale_bits && bad_scales++ == 0) {
          std::ostringstream o;
          o << row_name(r) << " group " << gi << ": 0x" << std::hex << h << " want 0x" << w.scale_bits;
          first_scales = o.str();
        }
      }
    }
    run.check("codes==reference", bad_codes == 0, cr.cv,
              std::to_string(bad_codes) + " groups differ, first " + first_codes);
    run.check("scales==reference", bad_scales == 0, cr.cv,
              std::to_string(bad_scales) + " groups differ, first " + first_scales);
  }

  void plant_decode(CaseRows& cr) override {
    if (plant_ != Plant::neighbour_scale) return;
    // Each group decoded with the next group's scale (cyclic in the row), in both
    // layouts, as a decoder indexing the scale plane wrongly would see it.
    for (Cache* cc : {&cr.paged, &cr.window})
      for (const RowRef& r : cr.rows) {
        uint8_t* s = kv_scale(cc->view(r.lane), r.layer, r.kv, r.head, r.pos);
        std::rotate(s, s + 2, s + cr.lay.scale_bytes);
      }
  }

  void check_values(Run& run, const CaseRows& cr, const float* out) override {
    check_roundtrip(run, cr, out);
    check_qk(run, cr);
  }

 private:
  // Decoded values against the reference (computed from x, never from the cache).
  void check_roundtrip(Run& run, const CaseRows& cr, const float* out) const {
    const int d = cr.d;
    double worst = 0, worst_unclipped = 0;
    std::string worst_at;
    int64_t bad_val = 0;
    std::string first_val;
    for (int i = 0; i < cr.n() && !std::isnan(worst); ++i) {
      const float* xr = cr.row_x(i);
      const float* got = out + size_t(i) * d;
      for (int j = 0; j < d; ++j) {
        const ref::Q4GroupRef& w = want_[i][j / 32];
        if (!same_float(got[j], w.values[j % 32]) && bad_val++ == 0)
          first_val = row_name(cr.rows[i]) + "[" + std::to_string(j) + "]";
        double ratio;
        if (w.poisoned) ratio = std::isnan(got[j]) ? 0.0 : std::numeric_limits<double>::infinity();
        else ratio = bound_ratio(std::fabs(double(got[j]) - double(xr[j])), w.bound[j % 32]);
        if (!w.poisoned && !w.clipped && ratio > worst_unclipped) worst_unclipped = ratio;
        if (worse_ratio(ratio, worst)) {
          worst = ratio;
          std::ostringstream o;
          o << row_name(cr.rows[i]) << "[" << j << "] x=" << xr[j] << " got=" << got[j] << " bound=" << w.bound[j % 32];
          worst_at = o.str();
          if (std::isnan(ratio)) break;
        }
      }
    }
    run.check("decode==reference", bad_val == 0, cr.cv, std::to_string(bad_val) + " values differ, first " + first_val);
    run.check_ratio("roundtrip-bound", worst, cr.cv, worst_at);
    // The worst ratio over groups whose codes stayed inside -7..7 without clipping
    // (clipped groups, saturated or fp16-subnormal scales, reach ~1 by construction:
    // their clip terms are exact).
    const double before = run.numbers.value("roundtrip_worst_ratio_unclipped", 0.0);
    run.numbers["roundtrip_worst_ratio_unclipped"] = std::max(before, worst_unclipped);
  }

  // q.k through the rotation: the query rotated by the helper attention uses, the key
  // read as attention reads it (dequantized, rotated space), against q . decoded key.
  void check_qk(Run& run, const CaseRows& cr) const {
    const int d = cr.d;
    std::vector<float> qs(size_t(4) * d);
    std::mt19937_64 gq(cr.c.seed ^ 0x9E3779B97F4A7C15ull);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (float& v : qs) v = nd(gq);
    double worst = 0;
    std::string worst_at;
    int64_t rows_checked = 0;
    std::vector<float> qrot(d), z(d);
    int64_t bad_z = 0;
    std::string first_z;
    for (int i = 0; i < cr.n() && !std::isnan(worst); ++i) {
      const RowRef& r = cr.rows[i];
      const KvView v = cr.paged.view(r.lane);
      q4_decode_row_rotated(kv_row(v, r.layer, r.kv, r.head, r.pos), kv_scale(v, r.layer, r.kv, r.head, r.pos), d,
                            z.data());
      if (!std::all_of(z.begin(), z.end(), [](float f) { return std::isfinite(f); })) continue;
      // The rotated-space decode attention reads is the reference's code x scale, exactly
      // (both sides of q4_dot below are built from z, so a wrong z would move them together).
      for (int j = 0; j < d; ++j) {
        const double want = want_[i][j / 32].deq[j % 32];
        if (!want_[i][j / 32].poisoned && double(z[j]) != want) {
          ++bad_z;
          if (first_z.empty()) {
            std::ostringstream o;
            o << row_name(r) << " element " << j << ": " << z[j] << ", the reference's code x scale " << want;
            first_z = o.str();
          }
        }
      }
      const float* q = qs.data() + size_t(i % 4) * d;
      std::copy(q, q + d, qrot.begin());
      if (plant_ != Plant::query_unrotated) q4_rotate_query(qrot.data(), d);
      const ref::Q4DotRef dr = ref::q4_dot(q, qrot.data(), z.data(), d);
      const double ratio = bound_ratio(std::fabs(dr.got - dr.want), dr.bound);
      ++rows_checked;
      if (worse_ratio(ratio, worst)) {
        worst = ratio;
        std::ostringstream o;
        o << row_name(r) << " q.k=" << dr.want << " rotated=" << dr.got << " bound=" << dr.bound;
        worst_at = o.str();
      }
    }
    if (rows_checked) {
      run.check("qk-bound", bad_z == 0, cr.cv,
                std::to_string(bad_z) + " rotated-space values differ from the reference's, first " + first_z);
      run.check_ratio("qk-bound", worst, cr.cv, worst_at);
    } else {
      run.skip("qk-bound", "every row has a poisoned group");
    }
  }

  const Plant plant_;
  std::vector<std::vector<ref::Q4GroupRef>> want_;
};

MakeChecks q4_checks(Plant plant) {
  return [plant](const CaseRows& cr) { return std::make_unique<Q4Checks>(cr, plant); };
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
  const Status st = run.be.decode_rows(Format::q4, c, rows.data(), n, out.data());
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

void q4_rows_body(Run& run) {
  const RowCodec codec{
      .name = "q4-rows",
      .format = Format::q4,
      // Pages of 1, 3, 7, 16, 48, 512 and odd sizes; head_dim 32 (one group), 64, 128,
      // 256; every distribution among the first eight cases. At most ~2,400 rows a case
      // so a cpu run stays well under a minute.
      .draw = {.fixed_ptok = {1, 3, 7, 16, 48, 512, 16, 7},
               .head_dims = {32, 64, 128, 256},
               .fixed_d = {64, 128, 256, 64, 128, 256, 32, 256},
               .max_len = 600,
               .lane_rows = 1200,
               .dists = kDists,
               .fixed_dists = kDists},
      .control_head_dim = 64,
      .make_rows = make_rows,
      .checks = q4_checks(Plant::none),
      .reference_gates =
          {{"codes==reference", "every group's 16 code bytes equal the float64 reference's exact prediction"},
           {"scales==reference", "every group's fp16 scale equals the reference's exact prediction"},
           {"decode==reference", "decoded fp32 values equal the reference's exact values (NaN by predicate)"},
           {"roundtrip-bound", "|decode(encode(x)) - x| <= derived per-element bound (reference/q4_ref.cpp)"},
           {"qk-bound", "rotated-space decode == reference code x scale; rotated query . dequantized rotated key == q . "
                        "decoded key within the derived bound"}},
      .guards_description = "no byte outside the rows' codes and scales changed; output canaries intact",
      .planted_row_description = "one code byte of one row flipped in the paged cache only",
      .own_controls = {{"scale-from-neighbour-group", "every group decoded with the scale of the next group of its row",
                        {7, 16}, "normal", 31, q4_checks(Plant::neighbour_scale)},
                       {"query-rotation-skipped", "the query left unrotated while keys are stored rotated", {16, 7},
                        "normal", 51, q4_checks(Plant::query_unrotated)}},
      .stray_seed_base = 41,
      .once_per_run =
          [](Run& r) {
            r.declare("decode-all-scales",
                      "all 65,536 fp16 scale patterns with all 16 nibbles decode to the reference value");
            check_all_scales(r);
          },
  };
  run_codec_contract(run, codec);
}

}  // namespace

ContractDef q4_rows_contract() {
  return {"q4-rows", "q4 rows: Hadamard-rotated 4-bit groups with fp16 scales, encode/decode through kv_row",
          64, q4_rows_body};
}

}  // namespace kc
