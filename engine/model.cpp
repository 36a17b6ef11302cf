#include "engine/model.h"

#include <algorithm>
#include <cmath>

namespace kc::engine {

Status make_engine_cache(const KvLayout& lay, const std::vector<LaneSpec>& lanes, Cache* out) {
  Cache c;
  c.lay = lay;
  c.views.resize(lanes.size());
  for (size_t l = 0; l < lanes.size(); ++l) {
    if (lanes[l].capacity <= 0) return Status::Error("lane " + std::to_string(l) + ": capacity must be positive");
    if (lanes[l].page < 0) return Status::Error("lane " + std::to_string(l) + ": page size must be positive");
  }
  uint64_t off = 0;
  // Paged regions, one per distinct page size, in order of first appearance.
  std::vector<int32_t> sizes;
  for (const LaneSpec& s : lanes)
    if (s.page > 0 && std::find(sizes.begin(), sizes.end(), s.page) == sizes.end()) sizes.push_back(s.page);
  for (int32_t P : sizes) {
    const uint64_t ps = lay.page_stride(P);
    std::vector<size_t> members;
    std::vector<int32_t> need;
    for (size_t l = 0; l < lanes.size(); ++l)
      if (lanes[l].page == P) {
        members.push_back(l);
        need.push_back((lanes[l].capacity + P - 1) / P);
      }
    std::vector<std::vector<int32_t>> tables(members.size());
    int32_t next = 0;
    for (bool more = true; more;) {
      more = false;
      for (size_t m = 0; m < members.size(); ++m)
        if (int32_t(tables[m].size()) < need[m]) {
          tables[m].push_back(next++);
          more = true;
        }
    }
    for (size_t m = 0; m < members.size(); ++m) {
      ViewDesc& d = c.views[members[m]];
      d.base_off = off;
      d.pt_off = int32_t(c.pts.size());
      d.n_pages = int32_t(tables[m].size());
      d.ptok = P;
      d.ps = ps;
      c.pts.insert(c.pts.end(), tables[m].begin(), tables[m].end());
    }
    off += uint64_t(next) * ps;
  }
  for (size_t l = 0; l < lanes.size(); ++l) {
    if (lanes[l].page > 0) continue;
    ViewDesc& d = c.views[l];
    d.base_off = off;
    d.ptok = lanes[l].capacity;
    off += lay.page_stride(lanes[l].capacity);
  }
  c.mem.assign(off, 0);
  KC_RETURN_IF_ERROR(c.validate());
  *out = std::move(c);
  return Status::Ok();
}

Status Model::create(const Qwen3Weights& w, const ModelOptions& opts, Model* out) {
  const Qwen3Config& c = w.config;
  if (opts.kv_format != Format::bf16 && opts.kv_format != Format::fp8 && opts.kv_format != Format::q4 &&
      opts.kv_format != Format::mxfp4)
    return Status::Error(std::string("kv cache format ") + format_name(opts.kv_format) +
                         ": not supported by the engine (bf16, fp8, q4, mxfp4)");
  if ((opts.kv_format == Format::q4 || opts.kv_format == Format::mxfp4) && c.head_dim % 32)
    return Status::Error(std::string("kv cache format ") + format_name(opts.kv_format) + ": head_dim " +
                         std::to_string(c.head_dim) + " is not a multiple of 32");
  if (opts.attn_chunk < 1 || opts.attn_chunk > 1024) return Status::Error("attention chunk must be in 1..1024");
  if (int64_t(w.layers.size()) != c.num_hidden_layers) return Status::Error("weights: layer count differs from config");
  Model m;
  m.config_ = c;
  m.opts_ = opts;
  if (opts.rope_theta > 0) m.config_.rope_theta = opts.rope_theta;
  m.embed_ = Bf16Matrix::from(w.embed_tokens);
  m.head_ = Bf16Matrix::from(w.output_head());
  for (const Qwen3LayerWeights& l : w.layers) {
    ModelLayer L;
    L.input_norm = l.input_layernorm.data;
    L.q_norm = l.q_norm.data;
    L.k_norm = l.k_norm.data;
    L.post_norm = l.post_attention_layernorm.data;
    L.q_proj = Bf16Matrix::from(l.q_proj);
    L.k_proj = Bf16Matrix::from(l.k_proj);
    L.v_proj = Bf16Matrix::from(l.v_proj);
    L.o_proj = Bf16Matrix::from(l.o_proj);
    L.gate_proj = Bf16Matrix::from(l.gate_proj);
    L.up_proj = Bf16Matrix::from(l.up_proj);
    L.down_proj = Bf16Matrix::from(l.down_proj);
    m.layers_.push_back(std::move(L));
  }
  m.final_norm_ = w.norm.data;
  *out = std::move(m);
  return Status::Ok();
}

KvLayout Model::kv_layout() const {
  return KvLayout(int(config_.num_hidden_layers), int(config_.num_key_value_heads), int(config_.head_dim),
                  opts_.kv_format);
}

Status Model::forward(Backend& be, Cache& cache, const std::vector<ForwardRow>& rows,
                      std::vector<float>* logits) const {
  const int n = int(rows.size());
  for (int i = 0; i < n; ++i) {  // forward_rows checks tokens and slots; positions and lanes are checked here
    const ForwardRow& r = rows[i];
    const std::string who = "forward: row " + std::to_string(i) + ": ";
    if (r.lane < 0 || r.lane >= int(cache.views.size())) return Status::Error(who + "lane out of range");
    if (r.pos < 0 || r.pos >= cache.views[r.lane].capacity()) return Status::Error(who + "position outside the lane");
  }
  {
    std::vector<std::pair<int32_t, int32_t>> at(n);
    for (int i = 0; i < n; ++i) at[i] = {rows[i].lane, rows[i].pos};
    std::sort(at.begin(), at.end());
    for (int i = 1; i < n; ++i)
      if (at[i] == at[i - 1])
        return Status::Error("forward: lane " + std::to_string(at[i].first) + " has two rows at position " +
                             std::to_string(at[i].second));
  }
  // Committed rows: k and v stored at the row's position, keys 0..pos attended, no tail.
  std::vector<int32_t> slots(n);
  std::vector<AttnRow> attn(n);
  for (int i = 0; i < n; ++i) {
    slots[i] = rows[i].pos;
    attn[i] = {rows[i].lane, rows[i].pos + 1, 0, 0};
  }
  return forward_rows(be, cache, rows, slots, attn, {}, 0, logits);
}

Status Model::forward_rows(Backend& be, Cache& cache, const std::vector<ForwardRow>& rows,
                           const std::vector<int32_t>& slots, const std::vector<AttnRow>& attn,
                           const std::vector<int32_t>& tails, int chunk_override, std::vector<float>* logits) const {
  const Qwen3Config& c = config_;
  const int n = int(rows.size());
  const int H = int(c.hidden_size), I = int(c.intermediate_size), D = int(c.head_dim);
  const int QH = int(c.num_attention_heads), KH = int(c.num_key_value_heads);
  const float eps = float(c.rms_norm_eps);
  if (slots.size() != rows.size() || attn.size() != rows.size())
    return Status::Error("forward_rows: slots and attention rows must match the rows");
  const KvLayout want = kv_layout();
  if (cache.lay.layers != want.layers || cache.lay.kv_heads != want.kv_heads || cache.lay.head_dim != want.head_dim ||
      cache.lay.format != want.format)
    return Status::Error("forward_rows: the cache's layout is not the model's");
  for (int i = 0; i < n; ++i) {
    const ForwardRow& r = rows[i];
    const std::string who = "forward_rows: row " + std::to_string(i) + ": ";
    if (r.token < 0 || r.token >= c.vocab_size)
      return Status::Error(who + "token " + std::to_string(r.token) + " out of range");
    if (r.lane < 0 || r.lane >= int(cache.views.size()) || attn[i].lane != r.lane) return Status::Error(who + "lane out of range");
    if (r.pos < 0 || slots[i] < 0 || slots[i] >= cache.views[r.lane].capacity())
      return Status::Error(who + "slot outside the lane");
  }
  if (logits) logits->clear();
  if (n == 0) return Status::Ok();
  std::vector<float> h(size_t(n) * H), a(size_t(n) * H), q(size_t(n) * QH * D), k(size_t(n) * KH * D),
      v(size_t(n) * KH * D), qr(size_t(n) * QH * D), att(size_t(n) * QH * D), tmp(size_t(n) * H),
      g(size_t(n) * I), u(size_t(n) * I);
  std::vector<int32_t> toks(n);
  std::vector<RopeRow> rope_rows(n);
  for (int i = 0; i < n; ++i) {
    toks[i] = rows[i].token;
    rope_rows[i] = {rows[i].lane, rows[i].pos, slots[i]};
  }
  embed_rows(embed_, toks.data(), n, h.data());
  for (size_t li = 0; li < layers_.size(); ++li) {
    const ModelLayer& L = layers_[li];
    rms_norm_rows(h.data(), L.input_norm.data(), n, H, eps, a.data());
    matmul_rows(L.q_proj, a.data(), n, q.data());
    matmul_rows(L.k_proj, a.data(), n, k.data());
    matmul_rows(L.v_proj, a.data(), n, v.data());
    rms_norm_rows(q.data(), L.q_norm.data(), n * QH, D, eps, q.data());
    rms_norm_rows(k.data(), L.k_norm.data(), n * KH, D, eps, k.data());
    RopeParams rp{QH, int(c.rotary_dim), c.rope_theta, int(li)};
    KC_RETURN_IF_ERROR(be.rope_store(cache, rp, rope_rows.data(), n, q.data(), k.data(), v.data(), qr.data()));
    const int chunk = chunk_override > 0 ? chunk_override
                      : opts_.plant_batch_dependent_chunk && n > 1 ? 4 : opts_.attn_chunk;
    AttnParams ap{QH, int(li), chunk, float(1.0 / std::sqrt(double(D)))};
    KC_RETURN_IF_ERROR(be.attention(cache, ap, attn.data(), n, tails, qr.data(), att.data()));
    matmul_rows(L.o_proj, att.data(), n, tmp.data());
    for (size_t j = 0; j < h.size(); ++j) h[j] += tmp[j];
    rms_norm_rows(h.data(), L.post_norm.data(), n, H, eps, a.data());
    matmul_rows(L.gate_proj, a.data(), n, g.data());
    matmul_rows(L.up_proj, a.data(), n, u.data());
    swiglu(g.data(), u.data(), int64_t(n) * I, g.data());
    matmul_rows(L.down_proj, g.data(), n, tmp.data());
    for (size_t j = 0; j < h.size(); ++j) h[j] += tmp[j];
  }
  if (!logits) return Status::Ok();
  std::vector<float> fin(H);
  for (int i = 0; i < n; ++i) {
    if (!rows[i].logits) continue;
    const size_t at = logits->size();
    logits->resize(at + size_t(c.vocab_size));
    rms_norm_rows(h.data() + size_t(i) * H, final_norm_.data(), 1, H, eps, fin.data());
    matmul_rows(head_, fin.data(), 1, logits->data() + at);
  }
  return Status::Ok();
}

}  // namespace kc::engine
