// Contract `qwen-pages`: rope store, split-K attention (partial + merge) and keep
// (compaction), paged and contiguous, bf16 and fp8.
//
// A case builds two lanes (committed lengths len0, len1) laid out twice: pages shuffled
// through one poisoned arena, and contiguous windows. History keys of both layers are
// rope-stored; then one round: lane 0 gets `tail` draft rows at scattered free slots
// (logical positions len0..), lane 1 one new row (committed) and a draft tail of another
// length. Attention runs rows F (lane 1 with its tail), A (lane 0, with its tail), B
// (lane 1), C (lane 1, a shorter prefix), D (no keys) and E (lane 0's tail alone, no
// committed keys) in one launch; the tail list holds both lanes' tails at two offsets.
// Finally one keep call moves both lanes' tails (lane 0's overlapping) into place.
// Once per run, six long keeps (run_keep_long: four lanes, two without moves, a compaction
// from position 0 of 520 moves and a sparse keep of 300, every position's bytes distinct)
// reach what tails of a few rows do not: the cuda keep kernel's batch pipeline past its
// third batch, a destination 0, lanes with moves behind lanes without, its no-table path.
// After the drawn cases, 51 probes (kProbes, Probe): whole cases with shaped inputs (peaked
// scores, a far maximum in a late chunk, V outliers in the last warp's keys, row magnitudes
// 2^-4 .. 2^4, fp8 V rows of E4M3 ties, q4 V groups whose scale is an fp16 tie, zero scale
// groups, tiny and huge values, bf16 over many chunks on the tensor-core shapes, a row of
// 72 head slots of 256, a row of 80 of 128, q4 groups whose rotation overflows to NaN beside
// finite values, q4 V scales largest past a chunk's first 512 keys, d 128 at rotary dims 64)
// for paths and numerics the drawn data reach by chance, and grids that take every
// tensor-core kernel, the regular one and the short path, whatever the seed.
// Gates:
//   paged==window    rotated queries, every stored row, attention rows, rows after keep
//   rows==solo       each attention row alone equals it in the mixed launch
//   empty-rows       row D (no keys) gives +0 in every element, never NaN
//   tail==committed  row A over its tail equals row A over the same keys committed (kept)
//   repeats          three rope stores and three attentions give identical bytes
//   store==reference stored bytes (codes, scales; both layers) equal the reference codec's
//                    where its input is exact (V rows, unrotated dims); K's rotated dims:
//                    scale and codes between those of the RoPE bound's ends
//   rope-bound       rotated queries and stored K / V within the float64 bound
//   attention-bound  attention rows within the float64 bound of the same dequantised
//                    inputs; worst error/bound ratio recorded
//   keep==reference  rows after keep equal sequential in-order moves on logical rows
//   guards, inputs   nothing outside the written rows changed; inputs unchanged
//   non-finite       NaN / +Inf in q, K, V (bf16, fp8, q4, mxfp4): NaN stays NaN in the store and
//                    in every attention row that reads it (design.md's policy); the rest as
//                    without it
// Controls: swapped page table, planted row, overlapping moves in reverse order, one key
// dropped from a row's attention; defects at the backend boundary (faulty_backend.h).
#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include <rapidcheck.h>

#include "contracts/arena.h"
#include "contracts/contracts.h"
#include "contracts/faulty_backend.h"
#include "contracts/framework.h"
#include "contracts/refusals.h"
#include "kernels/backend/kernel_paths.h"
#include "kernels/attention/rows.h"
#include "reference/attention_ref.h"
#include "reference/bounds.h"
#include "reference/e4m3_ref.h"
#include "reference/mxfp4_ref.h"
#include "reference/q4_ref.h"

namespace kc {
namespace {

enum class Plant { none, swap_page_table, planted_row, reverse_moves, dropped_key };

struct Shape {
  const char* name;
  int q_heads, kv_heads, head_dim, rot_dims;
  double base;
};
// Six shapes of design.md: GQA groups 1, 4, 6, 8; head_dim 64, 128, 256; full and partial
// rotary; a seventh whose group (12) is larger than one attention block's heads (8), so the
// block's head split is exercised, with head_dim 32; and an eighth whose rotary dims (20)
// are not a multiple of 8, so the fp8 and q4 rope stores take the block-per-row kernel
// (kernels/attention/rope_store.cu) instead of the bulk-copy one (cases 7 and 8: q4, fp8).
// A ninth, for probes only (never drawn): 64 q + 4 + 4 kv head slots of 256 at rotary dims 20,
// more than the block-per-row store stages at a time (kRopeStageFloats / 256 = 64), so a row
// takes a second stage. A tenth (80 head slots of 128) and an eleventh, probes only too: 8 q + 2
// + 2 kv heads of 128 at rotary dims 64, the only fp8 / q4 shape at d 128 with partial rotary
// that the ring kernel stores through its per-block plan (12 slots, rotary dims a multiple of 8;
// the drawn d 128 shapes rotate all 128 dims, or 20, which takes the block-per-row store).
const Shape kShapes[] = {
    {"qwen35-24q4kv-d256-r64", 24, 4, 256, 64, 1e7}, {"qwen3-32q8kv-d128", 32, 8, 128, 128, 1e6},
    {"gqa6-6q1kv-d128", 6, 1, 128, 128, 1e6},        {"mha-4q4kv-d64", 4, 4, 64, 64, 1e6},
    {"gqa8-16q2kv-d256", 16, 2, 256, 256, 1e7},      {"gqa4-8q2kv-d64-r32", 8, 2, 64, 32, 1e6},
    {"gqa12-12q1kv-d32", 12, 1, 32, 32, 1e6},        {"gqa2-4q2kv-d128-r20", 4, 2, 128, 20, 1e6},
    {"gqa16-64q4kv-d256-r20", 64, 4, 256, 20, 1e7},  {"gqa8-64q8kv-d128", 64, 8, 128, 128, 1e6},
    {"gqa4-8q2kv-d128-r64", 8, 2, 128, 64, 1e6},
};
constexpr int kShapeCount = 8;       // the drawn shapes: the first eight
constexpr int kWideShape = 8;        // probes only
constexpr int kWideShape128 = 9;     // probes only: 80 head slots of 128
constexpr int kPartialShape128 = 10;  // probes only: d 128 with rotary dims 64 (fp8, q4: the ring kernel's plan)
static_assert(int(sizeof(kShapes) / sizeof(kShapes[0])) == kShapeCount + 3,
              "qwen-pages: eight drawn shapes, the two wide ones and the partial-rotary d 128 one");

// Probes: inputs shaped so that every run reaches what the drawn cases reach only by chance
// (found by the device mutation sweep, reports/h200/mutation-sweep/). Each probe is a whole
// case (every gate) run once per run (kProbes).
//   peaked      scores set along the lowest-frequency rotary dim: a key in 61 between 0 and
//               3, the rest near -12, over small noise: a few keys carry p with arbitrary
//               mantissas while the scores' rounding (|q||k| small) stays far below the
//               p.v's, so an error in p' (the fp16 parts of p times the V scale) shows
//   far-max     scores in [-2, 2] but one key at +100 in chunk 20 of 32 keys each: the
//               merge's maximum must see every chunk (exp(m - M) overflows past 88)
//   v-binade    V rows at key 230 and 250 of every 256 are 16x: a chunk's largest V scale
//               sits in the last warp's keys, in a higher binade than the others
//   magnitudes  each K and V row scaled by 2^u, u in [-4, 4]: a key that takes another
//               key's row scale is far off (fp8 d128, two chunks of 1024 over 8 kv heads:
//               the regular tensor-core kernel, past its first 256 keys of a chunk)
//   v-ties      fp8 V rows of E4M3 midpoints times a row scale whose 448x is the row's
//               amax: every code is a tie the encoder must break to even (x / scale, not
//               x * (1 / scale))
//   zero-groups V rows with zero scale groups (q4, mxfp4: every third group of 32; bf16,
//               fp8: every fifth row): a zero group's codes are code 0 (q4 bytes 0x88), scale 0
//   q4-ties     q4 V groups whose rotated amax is 7 m, m an fp16 midpoint whose tie goes down
//               (to the even neighbour below): fl32(amax / 7) = m exactly and the scale is
//               the lower fp16, where amax * fl32(1 / 7) rounds to m + 1 ulp and the upper
//               one (found by the third device sweep: the ring kernel's fast encode)
//   chunks      drawn data, bf16 on the tensor-core shapes over 11 to 16 chunks of 64 (15 to
//               21 of 48 at gqa8 d 256): the merge's batches of partials on every path, the
//               kept-partials ones of bf16 d 256 among them, one batch of 16 and two in
//               registers (the drawn cases reach bf16 at d 128 / 256 only by chance)
//   wide        drawn data on the probe-only shapes of 72 head slots of 256 (rotary dims 20):
//               the block-per-row rope store's second stage of a row; and of 80 head slots of
//               128 (fp8, q4): the ring kernel's consumers in two passes of a row, without
//               their per-block plan (rope path "rope-ring, passes > 1")
//   tiny        K and V rows scaled by 2^u, u in [-140, -118] (every format): fp32
//               subnormals, bf16 subnormals (the store bound's absolute 2^-134), scales that
//               underflow
//   q4-half-nan layer 0's history V rows (a layer the attention does not read), one group of
//               each row holding +-FLT_MAX in eight elements (M M -M -M M M M M, times a sign)
//               whose fp32 butterflies overflow and cancel (Inf - Inf): the group's 16 even
//               rotated values NaN, its 16 odd ones finite, none Inf. The reference poisons the
//               group (scale 0x7E00, codes 0); an amax that drops a NaN operand (the ring
//               kernel's max.NaN.f32 as max.f32, found by the fourth device sweep) gets a finite
//               scale. A NaN or Inf input cannot show that: one makes every rotated value of
//               its group NaN, or +-Inf / NaN, and either maximum is then NaN or Inf
//   late-vmax   q4 over chunks of 1024: V rows 16x at keys 600, 800 and 1000 of each 1024 and
//               the scores peaked on those keys (between 0 and 3, the rest near -12): the
//               largest V scale of each group sits past a chunk's first 512 keys, at a key
//               whose p is 1, so a p' shift taken from keys 0..511 alone (a V-scale maximum
//               reduced before the chunk's third batch of 256 keys is loaded) puts p' = p x
//               scale x 2^shift at 2^16 or more, past fp16's 65504: Inf / NaN in the output
//   partial-rotary drawn data on the probe-only shape of 8 q + 2 kv heads of 128 at rotary
//               dims 64 (fp8, q4): the ring kernel's per-block plan where dims past rot_dims
//               pass through (rope-bound on the queries, store==reference on K's unrotated dims)
enum class Probe {
  none, peaked, far_max, v_binade, magnitudes, v_ties, zero_groups, tiny, huge_v, q4_ties, chunks, wide,
  q4_half_nan, late_vmax, partial_rotary
};
const char* probe_name(Probe p) {
  switch (p) {
    case Probe::peaked: return "peaked";
    case Probe::far_max: return "far-max";
    case Probe::v_binade: return "v-binade";
    case Probe::magnitudes: return "magnitudes";
    case Probe::v_ties: return "v-ties";
    case Probe::zero_groups: return "zero-groups";
    case Probe::tiny: return "tiny";
    case Probe::huge_v: return "huge-v";
    case Probe::q4_ties: return "q4-ties";
    case Probe::chunks: return "chunks";
    case Probe::wide: return "wide";
    case Probe::q4_half_nan: return "q4-half-nan";
    case Probe::late_vmax: return "late-vmax";
    case Probe::partial_rotary: return "partial-rotary";
    default: return "none";
  }
}

struct QwenCase {
  const int shape;
  const Format fmt;
  const int ptok;
  const int chunk;
  const int len0, len1;
  const int tail;
  const int pos_base;  // RoPE position of logical position 0 (large values test angles)
  // The softmax scale: 0 is 1/sqrt(d) (what Qwen uses), 1 is 1/d (smaller logits), 2 is 1
  // (large logits, as with no softcapping and no 1/sqrt(d)): a kernel that ignores the
  // scale, or hard-codes 1/sqrt(d), fails the cases of kinds 1 and 2.
  const int scale_kind;
  // Scores far from zero: -1 puts every score of layer 1 near -200 (a chunk whose scores
  // are all far below zero: the running max must start at -inf, not 0), +1 near +200
  // (expf(s) alone overflows); 0 leaves them as drawn. Softmax is shift-invariant, so the
  // output stays an ordinary weighting of V.
  const int logits;
  const uint64_t seed;
  const Probe probe = Probe::none;
  float scale(int d) const {
    return scale_kind == 2 ? 1.0f : scale_kind == 1 ? float(1.0 / d) : float(1.0 / std::sqrt(double(d)));
  }
  std::string vars() const {
    std::ostringstream o;
    o << "qwen-pages(shape=" << kShapes[shape].name << ",fmt=" << format_name(fmt) << ",ptok=" << ptok
      << ",chunk=" << chunk << ",len=" << len0 << "+" << len1 << ",tail=" << tail << ",pos0=" << pos_base
      << ",scale=" << (scale_kind == 2 ? "1" : scale_kind == 1 ? "1/d" : "1/sqrt(d)")
      << (logits ? (logits < 0 ? ",logits=-200" : ",logits=+200") : "")
      << (probe != Probe::none ? std::string(",probe=") + probe_name(probe) : std::string()) << ",seed=" << seed << ")";
    return o.str();
  }
};

QwenCase draw_case(uint64_t seed, int index) {
  rc::Random rnd(mix_seed(seed, index));
  std::mt19937_64 g(mix_seed(seed, index + 77));
  const int ptoks[] = {16, 48, 128, 256, 512, 1, 3, 7};
  const int ptok = index < 8 ? ptoks[index] : rc::gen::element(16, 48, 128, 256, 512, 1, 3, 7, 5, 33)(rnd.split(), 50).value();
  // Case 2 (a 9,000-position row) runs chunks of 32: more chunks than the merge kernel
  // stages at a time (kMergeTile, 256), so its later tiles are proved too.
  const int drawn_chunk = rc::gen::element(64, 128, 256, 100, 1024)(rnd.split(), 50).value();
  const int chunk = index == 2 ? 32 : drawn_chunk;
  const int shape = index < kShapeCount ? index : index == kShapeCount ? kShapeCount - 1 : int(g() % kShapeCount);
  // Formats: the first 12 cases three each, spread so that the large positions (cases 2,
  // 5, 8, 11) take all four and mxfp4 gets head_dim 256 with partial rotary (case 0) and
  // 64 (case 5); later cases cycle through the four, shifted every four cases so that the
  // scale-1 cases (index % 4 == 3) cycle too.
  constexpr Format B = Format::bf16, F8 = Format::fp8, Q4 = Format::q4, MX = Format::mxfp4;
  constexpr Format kFirst[12] = {MX, F8, Q4, B, F8, MX, B, Q4, F8, B, MX, Q4};
  constexpr Format kCycle[4] = {B, F8, Q4, MX};
  const Format fmt = index < 12 ? kFirst[index] : kCycle[(index + index / 4) % 4];
  // Cached lengths aimed at the edges: 1, a chunk minus one, a chunk, a chunk plus one,
  // a page boundary, long ones up to 9,000.
  auto pick = [&](int k) {
    const int opts[] = {1, chunk - 1, chunk, chunk + 1, ptok * 3 + 1, int(1 + g() % 3000), 9000 - int(g() % 40)};
    return opts[k % 7];
  };
  int len0 = pick(int(g() % 7)), len1 = pick(int(g() % 7));
  if (index == 2) len0 = 9000;
  // A single page must not be a whole lane for every case: the page-table controls
  // need at least two pages, so lanes get at least two positions.
  len0 = std::max(len0, 2);
  len1 = std::max(len1, 2);
  const int tail = 1 + int(g() % 4);
  const int pos_base = (index % 3 == 2) ? 262144 - std::max(len0, len1) - 16 : int(g() % 1000);
  // Most cases keep 1/sqrt(d); every fourth (3, 7, 11, ...: all three formats) takes 1 and
  // cases 5, 13, 21, ... take 1/d.
  const int scale_kind = index % 4 == 3 ? 2 : index % 8 == 5 ? 1 : 0;
  // Scores near -200 in cases 1, 5, 9, ... and near +200 in cases 2, 6, 10, ... (every
  // format among the first twelve).
  const int logits = index % 4 == 1 ? -1 : index % 4 == 2 ? 1 : 0;
  return QwenCase{shape, fmt, ptok, chunk, len0, len1, tail, pos_base, scale_kind, logits, mix_seed(seed, index + 5)};
}

struct Setup {
  Cache paged, window;
};

std::vector<float> randn(size_t n, std::mt19937_64& g, float sd = 1.0f) {
  std::normal_distribution<float> nd(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(g);
  return v;
}

bool bytes_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * 4) == 0; }

// All field bytes of (lane, pos), through the cache's own views.
std::vector<uint8_t> pos_bytes(const Cache& c, int lane, int pos) {
  std::vector<uint8_t> out;
  const KvView v = c.view(lane);
  for (int f = 0; f < c.lay.field_count(); ++f) {
    const uint8_t* p = kv_field_row(v, f, pos);
    out.insert(out.end(), p, p + c.lay.field(f).bytes_per_pos);
  }
  return out;
}

// The rows a keep writes: every layer, K and V and kv head at each move's destination.
std::vector<RowRef> moved_rows(const std::vector<KeepMove>& moves, int hkv) {
  std::vector<RowRef> dst;
  for (const KeepMove& m : moves)
    for (int l = 0; l < 2; ++l)
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < hkv; ++h) dst.push_back({m.lane, l, kv, h, m.dst});
  return dst;
}

