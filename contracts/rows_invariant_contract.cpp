// Contract `rows-invariant`: the engine kernels (kernels/engine/: embedding, RMSNorm and its
// launch of several row sets, bf16-weight matrix product, the product of several matrices
// over one x, SwiGLU, residual add and the add joined with the RMSNorm after it, logits,
// greedy argmax) are batch-invariant and within their float64 bounds.
//
// A case is one kernel, a batch size n (the first 64 cases take n = 1..64 in turn, later
// ones draw it; half the matmul_parts cases fold it to 1..8 and take K a multiple of 8, the
// staged multi-part launch on cuda) and an odd shape (reduction lengths 1..2056 around
// multiples of 8, so both the 16-byte and the element-wise paths of the device product
// run; four fixed cases among the first 64, rms_norm and logits, take rows of 12288 and
// 16411, past the device RMSNorm's 8192-float staging chunk: see kLongRows). matmul_parts
// draws 1, 2 or 3 parts (the first 64 cases cycle them), each its own row count and bf16
// matrix over the launch's cols and x; its output row is laid out as [part 0 row][part 1
// row][part 2 row]. add is h += t in place over n rows. Gates:
//   rows==solo         every row of the batched launch has the bytes of the same row
//                      launched alone (batch 1)
//   repeats            the batched launch twice: the same bytes
//   embed==reference   embedding rows equal the reference exactly
//   argmax==reference  the lowest index of the largest non-NaN value (rows with ties,
//                      NaN, -inf, signed zeros, all NaN)
//   add==reference     every element of h + t equals float(double(h) + double(t)) (one
//                      rounding: double rounding is exact for a single +), bytes compared;
//                      every case has exact cancellations (+0), signed zeros (-0 + -0 =
//                      -0), subnormals, sums past FLT_MAX (+-inf, the tie FLT_MAX + 2^103
//                      included) and inf + finite; no input makes NaN
//   <kernel>-bound     |fp32 - float64| <= the derived bound (reference/engine_ref.h) for
//                      rms_norm, matmul (matmul_parts: every part, by the same gate),
//                      swiglu, logits; worst ratio recorded
//   parts==matmul      every part of a matmul_parts launch has the bytes of a plain matmul
//                      of that part alone (same batch, same backend): the promise of
//                      EngineBackend::matmul_parts
//   joined==plain      rms_norm cases: rms_norm_parts over the batch in three parts (the
//                      first half in place, an empty part, the rest apart) has the bytes
//                      of the batched rms_norm; add cases: add_rms_norm (norm weights of
//                      its own) leaves h with the add's bytes and its norm with the bytes
//                      of rms_norm over those sums (the promises of
//                      EngineBackend::rms_norm_parts and add_rms_norm; with rows==solo of
//                      the plain calls, the joined ones are batch-invariant too)
//   guards             16 floats past every output region (batched, repeated and solo
//                      launches, parts alone) still hold their canary after the launch
//   device==host-twin  (cuda) the device's bytes equal the host twin's for every kernel
//                      but SwiGLU (CUDA's expf is not the C library's: that kernel is held
//                      to its bound; the count of differing SwiGLU values is recorded)
//   refusals           every kernel argument at its range's edges: the last valid value
//                      accepted, the first invalid one refused with a message naming it,
//                      the output region untouched (kernels/engine/validate.cpp)
// Controls (must be red): a product whose reduction is split in two when the batch has
// more than one row (a split-K tuned to the batch), a planted row (one row of a batched
// launch one ulp off / its argmax one index off; add and SwiGLU: the element in the middle
// of the launch; matmul_parts: that row of every part), parts-ulp (matmul_parts only: the
// first element of every row of the last part one ulp up, whatever the batch: only
// parts==matmul sees it), joined-ulp (rms_norm_parts' last part with rows and add_rms_norm's
// norm, the first element one ulp up: only joined==plain sees it), writes-past-output (every kernel writes one float / index past
// its output: only guards sees it); for refusals: a refusal turned into success
// (accepts-one-past), a refusal naming nothing (unnamed-refusal), an output float written
// before the refusal (writes-then-refuses).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "contracts/contracts.h"
#include "contracts/framework.h"
#include "kernels/backend/forwarding.h"
#include "reference/engine_ref.h"

