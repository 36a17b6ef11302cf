// Host twins of the rope store (rope_store.cu), split-K attention (partial_fma.cu,
// merge.cu) and keep (keep.cu) kernels: the same helpers, the same key chunks, the same
// reduction and merge order. The cpu backend runs these; the qwen-pages contract checks
// them against the float64 reference and the kernels against them.
#include "kernels/attention/twin.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/rows.h"
#include "kernels/layout/host_fma.h"

namespace kc {

// One row's rotation by its cos / sin table (c[i], sn[i] for pairs i < rot / 2).
static void rope_row_host(const float* x, float* y, int d, int rot, const float* c, const float* sn) {
  const int h = rot / 2;
  for (int j = rot; j < d; ++j) y[j] = x[j];
  for (int i = 0; i < h; ++i) {
    y[i] = x[i] * c[i] - x[i + h] * sn[i];
    y[i + h] = x[i + h] * c[i] + x[i] * sn[i];
  }
}

// The rotated K row (fp32) and the plain V row are stored with the format's encode_row
// (codecs/: bf16 RNE, fp8 / q4 / mxfp4 row codecs), the bytes the device's store_warp
// writes. q4 rotates the stored values by its Hadamard transform inside encode_row; mxfp4
// stores the RoPE-rotated row as is.
void rope_store_host(Cache& cache, const RopeParams& p, const RopeRow* rows, int n, const float* q,
                     const float* k, const float* v, float* q_out) {
  const int d = cache.lay.head_dim, hkv = cache.lay.kv_heads;
  const int h2 = p.rot_dims / 2;
  std::vector<float> y(d), c(h2), sn(h2);
  // theta_i once per call and the row's cos / sin once per row (as the device's blocks keep
  // them): the same rope_theta and rope_cos_sin_theta calls, so the same bits.
  std::vector<double> theta(h2);
  for (int i = 0; i < h2; ++i) theta[i] = rope_theta(i, p.rot_dims, p.base);
  with_format(cache.lay.format, [&](auto codec) {
    using C = decltype(codec);
    for (int r = 0; r < n; ++r) {
      const KvView view = cache.view(rows[r].lane);
      for (int i = 0; i < h2; ++i) rope_cos_sin_theta(rows[r].pos, theta[i], &c[i], &sn[i]);
      for (int h = 0; q && h < p.q_heads; ++h)
        rope_row_host(q + (size_t(r) * p.q_heads + h) * d, q_out + (size_t(r) * p.q_heads + h) * d, d, p.rot_dims,
                      c.data(), sn.data());
      for (int h = 0; h < hkv; ++h) {
        rope_row_host(k + (size_t(r) * hkv + h) * d, y.data(), d, p.rot_dims, c.data(), sn.data());
        C::encode_row(view, y.data(), RowRef{rows[r].lane, p.layer, 0, h, rows[r].slot});
        C::encode_row(view, v + (size_t(r) * hkv + h) * d, RowRef{rows[r].lane, p.layer, 1, h, rows[r].slot});
      }
    }
  });
}

// Partial state of one (row, q head, chunk), written to m, l, o[d], in the kernel's
// order (attention/rows.h): dot in element order with fmaf, l over lanes then the
// butterfly, p.v per key group with fmaf then the halving tree.
template <class C>
KC_HOST_FMA static void attention_partial_host(const KvView& view, const AttnParams& p, const AttnRow& row, const int32_t* tail,
                                   const float* q, int kvh, int chunk, float* m_out, float* l_out, float* o) {
  const int d = view.lay.head_dim;
  const int32_t total = row.len + row.tail_len;
  const int32_t k0 = chunk * p.chunk;
  const int n = std::max(0, std::min<int32_t>(total, k0 + p.chunk) - k0);
  std::vector<float> s(n), x(d);
#ifdef KC_PLANT_ATTN_MAX_ZERO
  float m = 0.0f;  // planted bug (test builds only): the running max starts at 0, not -inf
#else
  float m = -std::numeric_limits<float>::infinity();
#endif
  for (int i = 0; i < n; ++i) {
    C::attn_row(view, RowRef{row.lane, p.layer, 0, kvh, key_slot(k0 + i, row.len, tail)}, x.data());
    float acc = 0.0f;
    for (int j = 0; j < d; ++j) acc = std::fmaf(q[j], x[j], acc);
#ifdef KC_PLANT_ATTN_FIXED_SCALE  // planted bug (test builds only): the scale hard-coded to 1/sqrt(d)
    s[i] = acc * (1.0f / std::sqrt(float(d)));
#else
    s[i] = acc * p.scale;
#endif
    m = fmaxf(m, s[i]);
  }
  float part[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    part[l] = 0.0f;
    for (int i = l; i < n; i += kLanes) {
      s[i] = expf(s[i] - m);
      part[l] += s[i];
    }
  }
  butterfly_sum(part);
  const int groups = attn_key_groups(d);
  std::vector<float> og(size_t(groups) * d, 0.0f);
  for (int g = 0; g < groups; ++g)
    for (int i = g; i < n; i += groups) {
      C::attn_row(view, RowRef{row.lane, p.layer, 1, kvh, key_slot(k0 + i, row.len, tail)}, x.data());
      for (int j = 0; j < d; ++j) og[size_t(g) * d + j] = std::fmaf(s[i], x[j], og[size_t(g) * d + j]);
    }
  for (int st = groups / 2; st >= 1; st >>= 1)
    for (int g = 0; g < st; ++g)
      for (int j = 0; j < d; ++j) og[size_t(g) * d + j] = og[size_t(g) * d + j] + og[size_t(g + st) * d + j];
  for (int j = 0; j < d; ++j) o[j] = og[j];
  *m_out = m;
  *l_out = part[0];
}

// Merge in chunk order, then normalise. No keys at all: the output row is 0. Every chunk
// below nc has keys, so none is skipped: a NaN l or o (a non-finite score or V) reaches
// the output (design.md, non-finite inputs).
static void attention_merge_host(const float* m, const float* l, const float* o, int nc, int d, float* out,
                                 bool reverse_order = false) {
  float M = -std::numeric_limits<float>::infinity();
  for (int c = 0; c < nc; ++c)
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE  // planted bug (test builds only): a chunk whose l is NaN is skipped
    if (l[c] > 0.0f)
#endif
      M = fmaxf(M, m[c]);
  float L = 0.0f;
  for (int j = 0; j < d; ++j) out[j] = 0.0f;
  for (int ci = 0; ci < nc; ++ci) {
    const int c = reverse_order ? nc - 1 - ci : ci;
#ifdef KC_PLANT_MERGE_SKIP_NONFINITE
    if (!(l[c] > 0.0f)) continue;
#endif
    const float w = expf(m[c] - M);
    L += l[c] * w;
    for (int j = 0; j < d; ++j) out[j] += o[size_t(c) * d + j] * w;
  }
#ifdef KC_PLANT_MERGE_EMPTY_NAN
  for (int j = 0; j < d; ++j) out[j] = out[j] / L;  // planted bug (test builds only): 0 / 0 for a row with no keys
#elif defined(KC_PLANT_MERGE_SKIP_NONFINITE)
  for (int j = 0; j < d; ++j) out[j] = L > 0.0f ? out[j] / L : 0.0f;
#else
  for (int j = 0; j < d; ++j) out[j] = nc > 0 ? out[j] / L : 0.0f;
#endif
}

static int attention_chunks(const AttnRow& r, int chunk) { return (r.len + r.tail_len + chunk - 1) / chunk; }

template <class C>
static void attention_host_fmt(const Cache& cache, const AttnParams& p, const AttnRow* rows, int n,
                               const int32_t* tails, const float* q, float* out) {
  const int d = cache.lay.head_dim;
  [[maybe_unused]] const int group = p.q_heads / cache.lay.kv_heads;  // unused by the GQA_MODULO plant
  for (int r = 0; r < n; ++r) {
    const KvView view = cache.view(rows[r].lane);
    const int nc = attention_chunks(rows[r], p.chunk);
    std::vector<float> m(nc), l(nc), o(size_t(nc) * d);
    for (int h = 0; h < p.q_heads; ++h) {
      // q4: attention runs in rotated space; the query is rotated once, the output
      // rotated back once (codecs/q4.h). Other formats: no-ops.
      std::vector<float> qrot(q + (size_t(r) * p.q_heads + h) * d, q + (size_t(r) * p.q_heads + h + 1) * d);
      C::rotate_query(qrot.data(), d);
      const float* qr = qrot.data();
#ifdef KC_PLANT_GQA_MODULO
      const int kvh = h % cache.lay.kv_heads;  // planted bug (test builds only): modulo, not division
#else
      const int kvh = h / group;
#endif
      for (int c = 0; c < nc; ++c)
#ifdef KC_PLANT_ATTN_FIRST_ROW_TAIL
        attention_partial_host<C>(view, p, rows[r], tails + rows[0].tail_off, qr, kvh, c, &m[c], &l[c],  // planted bug
                                  &o[size_t(c) * d]);
#else
        attention_partial_host<C>(view, p, rows[r], tails + rows[r].tail_off, qr, kvh, c, &m[c], &l[c],
                                  &o[size_t(c) * d]);
#endif
#ifdef KC_PLANT_MERGE_ARRIVAL_ORDER
      // Planted bug (test builds only): rows after the first merge in another order, as
      // a merge by arrival order would.
      const bool reverse = r > 0;
#else
      const bool reverse = false;
#endif
      attention_merge_host(m.data(), l.data(), o.data(), nc, d, out + (size_t(r) * p.q_heads + h) * d, reverse);
      C::unrotate_out(out + (size_t(r) * p.q_heads + h) * d, d);
    }
  }
}

void attention_host(const Cache& cache, const AttnParams& p, const AttnRow* rows, int n, const int32_t* tails,
                    const float* q, float* out) {
  with_format(cache.lay.format, [&](auto codec) {
    attention_host_fmt<decltype(codec)>(cache, p, rows, n, tails, q, out);
  });
}

void keep_host(Cache& cache, const KeepMove* moves, int n) {
#ifdef KC_PLANT_KEEP_REVERSE
  for (int i = n - 1; i >= 0; --i) {  // planted bug (test builds only)
#else
  for (int i = 0; i < n; ++i) {
#endif
#ifdef KC_PLANT_KEEP_FIRST_LANE
    const KvView v = cache.view(moves[0].lane);  // planted bug (test builds only): the first move's lane
#else
    const KvView v = cache.view(moves[i].lane);
#endif
#ifdef KC_PLANT_KEEP_CODES_ONLY
    for (int f = 0; f < cache.lay.planes(); ++f)  // planted bug (test builds only): scale planes not moved
#else
    for (int f = 0; f < cache.lay.field_count(); ++f)
#endif
      memmove(kv_field_row(v, f, moves[i].dst), kv_field_row(v, f, moves[i].src), v.lay.field(f).bytes_per_pos);
  }
}

}  // namespace kc