// Bytes outside `rows` that differ from p0 (paged) and w0 (window); the first one in *where.
int64_t setup_guard_violations(const Setup& su, const Cache& p0, const Cache& w0, const std::vector<RowRef>& rows,
                               std::string* where) {
  std::vector<uint8_t> mp, mw;
  mark_rows(su.paged, rows, mp);
  mark_rows(su.window, rows, mw);
  return guard_violations(su.paged, p0.mem, mp, where) + guard_violations(su.window, w0.mem, mw, where);
}

const char* arith_name(AttnArith a) { return a == AttnArith::mma_split ? "mma_split" : "fma_chain"; }

// Dequantised row (as the kernel reads it) through the reference's own decoders.
void ref_row(const Cache& c, int lane, int layer, int kv, int head, int pos, double* out) {
  const KvView v = c.view(lane);
  const uint8_t* row = kv_row(v, layer, kv, head, pos);
  const int d = c.lay.head_dim;
  if (c.lay.format == Format::bf16) {
    for (int j = 0; j < d; ++j) {
      uint16_t b;
      std::memcpy(&b, row + 2 * j, 2);
      out[j] = ref::bf16_value(b);
    }
  } else if (c.lay.format == Format::fp8) {
    float s;
    std::memcpy(&s, kv_scale(v, layer, kv, head, pos), 4);
    for (int j = 0; j < d; ++j) out[j] = double(float(ref::e4m3_value(row[j]) * double(s)));
  } else if (c.lay.format == Format::mxfp4) {  // E2M1 * 2^e (exact), saturated to +-FLT_MAX
    static const std::array<double, 16> e2m1 = [] {
      std::array<double, 16> t{};
      for (int i = 0; i < 16; ++i) t[i] = ref::e2m1_value(uint8_t(i));
      return t;
    }();
    const uint8_t* ex = kv_scale(v, layer, kv, head, pos);
    for (int g = 0; g < d / 32; ++g) {
      const double s = ref::e8m0_value(ex[g]);
      for (int j = 32 * g; j < 32 * g + 32; ++j) {
        const double x = e2m1[(row[j / 2] >> (4 * (j % 2))) & 15] * s;
        out[j] = std::fabs(x) > double(FLT_MAX) ? std::copysign(double(FLT_MAX), x) : x;
      }
    }
  } else {  // q4: original space, 2^-2 H (code * s) per group, exact
    const uint8_t* sc = kv_scale(v, layer, kv, head, pos);
    for (int g = 0; g < d / 32; ++g) {
      uint16_t h;
      std::memcpy(&h, sc + 2 * g, 2);
      const std::array<double, 32> x = ref::q4_decode_bytes(row + 16 * g, h);
      for (int i = 0; i < 32; ++i) out[32 * g + i] = x[i];
    }
  }
}

// q4 rows in rotated space as the kernel dequantises them: code * s (exact).
void ref_row_rotated(const Cache& c, int lane, int layer, int kv, int head, int pos, double* out) {
  const KvView v = c.view(lane);
  const uint8_t* row = kv_row(v, layer, kv, head, pos);
  const uint8_t* sc = kv_scale(v, layer, kv, head, pos);
  for (int j = 0; j < c.lay.head_dim; ++j) {
    uint16_t h;
    std::memcpy(&h, sc + 2 * (j / 32), 2);
    const int nib = (row[j / 2] >> (4 * (j % 2))) & 15;
    out[j] = double(nib - 8) * ref::fp16_value(h);
  }
}

double f32(double x) { return double(float(x)); }  // fp32 round to nearest even (monotone)

// The stored bytes of one row (codes and scales) against the reference. The kernel's fp32
// input to the codec is known to lie in [y_j - rad_j, y_j + rad_j] (rad 0: exactly fp32(y_j),
// as for V rows and K's unrotated dims; K's rotated dims: the RoPE bound). Where the
// interval is a point the bytes must equal the reference codec's (bf16 RNE, fp8 row, q4
// group); elsewhere every rounding is monotone, so the scale must lie between the scales
// of the interval's extreme amax values and each code between the codes of its ends.
// Returns "" when the bytes are allowed, else why not.
std::string store_bytes_error(const Cache& cc, int lane, int layer, int kv, int head, int slot, const double* y,
                              const double* rad) {
  const KvView v = cc.view(lane);
  const int d = cc.lay.head_dim;
  const uint8_t* row = kv_row(v, layer, kv, head, slot);
  const uint8_t* sc = cc.lay.scale_bytes ? kv_scale(v, layer, kv, head, slot) : nullptr;
  bool exact = true;
  for (int j = 0; j < d; ++j) exact = exact && rad[j] == 0;
  std::vector<float> x32(d);
  std::vector<double> lo(d), hi(d);
  for (int j = 0; j < d; ++j) x32[j] = float(y[j]), lo[j] = f32(y[j] - rad[j]), hi[j] = f32(y[j] + rad[j]);
  auto amax_range = [](const double* l, const double* h, int n, double* alo, double* ahi) {
    *alo = 0, *ahi = 0;
    for (int j = 0; j < n; ++j) {
      *alo = std::max(*alo, l[j] > 0 ? l[j] : h[j] < 0 ? -h[j] : 0.0);
      *ahi = std::max(*ahi, std::max(std::fabs(l[j]), std::fabs(h[j])));
    }
  };
  std::ostringstream o;
  if (cc.lay.format == Format::bf16) {
    for (int j = 0; j < d; ++j) {
      uint16_t b;
      std::memcpy(&b, row + 2 * j, 2);
      const uint16_t blo = ref::bf16_from_double(lo[j]), bhi = ref::bf16_from_double(hi[j]);
      const double got = ref::bf16_value(b);
      if (rad[j] == 0 ? b != blo : !(ref::bf16_value(blo) <= got && got <= ref::bf16_value(bhi))) {
        o << "bf16 [" << j << "] 0x" << std::hex << b << " not in [0x" << blo << ", 0x" << bhi << "]";
        return o.str();
      }
    }
    return "";
  }
  if (cc.lay.format == Format::fp8) {
    float s;
    std::memcpy(&s, sc, 4);
    if (exact) {
      const ref::Fp8RowRef r = ref::fp8_row(x32.data(), d);
      if (std::memcmp(&s, &r.scale, 4) != 0) return (o << "fp8 scale " << s << ", reference " << r.scale, o.str());
      for (int j = 0; j < d; ++j)
        if (row[j] != r.codes[j])
          return (o << "fp8 code [" << j << "] 0x" << std::hex << int(row[j]) << ", reference 0x" << int(r.codes[j]), o.str());
      return "";
    }
    double alo, ahi;
    amax_range(lo.data(), hi.data(), d, &alo, &ahi);
    const double slo = f32(alo / 448.0), shi = f32(ahi / 448.0);
    if (!(slo <= s && s <= shi)) return (o << "fp8 scale " << s << " not in [" << slo << ", " << shi << "]", o.str());
    for (int j = 0; j < d; ++j) {
      const uint8_t clo = s == 0 ? 0 : ref::e4m3_from_double(f32(lo[j] / s));
      const uint8_t chi = s == 0 ? 0 : ref::e4m3_from_double(f32(hi[j] / s));
      const double got = ref::e4m3_value(row[j]);
      if (clo == chi ? row[j] != clo : !(ref::e4m3_value(clo) <= got && got <= ref::e4m3_value(chi)))
        return (o << "fp8 code [" << j << "] 0x" << std::hex << int(row[j]) << " not in [0x" << int(clo) << ", 0x"
                  << int(chi) << "] at scale " << std::defaultfloat << s, o.str());
    }
    return "";
  }
  if (cc.lay.format == Format::mxfp4) {
    // Exact input: the reference codec's nibbles and E8M0 bytes. Otherwise per group of 32:
    // the exponent between those of the interval's extreme amax values (the rule is
    // monotone in amax) and each element's E2M1 value between those of its ends at the
    // stored exponent (round to nearest is monotone).
    if (exact) {
      const ref::Mxfp4RowRef r = ref::mxfp4_row(x32.data(), d);
      if (std::memcmp(sc, r.exponents.data(), size_t(d / 32)) != 0) return "mxfp4 exponents differ from the reference";
      if (std::memcmp(row, r.codes.data(), size_t(d / 2)) != 0) return "mxfp4 codes differ from the reference";
      return "";
    }
    auto expo = [](double amax) { return amax > 0 ? std::clamp(ref::mx_exponent_unclamped(amax), -127, 127) : -127; };
    for (int g0 = 0; g0 < d / 32; ++g0) {
      double alo, ahi;
      amax_range(&lo[32 * g0], &hi[32 * g0], 32, &alo, &ahi);
      const int e = int(sc[g0]) - 127, elo = expo(alo), ehi = expo(ahi);
      if (!(elo <= e && e <= ehi)) return (o << "mxfp4 group " << g0 << " exponent " << e << " not in [" << elo << ", " << ehi << "]", o.str());
      for (int i = 0; i < 32; ++i) {
        const int j = 32 * g0 + i;
        const uint8_t nib = uint8_t((row[j / 2] >> (4 * (j % 2))) & 15);
        const double got = ref::e2m1_value(nib);
        const double vlo = ref::e2m1_value(ref::e2m1_from_double(std::ldexp(lo[j], -e)));
        const double vhi = ref::e2m1_value(ref::e2m1_from_double(std::ldexp(hi[j], -e)));
        if (!(vlo <= got && got <= vhi))
          return (o << "mxfp4 [" << j << "] " << got << " not in [" << vlo << ", " << vhi << "] at exponent " << e, o.str());
      }
    }
    return "";
  }
  if (cc.lay.format != Format::q4) return std::string("no byte prediction for format ") + format_name(cc.lay.format);
  const std::vector<ref::Q4GroupRef> r = exact ? ref::q4_row(x32.data(), d) : std::vector<ref::Q4GroupRef>();
  for (int g0 = 0; g0 < d / 32; ++g0) {
    uint16_t hb;
    std::memcpy(&hb, sc + 2 * g0, 2);
    const uint8_t* codes = row + 16 * g0;
    if (exact) {
      if (hb != r[g0].scale_bits)
        return (o << "q4 group " << g0 << " scale 0x" << std::hex << hb << ", reference 0x" << r[g0].scale_bits, o.str());
      if (std::memcmp(codes, r[g0].codes.data(), 16) != 0) return (o << "q4 group " << g0 << " codes differ from the reference", o.str());
      continue;
    }
    // Rotated values: 2^-3 H y within 2^-3 sum rad (the input's interval) plus the fp32
    // butterflies' 2^-21 relative to the group's sum |y| (the q4 store bound's terms).
    double yr[32], rlo[32], rhi[32], sum_rad = 0, sum_y = 0;
    ref::h32_apply(&y[32 * g0], yr);
    for (int i = 0; i < 32; ++i) sum_rad += rad[32 * g0 + i], sum_y += std::fabs(y[32 * g0 + i]);
    const double slack = 0.125 * (sum_rad + std::ldexp(sum_y + sum_rad, -21));
    for (int i = 0; i < 32; ++i) rlo[i] = f32(0.125 * yr[i] - slack), rhi[i] = f32(0.125 * yr[i] + slack);
    double alo, ahi;
    amax_range(rlo, rhi, 32, &alo, &ahi);
    const double slo = ref::fp16_value(ref::fp16_from_double(std::min(f32(alo / 7.0), 65504.0)));
    const double shi = ref::fp16_value(ref::fp16_from_double(std::min(f32(ahi / 7.0), 65504.0)));
    const double s = ref::fp16_value(hb);
    if (!(slo <= s && s <= shi)) return (o << "q4 group " << g0 << " scale " << s << " not in [" << slo << ", " << shi << "]", o.str());
    for (int i = 0; i < 32; ++i) {
      const int code = ((codes[i / 2] >> (4 * (i % 2))) & 15) - 8;
      auto q = [&](double t) { return s == 0 ? 0.0 : std::nearbyint(std::min(7.0, std::max(-7.0, f32(t / s)))); };
      if (!(q(rlo[i]) <= code && code <= q(rhi[i])))
        return (o << "q4 group " << g0 << " code [" << i << "] " << code << " not in [" << q(rlo[i]) << ", " << q(rhi[i])
                  << "] at scale " << s, o.str());
    }
  }
  return "";
}