namespace kc {
namespace {

enum class Op { embed, rms_norm, matmul, matmul_parts, swiglu, add, logits, argmax };
// The cases cycle through these. add sits at an odd index and matmul_parts before 12 so the
// planted-row control's first 12 batched cases (n = i + 1) hold an add case of even n (its
// plant, the launch's middle element, lands in another row than the row's own) and a
// matmul_parts case. logits stays at index 2 (its draws there, n = 3 and K = 33 at the
// default seed, make the 6-case mutant runs see a batch-dependent product order).
constexpr Op kOps[] = {Op::matmul, Op::add,   Op::logits, Op::rms_norm,
                       Op::matmul_parts, Op::swiglu, Op::argmax, Op::embed};
constexpr int kNumOps = int(std::size(kOps));

const char* op_name(Op o) {
  switch (o) {
    case Op::embed: return "embed";
    case Op::rms_norm: return "rms_norm";
    case Op::matmul: return "matmul";
    case Op::matmul_parts: return "matmul_parts";
    case Op::add: return "add";
    case Op::swiglu: return "swiglu";
    case Op::logits: return "logits";
    case Op::argmax: return "argmax";
  }
  return "?";
}

// Reduction lengths: odd ones and the multiples of 8 around them; from 1024 on, lengths
// where the product's partials take a second and third octet (rows.h: 128 partials of
// octets), the last one short.
constexpr int kLens[] = {1,   2,   3,   5,   7,   8,   9,   15,  16,   17,   31,  33,
                         64,  65,  100, 127, 128, 129, 255, 256, 257, 513, 1024, 1031, 2056};

// Rows longer than the device RMSNorm's shared-memory chunk (kNormChunk = 8192 floats,
// kernels/engine/kernels.cu: rms_rows_kernel, which stages a row a chunk at a time for
// rms_norm and for logits' final norm alike): fixed cases among the first 64, so every run
// of 64 cases or more (the default 128, the unit test's 64) holds rows of 2 and 3 chunks,
// on the kernel's float4 path (dim % 4 == 0) and its element-wise one (odd dim). Case i
// keeps every draw of make_case (the other cases are unchanged); only its length is
// replaced, and logits' vocabulary capped at 32 (the head product's cost on cpu).
struct LongRow {
  int index;
  int64_t dim;
};
constexpr LongRow kLongRows[] = {{10, 16411}, {11, 16411}, {18, 12288}, {19, 12288}};
constexpr int64_t kNormChunkFloats = 8192;  // the device kernel's chunk (coverage: norm_row)

struct Case {
  Op op;
  int n;
  // matmul: rows, cols; matmul_parts: the parts' rows summed, cols; logits, embed: vocab,
  // dim; rms_norm, swiglu, add: dim (b = 1); argmax: len
  int64_t a, b;
  int parts = 0;                 // matmul_parts: 1..3
  int64_t part_rows[3] = {};     // matmul_parts: each part's rows (sum a)
  uint64_t seed;
  std::string line() const {
    std::ostringstream s;
    s << "rows-invariant(op=" << op_name(op) << ",n=" << n << ",a=" << a << ",b=" << b;
    if (op == Op::matmul_parts) {
      s << ",parts=";
      for (int p = 0; p < parts; ++p) s << (p ? "+" : "") << part_rows[p];
    }
    s << ",seed=" << seed << ")";
    return s.str();
  }
};

Case make_case(uint64_t run_seed, int i) {
  std::mt19937_64 g(mix_seed(run_seed, uint64_t(i)));
  Case c;
  c.op = kOps[i % kNumOps];
  c.n = i < 64 ? i + 1 : 1 + int(g() % 64);
  const int nl = int(sizeof(kLens) / sizeof(kLens[0]));
  int64_t len = kLens[g() % nl];
  switch (c.op) {
    case Op::matmul: c.a = 1 + int64_t(g() % 300), c.b = len; break;
    case Op::matmul_parts: {
      // 1, 2, 3 parts in turn over the first 64 cases, drawn later. Half the cases take a
      // batch of at most 8 and K a multiple of 8: where cuda's staged kernel runs the parts
      // in one launch (elsewhere it is one block launch per part).
      c.parts = i < 64 ? 1 + (i / kNumOps) % 3 : 1 + int(g() % 3);
      if (g() & 1) {
        c.n = 1 + (c.n - 1) % 8;
        len = 8 * ((len + 7) / 8);
      }
      c.a = 0;
      for (int p = 0; p < c.parts; ++p) c.a += c.part_rows[p] = 1 + int64_t(g() % 200);
      c.b = len;
      break;
    }
    case Op::add: c.a = len, c.b = 1; break;
    case Op::logits: c.a = 1 + int64_t(g() % 700), c.b = len; break;
    case Op::embed: c.a = 1 + int64_t(g() % 300), c.b = len; break;
    case Op::rms_norm: c.a = len, c.b = 1; break;
    case Op::swiglu: c.a = len, c.b = 1; break;
    case Op::argmax: c.a = 1 + int64_t(g() % 1500), c.b = 1; break;
  }
  c.seed = g();
  for (const LongRow& l : kLongRows)
    if (l.index == i) {
      if (c.op == Op::rms_norm) c.a = l.dim;
      if (c.op == Op::logits) c.a = 1 + (c.a - 1) % 32, c.b = l.dim;
    }
  return c;
}

uint16_t to_bf16(float f) {  // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// The case's host inputs.
struct Data {
  // x: rows [n][len] (matmul x, rms x, swiglu gate, add h, logits h, argmax x); w: norm
  // weight / up / add t
  std::vector<float> x, w;
  std::vector<uint16_t> W;     // matmul / logits / embed matrix; matmul_parts: the parts' matrices one after another
  std::vector<int32_t> tokens; // embed
  float eps = 1e-6f;
};

Data make_data(const Case& c) {
  Data d;
  std::mt19937_64 g(c.seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto row_scale = [&] { return std::ldexp(1.0f, int(g() % 13) - 6); };
  const int n = c.n;
  switch (c.op) {
    case Op::matmul:
    case Op::matmul_parts:
    case Op::logits:
    case Op::embed: {
      const int64_t R = c.a, K = c.b;
      d.W.resize(size_t(R * K));
      for (int64_t r = 0; r < R; ++r) {
        const float s = row_scale() / std::sqrt(float(K));
        for (int64_t k = 0; k < K; ++k) d.W[size_t(r * K + k)] = to_bf16(nd(g) * s);
      }
      if (c.op == Op::embed) {
        d.tokens.resize(n);
        for (int i = 0; i < n; ++i) d.tokens[i] = int32_t(g() % uint64_t(R));
        break;
      }
      d.x.resize(size_t(n) * K);
      for (int i = 0; i < n; ++i) {
        const float s = row_scale();
        const bool zero_row = g() % 23 == 0;
        for (int64_t k = 0; k < K; ++k) d.x[size_t(i * K + k)] = zero_row ? 0.0f : nd(g) * s;
      }
      if (c.op == Op::logits) {
        d.w.resize(size_t(K));
        for (float& v : d.w) v = 1.0f + 0.25f * nd(g);
        d.eps = (g() & 1) ? 1e-6f : 1e-5f;
        for (int i = 0; i < n; ++i)  // logits rows are never all zero (a zero row's norm is 0, fine, but keep them live)
          d.x[size_t(i * K)] += 1.0f;
      }
      break;
    }
    case Op::rms_norm: {
      const int64_t D = c.a;
      d.x.resize(size_t(n) * D);
      d.w.resize(size_t(D));
      for (int i = 0; i < n; ++i) {
        const float s = row_scale();
        for (int64_t k = 0; k < D; ++k) d.x[size_t(i * D + k)] = nd(g) * s;
      }
      for (float& v : d.w) v = 1.0f + 0.25f * nd(g);
      d.eps = (g() & 1) ? 1e-6f : 1e-5f;
      break;
    }
    case Op::swiglu: {
      const int64_t D = c.a;
      d.x.resize(size_t(n) * D);
      d.w.resize(size_t(n) * D);
      for (size_t k = 0; k < d.x.size(); ++k) {
        d.x[k] = (g() % 16 == 0) ? (nd(g) * 20.0f) : nd(g) * 3.0f;  // some gates deep in the tails
        d.w[k] = nd(g) * row_scale();
      }
      // Gates where e^-g leaves float's range (float's e^-g rounds to inf and the product to
      // 0; the bound's |g u| 2^-126 term, reference/engine_ref.h), just inside it (the
      // quotient near the subnormal range) and far out on both sides, in every case.
      constexpr float kEdge[] = {-88.75f, -88.70f, -87.5f, -104.0f, 88.75f, 104.0f};
      for (size_t k = 0; k < std::size(kEdge) && k < d.x.size(); ++k) d.x[k * 7 % d.x.size()] = kEdge[k];
      // Products g u past float's range where y is not (y = (g / (1 + e^-g)) u: the quotient
      // first, g = -80, u = 3e38 gives y = -4.3e5; g u first gives -inf), from the end of the
      // launch, where the gates above do not land in cases of 8 elements or more.
      constexpr float kWide[][2] = {{-80.0f, 3e38f}, {-60.0f, 1e38f}, {-50.0f, -2e38f}};
      for (size_t k = 0; k < std::size(kWide) && k < d.x.size(); ++k) {
        const size_t at = d.x.size() - 1 - k * 2 % d.x.size();
        d.x[at] = kWide[k][0], d.w[at] = kWide[k][1];
      }
      break;
    }
    case Op::add: {
      const int64_t D = c.a;
      const size_t N = size_t(n) * D;
      d.x.resize(N);
      d.w.resize(N);
      const float inf = std::numeric_limits<float>::infinity(), fmax = std::numeric_limits<float>::max();
      const float sub = std::numeric_limits<float>::denorm_min();
      for (size_t k = 0; k < N; ++k) {
        const float s = row_scale();
        float& h = d.x[k];
        float& t = d.w[k];
        h = nd(g) * s;
        switch (g() % 16) {
          case 0: t = -h; break;                                                         // exact cancellation: +0
          case 1: h = (g() & 1) ? -0.0f : 0.0f, t = (g() & 1) ? -0.0f : 0.0f; break;     // signed zeros
          case 2: h = sub * float(int64_t(g() % (1u << 23)) - (1 << 22)),                // subnormals (and sums
                  t = sub * float(int64_t(g() % (1u << 23)) - (1 << 22)); break;         // crossing FLT_MIN)
          case 3: h = fmax * (0.5f + 0.5f * float(g() % 1024) / 1024), t = h; break;     // sums past FLT_MAX
          case 4: h = (g() & 1) ? inf : -inf, t = nd(g) * s; break;                      // inf + finite
          case 5: t = nd(g) * std::ldexp(1.0f, int(g() % 60) - 30); break;               // far apart scales
          default: t = nd(g) * s; break;
        }
        if (g() % 16 == 3) h = -h, t = -t;  // negative sums past -FLT_MAX too (signs never differ on inf)
      }
      // In every case, as many as it has elements: -0 + -0 = -0, +0 + -0 = +0, x - x = +0,
      // subnormal sums (one reaching FLT_MIN), FLT_MAX + FLT_MAX = inf (and its negative), the
      // tie FLT_MAX + 2^103 (to even: inf), FLT_MAX + 2^102 (FLT_MAX), +-inf + finite, the tie
      // 1 + 2^-24 (to even: 1).
      const float kEdge[][2] = {{-0.0f, -0.0f},     {0.0f, -0.0f},       {1.5f, -1.5f},
                                {sub, sub},         {std::nextafter(std::numeric_limits<float>::min(), 0.0f), sub},
                                {fmax, fmax},       {-fmax, -fmax},      {fmax, std::ldexp(1.0f, 103)},
                                {fmax, std::ldexp(1.0f, 102)},          {inf, 1.0f},
                                {-inf, fmax},       {1.0f, std::ldexp(1.0f, -24)}};
      for (size_t k = 0; k < std::size(kEdge) && k < N; ++k) {
        d.x[k * 7 % N] = kEdge[k][0];
        d.w[k * 7 % N] = kEdge[k][1];
      }
      break;
    }
    case Op::argmax: {
      const int64_t L = c.a;
      d.x.resize(size_t(n) * L);
      const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
      for (int i = 0; i < n; ++i) {
        float* r = d.x.data() + int64_t(i) * L;
        const uint64_t kind = g() % 8;
        for (int64_t k = 0; k < L; ++k) r[k] = nd(g);
        if (kind == 0) {  // ties: the maximum at several places
          const float m = 5.0f + float(g() % 4);
          for (int t = 0; t < 4; ++t) r[g() % L] = m;
        } else if (kind == 1) {  // NaN sprinkled, one of them at the front
          for (int t = 0; t < 5; ++t) r[g() % L] = nan;
          r[0] = nan;
        } else if (kind == 2) {  // all NaN
          for (int64_t k = 0; k < L; ++k) r[k] = nan;
        } else if (kind == 3) {  // -inf and signed zeros only
          for (int64_t k = 0; k < L; ++k) r[k] = (g() % 3 == 0) ? -inf : ((g() & 1) ? 0.0f : -0.0f);
        } else if (kind == 4) {  // quantised values: many ties
          for (int64_t k = 0; k < L; ++k) r[k] = float(int(g() % 5));
        }
      }
      break;
    }
  }
  return d;
}

// One launch over rows [r0, r0 + m) of the case's inputs on `eb`: floats out (or the
// argmax indices). Inputs go through scratch slots 0..2 and 4..6 of eb's memory, outputs
// through slots 3, 7, 8 (matmul_parts' parts alone: 9), each kGuardFloats longer than the
// output: the guard, a canary written before the launch and read back after it.
constexpr int kPartW[3] = {2, 5, 6}, kPartY[3] = {3, 7, 8}, kAloneY = 9;
constexpr size_t kGuardFloats = 16;
constexpr uint32_t kCanary = 0x7fa5a5a5u;  // a NaN whose payload no kernel makes

struct Out {
  std::vector<float> f;
  std::vector<int32_t> idx;
  std::string guard;  // empty: every guard held; else the first output region whose guard changed
};

// An output region of `bytes` in `slot`, its guard's canary written.
Status out_region(EngineBackend& eb, int slot, size_t bytes, void** p) {
  KC_RETURN_IF_ERROR(eb.scratch(slot, bytes + kGuardFloats * 4, p));
  const std::vector<uint32_t> canary(kGuardFloats, kCanary);
  return eb.upload(static_cast<char*>(*p) + bytes, canary.data(), kGuardFloats * 4);
}

// The region's bytes to `host`, its guard checked (a change noted in out->guard).
Status read_region(EngineBackend& eb, const void* p, size_t bytes, void* host, Out* out, const char* what) {
  std::vector<uint8_t> all(bytes + kGuardFloats * 4);
  KC_RETURN_IF_ERROR(eb.download(all.data(), p, all.size()));
  if (bytes) std::memcpy(host, all.data(), bytes);
  for (size_t k = 0; k < kGuardFloats && out->guard.empty(); ++k) {
    uint32_t v;
    std::memcpy(&v, all.data() + bytes + 4 * k, 4);
    if (v != kCanary) out->guard = std::string(what) + ": float " + std::to_string(k) + " past the output changed";
  }
  return Status::Ok();
}

// `bytes` of `host` into scratch slot `slot` of eb's memory (at least 4 bytes reserved).
Status put(EngineBackend& eb, int slot, const void* host, size_t bytes, void** p) {
  KC_RETURN_IF_ERROR(eb.scratch(slot, std::max<size_t>(bytes, 4), p));
  return eb.upload(*p, host, bytes);
}

Status launch(EngineBackend& eb, const Case& c, const Data& d, int r0, int m, Out* out) {
  void *px, *pw, *pW, *po, *pt;
  out->f.clear();
  out->idx.clear();
  out->guard.clear();
  // The launch's float output [m][width] in slot 3.
  auto floats_out = [&](int64_t width, const std::function<Status()>& call) -> Status {
    const size_t bytes = size_t(m) * width * 4;
    KC_RETURN_IF_ERROR(out_region(eb, 3, bytes, &po));
    KC_RETURN_IF_ERROR(call());
    out->f.resize(size_t(m) * width);
    return read_region(eb, po, bytes, out->f.data(), out, op_name(c.op));
  };
  switch (c.op) {
    case Op::matmul: {
      const int64_t R = c.a, K = c.b;
      KC_RETURN_IF_ERROR(put(eb, 2, d.W.data(), d.W.size() * 2, &pW));
      KC_RETURN_IF_ERROR(put(eb, 0, d.x.data() + int64_t(r0) * K, size_t(m) * K * 4, &px));
      return floats_out(R, [&] {
        return eb.matmul(static_cast<uint16_t*>(pW), R, K, static_cast<float*>(px), m, static_cast<float*>(po));
      });
    }
    case Op::matmul_parts: {
      // Each part's W and y in its own slots; the rows laid out [part 0][part 1][part 2].
      const int64_t K = c.b;
      KC_RETURN_IF_ERROR(put(eb, 0, d.x.data() + int64_t(r0) * K, size_t(m) * K * 4, &px));
      MatmulPart parts[3];
      int64_t off = 0;
      for (int p = 0; p < c.parts; ++p) {
        void *pWp, *pyp;
        KC_RETURN_IF_ERROR(put(eb, kPartW[p], d.W.data() + off * K, size_t(c.part_rows[p] * K) * 2, &pWp));
        KC_RETURN_IF_ERROR(out_region(eb, kPartY[p], size_t(m) * c.part_rows[p] * 4, &pyp));
        parts[p] = {static_cast<uint16_t*>(pWp), c.part_rows[p], static_cast<float*>(pyp)};
        off += c.part_rows[p];
      }
      KC_RETURN_IF_ERROR(eb.matmul_parts(parts, c.parts, K, static_cast<float*>(px), m));
      out->f.resize(size_t(m) * c.a);
      off = 0;
      for (int p = 0; p < c.parts; ++p) {
        const int64_t R = c.part_rows[p];
        std::vector<float> y(size_t(m) * R);
        const std::string what = "matmul_parts part " + std::to_string(p);
        KC_RETURN_IF_ERROR(read_region(eb, parts[p].y, y.size() * 4, y.data(), out, what.c_str()));
        for (int i = 0; i < m; ++i) std::memcpy(&out->f[size_t(i * c.a + off)], &y[size_t(i * R)], size_t(R) * 4);
        off += R;
      }
      return Status::Ok();
    }
    case Op::logits: {
      const int64_t V = c.a, K = c.b;
      KC_RETURN_IF_ERROR(put(eb, 2, d.W.data(), d.W.size() * 2, &pW));
      KC_RETURN_IF_ERROR(put(eb, 1, d.w.data(), d.w.size() * 4, &pw));
      KC_RETURN_IF_ERROR(put(eb, 0, d.x.data() + int64_t(r0) * K, size_t(m) * K * 4, &px));
      std::vector<int32_t> sel(m);
      for (int j = 0; j < m; ++j) sel[j] = j;
      return floats_out(V, [&] {
        return eb.logits(static_cast<float*>(px), sel.data(), m, int(K), static_cast<float*>(pw), d.eps,
                         static_cast<uint16_t*>(pW), V, static_cast<float*>(po));
      });
    }
    case Op::embed: {
      const int64_t V = c.a, D = c.b;
      KC_RETURN_IF_ERROR(put(eb, 2, d.W.data(), d.W.size() * 2, &pW));
      KC_RETURN_IF_ERROR(put(eb, 4, d.tokens.data() + r0, size_t(m) * 4, &pt));
      return floats_out(D, [&] {
        return eb.embed(static_cast<uint16_t*>(pW), V, D, static_cast<int32_t*>(pt), m, static_cast<float*>(po));
      });
    }
    case Op::rms_norm: {
      const int64_t D = c.a;
      KC_RETURN_IF_ERROR(put(eb, 1, d.w.data(), d.w.size() * 4, &pw));
      KC_RETURN_IF_ERROR(put(eb, 0, d.x.data() + int64_t(r0) * D, size_t(m) * D * 4, &px));
      return floats_out(D, [&] {
        return eb.rms_norm(static_cast<float*>(px), static_cast<float*>(pw), m, int(D), d.eps, static_cast<float*>(po));
      });
    }
    case Op::swiglu: {
      const int64_t D = c.a;
      KC_RETURN_IF_ERROR(put(eb, 0, d.x.data() + int64_t(r0) * D, size_t(m) * D * 4, &px));
      KC_RETURN_IF_ERROR(put(eb, 1, d.w.data() + int64_t(r0) * D, size_t(m) * D * 4, &pw));
      return floats_out(D, [&] {
        return eb.swiglu(static_cast<float*>(px), static_cast<float*>(pw), int64_t(m) * D, static_cast<float*>(po));
      });
    }
    case Op::add: {  // in place: h goes into the output region
      const int64_t D = c.a;
      KC_RETURN_IF_ERROR(put(eb, 1, d.w.data() + int64_t(r0) * D, size_t(m) * D * 4, &pw));
      return floats_out(D, [&] {
        KC_RETURN_IF_ERROR(eb.upload(po, d.x.data() + int64_t(r0) * D, size_t(m) * D * 4));
        return eb.add(static_cast<float*>(po), static_cast<float*>(pw), int64_t(m) * D);
      });
    }
    case Op::argmax: {
      const int64_t L = c.a;
      KC_RETURN_IF_ERROR(put(eb, 0, d.x.data() + int64_t(r0) * L, size_t(m) * L * 4, &px));
      KC_RETURN_IF_ERROR(out_region(eb, 3, size_t(m) * 4, &po));
      KC_RETURN_IF_ERROR(eb.argmax(static_cast<float*>(px), m, L, static_cast<int32_t*>(po)));
      out->idx.resize(size_t(m));
      return read_region(eb, po, out->idx.size() * 4, out->idx.data(), out, "argmax");
    }
  }
  return Status::Error("unknown op");
}

// parts==matmul: each part of the batched matmul_parts output `got` against a plain matmul
// of that part alone over the same batch on `eb` (output in slot kAloneY, guarded into
// `guard`). Empty when every part's bytes agree, else the first difference.
Status parts_alone(EngineBackend& eb, const Case& c, const Data& d, const Out& got, std::string* diff, Out* guard) {
  diff->clear();
  const int64_t K = c.b;
  void *px, *pW, *py;
  KC_RETURN_IF_ERROR(put(eb, 0, d.x.data(), size_t(c.n) * K * 4, &px));
  int64_t off = 0;
  for (int p = 0; p < c.parts; ++p) {
    const int64_t R = c.part_rows[p];
    KC_RETURN_IF_ERROR(put(eb, kPartW[p], d.W.data() + off * K, size_t(R * K) * 2, &pW));
    KC_RETURN_IF_ERROR(out_region(eb, kAloneY, size_t(c.n) * R * 4, &py));
    KC_RETURN_IF_ERROR(
        eb.matmul(static_cast<uint16_t*>(pW), R, K, static_cast<float*>(px), c.n, static_cast<float*>(py)));
    std::vector<float> y(size_t(c.n) * R);
    const std::string what = "matmul of part " + std::to_string(p) + " alone";
    KC_RETURN_IF_ERROR(read_region(eb, py, y.size() * 4, y.data(), guard, what.c_str()));
    for (int i = 0; i < c.n && diff->empty(); ++i)
      for (int64_t o = 0; o < R; ++o)
        if (std::memcmp(&got.f[size_t(i * c.a + off + o)], &y[size_t(i * R + o)], 4) != 0) {
          std::ostringstream s;
          s << "part " << p << " row " << i << " element " << o << ": matmul_parts " << got.f[size_t(i * c.a + off + o)]
            << ", matmul alone " << y[size_t(i * R + o)];
          *diff = s.str();
          break;
        }
    off += R;
  }
  return Status::Ok();
}

// joined==plain: the launches that join two kernels against the calls they join, on `eb`
// over the case's batch (outputs in slots kJoinA.., guarded into `guard`). rms_norm cases:
// rms_norm_parts of three parts, the first ceil(n / 2) rows in place, no rows, the other rows
// into a region of their own, against `got`, the batched rms_norm. add cases: add_rms_norm(h,
// t, w) with norm weights of the case's own (its draws are not the case's), h's sums against
// `got` (the batched add) and the norm against rms_norm of `got`. Empty when every byte
// agrees, else the first difference.
constexpr int kJoinA = 10, kJoinB = 11, kJoinIn = 12, kJoinW = 13;
constexpr float kJoinEps = 1e-6f;

std::string first_diff(const float* a, const float* b, size_t count, int64_t width, const char* what,
                       const char* a_name, const char* b_name) {
  for (size_t e = 0; e < count; ++e)
    if (std::memcmp(&a[e], &b[e], 4) != 0) {
      std::ostringstream s;
      s << what << " row " << int64_t(e) / width << " element " << int64_t(e) % width << ": " << a_name << " " << a[e]
        << ", " << b_name << " " << b[e];
      return s.str();
    }
  return "";
}

std::vector<float> join_weights(const Case& c) {
  std::mt19937_64 g(mix_seed(c.seed, 0x6a6f696eu));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> w(size_t(c.a));
  for (float& v : w) v = 1.0f + 0.25f * nd(g);
  return w;
}

Status joined_vs_plain(EngineBackend& eb, const Case& c, const Data& d, const Out& got, std::string* diff, Out* guard) {
  diff->clear();
  const int64_t D = c.a;
  const int n = c.n, h = (n + 1) / 2;
  void *pa, *pb, *pin, *pw;
  if (c.op == Op::rms_norm) {
    KC_RETURN_IF_ERROR(put(eb, kJoinW, d.w.data(), d.w.size() * 4, &pw));
    KC_RETURN_IF_ERROR(put(eb, kJoinIn, d.x.data(), size_t(n) * D * 4, &pin));
    KC_RETURN_IF_ERROR(out_region(eb, kJoinA, size_t(h) * D * 4, &pa));
    KC_RETURN_IF_ERROR(out_region(eb, kJoinB, size_t(n - h) * D * 4, &pb));
    KC_RETURN_IF_ERROR(eb.upload(pa, d.x.data(), size_t(h) * D * 4));
    const float* w = static_cast<float*>(pw);
    float* a = static_cast<float*>(pa);
    const NormPart parts[3] = {{a, w, h, a},
                               {static_cast<float*>(pin), w, 0, static_cast<float*>(pb)},
                               {static_cast<float*>(pin) + int64_t(h) * D, w, n - h, static_cast<float*>(pb)}};
    KC_RETURN_IF_ERROR(eb.rms_norm_parts(parts, 3, int(D), d.eps));
    std::vector<float> ya(size_t(h) * D), yb(size_t(n - h) * D);
    KC_RETURN_IF_ERROR(read_region(eb, pa, ya.size() * 4, ya.data(), guard, "rms_norm_parts part 0 (in place)"));
    KC_RETURN_IF_ERROR(read_region(eb, pb, yb.size() * 4, yb.data(), guard, "rms_norm_parts part 2"));
    *diff = first_diff(ya.data(), got.f.data(), ya.size(), D, "rms_norm_parts part 0", "joined", "rms_norm");
    if (diff->empty())
      *diff = first_diff(yb.data(), got.f.data() + ya.size(), yb.size(), D, "rms_norm_parts part 2", "joined", "rms_norm");
    return Status::Ok();
  }
  // add: h (d.x) += t (d.w), then the norm.
  const size_t N = size_t(n) * D;
  const std::vector<float> w = join_weights(c);
  KC_RETURN_IF_ERROR(put(eb, kJoinW, w.data(), w.size() * 4, &pw));
  KC_RETURN_IF_ERROR(put(eb, kJoinIn, d.w.data(), N * 4, &pin));
  KC_RETURN_IF_ERROR(out_region(eb, kJoinA, N * 4, &pa));
  KC_RETURN_IF_ERROR(out_region(eb, kJoinB, N * 4, &pb));
  KC_RETURN_IF_ERROR(eb.upload(pa, d.x.data(), N * 4));
  KC_RETURN_IF_ERROR(eb.add_rms_norm(static_cast<float*>(pa), static_cast<float*>(pin), static_cast<float*>(pw), n,
                                     int(D), kJoinEps, static_cast<float*>(pb)));
  std::vector<float> sums(N), y(N), plain(N);
  KC_RETURN_IF_ERROR(read_region(eb, pa, N * 4, sums.data(), guard, "add_rms_norm's h"));
  KC_RETURN_IF_ERROR(read_region(eb, pb, N * 4, y.data(), guard, "add_rms_norm's norm"));
  // The plain norm of the plain sums, in the same regions (A: the sums, B: their norm).
  KC_RETURN_IF_ERROR(out_region(eb, kJoinB, N * 4, &pb));
  KC_RETURN_IF_ERROR(eb.upload(pa, got.f.data(), N * 4));
  KC_RETURN_IF_ERROR(eb.rms_norm(static_cast<float*>(pa), static_cast<float*>(pw), n, int(D), kJoinEps,
                                 static_cast<float*>(pb)));
  KC_RETURN_IF_ERROR(read_region(eb, pb, N * 4, plain.data(), guard, "rms_norm of the add's sums"));
  *diff = first_diff(sums.data(), got.f.data(), N, D, "add_rms_norm's h", "joined", "add");
  if (diff->empty()) *diff = first_diff(y.data(), plain.data(), N, D, "add_rms_norm's norm", "joined", "add then rms_norm");
  return Status::Ok();
}

// Output elements per row.
int64_t row_width(const Case& c) {
  switch (c.op) {
    case Op::matmul: case Op::matmul_parts: case Op::logits: case Op::rms_norm: case Op::swiglu: case Op::add:
      return c.a;
    case Op::embed: return c.b;
    case Op::argmax: return 1;
  }
  return 0;
}

bool same_row(const Case& c, const Out& batched, int i, const Out& solo) {
  if (c.op == Op::argmax) return batched.idx[size_t(i)] == solo.idx[0];
  const int64_t w = row_width(c);
  return std::memcmp(batched.f.data() + int64_t(i) * w, solo.f.data(), size_t(w) * 4) == 0;
}

bool same_bytes(const Out& a, const Out& b) {
  return a.f.size() == b.f.size() && a.idx == b.idx &&
         (a.f.empty() || std::memcmp(a.f.data(), b.f.data(), a.f.size() * 4) == 0);
}

// ---- controls: decorators of an engine ---------------------------------------------

// split_k_by_batch: matmul splits K when n > 1 (-> rows==solo). planted_row: one row of a
// batched launch one ulp off (-> rows==solo). parts_ulp: matmul_parts' last part, the first
// element of every row one ulp up, whatever the batch (-> parts==matmul only). joined_ulp:
// rms_norm_parts' last part with rows and add_rms_norm's norm, the first element one ulp up
// (-> joined==plain only). write_past_output: every kernel writes one float (argmax: one
// index) past its output (-> guards only).
enum class Plant { split_k_by_batch, planted_row, parts_ulp, joined_ulp, write_past_output };

// Every operation forwards to `in` (matmul_parts too: ForwardingEngine leaves it to the
// default, one matmul per part through this decorator; here the inner engine's own
// launch runs, then the plant). rms_norm_parts and add_rms_norm: the inner engine's joined
// launch under joined_ulp, else the default (the plain calls, through these plants).
class PlantedEngine final : public ForwardingEngine {
 public:
  PlantedEngine(EngineBackend& in, Plant p) : ForwardingEngine(in), plant_(p) {}
  Status embed(const uint16_t* E, int64_t v, int64_t d, const int32_t* t, int n, float* out) override {
    KC_RETURN_IF_ERROR(in_.embed(E, v, d, t, n, out));
    KC_RETURN_IF_ERROR(past(out, int64_t(n) * d));
    return plant_row(out, n, d);
  }
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    KC_RETURN_IF_ERROR(in_.rms_norm(x, w, n, dim, eps, out));
    KC_RETURN_IF_ERROR(past(out, int64_t(n) * dim));
    return plant_row(out, n, dim);
  }
  Status matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) override {
    if (plant_ == Plant::split_k_by_batch && n > 1 && cols > 1) return split_matmul(W, rows, cols, x, n, y);
    KC_RETURN_IF_ERROR(in_.matmul(W, rows, cols, x, n, y));
    KC_RETURN_IF_ERROR(past(y, int64_t(n) * rows));
    return plant_row(y, n, rows);
  }
  Status matmul_parts(const MatmulPart* parts, int count, int64_t cols, const float* x, int n) override {
    // split_k_by_batch: the default, one (split) matmul of this decorator per part.
    if (plant_ == Plant::split_k_by_batch) return EngineBackend::matmul_parts(parts, count, cols, x, n);
    KC_RETURN_IF_ERROR(in_.matmul_parts(parts, count, cols, x, n));
    for (int p = 0; p < count; ++p) {
      KC_RETURN_IF_ERROR(past(parts[p].y, int64_t(n) * parts[p].rows));
      KC_RETURN_IF_ERROR(plant_row(parts[p].y, n, parts[p].rows));
    }
    if (plant_ != Plant::parts_ulp) return Status::Ok();
    const MatmulPart& last = parts[count - 1];
    for (int i = 0; i < n; ++i) KC_RETURN_IF_ERROR(ulp_up(last.y + int64_t(i) * last.rows));
    return Status::Ok();
  }
  Status rms_norm_parts(const NormPart* parts, int count, int dim, float eps) override {
    if (plant_ != Plant::joined_ulp) return EngineBackend::rms_norm_parts(parts, count, dim, eps);
    KC_RETURN_IF_ERROR(in_.rms_norm_parts(parts, count, dim, eps));
    for (int p = count - 1; p >= 0; --p)
      if (parts[p].n > 0) return ulp_up(parts[p].out);
    return Status::Ok();
  }
  Status add_rms_norm(float* h, const float* t, const float* w, int n, int dim, float eps, float* out) override {
    if (plant_ != Plant::joined_ulp) return EngineBackend::add_rms_norm(h, t, w, n, dim, eps, out);
    KC_RETURN_IF_ERROR(in_.add_rms_norm(h, t, w, n, dim, eps, out));
    return n > 0 ? ulp_up(out) : Status::Ok();
  }
  Status swiglu(const float* g, const float* u, int64_t count, float* out) override {
    KC_RETURN_IF_ERROR(in_.swiglu(g, u, count, out));
    KC_RETURN_IF_ERROR(past(out, count));
    // The element in the middle of the launch (a row of the batch, another element alone).
    return plant_ == Plant::planted_row && count > 1 ? plant_row(out + count / 2, 1, 0, true) : Status::Ok();
  }
  Status add(float* h, const float* t, int64_t count) override {
    KC_RETURN_IF_ERROR(in_.add(h, t, count));
    KC_RETURN_IF_ERROR(past(h, count));
    // As SwiGLU's: the middle element (another row's than the row alone's when n is even).
    return plant_ == Plant::planted_row && count > 1 ? plant_row(h + count / 2, 1, 0, true) : Status::Ok();
  }
  Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps, const uint16_t* W,
                int64_t vocab, float* out) override {
    KC_RETURN_IF_ERROR(in_.logits(h, sel, m, dim, norm, eps, W, vocab, out));
    KC_RETURN_IF_ERROR(past(out, int64_t(m) * vocab));
    return plant_row(out, m, vocab);
  }
  Status argmax(const float* x, int n, int64_t len, int32_t* out) override {
    KC_RETURN_IF_ERROR(in_.argmax(x, n, len, out));
    if (plant_ == Plant::write_past_output) {
      const int32_t v = 0;
      return in_.upload(out + n, &v, 4);
    }
    if (plant_ != Plant::planted_row || n < 2) return Status::Ok();
    int32_t v;
    KC_RETURN_IF_ERROR(in_.download(&v, out + (n - 1) / 2, 4));
    v = int32_t((v + 1) % len);
    return in_.upload(out + (n - 1) / 2, &v, 4);
  }

