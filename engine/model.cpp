#include "engine/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <type_traits>

#include "kernels/engine/engine_backend.h"

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
        need.push_back(int32_t((int64_t(lanes[l].capacity) + P - 1) / P));  // no int32 overflow near 2^31
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
  // What the kernels take, for weights that did not come through load_byte_level_checkpoint.
  KC_RETURN_IF_ERROR(check_engine_config(c, "config.json"));
  if ((opts.kv_format == Format::q4 || opts.kv_format == Format::mxfp4) && c.head_dim % 32)
    return Status::Error(std::string("kv cache format ") + format_name(opts.kv_format) + ": head_dim " +
                         std::to_string(c.head_dim) + " is not a multiple of 32");
  if (opts.attn_chunk < 1 || opts.attn_chunk > 1024) return Status::Error("attention chunk must be in 1..1024");
  if (int64_t(w.layers.size()) != c.num_hidden_layers) return Status::Error("weights: layer count differs from config");
  static std::atomic<uint64_t> next_id{1};
  Model m;
  m.id_ = next_id++;
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
    const auto who = [i] { return "forward: row " + std::to_string(i) + ": "; };  // built only for a refusal
    if (r.lane < 0 || r.lane >= int(cache.views.size())) return Status::Error(who() + "lane out of range");
    if (r.pos < 0 || r.pos >= cache.views[r.lane].capacity()) return Status::Error(who() + "position outside the lane");
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
    const auto who = [i] { return "forward_rows: row " + std::to_string(i) + ": "; };  // built only for a refusal
    if (r.token < 0 || r.token >= c.vocab_size)
      return Status::Error(who() + "token " + std::to_string(r.token) + " out of range");
    if (r.lane < 0 || r.lane >= int(cache.views.size()) || attn[i].lane != r.lane) return Status::Error(who() + "lane out of range");
    if (r.pos < 0 || slots[i] < 0 || slots[i] >= cache.views[r.lane].capacity())
      return Status::Error(who() + "slot outside the lane");
  }
  if (logits) logits->clear();
  if (n == 0) return Status::Ok();
  // The kernels run on the backend's engine, its buffers in the engine's memory (device
  // memory on cuda); a decorator without an engine gets the host twins with its own KV
  // steps. The order of operations is the same on every engine.
  EngineBackend* eb = be.engine();
  std::unique_ptr<EngineBackend> host;
  if (!eb) {
    host = make_host_engine(be);
    eb = host.get();
  }
  const size_t NH = size_t(n) * H, NQ = size_t(n) * QH * D, NK = size_t(n) * KH * D, NI = size_t(n) * I;
  float *h = nullptr, *a = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *qr = nullptr, *att = nullptr,
        *tmp = nullptr, *g = nullptr, *u = nullptr;
  int32_t* toks = nullptr;
  auto buf = [&](int slot, size_t count, auto** p) {
    void* raw;
    const Status st = eb->scratch(slot, count * sizeof(**p), &raw);
    *p = static_cast<std::remove_reference_t<decltype(*p)>>(raw);
    return st;
  };
  KC_RETURN_IF_ERROR(buf(0, NH, &h));
  KC_RETURN_IF_ERROR(buf(1, NH, &a));
  KC_RETURN_IF_ERROR(buf(2, NQ, &q));
  KC_RETURN_IF_ERROR(buf(3, NK, &k));
  KC_RETURN_IF_ERROR(buf(4, NK, &v));
  KC_RETURN_IF_ERROR(buf(5, NQ, &qr));
  KC_RETURN_IF_ERROR(buf(6, NQ, &att));
  KC_RETURN_IF_ERROR(buf(7, NH, &tmp));
  KC_RETURN_IF_ERROR(buf(8, NI, &g));
  KC_RETURN_IF_ERROR(buf(9, NI, &u));
  KC_RETURN_IF_ERROR(buf(10, size_t(n), &toks));
  auto mat = [&](const Bf16Matrix& m, const uint16_t** p) {
    const void* raw;
    KC_RETURN_IF_ERROR(eb->weights(id_, m.w.data(), m.w.size() * sizeof(uint16_t), &raw));
    *p = static_cast<const uint16_t*>(raw);
    return Status::Ok();
  };
  auto vec = [&](const std::vector<float>& w, const float** p) {
    const void* raw;
    KC_RETURN_IF_ERROR(eb->weights(id_, w.data(), w.size() * sizeof(float), &raw));
    *p = static_cast<const float*>(raw);
    return Status::Ok();
  };
  // One matrix product y = x W^T over the batch.
  auto matmul = [&](const Bf16Matrix& m, const float* x, float* y) {
    const uint16_t* w;
    KC_RETURN_IF_ERROR(mat(m, &w));
    return eb->matmul(w, m.rows, m.cols, x, n, y);
  };
  // Products of several matrices over the same x (q/k/v, gate/up): one launch where the
  // engine can, each element the bytes of its own matmul.
  auto matmul_parts = [&](std::initializer_list<std::pair<const Bf16Matrix*, float*>> ms, const float* x) {
    MatmulPart parts[3];
    int count = 0;
    for (const auto& [m, y] : ms) {
      const uint16_t* w;
      KC_RETURN_IF_ERROR(mat(*m, &w));
      parts[count++] = {w, m->rows, y};
    }
    return eb->matmul_parts(parts, count, ms.begin()->first->cols, x, n);
  };
  auto norm = [&](const std::vector<float>& w, const float* x, int rows, int dim, float* out) {
    const float* dw = nullptr;
    KC_RETURN_IF_ERROR(vec(w, &dw));
    return eb->rms_norm(x, dw, rows, dim, eps, out);
  };
  std::vector<int32_t> host_toks(n);
  std::vector<RopeRow> rope_rows(n);
  for (int i = 0; i < n; ++i) {
    host_toks[i] = rows[i].token;
    rope_rows[i] = {rows[i].lane, rows[i].pos, slots[i]};
  }
  KC_RETURN_IF_ERROR(eb->upload(toks, host_toks.data(), size_t(n) * sizeof(int32_t)));
  {
    const uint16_t* E;
    KC_RETURN_IF_ERROR(mat(embed_, &E));
    KC_RETURN_IF_ERROR(eb->embed(E, embed_.rows, embed_.cols, toks, n, h));
  }
  // The residual add and the RMSNorm after it in one call (post_norm; the next layer's
  // input_norm).
  auto add_norm = [&](const std::vector<float>& w, float* x, const float* t, int rows, int dim, float* out) {
    const float* dw = nullptr;
    KC_RETURN_IF_ERROR(vec(w, &dw));
    return eb->add_rms_norm(x, t, dw, rows, dim, eps, out);
  };
  if (!layers_.empty()) KC_RETURN_IF_ERROR(norm(layers_[0].input_norm, h, n, H, a));
  for (size_t li = 0; li < layers_.size(); ++li) {
    const ModelLayer& L = layers_[li];
    KC_RETURN_IF_ERROR(matmul_parts({{&L.q_proj, q}, {&L.k_proj, k}, {&L.v_proj, v}}, a));
    {  // q_norm and k_norm in one call
      const float *qw = nullptr, *kw = nullptr;
      KC_RETURN_IF_ERROR(vec(L.q_norm, &qw));
      KC_RETURN_IF_ERROR(vec(L.k_norm, &kw));
      const NormPart np[2] = {{q, qw, n * QH, q}, {k, kw, n * KH, k}};
      KC_RETURN_IF_ERROR(eb->rms_norm_parts(np, 2, D, eps));
    }
    RopeParams rp{QH, int(c.rotary_dim), c.rope_theta, int(li)};
    KC_RETURN_IF_ERROR(eb->rope_store(cache, rp, rope_rows.data(), n, q, k, v, qr));
    const int chunk = chunk_override > 0 ? chunk_override
                      : opts_.plant_batch_dependent_chunk && n > 1 ? 4 : opts_.attn_chunk;
    AttnParams ap{QH, int(li), chunk, float(1.0 / std::sqrt(double(D)))};
    KC_RETURN_IF_ERROR(eb->attention(cache, ap, attn.data(), n, tails, qr, att));
    KC_RETURN_IF_ERROR(matmul(L.o_proj, att, tmp));
    KC_RETURN_IF_ERROR(add_norm(L.post_norm, h, tmp, n, H, a));
    KC_RETURN_IF_ERROR(matmul_parts({{&L.gate_proj, g}, {&L.up_proj, u}}, a));
    KC_RETURN_IF_ERROR(eb->swiglu(g, u, int64_t(NI), g));
    KC_RETURN_IF_ERROR(matmul(L.down_proj, g, tmp));
    if (li + 1 < layers_.size())
      KC_RETURN_IF_ERROR(add_norm(layers_[li + 1].input_norm, h, tmp, n, H, a));
    else
      KC_RETURN_IF_ERROR(eb->add(h, tmp, int64_t(NH)));
  }
  if (!logits) return Status::Ok();
  std::vector<int32_t> sel;
  for (int i = 0; i < n; ++i)
    if (rows[i].logits) sel.push_back(i);
  if (sel.empty()) return Status::Ok();
  const int64_t V = c.vocab_size;
  float* out = nullptr;
  const uint16_t* W = nullptr;
  const float* fw = nullptr;
  KC_RETURN_IF_ERROR(buf(11, sel.size() * size_t(V), &out));
  KC_RETURN_IF_ERROR(mat(head_, &W));
  KC_RETURN_IF_ERROR(vec(final_norm_, &fw));
  KC_RETURN_IF_ERROR(eb->logits(h, sel.data(), int(sel.size()), H, fw, eps, W, V, out));
  logits->resize(sel.size() * size_t(V));
  return eb->download(logits->data(), out, logits->size() * sizeof(float));
}

}  // namespace kc::engine