// One case of the contract, as named steps over the state they share. run_case runs them
// in order; a step that calls the backend returns false after a backend error (recorded by
// fail()), and the case stops there. The generator g is drawn from in the order of the
// steps (slots, history, round, planted row), so a seed gives the same case as it always did.
class QwenCaseRun {
 public:
  QwenCaseRun(Run& run, Backend& be, const QwenCase& c, Plant plant)
      : run(run), be(be), c(c), plant(plant), cv(c.vars()), S(kShapes[c.shape]), d(S.head_dim), hq(S.q_heads),
        hkv(S.kv_heads), lay(2, hkv, d, c.fmt), g(c.seed), outp(size_t(kRows) * hq * d), outw(size_t(kRows) * hq * d) {}

  // The case, then (cuda) the kernel variants its launches picked into numbers.coverage.kernel_path
  // ("format/dD/path": the fma chain or the tensor cores, the cluster short path and its size,
  // the merge with kept partials and with more than one chunk, the rope store's kernel, the
  // keep's), once per case that noted it.
  void run_all() {
    KernelPaths paths;
    run_steps();
    if (plant != Plant::none || run.in_control) return;
    for (const std::string& k : paths.seen())
      run.cover_value("kernel_path", std::string(format_name(c.fmt)) + "/d" + std::to_string(d) + "/" + k);
  }

 private:
  void run_steps() {
    place_tails();
    cover();
    su = Setup{make_paged_cache(lay, c.ptok, lens, 2, c.seed), make_window_cache(lay, lens, 2, c.seed)};
    paged0 = su.paged;
    window0 = su.window;
    draw_inputs();
    if (!store()) return;
    check_store_guards();
    check_stored_paged_window();
    check_rope_bound();
    check_store_bytes();
    plant_defect();
    if (!attend()) return;
    check_attention_bound();
    if (!keep_tails()) return;
    check_tail_committed();
  }

  static constexpr int kF = 0, kA = 1, kB = 2;
  static constexpr int kRows = 6;
  static constexpr char kRowName[] = "FABCDE";

  bool fail(const Status& st) {
    if (st.ok) return false;
    run.error(cv, st.message);
    return true;
  }

  // Lane 0 holds len0 committed keys, then free slots where the tail rows go, with gaps,
  // so slots are past len0 + tail (moves then run dst < src).
  void place_tails() {
    for (int j = 0, s = c.len0 + c.tail; j < c.tail; ++j) {
      s += (j == 0) ? 0 : 1 + int(g() % 2);
      tail_slots.push_back(s);
    }
    // Overlap: when the tail has >= 2 rows, make the first tail slot equal to a later
    // move's destination (a dst that an earlier move reads from).
    if (c.tail >= 3) tail_slots[0] = c.len0 + 2;
    std::sort(tail_slots.begin(), tail_slots.end());
    tail_slots.erase(std::unique(tail_slots.begin(), tail_slots.end()), tail_slots.end());
    tail = int(tail_slots.size());
    // Lane 1 gets a draft tail too, of another length (tail1 != tail), after its new
    // committed row (position len1): slots from len1 + 1 + tail1 on, with gaps. Launches then
    // mix lanes: attention rows whose tails come from both lanes, with lists of different
    // lengths at different offsets, and one keep call that moves rows of both lanes.
    tail1 = tail >= 2 ? tail - 1 : 2;
    for (int j = 0, s = c.len1 + 1 + tail1; j < tail1; ++j) {
      s += (j == 0) ? 0 : 1 + int(g() % 2);
      tail1_slots.push_back(s);
    }
    // Lane 0 is long enough for lane 1's slots as well: a kernel that reads the first row's
    // tail list (lane 1's) for lane 0's rows, or runs every move in the first move's lane
    // (lane 0), then reads and writes wrong rows inside the lane, not outside it.
    lens = {std::max(tail_slots.back(), tail1_slots.back()) + 2, std::max(c.len1, tail1_slots.back()) + 2};
  }

  // Coverage in the receipt (numbers.coverage): cases per format, shape, page size, chunk,
  // scale, score regime and lane mix, so a reviewer sees what ran. `dims` (drawn cases and
  // probes alike): format, head_dim and rotary dims, what the cuda rope store and partials pick
  // their kernel by.
  void cover() {
    if (plant != Plant::none || run.in_control) return;
    run.cover_value("dims", std::string(format_name(c.fmt)) + "/d" + std::to_string(d) + "/r" + std::to_string(S.rot_dims));
    if (c.probe != Probe::none) {  // once per run, apart from the drawn cases' counts
      run.cover_value("probe", std::string(probe_name(c.probe)) + "/" + format_name(c.fmt) + "/d" + std::to_string(d));
      return;
    }
    run.cover_case({{"format", format_name(c.fmt)},
                    {"shape", S.name},
                    {"page_tokens", std::to_string(c.ptok)},
                    {"chunk", std::to_string(c.chunk)},
                    {"scale", c.scale_kind == 2 ? "1" : c.scale_kind == 1 ? "1/d" : "1/sqrt(d)"},
                    {"scores", c.logits < 0 ? "near -200" : c.logits > 0 ? "near +200" : "as drawn"},
                    {"lane_mix", "attention tails lane0 " + std::to_string(tail) + " at " + std::to_string(tail1) +
                                     " + lane1 " + std::to_string(tail1) + " at 0; keep lanes 0+1 in one call"}});
  }

  // History: both layers, both lanes, k and v only. Round: lane 0's tail rows, lane 1's new
  // committed row, then lane 1's tail rows, with queries.
  void draw_inputs() {
    for (int p = 0; p < c.len0; ++p) hist.push_back({0, c.pos_base + p, p});
    for (int p = 0; p < c.len1; ++p) hist.push_back({1, c.pos_base + p, p});
    std::shuffle(hist.begin(), hist.end(), g);
    nh = int(hist.size());
    hk0 = randn(size_t(nh) * hkv * d, g);
    hv0 = randn(size_t(nh) * hkv * d, g);
    hk1 = randn(size_t(nh) * hkv * d, g);
    hv1 = randn(size_t(nh) * hkv * d, g, 2.0f);
    for (int j = 0; j < tail; ++j) round.push_back({0, c.pos_base + c.len0 + j, tail_slots[j]});
    round.push_back({1, c.pos_base + c.len1, c.len1});
    for (int j = 0; j < tail1; ++j) round.push_back({1, c.pos_base + c.len1 + 1 + j, tail1_slots[j]});
    nr = int(round.size());
    rq = randn(size_t(nr) * hq * d, g);
    rk = randn(size_t(nr) * hkv * d, g);
    rv = randn(size_t(nr) * hkv * d, g, 2.0f);
    if (c.logits != 0) {
      // Layer 1's keys and the queries get A e along the lowest-frequency rotary dim (its
      // angle moves < 0.03 rad over any two positions here), the queries with the sign of
      // c.logits: every score is then about c.logits * A^2 * scale = +-200, give or take the
      // drawn parts' A |q_e - k_e| scale.
      const int e = S.rot_dims / 2 - 1;
      const float A = float(std::sqrt(200.0 / c.scale(d)));
      for (size_t i = 0; i < hk1.size(); i += d) hk1[i + e] += A;
      for (size_t i = 0; i < rk.size(); i += d) rk[i + e] += A;
      for (size_t i = 0; i < rq.size(); i += d) rq[i + e] += float(c.logits) * A;
    }
    shape_probe();
  }