 private:
  // Row (n-1)/2 of a batch of n > 1: its first element one ulp up.
  Status plant_row(float* out, int n, int64_t width, bool always = false) {
    if (plant_ != Plant::planted_row || (n < 2 && !always)) return Status::Ok();
    return ulp_up(out + int64_t((n - 1) / 2) * width);
  }
  Status ulp_up(float* at) {
    float v;
    KC_RETURN_IF_ERROR(in_.download(&v, at, 4));
    v = std::nextafter(v, std::numeric_limits<float>::infinity());
    return in_.upload(at, &v, 4);
  }
  // write_past_output: 1.0f into the float after an output of `count` floats.
  Status past(float* out, int64_t count) {
    if (plant_ != Plant::write_past_output) return Status::Ok();
    const float one = 1.0f;
    return in_.upload(out + count, &one, 4);
  }
  // y = W[:, :h] x[:, :h] + W[:, h:] x[:, h:], h = cols / 2: the reduction split in two
  // (what a split-K launch chosen for a larger batch does).
  Status split_matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) {
    const int64_t h = cols / 2, h2 = cols - h;
    std::vector<uint16_t> Wh(size_t(rows * cols)), W1(size_t(rows * h)), W2(size_t(rows * h2));
    std::vector<float> xh(size_t(n) * cols), x1(size_t(n) * h), x2(size_t(n) * h2);
    KC_RETURN_IF_ERROR(in_.download(Wh.data(), W, Wh.size() * 2));
    KC_RETURN_IF_ERROR(in_.download(xh.data(), x, xh.size() * 4));
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&W1[size_t(r * h)], &Wh[size_t(r * cols)], size_t(h) * 2);
      std::memcpy(&W2[size_t(r * h2)], &Wh[size_t(r * cols + h)], size_t(h2) * 2);
    }
    for (int i = 0; i < n; ++i) {
      std::memcpy(&x1[size_t(i) * h], &xh[size_t(i) * cols], size_t(h) * 4);
      std::memcpy(&x2[size_t(i) * h2], &xh[size_t(i) * cols + h], size_t(h2) * 4);
    }
    void *pW1, *pW2, *px1, *px2, *pt;
    KC_RETURN_IF_ERROR(in_.scratch(16, W1.size() * 2, &pW1));
    KC_RETURN_IF_ERROR(in_.scratch(17, W2.size() * 2, &pW2));
    KC_RETURN_IF_ERROR(in_.scratch(18, x1.size() * 4, &px1));
    KC_RETURN_IF_ERROR(in_.scratch(19, x2.size() * 4, &px2));
    KC_RETURN_IF_ERROR(in_.scratch(20, size_t(n) * rows * 4, &pt));
    KC_RETURN_IF_ERROR(in_.upload(pW1, W1.data(), W1.size() * 2));
    KC_RETURN_IF_ERROR(in_.upload(pW2, W2.data(), W2.size() * 2));
    KC_RETURN_IF_ERROR(in_.upload(px1, x1.data(), x1.size() * 4));
    KC_RETURN_IF_ERROR(in_.upload(px2, x2.data(), x2.size() * 4));
    KC_RETURN_IF_ERROR(in_.matmul(static_cast<uint16_t*>(pW1), rows, h, static_cast<float*>(px1), n, y));
    KC_RETURN_IF_ERROR(in_.matmul(static_cast<uint16_t*>(pW2), rows, h2, static_cast<float*>(px2), n, static_cast<float*>(pt)));
    return in_.add(y, static_cast<float*>(pt), int64_t(n) * rows);
  }

  Plant plant_;
};