  // The probe's inputs (QwenCase::probe): layer 1's keys and values (the layer attention
  // reads) and the queries, by each row's logical position.
  void shape_probe() {
    if (c.probe == Probe::none) return;
    std::vector<int> hpos(nh), rpos(nr);
    for (int i = 0; i < nh; ++i) hpos[i] = hist[i].pos - c.pos_base;
    for (int i = 0; i < nr; ++i) rpos[i] = round[i].pos - c.pos_base;
    std::uniform_real_distribution<double> U(0.0, 1.0);
    // late-vmax: the keys at 600, 800 and 1000 of each 1024 (past a chunk's first 512 keys).
    auto late = [](int pos) { return pos % 1024 == 600 || pos % 1024 == 800 || pos % 1024 == 1000; };
    if (c.probe == Probe::peaked || c.probe == Probe::far_max || c.probe == Probe::late_vmax) {
      // q = A e + noise, k = a e + noise with A a scale = the key's target score (the pair of
      // e turns < 0.04 rad between any two positions here), noise 0.05 per element.
      const int e = S.rot_dims / 2 - 1;
      const double A = 1.0 / std::sqrt(double(c.scale(d)));
      auto target = [&](int pos) {
        if (c.probe == Probe::far_max) return pos % 1024 == 20 * 32 + 5 ? 100.0 : -2.0 + 4.0 * U(g);
        if (c.probe == Probe::late_vmax) return late(pos) ? 3.0 * U(g) : -14.0 + 4.0 * U(g);
        return pos % 61 == 7 ? 3.0 * U(g) : -14.0 + 4.0 * U(g);
      };
      auto keys = [&](std::vector<float>& k, const std::vector<int>& pos) {
        for (size_t r = 0; r < pos.size(); ++r)
          for (int h = 0; h < hkv; ++h) {
            float* row = &k[(r * hkv + h) * d];
            for (int j = 0; j < d; ++j) row[j] *= 0.05f;
            row[e] += float(target(pos[r]) / (A * c.scale(d)));
          }
      };
      keys(hk1, hpos);
      keys(rk, rpos);
      for (size_t i = 0; i < rq.size(); i += d) {
        for (int j = 0; j < d; ++j) rq[i + j] *= 0.05f;
        rq[i + e] += float(A);
      }
    }
    if (c.probe == Probe::v_binade) {
      auto scale_rows = [&](std::vector<float>& v, const std::vector<int>& pos) {
        for (size_t r = 0; r < pos.size(); ++r)
          if (pos[r] % 256 == 230 || pos[r] % 256 == 250)
            for (int j = 0; j < hkv * d; ++j) v[r * hkv * d + j] *= 16.0f;
      };
      scale_rows(hv1, hpos);
      scale_rows(rv, rpos);
    }
    if (c.probe == Probe::late_vmax) {
      auto scale_rows = [&](std::vector<float>& v, const std::vector<int>& pos) {
        for (size_t r = 0; r < pos.size(); ++r)
          if (late(pos[r]))
            for (int j = 0; j < hkv * d; ++j) v[r * hkv * d + j] *= 16.0f;
      };
      scale_rows(hv1, hpos);
      scale_rows(rv, rpos);
    }
    if (c.probe == Probe::q4_half_nan) {
      // Eight elements 8 b .. 8 b + 7 of one group: M M -M -M M M M M (times sg), M = FLT_MAX.
      // Butterflies h = 1: Inf 0 -Inf 0 Inf 0 Inf 0; h = 2: NaN 0 Inf 0 Inf 0 NaN 0; h = 4:
      // NaN 0 NaN 0 NaN 0 NaN 0; h = 8 and 16 then make every even output NaN and leave the
      // odd ones the finite sums of the other 24 drawn elements (exact zeros from these eight).
      const float M = std::numeric_limits<float>::max();
      const float pat[8] = {M, M, -M, -M, M, M, M, M};
      for (size_t i = 0, row = 0; i < hv0.size(); i += d, ++row) {
        const int g0 = int(row % size_t(d / 32)), b = int((row / 2) % 4);
        const float sg = g() & 1 ? -1.0f : 1.0f;
        for (int k = 0; k < 8; ++k) hv0[i + 32 * g0 + 8 * b + k] = sg * pat[k];
      }
    }
    if (c.probe == Probe::magnitudes) {
      auto scale_rows = [&](std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); i += d) {
          const float f = std::ldexp(1.0f, int(g() % 9) - 4);
          for (int j = 0; j < d; ++j) v[i + j] *= f;
        }
      };
      scale_rows(hk1), scale_rows(hv1), scale_rows(rk), scale_rows(rv);
    }
    if (c.probe == Probe::v_ties) {
      // s = 2^t (1 + m / 4096); elements +-2^x (1 + (2f + 1) / 16) s, x in [-6, 7] (E4M3
      // normals' midpoints, exact in fp32), one element +-448 s (the amax, so scale = s).
      auto ties = [&](std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); i += d) {
          const float sc = std::ldexp(1.0f + float(g() % 4096) / 4096.0f, int(g() % 7) - 3);
          for (int j = 0; j < d; ++j) {
            const float mid = std::ldexp(1.0f + float(2 * int(g() % 8) + 1) / 16.0f, int(g() % 14) - 6);
            v[i + j] = (g() & 1 ? -mid : mid) * sc;
          }
          v[i + g() % d] = (g() & 1 ? -448.0f : 448.0f) * sc;
        }
      };
      ties(hv1), ties(rv), ties(hv0);
    }
    if (c.probe == Probe::q4_ties) {
      // Rotated group y = n_i 2^(e - 11): n_i drawn in (-7 M, 7 M), one n = +-7 M, M = 2049 +
      // 2 j with j even, 2809 <= M < 4096. amax / 7 = m = M 2^(e - 11) exactly: the fp16
      // midpoint of 1024 + j and 1025 + j (times 2^(e - 10)), whose tie goes down to the even
      // 1024 + j. 7 fl32(1 / 7) = 1 + 4.47e-8, so amax * fl32(1 / 7) = m + 1.83e-4 M ulp before
      // rounding, at least 0.514 ulp here: m + 1 ulp, whose fp16 is the upper neighbour. The
      // input x = 2^-2 H y: sums of 32 integers below 2^15 times 2^(e - 13), exact in fp32,
      // and the fp32 fwd rotation returns y exactly.
      auto ties = [&](std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); i += 32) {
          const int M = 2049 + 4 * (190 + int(g() % 322)), e = int(g() % 7) - 3;
          double y[32], hy[32];
          for (int k = 0; k < 32; ++k) y[k] = std::ldexp(double(int64_t(g() % uint64_t(14 * M - 1)) - (7 * M - 1)), e - 11);
          y[g() % 32] = std::ldexp(double(g() & 1 ? -7 * M : 7 * M), e - 11);
          ref::h32_apply(y, hy);
          for (int k = 0; k < 32; ++k) v[i + k] = float(0.25 * hy[k]);
        }
      };
      ties(hv1), ties(rv), ties(hv0);
    }
    if (c.probe == Probe::tiny) {
      // Each K and V row scaled by 2^u, u in [-140, -118]: fp32 subnormals and the smallest
      // normals, where bf16 is subnormal and the formats' scales underflow.
      auto scale_rows = [&](std::vector<float>& v) {
        for (size_t i = 0; i < v.size(); i += d) {
          const int u = int(g() % 23) - 140;
          for (int j = 0; j < d; ++j) v[i + j] = float(std::ldexp(double(v[i + j]), u));
        }
      };
      scale_rows(hk1), scale_rows(hv1), scale_rows(rk), scale_rows(rv);
    }
    if (c.probe == Probe::huge_v) {
      // Key 13 of each lane has +-FLT_MAX as one element of each V group: a group's amax near
      // 2^128, where mxfp4's shared exponent is at its top (126) and a code of magnitude 4 or 6
      // times it overflows fp32, so the attention's read must saturate (mx_attn_value) as the
      // row decode does. One such key per lane: the unnormalized sum of p v (p <= 1) over two
      // such keys could itself overflow, which no fp32 attention avoids; with one, every
      // output is that value times a weight below 1 plus the drawn keys' terms: finite.
      auto huge = [&](std::vector<float>& v, const std::vector<int>& pos) {
        for (size_t r = 0; r < pos.size(); ++r)
          if (pos[r] == 13)
            for (int h = 0; h < hkv; ++h)
              for (int g0 = 0; g0 < d / 32; ++g0)
                v[(r * hkv + h) * d + 32 * g0 + (g() % 32)] = (g() & 1 ? -1.0f : 1.0f) * std::numeric_limits<float>::max();
      };
      huge(hv1, hpos);
      huge(rv, rpos);
    }
    if (c.probe == Probe::zero_groups) {
      const bool grouped = c.fmt == Format::q4 || c.fmt == Format::mxfp4;
      auto zero = [&](std::vector<float>& v) {
        for (size_t i = 0, row = 0; i < v.size(); i += d, ++row)
          for (int g0 = 0; g0 < d / 32; ++g0)
            if (grouped ? (row + g0) % 3 == 0 : row % 5 == 0) std::fill_n(&v[i + 32 * g0], 32, 0.0f);
      };
      zero(hv1), zero(rv), zero(hv0);
    }
  }

  // Both layers' history, then the round (a new row stores every layer: layer 0 from other
  // inputs, layer 1 with the queries).
  bool store_all(Cache& cc, float* qout) {
    const RopeParams rp{hq, S.rot_dims, S.base, 0};
    RopeParams p0 = rp;
    p0.layer = 0;
    if (fail(be.rope_store(cc, p0, hist.data(), nh, nullptr, hk0.data(), hv0.data(), nullptr))) return false;
    RopeParams p1 = rp;
    p1.layer = 1;
    if (fail(be.rope_store(cc, p1, hist.data(), nh, nullptr, hk1.data(), hv1.data(), nullptr))) return false;
    if (fail(be.rope_store(cc, p0, round.data(), nr, nullptr, rv.data(), rk.data(), nullptr))) return false;
    return !fail(be.rope_store(cc, p1, round.data(), nr, rq.data(), rk.data(), rv.data(), qout));
  }

  // Rope store, paged and window: inputs unchanged, the rotated queries equal, repeats
  // identical.
  bool store() {
    const uint64_t in_hash = fnv1a(rq.data(), rq.size() * 4) ^ fnv1a(hk1.data(), hk1.size() * 4);
    qrot_p.assign(size_t(nr) * hq * d, 0.0f);
    qrot_w.assign(size_t(nr) * hq * d, 0.0f);
    if (!store_all(su.paged, qrot_p.data()) || !store_all(su.window, qrot_w.data())) return false;
    run.check("inputs", (fnv1a(rq.data(), rq.size() * 4) ^ fnv1a(hk1.data(), hk1.size() * 4)) == in_hash, cv,
              "rope store changed its inputs");
    run.check("paged==window", bytes_equal(qrot_p.data(), qrot_w.data(), qrot_p.size()), cv, "rotated queries differ");
    Cache again = paged0;
    std::vector<float> q2(qrot_p.size());
    bool same = store_all(again, q2.data()) && again.mem == su.paged.mem && bytes_equal(q2.data(), qrot_p.data(), q2.size());
    Cache again2 = paged0;
    same = same && store_all(again2, q2.data()) && again2.mem == su.paged.mem;
    run.check("repeats", same, cv, "a repeated rope store gave different bytes");
    return true;
  }

  // Guards: only the stored rows (both layers) changed.
  void check_store_guards() {
    std::vector<RowRef> written;
    for (int layer = 0; layer < 2; ++layer)
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < hkv; ++h) {
          for (const RopeRow& r : hist) written.push_back({r.lane, layer, kv, h, r.slot});
          for (const RopeRow& r : round) written.push_back({r.lane, layer, kv, h, r.slot});
        }
    std::string where;
    const int64_t bad = setup_guard_violations(su, paged0, window0, written, &where);
    run.check("guards", bad == 0, cv, std::to_string(bad) + " bytes; " + where);
  }

  // Stored rows paged == window.
  void check_stored_paged_window() {
    int64_t bad = 0;
    std::string first;
    for (int lane = 0; lane < 2; ++lane)
      for (int pos = 0; pos < lens[lane]; ++pos) {
        const bool used = lane == 0 ? (pos < c.len0 || std::count(tail_slots.begin(), tail_slots.end(), pos))
                                    : (pos <= c.len1 || std::count(tail1_slots.begin(), tail1_slots.end(), pos));
        if (used && pos_bytes(su.paged, lane, pos) != pos_bytes(su.window, lane, pos) && bad++ == 0)
          first = "lane " + std::to_string(lane) + " pos " + std::to_string(pos);
      }
    run.check("paged==window", bad == 0, cv, std::to_string(bad) + " stored positions differ, first " + first);
  }

  // q4 store bound (derived): the kernel rotates its fp32 row y32 (|y32 - y| <= rb per
  // element) by 2^-3 H in fp32 (gamma_5, below 2^-21 relative to the group's sum |y|),
  // quantises each rotated value to within max(s/2, |yrot| - 7 s) (a clipped value), and
  // the decoded row is 2^-2 H of the codes, exact. So |got_j - y_j| <= 2^-2 * 32 * (max_i
  // e_i), e_i the rotated-space error bound. x: the input row, y: its rotation (K) or x (V).
  void q4_store_bound(int lane, int kv, int h, int slot, int pos, const std::vector<double>& x,
                      const std::vector<double>& y, std::vector<double>& q4b) const {
    const KvView wv = su.window.view(lane);
    const uint8_t* sc = kv_scale(wv, 1, kv, h, slot);
    for (int g0 = 0; g0 < d; g0 += 32) {
      uint16_t hb;
      std::memcpy(&hb, sc + 2 * (g0 / 32), 2);
      const double sg = ref::fp16_value(hb);
      double yr[32], sum_rb = 0, sum_y = 0, ymax = 0;
      ref::h32_apply(&y[g0], yr);
      for (int i = 0; i < 32; ++i) {
        const double rbi = kv == 0 ? ref::rope_bound(x.data(), d, S.rot_dims, S.base, pos, g0 + i) : 0.0;
        sum_rb += rbi;
        sum_y += std::fabs(y[g0 + i]);
        ymax = std::max(ymax, std::fabs(yr[i]) * 0.125);
      }
      const double slack = 0.125 * (sum_rb + std::ldexp(sum_y + sum_rb, -21));
      const double e = std::max(sg / 2, ymax + slack - 7 * sg) + slack;
      for (int i = 0; i < 32; ++i) q4b[g0 + i] = 8 * e * (1 + 1e-12);
    }
  }

  // One stored row (layer 1, K rotated and V plain, every head) against the rope bound plus
  // the format's store bound; the worst ratio and where it is.
  void rope_row_worst(int lane, int slot, int pos, const float* kin, const float* vin, double* worst, std::string* at) const {
    std::vector<double> x(d), y(d), got(d), q4b(d);
    for (int h = 0; h < hkv; ++h)
      for (int kv = 0; kv < 2; ++kv) {
        const float* src = (kv == 0 ? kin : vin) + size_t(h) * d;
        for (int j = 0; j < d; ++j) x[j] = src[j];
        if (kv == 0) ref::rope(x.data(), y.data(), d, S.rot_dims, S.base, pos);
        else y = x;
        ref_row(su.window, lane, 1, kv, h, slot, got.data());
        if (c.fmt == Format::q4) q4_store_bound(lane, kv, h, slot, pos, x, y, q4b);
        double amax = 0;
        for (int j = 0; j < d; ++j) amax = std::max(amax, std::fabs(y[j]));
        for (int j = 0; j < d; ++j) {
          const double rb = kv == 0 ? ref::rope_bound(x.data(), d, S.rot_dims, S.base, pos, j) : 0.0;
          double qb;
          // bf16: half an ulp relative (2^-8 (|y| + rb)), and below 2^-126, where bf16 is
          // subnormal (spacing 2^-133), half the spacing, 2^-134 (the probe tiny).
          if (c.fmt == Format::bf16) qb = std::ldexp(std::fabs(y[j]) + rb, -8) + std::ldexp(1.0, -134);
          else if (c.fmt == Format::q4) qb = q4b[j];
          else if (c.fmt == Format::mxfp4) {
            // mxfp4 store bound (derived): the kernel encodes its fp32 row y32 (|y32 - y| <=
            // rb) in the group's stored exponent e (from amax(y32): no value clips), and
            // decoding is exact, so |got - y32| <= h(|y32| / 2^e) 2^e (mxfp4_ref.h: half the
            // E2M1 gap) and h is nondecreasing: qb = h((|y| + rb) / 2^e) 2^e.
            const uint8_t eb = kv_scale(su.window.view(lane), 1, kv, h, slot)[j / 32];
            qb = ref::mxfp4_element_bound(std::fabs(y[j]) + rb, int(eb) - 127);
          }
          else {
            // The reference's scale, not the stored one: the bound's saturation term
            // max(0, |y| - 448 s) then allows only what the reference's own scale saturates
            // (a stored scale of 0 or one too small is not "inside the bound").
            const double s = f32(amax / 448.0);
            qb = ref::fp8_element_bound(y[j], s, got[j]) + std::ldexp(amax, -24) * 4;
          }
          const double ratio = std::fabs(got[j] - y[j]) / (rb + qb + 1e-300);
          if (worse_ratio(ratio, *worst)) {
            *worst = ratio;
            *at = "stored lane " + std::to_string(lane) + " slot " + std::to_string(slot) + (kv ? " V" : " K") +
                  " head " + std::to_string(h) + " [" + std::to_string(j) + "]";
          }
        }
      }
  }

  // Within the rope bound (K rotated, V plain): the round rows, a sample of history rows,
  // and the rotated queries (fp32 out) against the float64 rotation.
  void check_rope_bound() {
    double worst = 0;
    std::string at;
    for (int i = 0; i < nr; ++i)
      rope_row_worst(round[i].lane, round[i].slot, round[i].pos, &rk[size_t(i) * hkv * d], &rv[size_t(i) * hkv * d], &worst, &at);
    for (int i = 0; i < nh; i += std::max(1, nh / 64))
      rope_row_worst(hist[i].lane, hist[i].slot, hist[i].pos, &hk1[size_t(i) * hkv * d], &hv1[size_t(i) * hkv * d], &worst, &at);
    std::vector<double> x(d), y(d);
    for (int i = 0; i < nr; ++i)
      for (int h = 0; h < hq; ++h) {
        const float* src = &rq[(size_t(i) * hq + h) * d];
        for (int j = 0; j < d; ++j) x[j] = src[j];
        ref::rope(x.data(), y.data(), d, S.rot_dims, S.base, round[i].pos);
        for (int j = 0; j < d; ++j) {
          const double b = ref::rope_bound(x.data(), d, S.rot_dims, S.base, round[i].pos, j) + 1e-300;
          const double ratio = std::fabs(qrot_p[(size_t(i) * hq + h) * d + j] - y[j]) / b;
          if (worse_ratio(ratio, worst)) {
            worst = ratio;
            at = "q row " + std::to_string(i) + " head " + std::to_string(h) + " [" + std::to_string(j) + "] pos " +
                 std::to_string(round[i].pos);
          }
        }
      }
    run.check_ratio("rope-bound", worst, cv, at);
  }

  // Stored bytes against the reference: both layers, K and V, the round's rows and a
  // sample of history rows (paged==window has compared every stored position).
  void check_store_bytes() {
    std::string why;
    int64_t bad = 0, rows_checked = 0;
    std::vector<double> x(d), y(d), rad(d), zero(d, 0.0);
    auto check_bytes = [&](int layer, int lane, int slot, int pos, const float* kin, const float* vin) {
      for (int h = 0; h < hkv; ++h)
        for (int kv = 0; kv < 2; ++kv) {
          const float* src = (kv == 0 ? kin : vin) + size_t(h) * d;
          for (int j = 0; j < d; ++j) x[j] = src[j];
          if (kv == 0) {
            ref::rope(x.data(), y.data(), d, S.rot_dims, S.base, pos);
            for (int j = 0; j < d; ++j) {
              rad[j] = j < S.rot_dims ? ref::rope_bound(x.data(), d, S.rot_dims, S.base, pos, j) : 0.0;
              if (j >= S.rot_dims) y[j] = x[j];  // passed through: exact
            }
          }
          const std::string e = store_bytes_error(su.window, lane, layer, kv, h, slot, kv == 0 ? y.data() : x.data(),
                                                  kv == 0 ? rad.data() : zero.data());
          ++rows_checked;
          if (!e.empty() && bad++ == 0)
            why = "layer " + std::to_string(layer) + " lane " + std::to_string(lane) + " slot " + std::to_string(slot) +
                  (kv ? " V" : " K") + " head " + std::to_string(h) + ": " + e;
        }
    };
    for (int i = 0; i < nr; ++i) {
      check_bytes(0, round[i].lane, round[i].slot, round[i].pos, &rv[size_t(i) * hkv * d], &rk[size_t(i) * hkv * d]);
      check_bytes(1, round[i].lane, round[i].slot, round[i].pos, &rk[size_t(i) * hkv * d], &rv[size_t(i) * hkv * d]);
    }
    for (int i = 0; i < nh; i += std::max(1, nh / 48)) {
      check_bytes(0, hist[i].lane, hist[i].slot, hist[i].pos, &hk0[size_t(i) * hkv * d], &hv0[size_t(i) * hkv * d]);
      check_bytes(1, hist[i].lane, hist[i].slot, hist[i].pos, &hk1[size_t(i) * hkv * d], &hv1[size_t(i) * hkv * d]);
    }
    run.check("store==reference", bad == 0, cv, std::to_string(bad) + " of " + std::to_string(rows_checked) + " rows; first " + why);
  }

  // The controls' defects in the paged cache: one stored K row altered, or each lane's
  // first two page-table entries swapped.
  void plant_defect() {
    if (plant == Plant::planted_row) {
      uint8_t* row = kv_row(su.paged.view(1), 1, 0, 0, int(g() % c.len1));
      row[g() % lay.code_bytes] ^= 0x10;
    }
    if (plant == Plant::swap_page_table) {
      for (int lane = 0; lane < 2; ++lane)
        if (su.paged.views[lane].n_pages >= 2)
          std::swap(su.paged.pts[su.paged.views[lane].pt_off], su.paged.pts[su.paged.views[lane].pt_off + 1]);
    }
  }

  // Attention: rows F (lane 1 + its tail, first in the launch), A (lane 0 + its tail), B
  // (lane 1, its new row committed), C (lane 1 prefix), D (no keys at all: its output is
  // defined as +0, never NaN) and E (no committed keys, only lane 0's tail through the
  // index list). The tail list holds lane 1's tail (offset 0, tail1 slots), then lane 0's
  // (offset tail1, tail slots). Checked: empty rows +0, cache unchanged, guards, paged ==
  // window, repeats, each row alone == the row in the mixed launch.
  bool attend() {
    const int drop = plant == Plant::dropped_key ? 1 : 0;
    const int lenC = std::max(0, c.len1 / 2);
    tails.assign(tail1_slots.begin(), tail1_slots.end());
    tails.insert(tails.end(), tail_slots.begin(), tail_slots.end());
    rows = {{1, c.len1 + 1, 0, tail1}, {0, c.len0, tail1, tail}, {1, c.len1 + 1 - drop, 0, 0},
            {1, lenC, 0, 0},           {1, 0, 0, 0},             {0, 0, tail1, tail}};
    // The round's rotated query each row uses.
    const int qsrc[kRows] = {tail + tail1, tail - 1, tail, tail, tail, tail - 1};
    q.assign(size_t(kRows) * hq * d, 0.0f);
    for (int r = 0; r < kRows; ++r) std::copy_n(&qrot_p[size_t(qsrc[r]) * hq * d], size_t(hq) * d, &q[size_t(r) * hq * d]);
    ap = AttnParams{hq, 1, c.chunk, c.scale(d)};
    const size_t no = size_t(kRows) * hq * d;
    const uint64_t cache_hash = fnv1a(su.paged.mem.data(), su.paged.mem.size());
    if (fail(be.attention(su.paged, ap, rows.data(), kRows, tails, q.data(), outp.data()))) return false;
    if (fail(be.attention(su.window, ap, rows.data(), kRows, tails, q.data(), outw.data()))) return false;
    {  // every row without keys (the bound below skips them)
      const size_t m = size_t(hq) * d;
      const std::vector<float> zeros(m, 0.0f);
      bool zero = true;
      std::string which;
      for (int r = 0; r < kRows; ++r)
        if (rows[r].len + rows[r].tail_len == 0 &&
            !(bytes_equal(outp.data() + r * m, zeros.data(), m) && bytes_equal(outw.data() + r * m, zeros.data(), m))) {
          zero = false;
          which = std::string("row ") + kRowName[r] + " (no keys) is not +0 in every element (first " +
                  std::to_string(outp.data()[r * m]) + ")";
        }
      run.check("empty-rows", zero, cv, which);
    }
    run.check("inputs", fnv1a(su.paged.mem.data(), su.paged.mem.size()) == cache_hash, cv, "attention changed the cache");
    run.check("guards", outp.guards_intact() && outw.guards_intact(), cv, "attention wrote past its output");
    run.check("paged==window", bytes_equal(outp.data(), outw.data(), no), cv, "attention rows differ");
    Guarded<float> again(no);
    bool same = true, fenced = true;
    for (int rep = 0; rep < 2 && same; ++rep) {
      if (fail(be.attention(su.paged, ap, rows.data(), kRows, tails, q.data(), again.data()))) return false;
      same = bytes_equal(again.data(), outp.data(), no);
      fenced = fenced && again.guards_intact();
    }
    run.check("repeats", same, cv, "a repeated attention gave different bytes");
    bool solo = true;
    std::string which;
    for (int r = 0; r < kRows && solo; ++r) {
      Guarded<float> one(size_t(hq) * d);
      if (fail(be.attention(su.paged, ap, &rows[r], 1, tails, &q[size_t(r) * hq * d], one.data()))) return false;
      solo = bytes_equal(one.data(), outp.data() + size_t(r) * hq * d, size_t(hq) * d);
      fenced = fenced && one.guards_intact();
      if (!solo) which = std::string("row ") + kRowName[r];
    }
    run.check("rows==solo", solo, cv, which);
    run.check("guards", fenced, cv, "a repeated or solo attention wrote past its output");
    return true;
  }

  // The dequantised keys and values of one attention row and KV head (q4: rotated space),
  // with fp8's V row scales.
  void load_keys(const AttnRow& row, int kvh, Eigen::MatrixXd* K, Eigen::MatrixXd* V, std::vector<double>* vscale) const {
    const int n = row.len + row.tail_len;
    std::vector<double> tmp(d);
    for (int i = 0; i < n; ++i) {
      const int slot = i < row.len ? i : tails[row.tail_off + i - row.len];
      if (c.fmt == Format::fp8) {
        float vs;
        std::memcpy(&vs, kv_scale(su.window.view(row.lane), 1, 1, kvh, slot), 4);
        (*vscale)[i] = vs;
      }
      if (c.fmt == Format::q4)  // each group's fp16 scale, [key][group]
        for (int g = 0; g < d / 32; ++g) {
          uint16_t h;
          std::memcpy(&h, kv_scale(su.window.view(row.lane), 1, 1, kvh, slot) + 2 * g, 2);
          (*vscale)[size_t(i) * (d / 32) + g] = ref::fp16_value(h);
        }
      // q4: the reference runs in rotated space on the exact dequantised codes.
      auto rr = c.fmt == Format::q4 ? ref_row_rotated : ref_row;
      rr(su.window, row.lane, 1, 0, kvh, slot, tmp.data());
      for (int j = 0; j < d; ++j) (*K)(i, j) = tmp[j];
      rr(su.window, row.lane, 1, 1, kvh, slot, tmp.data());
      for (int j = 0; j < d; ++j) (*V)(i, j) = tmp[j];
    }
  }

  // q4: rotated space. q_rot = 2^-2 H q exactly (so q_rot . z = q . k for the decoded
  // k = 2^-2 H z); the kernel's fp32 q_rot (emulated bit for bit by the reference) differs
  // by dq, a score error scale * sum_e |dq_e| |z_ie| per key (*extra).
  void q4_rotate_query(const float* q32_row, const Eigen::MatrixXd& K, Eigen::VectorXd* qv,
                       std::vector<double>* extra) const {
    const int n = int(K.rows());
    std::vector<float> q32(q32_row, q32_row + d), qr32(d);
    for (int g0 = 0; g0 < d; g0 += 32) {
      double t[32];
      ref::h32_apply(&(*qv)[g0], t);
      ref::h32_fp32(&q32[g0], 0.25, &qr32[g0]);
      for (int i = 0; i < 32; ++i) (*qv)[g0 + i] = 0.25 * t[i];
    }
    extra->assign(n, 0.0);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < d; ++j) (*extra)[i] += std::fabs(double(qr32[j]) - (*qv)[j]) * std::fabs(K(i, j));
    for (double& e : *extra) e *= ap.scale;
  }

  // Tensor cores: the score errors the order's depths leave out (*extra, per key, added to
  // any there: q4's rotation) and the output error from the fp16 parts of p' (*out_extra,
  // per element). fp16 inputs (fp8, q4): q's parts leave at most 2^-39 max|q| per element
  // (q4: of the kernel's fp32 rotated q, within 2^-20 of the exact one's max); fp8: p' = p
  // * V scale's parts 2^-39 max_k V scale_k (p <= 1) per key, an output error of 2^-39
  // max_k vs_k sum_i |V_ij| / vs_i (the merge's weights are <= 1 and L >= 1), and an extra
  // u |s| for fp8's row-scale product on the score; q4: the same per element group G, with
  // the keys' scales of G (vscale [key][group]); bf16: flushes of bf16 parts below 2^-126
  // (3 parts of q, K's elements).
  void mma_extras(const Eigen::VectorXd& qv, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                  const std::vector<double>& vscale, std::vector<double>* extra, std::vector<double>* out_extra) const {
    const int n = int(K.rows());
    const double tiny = std::ldexp(1.0, -126), t39 = std::ldexp(1.0, -39);
    double qabs = 0, qmax = 0;
    for (int j = 0; j < d; ++j) qabs += std::fabs(qv[j]), qmax = std::max(qmax, std::fabs(qv[j]));
    if (c.fmt == Format::q4) qmax *= 1 + std::ldexp(1.0, -20);
    extra->resize(n, 0.0);
    for (int i = 0; i < n; ++i) {
      double kabs = 0, s = 0;
      for (int j = 0; j < d; ++j) kabs += std::fabs(K(i, j)), s += qv[j] * K(i, j);
      (*extra)[i] += c.fmt == Format::fp8  ? ap.scale * t39 * qmax * kabs + bound::kU32 * std::fabs(s * ap.scale)
                     : c.fmt == Format::q4 ? ap.scale * t39 * qmax * kabs
                                           : ap.scale * tiny * (3 * kabs + qabs);
    }
    if (c.fmt == Format::fp8 || c.fmt == Format::q4) {
      const int ng = c.fmt == Format::q4 ? d / 32 : 1, gw = d / ng;  // scale groups and their width
      for (int g = 0; g < ng; ++g) {
        double vs_max = 0;
        for (int i = 0; i < n; ++i) vs_max = std::max(vs_max, std::fabs(vscale[size_t(i) * ng + g]));
        for (int i = 0; i < n; ++i) {
          const double vs = std::fabs(vscale[size_t(i) * ng + g]);
          if (vs > 0)  // a zero scale holds zero codes' values only
            for (int j = g * gw; j < (g + 1) * gw; ++j) (*out_extra)[j] += t39 * vs_max * std::fabs(V(i, j)) / vs;
        }
      }
    }
  }

  // q4: back to original space: out = 2^-2 H out_rot, computed by the kernel in fp32
  // (gamma_5 of the group's sum |out_rot|) from its rotated output (within bound_rot per
  // element): |err_j| <= 2^-2 sum_i (bound_rot_i + gamma_5 (|out_rot_i| + bound_rot_i)) +
  // u |out_j|.
  void q4_unrotate(ref::AttnRef* want) const {
    ref::AttnRef o2 = *want;
    for (int g0 = 0; g0 < d; g0 += 32) {
      double t[32], sb = 0, so = 0;
      ref::h32_apply(&want->out[g0], t);
      for (int i = 0; i < 32; ++i) {
        sb += want->bound[g0 + i];
        so += std::fabs(want->out[g0 + i]);
      }
      for (int i = 0; i < 32; ++i) {
        o2.out[g0 + i] = 0.25 * t[i];
        o2.bound[g0 + i] = 0.25 * (sb + bound::gamma(5) * (so + sb)) + bound::kU32 * std::fabs(o2.out[g0 + i]) + 1e-30;
      }
    }
    *want = o2;
  }

  // The float64 reference of attention row r, query head h, over the keys K, V, with its
  // per-element bound in the backend's order.
  ref::AttnRef attention_reference(int r, int h, const Eigen::MatrixXd& K, const Eigen::MatrixXd& V,
                                   const std::vector<double>& vscale) {
    Eigen::VectorXd qv(d);
    for (int j = 0; j < d; ++j) qv[j] = q[(size_t(r) * hq + h) * d + j];
    std::vector<double> extra;
    if (c.fmt == Format::q4) q4_rotate_query(&q[(size_t(r) * hq + h) * d], K, &qv, &extra);
    // Depths of the backend's order (attention/rows.h). fma chain: dot d; p.v per key
    // group then the halving tree. Tensor cores: 37 u per mma step plus the fp32 sums
    // over k-steps / a key group's tiles and the groups' sum (fp8: +4 for the two fp16
    // parts' remainder, +1 for p * row-scale), and the extras of mma_extras. Both: l over
    // a lane's keys then the butterfly.
    const bool mma = be.attention_arith(c.fmt, d) == AttnArith::mma_split;
    const int dot_depth = mma ? attn_mma_dot_depth(d, c.fmt, hq / hkv) : d;
    const int pv_depth = mma ? attn_mma_pv_depth(c.chunk, d, c.fmt, hq / hkv) : attn_pv_depth(c.chunk, d);
    const int acc_depth = std::max(pv_depth, (c.chunk + 31) / 32 + 5);
    std::vector<double> out_extra(d, 0.0);
    if (mma) mma_extras(qv, K, V, vscale, &extra, &out_extra);
    if (c.logits != 0 && plant == Plant::none) {  // the scores' range, in the receipt
      const Eigen::VectorXd sc = (K * qv) * ap.scale;
      auto& rng = run.numbers["far_logit_score_range"][c.logits < 0 ? "-200" : "+200"];
      const double lo = sc.minCoeff(), hi = sc.maxCoeff();
      if (rng.is_null()) rng = nlohmann::json::array({lo, hi});
      else rng = nlohmann::json::array({std::min(lo, rng[0].get<double>()), std::max(hi, rng[1].get<double>())});
    }
    ref::AttnRef want = ref::attention(qv, K, V, ap.scale, c.chunk, dot_depth, acc_depth, extra.empty() ? nullptr : &extra);
    for (int j = 0; j < d; ++j) want.bound[j] += out_extra[j];
    if (c.fmt == Format::q4) q4_unrotate(&want);
    return want;
  }

  // Bound against the float64 reference over the same dequantised keys (always all of
  // them: the dropped-key control must be caught here).
  void check_attention_bound() {
    double worst = 0;
    std::string at;
    std::vector<AttnRow> full = rows;
    full[kB].len = c.len1 + 1;
    for (int r = 0; r < kRows; ++r) {
      const AttnRow& row = full[r];
      const int n = row.len + row.tail_len;
      if (n == 0) continue;  // the empty-rows gate
      for (int kvh = 0; kvh < hkv; ++kvh) {
        Eigen::MatrixXd K(n, d), V(n, d);
        std::vector<double> vscale(size_t(n) * (c.fmt == Format::q4 ? d / 32 : 1), 1.0);  // fp8: V row scales; q4: [key][group]
        load_keys(row, kvh, &K, &V, &vscale);
        for (int h = kvh * (hq / hkv); h < (kvh + 1) * (hq / hkv); ++h) {
          const ref::AttnRef want = attention_reference(r, h, K, V, vscale);
          for (int j = 0; j < d; ++j) {
            const float got = outp.data()[(size_t(r) * hq + h) * d + j];
            const double ratio = std::isnan(got) ? NAN : std::fabs(got - want.out[j]) / want.bound[j];
            if (worse_ratio(ratio, worst)) {
              worst = ratio;
              std::ostringstream o;
              o << "row " << kRowName[r] << " head " << h << " [" << j << "] got " << got << " ref " << want.out[j] << " bound "
                << want.bound[j];
              at = o.str();
            }
          }
        }
      }
    }
    run.check_ratio("attention-bound", worst, cv, at);
    // The worst ratio per arithmetic (the gate keeps one overall): a reviewer sees how tight
    // each order's bound is (numerics.md: never within 100x means too loose).
    if (plant == Plant::none && !std::isnan(worst)) {
      auto& w = run.numbers["attention_bound_worst_ratio_by_arithmetic"][arith_name(be.attention_arith(c.fmt, d))];
      if (w.is_null() || worst > w.get<double>()) w = worst;
    }
  }

  // Keep, one call for both lanes: lane 0 accepts its tail, moves slot_j -> len0 + j
  // (ascending, dst < src, possibly overlapping), lane 1 its tail into len1 + 1 + j; the
  // two lanes' moves interleaved, lane 0's first. Reference: sequential moves on the
  // logical rows of each lane.
  bool keep_tails() {
    std::vector<KeepMove> moves, moves0, moves1;
    for (int j = 0; j < tail; ++j)
      if (tail_slots[j] != c.len0 + j) moves0.push_back({0, tail_slots[j], c.len0 + j});
    for (int j = 0; j < tail1; ++j) moves1.push_back({1, tail1_slots[j], c.len1 + 1 + j});
    for (size_t i = 0; i < std::max(moves0.size(), moves1.size()); ++i) {
      if (i < moves0.size()) moves.push_back(moves0[i]);
      if (i < moves1.size()) moves.push_back(moves1[i]);
    }
    std::vector<std::vector<uint8_t>> logical[2];
    for (int lane = 0; lane < 2; ++lane)
      for (int p = 0; p < lens[lane]; ++p) logical[lane].push_back(pos_bytes(su.window, lane, p));
    for (const KeepMove& m : moves) logical[m.lane][m.dst] = logical[m.lane][m.src];
    const Cache before_keep_p = su.paged, before_keep_w = su.window;
    for (Cache* cc : {&su.paged, &su.window}) {
      if (plant == Plant::reverse_moves) {
        for (int i = int(moves.size()) - 1; i >= 0; --i)
          if (fail(be.keep(*cc, &moves[i], 1))) return false;
      } else if (fail(be.keep(*cc, moves.data(), int(moves.size())))) {
        return false;
      }
    }
    int64_t bad_ref = 0, bad_pw = 0;
    for (int lane = 0; lane < 2; ++lane)
      for (int p = 0; p < (lane == 0 ? c.len0 + tail : c.len1 + 1 + tail1); ++p) {
        bad_ref += pos_bytes(su.window, lane, p) != logical[lane][p];
        bad_pw += pos_bytes(su.paged, lane, p) != pos_bytes(su.window, lane, p);
      }
    run.check("keep==reference", bad_ref == 0, cv, std::to_string(bad_ref) + " positions differ after keep");
    run.check("paged==window", bad_pw == 0, cv, std::to_string(bad_pw) + " positions differ after keep");
    std::string where;
    const int64_t bad = setup_guard_violations(su, before_keep_p, before_keep_w, moved_rows(moves, hkv), &where);
    run.check("guards", bad == 0, cv, std::to_string(bad) + " bytes changed outside the moved rows; " + where);
    return true;
  }

  // tail == committed: rows A and F over the kept (now committed) keys, in one launch,
  // equal rows A and F over their tails.
  void check_tail_committed() {
    const AttnRow committed[2] = {{0, c.len0 + tail, 0, 0}, {1, c.len1 + 1 + tail1, 0, 0}};
    const size_t m = size_t(hq) * d;
    std::vector<float> q2(2 * m);
    std::copy_n(&q[kA * m], m, q2.data());
    std::copy_n(&q[kF * m], m, q2.data() + m);
    Guarded<float> out(2 * m);
    if (fail(be.attention(su.paged, ap, committed, 2, tails, q2.data(), out.data()))) return;
    run.check("tail==committed", bytes_equal(out.data(), outp.data() + kA * m, m) && bytes_equal(out.data() + m, outp.data() + kF * m, m), cv,
              "row A or F over committed keys differs from the row over its tail");
    run.check("guards", out.guards_intact(), cv, "attention wrote past its output");
  }

  Run& run;
  Backend& be;
  const QwenCase& c;
  const Plant plant;
  const std::string cv;  // the case line
  const Shape& S;
  const int d, hq, hkv;
  const KvLayout lay;
  std::mt19937_64 g;
  // Slots: lane 0's tail (tail rows), lane 1's (tail1 rows); each lane's length.
  std::vector<int32_t> tail_slots, tail1_slots;
  int tail = 0, tail1 = 0;
  std::vector<int> lens;
  Setup su;
  Cache paged0, window0;  // as made, before any store
  // History rows (nh) and their layer-0 / layer-1 K and V; the round's rows (nr), queries,
  // K and V; the rotated queries from the paged and the window store.
  std::vector<RopeRow> hist, round;
  int nh = 0, nr = 0;
  std::vector<float> hk0, hv0, hk1, hv1, rq, rk, rv, qrot_p, qrot_w;
  // Attention: the rows, the tail list, the queries, the parameters and the outputs.
  std::vector<AttnRow> rows;
  std::vector<int32_t> tails;
  std::vector<float> q;
  AttnParams ap{};
  Guarded<float> outp, outw;
};

void run_case(Run& run, Backend& be, const QwenCase& c, Plant plant) { QwenCaseRun(run, be, c, plant).run_all(); }

// Non-finite inputs (design.md, "Non-finite inputs"): one lane of 69 keys (chunks of 32)
// rope-stored clean, then again with one NaN or +Inf planted in a query, a K row or a V
// row (element 3, a rotated dim, so its rotary partner is hit too). Rows: R0 every key,
// R1 the first chunk (never the planted key 40), R2 key 40 alone as a tail. Checked:
// the stored row and the rotated query hold NaN (NaN planted) or a non-finite value (Inf)
// exactly where the policy says (bf16: the element and its partner; fp8: the whole row
// poisoned; q4: the groups poisoned), every other byte as in the clean run; attention
// rows that read the planted value are NaN where the policy says NaN (never a finite
// number, never Inf), and every other output equals the clean run's bytes.
struct NonFiniteCase {
  int shape;
  Format fmt;
  std::string vars() const {
    return std::string("qwen-pages-nonfinite(shape=") + kShapes[shape].name + ",fmt=" + format_name(fmt) + ",chunk=32,len=69)";
  }
};

void run_nonfinite(Run& run, Backend& be, const NonFiniteCase& nc) {
  const std::string cv = nc.vars();
  KernelPaths paths;  // the kernels the case's launches picked (cuda): numbers.coverage.non_finite_kernel_path
  const Shape& S = kShapes[nc.shape];
  const int d = S.head_dim, hq = S.q_heads, hkv = S.kv_heads, group = hq / hkv, half = S.rot_dims / 2;
  const KvLayout lay(1, hkv, d, nc.fmt);
  constexpr int kLen = 69, kChunk = 32, kKey = 40, kElem = 3;
  const Cache empty = make_window_cache(lay, {kLen}, 2, 0x9e3779b9u + nc.shape);
  std::mt19937_64 g(0x51ed27u + uint64_t(nc.shape) * 7 + int(nc.fmt));
  std::vector<RopeRow> rr;
  for (int p = 0; p < kLen; ++p) rr.push_back({0, 100 + p, p});
  const std::vector<float> q0 = randn(size_t(kLen) * hq * d, g), k0 = randn(size_t(kLen) * hkv * d, g),
                           v0 = randn(size_t(kLen) * hkv * d, g);
  const RopeParams rp{hq, S.rot_dims, S.base, 0};
  const std::vector<AttnRow> rows = {{0, kLen, 0, 0}, {0, kChunk, 0, 0}, {0, 0, 0, 1}};
  const std::vector<int32_t> tails = {kKey};
  const int qsrc[3] = {kLen - 1, kChunk - 1, kKey};
  const AttnParams ap{hq, 0, kChunk, float(1.0 / std::sqrt(double(d)))};
  struct Out {
    Cache cache;
    std::vector<float> qrot, att;
  };
  auto launch = [&](const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, Out& o) {
    o.cache = empty;
    o.qrot.assign(q.size(), 0.0f);
    Status st = be.rope_store(o.cache, rp, rr.data(), kLen, q.data(), k.data(), v.data(), o.qrot.data());
    if (!st.ok) return run.error(cv, st.message), false;
    std::vector<float> qa(size_t(3) * hq * d);
    for (int r = 0; r < 3; ++r) std::copy_n(&o.qrot[size_t(qsrc[r]) * hq * d], size_t(hq) * d, &qa[size_t(r) * hq * d]);
    o.att.assign(qa.size(), 0.0f);
    st = be.attention(o.cache, ap, rows.data(), 3, tails, qa.data(), o.att.data());
    if (!st.ok) return run.error(cv, st.message), false;
    return true;
  };
  Out clean;
  if (!launch(q0, k0, v0, clean)) return;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // The elements a planted element j reaches through the rotation (q and K; V is plain).
  auto reached = [&](int e, bool rotated) {
    if (!rotated) return e == kElem;
    const int partner = kElem < half ? kElem + half : kElem - half;
    return e == kElem || e == partner;
  };
  for (int target = 0; target < 3; ++target)  // q, K, V
    for (const float bad : {nan, inf, std::numeric_limits<float>::max()}) {
      // FLT_MAX: finite, but above bf16's largest finite value and past its rounding midpoint,
      // so a bf16 V row (unrotated: stored as given) must hold +Inf, as +Inf itself would be; a
      // store that saturates to 0x7F7F (or rounds toward zero) stores a finite value. Only there:
      // rotated q and K rows move it by cos / sin, and the other formats scale it.
      const bool flt_max = std::isfinite(bad);
      if (flt_max && !(target == 2 && nc.fmt == Format::bf16)) continue;
      const bool is_nan = std::isnan(bad);
      const std::string what = std::string(target == 0 ? "q" : target == 1 ? "K" : "V") +
                               (is_nan ? " NaN" : flt_max ? " FLT_MAX (bf16: +Inf)" : " +Inf");
      std::vector<float> q = q0, k = k0, v = v0;
      const int head = target == 0 ? hq - 1 : hkv - 1;  // q head hq - 1 reads kv head hkv - 1
      if (target == 0) q[(size_t(kLen - 1) * hq + head) * d + kElem] = bad;
      if (target == 1) k[(size_t(kKey) * hkv + head) * d + kElem] = bad;
      if (target == 2) v[(size_t(kKey) * hkv + head) * d + kElem] = bad;
      Out o;
      if (!launch(q, k, v, o)) return;
      // Rope store: the rotated query, then the stored row of key 40.
      bool ok = true;
      std::string why;
      auto fail = [&](const std::string& m) {
        if (ok) why = what + ": " + m;
        ok = false;
      };
      for (size_t i = 0; i < o.qrot.size(); ++i) {
        const size_t rowh = i / d;
        const int e = int(i % d);
        const bool hit = target == 0 && rowh == size_t(kLen - 1) * hq + head && reached(e, true);
        if (hit ? !(is_nan ? std::isnan(o.qrot[i]) : !std::isfinite(o.qrot[i]))
                : std::memcmp(&o.qrot[i], &clean.qrot[i], 4) != 0)
          fail("rotated query element " + std::to_string(i) + " is " + std::to_string(o.qrot[i]));
      }
      for (int p = 0; p < kLen; ++p)
        if (p != kKey && pos_bytes(o.cache, 0, p) != pos_bytes(clean.cache, 0, p)) fail("stored position " + std::to_string(p) + " changed");
      const KvView wv = o.cache.view(0), cvw = clean.cache.view(0);
      for (int kv = 0; kv < 2; ++kv)
        for (int h = 0; h < hkv; ++h) {
          const bool hit_row = target == kv + 1 && h == head;
          const uint8_t* got = kv_row(wv, 0, kv, h, kKey);
          const uint8_t* ref = kv_row(cvw, 0, kv, h, kKey);
          const std::string where = std::string(kv ? "V" : "K") + " head " + std::to_string(h);
          if (!hit_row) {
            if (std::memcmp(got, ref, lay.code_bytes) != 0 ||
                (lay.scale_bytes && std::memcmp(kv_scale(wv, 0, kv, h, kKey), kv_scale(cvw, 0, kv, h, kKey), lay.scale_bytes) != 0))
              fail("stored " + where + " changed");
            continue;
          }
          if (nc.fmt == Format::fp8) {
            float sc;
            std::memcpy(&sc, kv_scale(wv, 0, kv, h, kKey), 4);
            bool poisoned = std::isnan(sc);
            for (int e = 0; e < d; ++e) poisoned = poisoned && got[e] == kE4M3NaN;
            if (!poisoned) fail("stored fp8 " + where + " is not poisoned (scale " + std::to_string(sc) + ")");
          } else if (nc.fmt == Format::q4) {
            const uint8_t* sg = kv_scale(wv, 0, kv, h, kKey);
            const uint8_t* sr = kv_scale(cvw, 0, kv, h, kKey);
            for (int g0 = 0; g0 < d / 32; ++g0) {
              bool hit = false;
              for (int e = 32 * g0; e < 32 * g0 + 32; ++e) hit = hit || reached(e, kv == 0);
              uint16_t sb;
              std::memcpy(&sb, sg + 2 * g0, 2);
              bool poisoned = sb == kQ4ScaleNaN;
              for (int b = 0; b < 16; ++b) poisoned = poisoned && got[16 * g0 + b] == kQ4PoisonCodes;
              if (hit ? !poisoned
                      : (std::memcmp(got + 16 * g0, ref + 16 * g0, 16) != 0 || std::memcmp(sg + 2 * g0, sr + 2 * g0, 2) != 0))
                fail("stored q4 " + where + " group " + std::to_string(g0) + (hit ? " is not poisoned" : " changed"));
            }
          } else if (nc.fmt == Format::mxfp4) {  // the group poisoned: exponent 0xFF, codes 0
            const uint8_t* eg = kv_scale(wv, 0, kv, h, kKey);
            const uint8_t* er = kv_scale(cvw, 0, kv, h, kKey);
            for (int g0 = 0; g0 < d / 32; ++g0) {
              bool hit = false;
              for (int e = 32 * g0; e < 32 * g0 + 32; ++e) hit = hit || reached(e, kv == 0);
              bool poisoned = eg[g0] == 0xFF;
              for (int b = 0; b < 16; ++b) poisoned = poisoned && got[16 * g0 + b] == 0;
              if (hit ? !poisoned : (std::memcmp(got + 16 * g0, ref + 16 * g0, 16) != 0 || eg[g0] != er[g0]))
                fail("stored mxfp4 " + where + " group " + std::to_string(g0) + (hit ? " is not poisoned" : " changed"));
            }
          } else if (nc.fmt != Format::bf16) {
            fail(std::string("no non-finite rule for format ") + format_name(nc.fmt));
          } else {
            for (int e = 0; e < d; ++e) {
              uint16_t b;
              std::memcpy(&b, got + 2 * e, 2);
              const float x = bf16_to_float(b);
              const bool hit = reached(e, kv == 0);
              if (hit ? !(is_nan ? std::isnan(x) : !std::isfinite(x)) : std::memcmp(got + 2 * e, ref + 2 * e, 2) != 0)
                fail("stored bf16 " + where + " [" + std::to_string(e) + "] is " + std::to_string(x));
            }
          }
        }
      // Attention. Which (row, head) reads the planted value: q: R0's head hq - 1; K and V:
      // rows R0 and R2 (key 40), the heads of kv head hkv - 1.
      for (int r = 0; r < 3; ++r)
        for (int h = 0; h < hq; ++h) {
          const float* got = &o.att[(size_t(r) * hq + h) * d];
          const float* ref = &clean.att[(size_t(r) * hq + h) * d];
          const bool reads = target == 0 ? (r == 0 && h == head) : (r != 1 && h / group == head);
          // What the policy says of each element: 0 the clean bytes, 1 NaN, 2 NaN or finite
          // (never Inf: a key whose score is -Inf may get weight 0), 3 not finite.
          std::vector<int> want(d, 0);
          if (reads) {
            if (target == 2 && nc.fmt == Format::mxfp4) {
              // V in mxfp4 (unrotated): the poisoned group's elements, NaN; the rest unchanged.
              for (int e = 32 * (kElem / 32); e < 32 * (kElem / 32) + 32; ++e) want[e] = 1;
            } else if (target == 0 || nc.fmt != Format::bf16 || target == 1) {
              // q (any format), K (any format), V in fp8 / q4 (the poisoned row or group).
              for (int e = 0; e < d; ++e) want[e] = 1;
              if (target == 1 && !is_nan && nc.fmt == Format::bf16 && r == 0) {
                // +Inf in a bf16 K row: the score of key 40 is +-Inf or NaN; predicted in
                // float64 from the stored row. -Inf: weight 0 or (tensor-core parts) NaN.
                double sc = 0;
                std::vector<float> kr(d);
                dequant_row(wv, 0, 0, head, kKey, kr.data());
                for (int e = 0; e < d; ++e) sc += double(o.qrot[(size_t(qsrc[r]) * hq + h) * d + e]) * double(kr[e]);
                if (sc == -INFINITY) std::fill(want.begin(), want.end(), 2);
              }
              if (target == 2 && nc.fmt == Format::q4)
                for (int e = 0; e < d; ++e) want[e] = e / 32 == kElem / 32 ? 1 : 0;
            } else {  // V in bf16: the element alone
              want[kElem] = is_nan ? 1 : 3;
            }
          }
          for (int e = 0; e < d; ++e) {
            const float x = got[e];
            const bool good = want[e] == 0   ? std::memcmp(&x, &ref[e], 4) == 0
                              : want[e] == 1 ? std::isnan(x)
                              : want[e] == 2 ? !std::isinf(x)
                                             : !std::isfinite(x);
            if (!good) {
              fail("attention row R" + std::to_string(r) + " head " + std::to_string(h) + " [" + std::to_string(e) +
                   "] is " + std::to_string(x) + (want[e] == 0 ? " (the clean run's value expected)" : ""));
              break;
            }
          }
        }
      run.check("non-finite", ok, cv, why);
      if (!run.in_control) run.cover_value("non_finite", std::string(format_name(nc.fmt)) + "/d" + std::to_string(d));
    }
  // Which store and attention kernels the non-finite inputs went through ("format/dD/rR/path"),
  // apart from kernel_path (the drawn cases' and probes'): the fourth device sweep's q4 amax
  // mutant survived these cases on the ring kernel (a planted NaN makes its whole rotated group
  // NaN, whatever the maximum), and the receipt is where a reader sees that path was taken.
  if (!run.in_control)
    for (const std::string& k : paths.seen())
      run.cover_value("non_finite_kernel_path", std::string(format_name(nc.fmt)) + "/d" + std::to_string(d) + "/r" +
                                                    std::to_string(S.rot_dims) + "/" + k);
}