// ---- refusals: every kernel argument at the edges of its range ----------------------

enum class RefusalPlant { none, accepts_one_past, unnamed_refusal, writes_then_refuses };

// The controls of the refusals gate: a refusal turned into success, a refusal whose
// message names nothing, or one output float written before the refusal.
class RefusalPlantEngine final : public ForwardingEngine {
 public:
  RefusalPlantEngine(EngineBackend& in, RefusalPlant p) : ForwardingEngine(in), plant_(p) {}
  Status embed(const uint16_t* E, int64_t v, int64_t d, const int32_t* t, int n, float* out) override {
    return after(out, [&] { return in_.embed(E, v, d, t, n, out); });
  }
  Status rms_norm(const float* x, const float* w, int n, int dim, float eps, float* out) override {
    return after(out, [&] { return in_.rms_norm(x, w, n, dim, eps, out); });
  }
  Status matmul(const uint16_t* W, int64_t rows, int64_t cols, const float* x, int n, float* y) override {
    return after(y, [&] { return in_.matmul(W, rows, cols, x, n, y); });
  }
  Status swiglu(const float* g, const float* u, int64_t count, float* out) override {
    return after(out, [&] { return in_.swiglu(g, u, count, out); });
  }
  Status add(float* h, const float* t, int64_t count) override {
    return after(h, [&] { return in_.add(h, t, count); });
  }
  Status logits(const float* h, const int32_t* sel, int m, int dim, const float* norm, float eps, const uint16_t* W,
                int64_t vocab, float* out) override {
    return after(out, [&] { return in_.logits(h, sel, m, dim, norm, eps, W, vocab, out); });
  }
  Status argmax(const float* x, int n, int64_t len, int32_t* out) override {
    return after(out, [&] { return in_.argmax(x, n, len, out); });
  }