// Long keeps, once per run for each of six (shape, format, page size): one keep call over four
// lanes, lane 0 and lane 3 without moves (so the lanes with moves are not the first lanes of
// the call), lane 1 compacted from position 0 (j <- 2j + 1 for j < 520: a destination 0, and
// more moves than three of the kernel's batches of at most 128), lane 2 a sparse keep (300
// random ascending sources moved down to a random start); lane 2's moves come first in the
// list. Every field of every position holds its own random bytes first (the caches come
// poisoned, and equal rows would hide a wrong move). Gates: keep==reference (sequential
// in-order moves on logical rows), paged==window, guards. The tails of the generated cases
// keep a few rows; these reach the batch pipeline of the cuda keep kernel, its no-table path
// (d 32 rows of 16 and 20 bytes) and page sizes 5 to 256.
struct KeepLongCase {
  int shape;
  Format fmt;
  int ptok;
  std::string vars() const {
    return std::string("qwen-pages-keep-long(shape=") + kShapes[shape].name + ",fmt=" + format_name(fmt) +
           ",ptok=" + std::to_string(ptok) + ",moves=520+300)";
  }
};
const KeepLongCase kKeepLong[] = {{1, Format::bf16, 16}, {0, Format::fp8, 48},  {2, Format::q4, 7},
                                  {6, Format::q4, 16},   {6, Format::mxfp4, 5}, {3, Format::mxfp4, 256}};