 private:
  template <class F>
  Status after(void* out, F call) {
    Status st = call();
    if (st.ok) return st;
    switch (plant_) {
      case RefusalPlant::accepts_one_past: return Status::Ok();
      case RefusalPlant::unnamed_refusal: return Status::Error("refused");
      case RefusalPlant::writes_then_refuses:
        if (out) {
          const float one = 1.0f;
          KC_RETURN_IF_ERROR(in_.upload(out, &one, 4));
        }
        return st;
      case RefusalPlant::none: break;
    }
    return st;
  }
  RefusalPlant plant_;
};

// One call at an edge: the kernel, the argument at its edge, valid or not, the call.
struct Probe {
  std::string op, arg;
  bool valid;
  std::function<Status(EngineBackend&)> call;
};

void refusals_gate(Run& run, EngineBackend& eb) {
  const std::string line = "rows-invariant(refusals)";
  // Inputs (small, valid) and an output region filled with a canary.
  constexpr size_t kFloats = 64;
  void *px, *pw, *pW, *pt, *po;
  std::vector<float> xs(kFloats, 0.5f), canary(kFloats);
  std::vector<uint16_t> Ws(kFloats, 0x3f80);  // bf16 1.0
  std::vector<int32_t> toks(kFloats, 0);
  std::memset(canary.data(), 0x7f, canary.size() * 4);
  Status st = eb.scratch(0, kFloats * 4, &px);
  if (st.ok) st = eb.scratch(1, kFloats * 4, &pw);
  if (st.ok) st = eb.scratch(2, kFloats * 2, &pW);
  if (st.ok) st = eb.scratch(4, kFloats * 4, &pt);
  if (st.ok) st = eb.scratch(3, kFloats * 4, &po);
  if (st.ok) st = eb.upload(px, xs.data(), kFloats * 4);
  if (st.ok) st = eb.upload(pw, xs.data(), kFloats * 4);
  if (st.ok) st = eb.upload(pW, Ws.data(), kFloats * 2);
  if (st.ok) st = eb.upload(pt, toks.data(), kFloats * 4);
  if (!st.ok) {
    run.error(line, st.message);
    return;
  }
  float* x = static_cast<float*>(px);
  float* w = static_cast<float*>(pw);
  const uint16_t* W = static_cast<uint16_t*>(pW);
  const int32_t* t = static_cast<int32_t*>(pt);
  float* o = static_cast<float*>(po);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Probe> probes = {
      {"embed", "vocab", true, [=](EngineBackend& e) { return e.embed(W, 1, 4, t, 2, o); }},
      {"embed", "vocab", false, [=](EngineBackend& e) { return e.embed(W, 0, 4, t, 2, o); }},
      {"embed", "dim", true, [=](EngineBackend& e) { return e.embed(W, 3, 1, t, 2, o); }},
      {"embed", "dim", false, [=](EngineBackend& e) { return e.embed(W, 3, 0, t, 2, o); }},
      {"embed", "n", true, [=](EngineBackend& e) { return e.embed(W, 3, 4, t, 0, o); }},
      {"embed", "n", false, [=](EngineBackend& e) { return e.embed(W, 3, 4, t, -1, o); }},
      {"embed", "out", false, [=](EngineBackend& e) { return e.embed(W, 3, 4, t, 1, nullptr); }},
      {"rms_norm", "dim", true, [=](EngineBackend& e) { return e.rms_norm(x, w, 2, 1, 1e-6f, o); }},
      {"rms_norm", "dim", false, [=](EngineBackend& e) { return e.rms_norm(x, w, 2, 0, 1e-6f, o); }},
      {"rms_norm", "n", true, [=](EngineBackend& e) { return e.rms_norm(x, w, 0, 4, 1e-6f, o); }},
      {"rms_norm", "n", false, [=](EngineBackend& e) { return e.rms_norm(x, w, -1, 4, 1e-6f, o); }},
      {"rms_norm", "eps", true, [=](EngineBackend& e) { return e.rms_norm(x, w, 2, 4, 0.0f, o); }},
      {"rms_norm", "eps", false, [=](EngineBackend& e) { return e.rms_norm(x, w, 2, 4, -1e-30f, o); }},
      {"rms_norm", "eps", false, [=](EngineBackend& e) { return e.rms_norm(x, w, 2, 4, nan, o); }},
      {"rms_norm", "x", false, [=](EngineBackend& e) { return e.rms_norm(nullptr, w, 2, 4, 1e-6f, o); }},
      {"matmul", "rows", true, [=](EngineBackend& e) { return e.matmul(W, 1, 4, x, 2, o); }},
      {"matmul", "rows", false, [=](EngineBackend& e) { return e.matmul(W, 0, 4, x, 2, o); }},
      {"matmul", "cols", true, [=](EngineBackend& e) { return e.matmul(W, 3, 1, x, 2, o); }},
      {"matmul", "cols", false, [=](EngineBackend& e) { return e.matmul(W, 3, 0, x, 2, o); }},
      {"matmul", "n", true, [=](EngineBackend& e) { return e.matmul(W, 3, 4, x, 0, o); }},
      {"matmul", "n", false, [=](EngineBackend& e) { return e.matmul(W, 3, 4, x, -1, o); }},
      {"matmul", "W", false, [=](EngineBackend& e) { return e.matmul(nullptr, 3, 4, x, 2, o); }},
      {"swiglu", "count", true, [=](EngineBackend& e) { return e.swiglu(x, w, 0, o); }},
      {"swiglu", "count", false, [=](EngineBackend& e) { return e.swiglu(x, w, -1, o); }},
      {"swiglu", "up", false, [=](EngineBackend& e) { return e.swiglu(x, nullptr, 4, o); }},
      {"add", "count", true, [=](EngineBackend& e) { return e.add(o, x, 0); }},
      {"add", "count", false, [=](EngineBackend& e) { return e.add(o, x, -1); }},
      {"add", "t", false, [=](EngineBackend& e) { return e.add(o, nullptr, 4); }},
      {"argmax", "len", true, [=](EngineBackend& e) { return e.argmax(x, 2, 1, reinterpret_cast<int32_t*>(o)); }},
      {"argmax", "len", false, [=](EngineBackend& e) { return e.argmax(x, 2, 0, reinterpret_cast<int32_t*>(o)); }},
      {"argmax", "n", true, [=](EngineBackend& e) { return e.argmax(x, 0, 4, reinterpret_cast<int32_t*>(o)); }},
      {"argmax", "n", false, [=](EngineBackend& e) { return e.argmax(x, -1, 4, reinterpret_cast<int32_t*>(o)); }},
  };
  const int32_t sel0[2] = {0, 1}, selneg[2] = {0, -1};
  auto logits = [=](int m, int dim, float eps, int64_t vocab, const int32_t* sel) {
    return [=](EngineBackend& e) { return e.logits(x, sel, m, dim, w, eps, W, vocab, o); };
  };
  // The joined launches: h (add_rms_norm) and the outputs in the canary region (out 32
  // floats after h), so a write before a refusal shows.
  auto add_norm = [=](int n, int dim, float eps, const float* t) {
    return [=](EngineBackend& e) { return e.add_rms_norm(o, t, w, n, dim, eps, o + 32); };
  };
  probes.push_back({"add_rms_norm", "dim", true, add_norm(2, 1, 1e-6f, x)});
  probes.push_back({"add_rms_norm", "dim", false, add_norm(2, 0, 1e-6f, x)});
  probes.push_back({"add_rms_norm", "n", true, add_norm(0, 4, 1e-6f, x)});
  probes.push_back({"add_rms_norm", "n", false, add_norm(-1, 4, 1e-6f, x)});
  probes.push_back({"add_rms_norm", "eps", false, add_norm(2, 4, -1e-30f, x)});
  probes.push_back({"add_rms_norm", "t", false, add_norm(2, 4, 1e-6f, nullptr)});
  auto norm_parts = [=](int count, int n1) {
    return [=](EngineBackend& e) {
      const NormPart p[kNormPartsMax + 1] = {
          {x, w, 2, o}, {x, w, n1, o + 32}, {x, w, 1, o + 16}, {x, w, 1, o + 48}, {x, w, 1, o + 56}};
      return e.rms_norm_parts(p, count, 4, 1e-6f);
    };
  };
  probes.push_back({"rms_norm_parts", "count", true, norm_parts(kNormPartsMax, 1)});
  probes.push_back({"rms_norm_parts", "count", false, norm_parts(kNormPartsMax + 1, 1)});
  probes.push_back({"rms_norm_parts", "count", false, norm_parts(0, 1)});
  probes.push_back({"rms_norm_parts", "part 1", true, norm_parts(2, 0)});  // a part of no rows
  probes.push_back({"rms_norm_parts", "part 1", false, norm_parts(2, -1)});
  probes.push_back({"rms_norm_parts", "part 1", false, [=](EngineBackend& e) {  // its x is part 0's output
                      const NormPart p[2] = {{x, w, 2, o}, {o, w, 1, o + 32}};
                      return e.rms_norm_parts(p, 2, 4, 1e-6f);
                    }});
  probes.push_back({"logits", "vocab", true, logits(2, 4, 1e-6f, 1, sel0)});
  probes.push_back({"logits", "vocab", false, logits(2, 4, 1e-6f, 0, sel0)});
  probes.push_back({"logits", "dim", true, logits(2, 1, 1e-6f, 3, sel0)});
  probes.push_back({"logits", "dim", false, logits(2, 0, 1e-6f, 3, sel0)});
  probes.push_back({"logits", "m", true, logits(0, 4, 1e-6f, 3, sel0)});
  probes.push_back({"logits", "m", false, logits(-1, 4, 1e-6f, 3, sel0)});
  probes.push_back({"logits", "sel", false, logits(2, 4, 1e-6f, 3, selneg)});
  probes.push_back({"logits", "eps", false, logits(2, 4, -1.0f, 3, sel0)});
  if (!eb.on_device()) {  // tokens in host memory: the host engine checks their range
    static const int32_t last[1] = {2}, past[1] = {3}, neg[1] = {-1};
    probes.push_back({"embed", "tokens", true, [=](EngineBackend& e) { return e.embed(W, 3, 4, last, 1, o); }});
    probes.push_back({"embed", "tokens", false, [=](EngineBackend& e) { return e.embed(W, 3, 4, past, 1, o); }});
    probes.push_back({"embed", "tokens", false, [=](EngineBackend& e) { return e.embed(W, 3, 4, neg, 1, o); }});
  }
  for (const Probe& p : probes) {
    const std::string at = line + " " + p.op + "(" + p.arg + (p.valid ? ", last valid)" : ", first invalid)");
    std::vector<float> after(kFloats);
    Status s2 = eb.upload(po, canary.data(), kFloats * 4);
    const Status got = s2.ok ? p.call(eb) : s2;
    if (s2.ok) s2 = eb.download(after.data(), po, kFloats * 4);
    if (!s2.ok) {
      run.error(at, s2.message);
      continue;
    }
    if (p.valid) {
      run.check("refusals", got.ok, at, got.ok ? "" : "refused: " + got.message);
      continue;
    }
    const bool named = got.message.find(p.op + ": " + p.arg) != std::string::npos;
    const bool untouched = std::memcmp(after.data(), canary.data(), kFloats * 4) == 0;
    run.check("refusals", !got.ok && named && untouched, at,
              got.ok ? "accepted" : !named ? "refusal does not name " + p.arg + ": " + got.message : "output written");
  }
}

// ---- the body -----------------------------------------------------------------------

// float(s) for s = double(a) + double(b) of two floats, spelt out past FLT_MAX: from
// FLT_MAX + half its ulp (2^128 - 2^103, the tie, which goes to the even 2^128) on, +-inf;
// below that FLT_MAX at most (a double to float conversion out of float's range is
// undefined in C++). The double sum is rounded once more to float; for one + that is the
// correctly rounded float sum (53 >= 2 * 24 + 2).
float float_of_sum(double s) {
  const float inf = std::numeric_limits<float>::infinity(), fmax = std::numeric_limits<float>::max();
  if (std::fabs(s) >= 0x1.ffffffp127) return s > 0 ? inf : -inf;
  if (std::fabs(s) > double(fmax)) return s > 0 ? fmax : -fmax;
  return float(s);
}

void check_reference(Run& run, const Case& c, const Data& d, const Out& got, const std::string& line) {
  const int n = c.n;
  auto ratio_gate = [&](const char* gate, const ref::EngineRef& r) {
    double worst = 0;
    std::string detail;
    for (size_t e = 0; e < r.value.size(); ++e) {
      const double err = std::fabs(double(got.f[e]) - r.value[e]);
      const double ratio = bound_ratio(err, r.bound[e]);
      if (worse_ratio(ratio, worst)) {
        worst = ratio;
        std::ostringstream s;
        s << "element " << e << ": got " << got.f[e] << ", float64 " << r.value[e] << ", bound " << r.bound[e];
        detail = s.str();
      }
    }
    run.check_ratio(gate, worst, line, detail);
  };
  switch (c.op) {
    // matmul_parts: the parts' matrices one after another are one matrix of c.a rows, whose
    // output row is the launch's [part 0][part 1][part 2] row.
    case Op::matmul:
    case Op::matmul_parts: ratio_gate("matmul-bound", ref::matmul_ref(d.W.data(), c.a, c.b, d.x.data(), n)); break;
    case Op::add: {
      int64_t bad = 0, first = -1;
      for (size_t e = 0; e < got.f.size(); ++e) {
        const float want = float_of_sum(double(d.x[e]) + double(d.w[e]));
        if (std::memcmp(&want, &got.f[e], 4) != 0 && bad++ == 0) first = int64_t(e);
      }
      std::ostringstream s;
      if (bad)
        s << bad << " elements differ; element " << first << ": " << d.x[size_t(first)] << " + " << d.w[size_t(first)]
          << " gave " << got.f[size_t(first)] << ", float(double sum) "
          << float_of_sum(double(d.x[size_t(first)]) + double(d.w[size_t(first)]));
      run.check("add==reference", bad == 0, line, s.str());
      break;
    }
    case Op::rms_norm: ratio_gate("rms_norm-bound", ref::rms_norm_ref(d.x.data(), d.w.data(), n, int(c.a), d.eps)); break;
    case Op::swiglu: ratio_gate("swiglu-bound", ref::swiglu_ref(d.x.data(), d.w.data(), int64_t(n) * c.a)); break;
    case Op::logits: {
      std::vector<int32_t> sel(n);
      for (int j = 0; j < n; ++j) sel[j] = j;
      ratio_gate("logits-bound", ref::logits_ref(d.x.data(), sel, int(c.b), d.w.data(), d.eps, d.W.data(), c.a));
      break;
    }
    case Op::embed: {
      const ref::EngineRef r = ref::embed_ref(d.W.data(), c.b, d.tokens.data(), n);
      int64_t bad = 0;
      for (size_t e = 0; e < r.value.size(); ++e) bad += double(got.f[e]) != r.value[e];
      run.check("embed==reference", bad == 0, line, std::to_string(bad) + " elements differ");
      break;
    }
    case Op::argmax: {
      const std::vector<int32_t> want = ref::argmax_ref(d.x.data(), n, c.a);
      int bad = -1;
      for (int i = 0; i < n && bad < 0; ++i)
        if (got.idx[size_t(i)] != want[size_t(i)]) bad = i;
      run.check("argmax==reference", bad < 0, line,
                bad < 0 ? "" : "row " + std::to_string(bad) + ": got " + std::to_string(got.idx[size_t(bad)]) +
                                   ", reference " + std::to_string(want[size_t(bad)]));
      break;
    }
  }
}