void run_keep_long(Run& run, Backend& be, const KeepLongCase& kl, bool reverse) {
  const std::string cv = kl.vars();
  const Shape& S = kShapes[kl.shape];
  const KvLayout lay(2, S.kv_heads, S.head_dim, kl.fmt);
  constexpr int kCompact = 520, kSparse = 300, kLen = 2 * kCompact + 2;
  const std::vector<int> lens = {kLen, kLen, kLen, 40};
  std::mt19937_64 g(0x6b656570ull + uint64_t(kl.shape) * 31 + uint64_t(int(kl.fmt)) * 7 + uint64_t(kl.ptok));
  std::vector<KeepMove> moves;
  const int start = 1 + int(g() % 64);
  std::vector<int> src(size_t(kLen - start - 1));
  std::iota(src.begin(), src.end(), start + 1);
  std::shuffle(src.begin(), src.end(), g);
  src.resize(kSparse);
  std::sort(src.begin(), src.end());
  for (int j = 0; j < kSparse; ++j) moves.push_back({2, src[size_t(j)], start + j});  // src[j] > start + j
  for (int j = 0; j < kCompact; ++j) moves.push_back({1, 2 * j + 1, j});
  Setup su{make_paged_cache(lay, kl.ptok, lens, 2, g()), make_window_cache(lay, lens, 2, g())};
  std::vector<std::vector<uint8_t>> logical[4];
  for (int lane = 0; lane < 4; ++lane)
    for (int p = 0; p < lens[size_t(lane)]; ++p) {
      for (int f = 0; f < lay.field_count(); ++f) {
        uint8_t* a = kv_field_row(su.paged.view(lane), f, p);
        uint8_t* b = kv_field_row(su.window.view(lane), f, p);
        for (int64_t i = 0; i < lay.field(f).bytes_per_pos; ++i) a[i] = b[i] = uint8_t(g());
      }
      logical[lane].push_back(pos_bytes(su.window, lane, p));
    }
  for (const KeepMove& m : moves) logical[m.lane][size_t(m.dst)] = logical[m.lane][size_t(m.src)];
  const Cache before_p = su.paged, before_w = su.window;
  for (Cache* cc : {&su.paged, &su.window}) {
    const Status st = reverse ? Status::Ok() : be.keep(*cc, moves.data(), int(moves.size()));
    if (!st.ok) return run.error(cv, st.message);
    for (int i = int(moves.size()) - 1; reverse && i >= 0; --i) {  // the control: last to first
      const Status sr = be.keep(*cc, &moves[size_t(i)], 1);
      if (!sr.ok) return run.error(cv, sr.message);
    }
  }
  int64_t bad_ref = 0, bad_pw = 0;
  std::string first;
  for (int lane = 0; lane < 4; ++lane)
    for (int p = 0; p < lens[size_t(lane)]; ++p) {
      const bool r = pos_bytes(su.window, lane, p) != logical[lane][size_t(p)];
      bad_ref += r;
      bad_pw += pos_bytes(su.paged, lane, p) != pos_bytes(su.window, lane, p);
      if (r && first.empty()) first = "; first: lane " + std::to_string(lane) + " position " + std::to_string(p);
    }
  run.check("keep==reference", bad_ref == 0, cv, std::to_string(bad_ref) + " positions differ after the long keep" + first);
  run.check("paged==window", bad_pw == 0, cv, std::to_string(bad_pw) + " positions differ after the long keep");
  std::string where;
  const int64_t bad = setup_guard_violations(su, before_p, before_w, moved_rows(moves, S.kv_heads), &where);
  run.check("guards", bad == 0, cv, std::to_string(bad) + " bytes changed outside the moved rows (long keep); " + where);
  if (!run.in_control) run.cover_value("keep_long", std::string(format_name(kl.fmt)) + "/d" + std::to_string(S.head_dim));
}

void declare_gates(Run& run) {
  run.declare("paged==window", "rotated queries, stored rows, attention rows and kept rows equal between pages and windows, bytes");
  run.declare("rows==solo", "an attention row alone equals the same row in the mixed five-row launch");
  run.declare("empty-rows", "a row with no keys (no committed keys, no tail) gives +0 in every element, never NaN");
  run.declare("tail==committed", "a row over its draft tail equals the row over the same keys committed by keep");
  run.declare("repeats", "three rope stores and three attentions give identical bytes");
  run.declare("store==reference", "stored K and V bytes (codes and scales, both layers) equal the reference codec's where its input is exact (V, unrotated dims), and lie between the codes and scales of the RoPE bound's ends where not");
  run.declare("rope-bound", "rotated q (fp32) and stored K/V within the float64 RoPE + format bound (angles to 262,144)");
  run.declare("attention-bound", "attention within the float64 bound over the same dequantised inputs (numerics.md, safety 2)");
  run.declare("keep==reference", "rows after keep equal sequential in-order moves on logical rows, every field");
  run.declare("guards", "no byte outside the rows written changed; output canaries intact");
  run.declare("inputs", "inputs and the attended cache hash the same after each launch");
  run.declare("non-finite", "a NaN or +Inf in q, K or V (bf16, fp8, q4, mxfp4) stays NaN or non-finite where design.md says, in the stored row, the rotated query and every attention row that reads it; every other byte as without it");
}