// The cases of a run (or of a control: `only` limits the kernels, `max_cases` the count).
void run_cases(Run& run, EngineBackend& eb, EngineBackend* twin, const std::vector<Op>& only, int max_cases,
               bool reference) {
  int done = 0;
  int64_t swiglu_twin_diff = 0, swiglu_values = 0;
  // A control draws from the same generator but not from --cases: it must find its batched
  // cases (of its operation) however few cases the run asked for.
  const int limit = run.in_control ? std::max(run.cases, 512) : run.cases;
  for (int i = 0; i < limit && done < max_cases; ++i) {
    const Case c = make_case(run.seed, i);
    if (!only.empty() && std::find(only.begin(), only.end(), c.op) == only.end()) continue;
    if (c.n < 2 && run.in_control) continue;  // a control needs a batch
    const std::string line = c.line();
    if (!run.selected(line)) continue;
    ++done;
    if (!run.in_control) {  // what ran, per dimension (numbers.coverage)
      run.cover_case({{"op", op_name(c.op)},
                      {"batch", c.n == 1 ? "1" : c.n <= 8 ? "2..8" : c.n <= 32 ? "9..32" : "33..64"},
                      {"width", c.a % 32 == 0 ? "multiple of 32" : "not a multiple of 32"}});
      if (c.op == Op::matmul_parts)
        run.cover_value("matmul_parts", std::to_string(c.parts) + (c.parts == 1 ? " part" : " parts"));
      if (c.op == Op::add)  // add_rms_norm's rows: cuda's joined kernel takes dim % 4 == 0 up to 8192
        run.cover_value("add_rms_norm", c.a % 4 == 0 && c.a <= kNormChunkFloats ? "dim % 4 == 0, <= 8192" : "other dim");
      if (c.op == Op::rms_norm || c.op == Op::logits) {  // the normed row in device staging chunks
        const int64_t chunks = ((c.op == Op::rms_norm ? c.a : c.b) + kNormChunkFloats - 1) / kNormChunkFloats;
        run.cover_value("norm_row", std::to_string(chunks) + (chunks == 1 ? " chunk" : " chunks") + " of 8192");
      }
    }
    const Data d = make_data(c);
    Out batched, again;
    Status st = launch(eb, c, d, 0, c.n, &batched);
    if (st.ok) st = launch(eb, c, d, 0, c.n, &again);
    if (!st.ok) {
      run.error(line, st.message);
      continue;
    }
    run.check("repeats", same_bytes(batched, again), line);
    std::string guard = !batched.guard.empty() ? "batched " + batched.guard
                        : !again.guard.empty()   ? "repeat " + again.guard
                                                 : "";
    int bad_row = -1;
    for (int r = 0; r < c.n; ++r) {
      Out solo;
      st = launch(eb, c, d, r, 1, &solo);
      if (!st.ok) {
        run.error(line, st.message);
        break;
      }
      if (bad_row < 0 && !same_row(c, batched, r, solo)) bad_row = r;
      if (guard.empty() && !solo.guard.empty()) guard = "row " + std::to_string(r) + " alone: " + solo.guard;
    }
    if (!st.ok) continue;
    run.check("rows==solo", bad_row < 0, line,
              bad_row < 0 ? "" : "row " + std::to_string(bad_row) + " of " + std::to_string(c.n) + " differs from it alone");
    if (c.op == Op::matmul_parts) {
      std::string diff;
      Out alone;
      st = parts_alone(eb, c, d, batched, &diff, &alone);
      if (!st.ok) {
        run.error(line, "parts alone: " + st.message);
        continue;
      }
      run.check("parts==matmul", diff.empty(), line, diff);
      if (guard.empty()) guard = alone.guard;
    }
    if (c.op == Op::rms_norm || c.op == Op::add) {
      std::string diff;
      Out joined;
      st = joined_vs_plain(eb, c, d, batched, &diff, &joined);
      if (!st.ok) {
        run.error(line, "joined: " + st.message);
        continue;
      }
      run.check("joined==plain", diff.empty(), line, diff);
      if (guard.empty()) guard = joined.guard;
    }
    run.check("guards", guard.empty(), line, guard);
    if (reference) check_reference(run, c, d, batched, line);
    if (twin) {
      Out host;
      st = launch(*twin, c, d, 0, c.n, &host);
      if (!st.ok) {
        run.error(line, "host twin: " + st.message);
        continue;
      }
      if (c.op == Op::swiglu) {
        for (size_t e = 0; e < host.f.size(); ++e)
          swiglu_twin_diff += std::memcmp(&host.f[e], &batched.f[e], 4) != 0;
        swiglu_values += int64_t(host.f.size());
      } else {
        run.check("device==host-twin", same_bytes(batched, host), line);
      }
    }
  }
  if (twin && !run.in_control) {
    run.numbers["swiglu_device_values_differing_from_twin"] = swiglu_twin_diff;
    run.numbers["swiglu_values_compared"] = swiglu_values;
  }
}