QwenCase control_case(int shape, Format f, int ptok, int len0, int len1, int tail, uint64_t seed) {
  return QwenCase{shape, f, ptok, 64, len0, len1, tail, 100, 0, 0, seed};
}

// The probes, once per run: shape, format, page size, chunk, lengths, tail, probe.
QwenCase probe_case(int shape, Format f, int ptok, int chunk, int len0, int len1, Probe p, uint64_t seed,
                    int scale_kind = 0) {
  return QwenCase{shape, f, ptok, chunk, len0, len1, 2, 500, scale_kind, 0, seed, p};
}
const QwenCase kProbes[] = {
    probe_case(1, Format::q4, 16, 256, 400, 300, Probe::peaked, 101),     // q4 d128 group 4: the packed kernel
    probe_case(0, Format::q4, 48, 1024, 300, 200, Probe::peaked, 102),    // q4 d256
    probe_case(2, Format::fp8, 16, 256, 400, 300, Probe::peaked, 103),    // fp8 d128 group 6
    probe_case(4, Format::bf16, 128, 256, 300, 200, Probe::peaked, 104),  // bf16 d256
    probe_case(3, Format::bf16, 16, 32, 700, 660, Probe::far_max, 105),   // 32 chunks, the max in chunk 20
    probe_case(1, Format::fp8, 48, 32, 680, 700, Probe::far_max, 106),
    probe_case(1, Format::q4, 16, 256, 300, 260, Probe::v_binade, 107),   // keys 230 and 250 of 256
    probe_case(0, Format::q4, 256, 1024, 300, 260, Probe::v_binade, 108),
    // fp8 d128, two chunks of 1024 for 8 kv heads and 6 rows: too many blocks for the short path
    probe_case(1, Format::fp8, 128, 1024, 1100, 1030, Probe::magnitudes, 109),
    probe_case(1, Format::q4, 48, 1024, 600, 300, Probe::magnitudes, 110),
    probe_case(1, Format::fp8, 16, 256, 120, 100, Probe::v_ties, 111),    // the ring kernel's fast encode
    probe_case(7, Format::fp8, 16, 256, 120, 100, Probe::v_ties, 112),    // rot_dims 20: the block-per-row store
    probe_case(4, Format::fp8, 16, 256, 120, 100, Probe::v_ties, 113),
    probe_case(7, Format::q4, 16, 256, 120, 100, Probe::zero_groups, 114),  // the block-per-row store
    probe_case(1, Format::q4, 48, 256, 120, 100, Probe::zero_groups, 115),  // the ring kernel
    probe_case(7, Format::mxfp4, 16, 256, 120, 100, Probe::zero_groups, 116),
    probe_case(7, Format::fp8, 16, 256, 120, 100, Probe::zero_groups, 117),
    probe_case(4, Format::bf16, 16, 256, 120, 100, Probe::tiny, 118),
    probe_case(1, Format::fp8, 48, 256, 120, 100, Probe::tiny, 119),
    probe_case(1, Format::q4, 16, 256, 120, 100, Probe::tiny, 120),
    probe_case(7, Format::mxfp4, 16, 256, 120, 100, Probe::tiny, 121),
    probe_case(7, Format::mxfp4, 16, 256, 300, 200, Probe::huge_v, 122),
    probe_case(4, Format::mxfp4, 48, 256, 300, 200, Probe::huge_v, 123),
    probe_case(1, Format::q4, 16, 256, 120, 100, Probe::q4_ties, 124),  // the ring kernel's fast encode, d 128
    probe_case(0, Format::q4, 48, 256, 120, 100, Probe::q4_ties, 125),  // d 256
    probe_case(7, Format::q4, 16, 256, 120, 100, Probe::q4_ties, 126),  // the block-per-row store
    probe_case(4, Format::bf16, 16, 48, 1000, 700, Probe::chunks, 127),   // bf16 d 256: kept partials, 21 chunks (two batches)
    // These two at the other scales (1/d, 1): every run proves the softmax scale, whatever
    // --cases (the drawn cases reach a scale other than 1/sqrt(d) from case 3 on, and a
    // hard-coded 1/sqrt(d), the attn-fixed-scale mutant, passed a run of three).
    probe_case(0, Format::bf16, 48, 64, 1000, 700, Probe::chunks, 128, 1),
    probe_case(1, Format::bf16, 16, 64, 1000, 700, Probe::chunks, 129, 2),  // bf16 d 128
    probe_case(kWideShape, Format::mxfp4, 16, 256, 120, 100, Probe::wide, 130),
    probe_case(kWideShape, Format::fp8, 16, 256, 120, 100, Probe::wide, 131),
    probe_case(kWideShape, Format::q4, 16, 256, 120, 100, Probe::wide, 132),
    probe_case(kWideShape128, Format::fp8, 16, 256, 120, 100, Probe::wide, 143),
    probe_case(kWideShape128, Format::q4, 16, 256, 120, 100, Probe::wide, 144),
    // d 64 and 32: the bulk-copy rope store (rope-bulk), its encoders on ties; with the first
    // nine drawn cases (their shapes and formats fixed by index) every format at every head_dim
    probe_case(3, Format::fp8, 16, 256, 120, 100, Probe::v_ties, 133),
    probe_case(6, Format::q4, 16, 256, 120, 100, Probe::q4_ties, 134),
    probe_case(6, Format::fp8, 16, 256, 120, 100, Probe::v_ties, 135),
    probe_case(5, Format::q4, 16, 256, 120, 100, Probe::q4_ties, 136),
    probe_case(6, Format::mxfp4, 16, 256, 300, 200, Probe::huge_v, 137),
    // q4 d256, five chunks of 256 for 4 kv heads and 6 rows: too many blocks for the short path,
    // so the regular q4 d256 kernel runs (at the drawn cases' sizes the short path takes it:
    // 983675a's qwen-pages on the H200 never reached it)
    probe_case(0, Format::q4, 48, 256, 1100, 1030, Probe::magnitudes, 138),
    // With those above, every tensor-core kernel from the probes alone, whatever the seed (the
    // drawn cases' sizes decide between the short path and the regular grid by chance): fp8
    // d256 over 16 chunks of 64 x 2 kv heads x 6 rows, the regular kernel; q4 d128 at GQA
    // group 6 (not the packed kernels) over 16 chunks (regular) and one chunk (short); bf16
    // d128 over one chunk (short)
    probe_case(4, Format::fp8, 16, 64, 1000, 700, Probe::magnitudes, 139),
    probe_case(2, Format::q4, 16, 64, 1000, 700, Probe::magnitudes, 140),
    probe_case(2, Format::q4, 16, 256, 120, 100, Probe::peaked, 141),
    probe_case(1, Format::bf16, 16, 256, 120, 100, Probe::peaked, 142),
    // The fourth device sweep's blind spots (reports/h200/mutation-sweep/round4/README.md).
    // q4 groups whose rotated values mix NaN and finite ones, stored by the ring kernel's fast
    // encode: d 128 through its per-block plan (8 head slots), d 256 (the grouped consumer)
    probe_case(2, Format::q4, 16, 256, 120, 100, Probe::q4_half_nan, 145),
    probe_case(0, Format::q4, 48, 256, 120, 100, Probe::q4_half_nan, 146),
    // A group's largest V scale at keys 600 / 800 / 1000 of a q4 chunk of 1024, where p peaks: d 128
    // at group 4 over two chunks x 8 kv heads x 6 rows, too many blocks for the short path (the
    // regular packed kernel); d 256 and d 128 at group 6 over one chunk (their short paths; the
    // regular d 256 kernel loads every key's V scale before the maximum)
    probe_case(1, Format::q4, 128, 1024, 1100, 1030, Probe::late_vmax, 147),
    probe_case(0, Format::q4, 48, 1024, 1000, 900, Probe::late_vmax, 148),
    probe_case(2, Format::q4, 16, 1024, 1000, 900, Probe::late_vmax, 149),
    // d 128 at rotary dims 64 in fp8 and q4: the ring kernel's plan with dims passed through
    probe_case(kPartialShape128, Format::fp8, 16, 256, 120, 100, Probe::partial_rotary, 150),
    probe_case(kPartialShape128, Format::q4, 16, 256, 120, 100, Probe::partial_rotary, 151),
};

void qwen_pages_body(Run& run) {
  run.control("swapped-page-table", "each lane's first two page-table entries swapped before attention", [](Run& r) {
    run_case(r, r.be, control_case(3, Format::bf16, 16, 70, 50, 2, 101), Plant::swap_page_table);
    run_case(r, r.be, control_case(5, Format::fp8, 48, 200, 130, 1, 102), Plant::swap_page_table);
    run_case(r, r.be, control_case(1, Format::q4, 16, 90, 70, 2, 109), Plant::swap_page_table);
  });
  run.control("planted-row", "one stored K row of lane 1 altered in the paged cache only", [](Run& r) {
    run_case(r, r.be, control_case(3, Format::bf16, 7, 40, 33, 2, 103), Plant::planted_row);
    run_case(r, r.be, control_case(2, Format::fp8, 16, 65, 129, 3, 104), Plant::planted_row);
    run_case(r, r.be, control_case(4, Format::q4, 7, 50, 80, 1, 110), Plant::planted_row);
  });
  run.control("reverse-order-moves", "keep's overlapping moves applied last to first", [](Run& r) {
    run_case(r, r.be, control_case(3, Format::bf16, 16, 30, 20, 4, 105), Plant::reverse_moves);
    run_case(r, r.be, control_case(5, Format::fp8, 3, 64, 10, 3, 106), Plant::reverse_moves);
    run_case(r, r.be, control_case(6, Format::q4, 5, 40, 25, 2, 112), Plant::reverse_moves);
    run_keep_long(r, r.be, kKeepLong[2], true);
  });
  run.control("dropped-key", "row B attends without its last key (its own); only the bound can see it", [](Run& r) {
    run_case(r, r.be, control_case(3, Format::bf16, 16, 30, 300, 1, 107), Plant::dropped_key);
    run_case(r, r.be, control_case(0, Format::fp8, 128, 64, 1000, 2, 108), Plant::dropped_key);
    run_case(r, r.be, control_case(1, Format::q4, 48, 64, 500, 2, 111), Plant::dropped_key);
    run_case(r, r.be, control_case(5, Format::mxfp4, 16, 64, 300, 2, 113), Plant::dropped_key);
  });
  // Defects at the backend boundary (contracts/faulty_backend.h), each aimed at the gate
  // that no other control turns red.
  auto faulty = [](Fault f, int shape, Format fmt) {
    return [f, shape, fmt](Run& r) {
      FaultyBackend fb(r.be, f);
      run_case(r, fb, control_case(shape, fmt, 16, 40, 60, 2, 120 + int(f)), Plant::none);
    };
  };
  run.control("attention-writes-its-input", "attention flips one byte of the cache it reads", faulty(Fault::input_write, 3, Format::fp8));
  run.control("launch-dependent-rows", "a row's result changes when other rows share the launch",
              faulty(Fault::launch_dependent, 0, Format::bf16));
  run.control("nondeterministic-attention", "every second attention differs in the last bit of one value",
              faulty(Fault::nondeterministic, 5, Format::q4));
  run.control("write-past-output", "attention writes one float past the end of its output",
              faulty(Fault::write_past_output, 1, Format::bf16));
  run.control("rope-off-by-one-position", "rope store rotates every row by its position + 1",
              faulty(Fault::rope_position, 2, Format::bf16));
  run.control("empty-row-nan", "a row with no keys comes out NaN (an unguarded 0 / 0 in the merge)",
              faulty(Fault::empty_row_nan, 4, Format::fp8));
  run.control("keep-skips-a-layer", "keep leaves layer 0 of lane 0's last moved row unwritten (attention reads layer 1)",
              faulty(Fault::keep_skips_layer0, 6, Format::q4));
  declare_gates(run);
  run.numbers["attention_bound_safety_factor"] = 2.0;
  // Which order each (format, head_dim) ran in, so a reviewer knows which depths the
  // attention bound used (attention/rows.h).
  nlohmann::json arith = nlohmann::json::object();
  for (const Shape& sh : kShapes)
    for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4})
      arith[std::string(format_name(f)) + "/d" + std::to_string(sh.head_dim)] = arith_name(run.be.attention_arith(f, sh.head_dim));
  run.numbers["attention_arithmetic"] = arith;
  run.numbers["attention_mma_step_depth"] = kMmaStepDepth;
  // The refusals first: they take milliseconds, and a --gates-only run (a mutant test) stops
  // at its first failing gate.
  refusal_gate(run, {RefusalOp::rope_store, RefusalOp::attention, RefusalOp::keep},
               {Format::bf16, Format::fp8, Format::q4, Format::mxfp4});
  // Non-finite inputs: every format, a head_dim on the fma chain (64), one the cuda backend
  // runs on the tensor cores (128, a GQA group of 6), and rotary dims of 20 (not a multiple
  // of 8: fp8 and q4 store through the block-per-row kernel, whose amax must keep a NaN).
  for (Format f : {Format::bf16, Format::fp8, Format::q4, Format::mxfp4})
    for (int shape : {3, 2, 7}) {
      const NonFiniteCase nc{shape, f};
      if (run.selected(nc.vars())) run_nonfinite(run, run.be, nc);
    }
  for (const KeepLongCase& kl : kKeepLong)
    if (run.selected(kl.vars())) run_keep_long(run, run.be, kl, false);
  for (int i = 0; i < run.cases; ++i) {
    const QwenCase c = draw_case(run.seed, i);
    if (!run.selected(c.vars())) continue;
    run.progress("case " + std::to_string(i + 1) + "/" + std::to_string(run.cases) + " " + c.vars());
    run_case(run, run.be, c, Plant::none);
  }
  // The probes after the drawn cases: a planted bug those catch stops a --gates-only run first.
  for (const QwenCase& pc : kProbes)
    if (run.selected(pc.vars())) {
      run.progress("probe " + pc.vars());
      run_case(run, run.be, pc, Plant::none);
    }
}

}  // namespace

ContractDef qwen_pages_contract() {
  return {"qwen-pages",
          "rope store, split-K attention partial+merge and keep: paged == contiguous, bf16, fp8, q4 and mxfp4, float64 bounds", 12,
          qwen_pages_body};
}

}  // namespace kc