void rows_invariant_body(Run& run) {
  run.declare("rows==solo", "every row of a batched launch (batch 1..64) has the bytes of the same row launched alone");
  run.declare("repeats", "the batched launch twice gives the same bytes");
  run.declare("embed==reference", "embedding rows equal the float64 reference exactly");
  run.declare("argmax==reference", "argmax is the lowest index of the largest non-NaN value (all NaN: 0)");
  run.declare("rms_norm-bound", "RMSNorm within 0.5 gamma_{ceil(K/8)+5} + gamma_4 relative per element (reference/engine_ref.h)");
  run.declare("matmul-bound",
              "bf16 x fp32 product (matmul, and every part of matmul_parts) within gamma_{min(K, 8 ceil(K/1024))+7} "
              "sum|w x| (reference/engine_ref.h)");
  run.declare("swiglu-bound", "SwiGLU within kExpErr + gamma_3 relative (reference/engine_ref.h)");
  run.declare("logits-bound", "final RMSNorm + head product within (gamma_m (1 + rho) + rho) sum|W y|");
  run.declare("add==reference",
              "h + t equals float(double(h) + double(t)) bit for bit (cancellations, signed zeros, subnormals, "
              "overflow to +-inf, inf + finite)");
  run.declare("parts==matmul",
              "every part of a matmul_parts launch (1, 2 or 3 parts) has the bytes of a plain matmul of that part "
              "alone");
  run.declare("joined==plain",
              "rms_norm_parts (3 parts: in place, empty, apart) and add_rms_norm give the bytes of the rms_norm and add "
              "calls they join");
  run.declare("guards", "16 floats past every output region of every launch still hold their canary");
  run.declare("refusals",
              "every engine kernel argument at its range's edges: the last valid value accepted, the first invalid "
              "refused naming the argument, the output untouched");
  run.device_gate("device==host-twin",
                  "the device kernels' bytes equal the host twin's (every kernel but SwiGLU: CUDA expf; bound-gated)");
  EngineBackend* eb = run.be.engine();
  if (!eb) {
    run.error("rows-invariant", "backend " + run.be.name() + " has no engine kernels");
    return;
  }
  EngineBackend* twin = run.twin ? run.twin->engine() : nullptr;
  run_cases(run, *eb, twin, {}, run.cases, true);
  refusals_gate(run, *eb);
  run.control("batch-split-k", "the matrix product splits K in two when the batch has more than one row",
              [](Run& r) {
                PlantedEngine pe(*r.be.engine(), Plant::split_k_by_batch);
                run_cases(r, pe, nullptr, {Op::matmul}, 8, false);
              });
  run.control("planted-row", "one row of every batched launch one ulp off (argmax: one index off)", [](Run& r) {
    PlantedEngine pe(*r.be.engine(), Plant::planted_row);
    run_cases(r, pe, nullptr, {}, 12, false);
  });
  run.control("parts-ulp",
              "matmul_parts: the first element of every row of the last part one ulp up, whatever the batch",
              [](Run& r) {
                PlantedEngine pe(*r.be.engine(), Plant::parts_ulp);
                run_cases(r, pe, nullptr, {Op::matmul_parts}, 4, false);
              });
  run.control("joined-ulp",
              "rms_norm_parts' last part with rows and add_rms_norm's norm: the first element one ulp up, whatever "
              "the batch",
              [](Run& r) {
                PlantedEngine pe(*r.be.engine(), Plant::joined_ulp);
                run_cases(r, pe, nullptr, {Op::rms_norm, Op::add}, 4, false);
              });
  run.control("writes-past-output", "every kernel writes one float (argmax: one index) past its output",
              [](Run& r) {
                PlantedEngine pe(*r.be.engine(), Plant::write_past_output);
                run_cases(r, pe, nullptr, {}, 8, false);
              });
  run.control("accepts-one-past", "a refused engine call returns Ok instead", [](Run& r) {
    RefusalPlantEngine pe(*r.be.engine(), RefusalPlant::accepts_one_past);
    refusals_gate(r, pe);
  });
  run.control("unnamed-refusal", "a refusal's message names no argument", [](Run& r) {
    RefusalPlantEngine pe(*r.be.engine(), RefusalPlant::unnamed_refusal);
    refusals_gate(r, pe);
  });
  run.control("writes-then-refuses", "one output float written before a refusal", [](Run& r) {
    RefusalPlantEngine pe(*r.be.engine(), RefusalPlant::writes_then_refuses);
    refusals_gate(r, pe);
  });
}

}  // namespace

ContractDef rows_invariant_contract() {
  return {"rows-invariant",
          "engine kernels (embedding, RMSNorm and its launch of several row sets, bf16 product and its 1-3 part "
          "launch, SwiGLU, add and add joined with RMSNorm, logits, argmax): a row's bytes never depend on its batch; "
          "each within its float64 bound",
          128, rows_invariant_body};  // 16 cases of each of the 8 operations
}

}  // namespace kc
