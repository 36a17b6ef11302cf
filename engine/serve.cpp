#include "engine/serve.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>

#include "contracts/framework.h"  // fnv1a
#include "engine/generate.h"     // kTokEos
#include "kernels/engine/engine_backend.h"

namespace kc::engine {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Lane {
  int req = -1;
  bool paged = false;
  std::vector<int32_t> pages;
  bool released_early = false;
  size_t fed = 0;              // prompt positions stored
  std::vector<int32_t> seq;    // prompt + generated
  int gen = 0;
  bool done = false;
  int32_t dfed = 0;            // draft cache: positions holding the lane's own tokens
  int32_t C = 0;               // first tail slot (prompt + max_tokens)
  Clock::time_point admitted;
};

const ViewDesc kIdle{0, -1, 0, 1, 0};

// A draft tree node: its parent (-1: the root, the lane's last committed token), its token
// and its depth (1 = the first draft position). Nodes are numbered breadth first.
struct DraftNode {
  int parent;
  int32_t token;
  int depth;
};

// The k largest of x[0..n) by value, ties to the lower index (the first is argmax's
// choice); NaN never chosen (all NaN: argmax's 0).
std::vector<int32_t> top_k(const float* x, int64_t n, int k) {
  std::vector<int32_t> idx;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isnan(x[i])) idx.push_back(int32_t(i));
  if (idx.empty()) return {argmax(x, n)};
  const size_t m = std::min(idx.size(), size_t(k));
  std::partial_sort(idx.begin(), idx.begin() + m, idx.end(),
                    [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  idx.resize(m);
  return idx;
}
}  // namespace

Status make_draft_weights(const Qwen3Weights& target, int layers, Qwen3Weights* out) {
  if (layers < 1 || layers > int(target.layers.size()))
    return Status::Error("draft layers " + std::to_string(layers) + ": must be in 1.." +
                         std::to_string(target.layers.size()));
  Qwen3Weights w;
  w.config = target.config;
  w.config.num_hidden_layers = layers;
  w.embed_tokens = target.embed_tokens;
  w.layers.assign(target.layers.begin(), target.layers.begin() + layers);
  w.norm = target.norm;
  w.lm_head = target.lm_head;
  *out = std::move(w);
  return Status::Ok();
}

std::vector<int> draft_shape(const ServeConfig& cfg) {
  if (!cfg.draft_tree.empty()) return cfg.draft_tree;
  return std::vector<int>(size_t(std::max(cfg.draft_tokens, 0)), 1);
}

int draft_nodes(const std::vector<int>& shape, int depth) {
  // Saturates at INT_MAX (a fixture's tree of 16 levels of 8 holds 2^48 nodes: cast to int it
  // wrapped negative and passed the "at most 64" check).
  int64_t n = 0, level = 1;
  for (int t = 0; t < depth && t < int(shape.size()); ++t) {
    level = std::min<int64_t>(level * std::max(shape[t], 0), INT_MAX);
    n = std::min<int64_t>(n + level, INT_MAX);
  }
  return int(n);
}

int64_t serve_positions(const ServeConfig& cfg, int64_t prompt, int64_t max_tokens) {
  const std::vector<int> shape = draft_shape(cfg);
  return prompt + max_tokens + (shape.empty() ? 0 : draft_nodes(shape, int(shape.size())) + 1);
}

ServeArena plan_serve_arena(const ServeConfig& cfg, const KvLayout& lay, const KvLayout* dlay) {
  ServeArena a;
  const int L = std::max(cfg.parallel, 0);
  for (int l = 0; l < L; ++l) {
    const bool win = cfg.all_windows || (l == 0 && cfg.window_first && !cfg.pages_all);
    std::vector<RunPart> parts;
    if (win) parts.push_back({"window", lay.kv_bytes(uint64_t(cfg.context)), 0});
    if (dlay) parts.push_back({"draft", dlay->kv_bytes(uint64_t(cfg.context)), 0});
    a.run_bytes = std::max(a.run_bytes, run_bytes_for(parts));
    a.parts.push_back(std::move(parts));
    a.window.push_back(win);
  }
  a.page_stride = lay.page_stride(cfg.page);
  a.arena_bytes = uint64_t(cfg.pool_pages) * a.page_stride + uint64_t(L) * a.run_bytes;
  return a;
}

Status serve(const Model& target, const Model* draft, Backend& be, const ServeConfig& cfg,
             const std::vector<ServeRequest>& reqs, std::vector<ServeResult>* out, ServeStats* stats) {
  if (cfg.parallel < 1) return Status::Error("serve: parallel must be at least 1");
  if (cfg.page < 1) return Status::Error("serve: page size must be positive");
  if (cfg.context < 2) return Status::Error("serve: context must be at least 2");
  if (cfg.prefill_chunk < 1) return Status::Error("serve: prefill chunk must be positive");
  const std::vector<int> shape = draft_shape(cfg);
  for (int b : shape)
    if (b < 1) return Status::Error("serve: every draft tree branching must be at least 1");
  const bool drafting = !shape.empty();
  if (drafting && !draft) return Status::Error("serve: drafting needs a draft model");
  const int64_t V = target.config().vocab_size;
  if (drafting && draft->config().vocab_size != V)
    return Status::Error("serve: the draft model's vocabulary (" + std::to_string(draft->config().vocab_size) +
                         ") is not the target's (" + std::to_string(V) + ")");
  const KvLayout lay = target.kv_layout();
  const KvLayout dlay = drafting ? draft->kv_layout() : KvLayout();
  const int P = cfg.page;
  const int maxp = int((int64_t(cfg.context) + P - 1) / P);
  const int L = cfg.parallel;
  const ServeArena plan = plan_serve_arena(cfg, lay, drafting ? &dlay : nullptr);
  auto is_window = [&](int l) { return bool(plan.window[l]); };
  auto parts_for = [&](int l) { return plan.parts[l]; };
  const uint64_t max_run = plan.run_bytes;
  const uint64_t ps = plan.page_stride;
  const uint64_t arena = plan.arena_bytes;
  Pool pool(arena, ps);
  ServeStats st;
  st.arena_bytes = arena;
  st.fixed_bytes_per_lane = max_run;
  const auto t0 = Clock::now();

  Cache cache;
  cache.lay = lay;
  cache.mem.assign(arena, 0);
  cache.pts.assign(size_t(L) * maxp, 0);
  cache.views.assign(L, kIdle);
  Cache dcache;
  if (drafting) {
    dcache.lay = dlay;
    dcache.views.assign(L, kIdle);
  }
  // The arena on the device for the whole call (cuda; nothing on cpu), the drafter's
  // cache an alias of it; brought back (released) when serve returns, error or not.
  struct Held {
    EngineBackend* eb = nullptr;
    Cache* target = nullptr;
    Cache* draft = nullptr;
    ~Held() {
      if (draft) (void)eb->release(*draft);
      if (target) (void)eb->release(*target);
    }
  } held;
  if (EngineBackend* eb = be.engine()) {
    held.eb = eb;
    KC_RETURN_IF_ERROR(eb->hold(cache));
    held.target = &cache;
    if (drafting) {
      KC_RETURN_IF_ERROR(eb->hold_alias(dcache, cache));
      held.draft = &dcache;
    }
  }

  std::vector<ServeResult> res(reqs.size());
  std::vector<Lane> lanes(L);
  std::vector<size_t> queue;
  const int scratch = drafting ? draft_nodes(shape, int(shape.size())) + 1 : 0;
  for (size_t r = 0; r < reqs.size(); ++r) {
    const ServeRequest& q = reqs[r];
    const int64_t need = serve_positions(cfg, int64_t(q.prompt.size()), q.max_tokens);
    std::string why;
    if (q.prompt.size() < 2) why = "a prompt holds at least two tokens";
    else if (q.max_tokens < 1) why = "max_tokens must be at least 1";
    else if (need > cfg.context)
      why = "needs " + std::to_string(need) + " positions (prompt " + std::to_string(q.prompt.size()) + " + max_tokens " +
            std::to_string(q.max_tokens) + " + draft window " + std::to_string(scratch) + "), a lane holds " +
            std::to_string(cfg.context);
    else if (!(cfg.all_windows || (cfg.window_first && !cfg.pages_all)) && (need + P - 1) / P > pool.total_pages())
      why = "needs " + std::to_string((need + P - 1) / P) + " pages, the pool holds " + std::to_string(pool.total_pages());
    for (int32_t t : q.prompt)
      if (t < 0 || t >= V) why = "token out of the vocabulary";
    if (!why.empty()) res[r].refused = "request " + std::to_string(r) + " refused: " + why;
    else queue.push_back(r);
  }

  uint64_t step = 0;
  bool first_token_seen = false;
  std::vector<float> logits;
  // Freed pages poisoned where the cache lives (the held device copy on cuda), ordered
  // after the work that used them.
  auto poison = [&](const std::vector<int32_t>& pages) {
    std::vector<ByteRange> r;
    for (int32_t p : pages) r.push_back({uint64_t(p) * ps, ps});
    return r.empty() ? Status::Ok() : be.fill(cache, r.data(), int(r.size()), Pool::kPoison);
  };
  // Retires what the finished steps used: up to the highest step the backend has done.
  auto retire_done = [&]() {
    uint64_t done = 0;
    KC_RETURN_IF_ERROR(be.fences_done(&done));
    pool.retire(std::min(done, step));
    return poison(pool.take_freed());
  };
  auto take = [&](int l, int32_t tok, const float* row) {
    Lane& ln = lanes[l];
    ServeResult& rr = res[ln.req];
    if (!first_token_seen) {
      first_token_seen = true;
      st.first_token_s = since(t0);
    }
    if (rr.tokens.empty() && !rr.stopped_at_eos) rr.ttft_s = since(ln.admitted);
    if (ln.done) return;
    if (tok == kTokEos) {
      rr.stopped_at_eos = true;
      rr.eos_digest = fnv1a(row, size_t(V) * sizeof(float));  // the gates compare this row too
      ln.done = true;
      return;
    }
    rr.tokens.push_back(tok);
    rr.digests.push_back(fnv1a(row, size_t(V) * sizeof(float)));
    ln.seq.push_back(tok);
    ++ln.gen;
    ++st.tokens;
    if (ln.gen >= reqs[ln.req].max_tokens) ln.done = true;
  };

  while (true) {
    // Admission: every free lane takes the first queued request that fits it now.
    for (int l = 0; l < L; ++l) {
      if (lanes[l].req >= 0) continue;
      for (size_t qi = 0; qi < queue.size(); ++qi) {
        const size_t r = queue[qi];
        const ServeRequest& q = reqs[r];
        const int32_t need = int32_t(serve_positions(cfg, int64_t(q.prompt.size()), q.max_tokens));
        const bool win = is_window(l);
        if (!win && pool.free_pages() < (int64_t(need) + P - 1) / P) continue;
        std::vector<RunPart> parts = parts_for(l);
        uint64_t rb = run_bytes_for(parts);
        if (cfg.plant_run_short && !parts.empty()) {
          std::vector<RunPart> less(parts.begin(), parts.end() - 1);
          rb = run_bytes_for(less);
        }
        uint64_t roff = 0;
        if (!parts.empty()) {
          Status cs = plan_run(&parts, rb);
          if (!cs.ok) {
            // Refused at planning: nothing placed, the request is refused (never overwritten).
            st.planning_errors.push_back("lane " + std::to_string(l) + ": " + cs.message);
            res[r].refused = "request " + std::to_string(r) + " refused: " + cs.message;
            queue.erase(queue.begin() + qi);
            --qi;
            continue;
          }
          cs = pool.claim_run(l, parts, rb, &roff);
          if (!cs.ok) continue;  // no room now: wait
        }
        Lane ln;
        ln.req = int(r);
        ln.paged = !win;
        ln.seq = q.prompt;
        ln.C = int32_t(q.prompt.size()) + q.max_tokens;
        ln.admitted = Clock::now();
        if (win) {
          uint64_t off = 0;
          KC_RETURN_IF_ERROR(pool.find_run(l, "window", lay.kv_bytes(uint64_t(cfg.context)), &off));
          cache.views[l] = {off, -1, 0, cfg.context, 0};
        } else {
          if (!pool.take_pages(l, (need + P - 1) / P, &ln.pages)) {
            pool.unclaim_run(l);  // never used: no fence to wait for
            continue;
          }
          std::copy(ln.pages.begin(), ln.pages.end(), cache.pts.begin() + size_t(l) * maxp);
          cache.views[l] = {0, l * maxp, int32_t(ln.pages.size()), P, ps};
        }
        if (drafting) {
          uint64_t off = 0;
          KC_RETURN_IF_ERROR(pool.find_run(l, "draft", dlay.kv_bytes(uint64_t(cfg.context)), &off));
          dcache.views[l] = {off, -1, 0, cfg.context, 0};
        }
        res[r].lane = l;
        res[r].paged = ln.paged;
        res[r].pages = int(ln.pages.size());
        if (q.restore) {
          const int64_t n1 = int64_t(q.prompt.size()) - 1;
          KC_RETURN_IF_ERROR(be.unpack(cache, l, 0, *q.restore));
          if (cfg.plant_restore_without_scales && lay.scale_bytes) {
            // The restored positions' scale planes zeroed where the cache lives (offsets
            // from the host image's addressing, which the device copy shares).
            const KvView v = cache.view(l);
            std::vector<ByteRange> r;
            for (int64_t p = 0; p < n1; ++p)
              for (int li = 0; li < lay.layers; ++li)
                for (int kv = 0; kv < 2; ++kv)
                  for (int h = 0; h < lay.kv_heads; ++h)
                    r.push_back({uint64_t(kv_scale(v, li, kv, h, p) - cache.mem.data()), lay.scale_bytes});
            KC_RETURN_IF_ERROR(be.fill(cache, r.data(), int(r.size()), 0));
          }
          ln.fed = size_t(n1);
        }
        lanes[l] = std::move(ln);
        st.admitted.push_back(int(r));
        queue.erase(queue.begin() + qi);
        break;
      }
    }
    bool any = false, free_lane = false;
    for (const Lane& ln : lanes) any = any || ln.req >= 0, free_lane = free_lane || ln.req < 0;
    if (free_lane && !queue.empty() && any) ++st.admission_waits;
    if (!any && !queue.empty() && pool.has_pending()) {
      // Idle, requests queued, room still fenced: wait for the steps that hold it.
      KC_RETURN_IF_ERROR(be.wait_fence(step));
      KC_RETURN_IF_ERROR(retire_done());
      if (!pool.has_pending()) continue;
    }
    if (!any) {
      for (size_t r : queue) res[r].refused = "request " + std::to_string(r) + " refused: it fits in no lane of an idle pool";
      break;
    }

    // Draft phase: catch up and propose each decoding lane's tree, level by level, batched.
    std::vector<std::vector<DraftNode>> tree(L);
    std::vector<int> dn(L, 0);  // levels proposed this round (0: the lane decodes plainly)
    if (drafting) {
      std::vector<int> who;
      for (int l = 0; l < L; ++l) {
        const Lane& ln = lanes[l];
        if (ln.req < 0 || ln.done || ln.fed < reqs[ln.req].prompt.size()) continue;
        dn[l] = std::min(int(shape.size()), reqs[ln.req].max_tokens - ln.gen - 1);
        if (dn[l] > 0) who.push_back(l);
      }
      if (!who.empty()) {
        std::swap(cache.mem, dcache.mem);
        Status ds = Status::Ok();
        std::vector<std::vector<int>> frontier(L, std::vector<int>{-1});  // the last level's nodes (-1: the root)
        for (int t = 0; t < int(shape.size()) && ds.ok; ++t) {
          std::vector<ForwardRow> rows;
          std::vector<int32_t> slots, tails;
          std::vector<AttnRow> attn;
          std::vector<std::pair<int, int>> owners;  // (lane, node) of each logits row
          for (int l : who) {
            if (t >= dn[l]) continue;
            Lane& ln = lanes[l];
            const int32_t Lc = int32_t(ln.seq.size()) - 1;
            if (t == 0) {  // catch up on the committed tokens; the last row's logits give depth 1
              for (int32_t p = ln.dfed; p <= Lc; ++p) {
                rows.push_back({l, ln.seq[p], p, p == Lc});
                slots.push_back(p);
                attn.push_back({l, p + 1, 0, 0});
              }
              owners.push_back({l, -1});
              continue;
            }
            for (int i : frontier[l]) {  // a node at depth t: committed 0..Lc and its ancestors (depth 1..t)
              rows.push_back({l, tree[l][i].token, Lc + t, true});
              slots.push_back(ln.C + 1 + i);
              attn.push_back({l, Lc + 1, int32_t(tails.size()), t});
              const size_t at = tails.size();
              for (int x = i; x >= 0; x = tree[l][x].parent) tails.push_back(ln.C + 1 + x);
              std::reverse(tails.begin() + at, tails.end());
              owners.push_back({l, i});
            }
          }
          if (rows.empty()) break;
          ds = draft->forward_rows(be, dcache, rows, slots, attn, tails, 0, &logits);
          if (!ds.ok) break;
          for (int l : who) frontier[l].clear();
          for (size_t o = 0; o < owners.size(); ++o) {
            const auto [l, parent] = owners[o];
            for (int32_t tok : top_k(logits.data() + o * V, V, shape[t])) {
              frontier[l].push_back(int(tree[l].size()));
              tree[l].push_back({parent, tok, t + 1});
            }
          }
        }
        std::swap(cache.mem, dcache.mem);
        KC_RETURN_IF_ERROR(ds);
        for (int l : who) lanes[l].dfed = int32_t(lanes[l].seq.size());
      }
    }

    // The target batch.
    std::vector<ForwardRow> rows;
    std::vector<int32_t> slots, tails;
    std::vector<AttnRow> attn;
    struct Owner { int lane; int kind; int count; };  // kind 0 prefill/decode (1 logits row), 1 verify (count rows)
    std::vector<Owner> owners;
    bool has_prefill = false, has_decode = false, has_window = false, has_paged = false;
    for (int l = 0; l < L; ++l) {
      Lane& ln = lanes[l];
      if (ln.req < 0 || ln.done) continue;
      (ln.paged ? has_paged : has_window) = true;
      const ServeRequest& q = reqs[ln.req];
      const size_t n = q.prompt.size();
      if (ln.fed < n) {
        has_prefill = true;
        const size_t end = std::min(n, ln.fed + size_t(cfg.prefill_chunk));
        for (size_t p = ln.fed; p < end; ++p) {
          rows.push_back({l, q.prompt[p], int32_t(p), p + 1 == n});
          slots.push_back(int32_t(p));
          attn.push_back({l, int32_t(p) + 1, 0, 0});
        }
        if (end == n) owners.push_back({l, 0, 1});
        ln.fed = end;
        continue;
      }
      has_decode = true;
      const int32_t Lc = int32_t(ln.seq.size()) - 1;
      if (dn[l] == 0) {
        rows.push_back({l, ln.seq.back(), Lc, true});
        slots.push_back(Lc);
        attn.push_back({l, Lc + 1, 0, 0});
        owners.push_back({l, 0, 1});
        continue;
      }
      // Verify: the root (slot C) and every draft node i (slot C+1+i) as tail rows.
      rows.push_back({l, ln.seq.back(), Lc, true});
      slots.push_back(ln.C);
      attn.push_back({l, Lc, int32_t(tails.size()), 1});
      tails.push_back(ln.C);
      const std::vector<DraftNode>& nodes = tree[l];
      for (int i = 0; i < int(nodes.size()); ++i) {
        rows.push_back({l, nodes[i].token, Lc + nodes[i].depth, true});
        slots.push_back(ln.C + 1 + i);
        const size_t at = tails.size();
        tails.push_back(ln.C);
        if (cfg.plant_tree_chain_tails) {
          for (int x = 0; x <= i; ++x) tails.push_back(ln.C + 1 + x);
        } else {
          for (int x = i; x >= 0; x = nodes[x].parent) tails.push_back(ln.C + 1 + x);
          std::reverse(tails.begin() + at + 1, tails.end());
        }
        attn.push_back({l, Lc, int32_t(at), int32_t(tails.size() - at)});
      }
      owners.push_back({l, 1, int(nodes.size()) + 1});
    }
    if (has_prefill && has_decode) ++st.prefill_decode_rounds;
    if (has_window && has_paged) ++st.mixed_rounds;
    if (!rows.empty()) {
      for (int l = 0; l < L; ++l)
        if (lanes[l].req >= 0 && lanes[l].paged) {
          const Status pc = pool.check(l, lanes[l].pages);
          if (!pc.ok && st.pool_violations.size() < 8) st.pool_violations.push_back(pc.message);
        }
      const int chunk = cfg.plant_paged_batch_chunk && has_paged ? 4 : 0;
      KC_RETURN_IF_ERROR(target.forward_rows(be, cache, rows, slots, attn, tails, chunk, &logits));
      ++st.rounds;
      std::vector<KeepMove> moves;
      size_t at = 0;
      for (const Owner& o : owners) {
        Lane& ln = lanes[o.lane];
        if (o.kind == 0) {
          take(o.lane, argmax(logits.data() + at * V, V), logits.data() + at * V);
          ++at;
          continue;
        }
        // From the root, follow the child whose token is the target's argmax of the current row.
        const int32_t Lc = int32_t(ln.seq.size()) - 1;
        const std::vector<DraftNode>& nodes = tree[o.lane];
        std::vector<int> path;
        std::vector<int32_t> g;
        for (int cur = -1;;) {
          const float* row = logits.data() + (at + size_t(cur + 1)) * V;
          g.push_back(argmax(row, V));
          int next = -1;
          for (int i = cur + 1; i < int(nodes.size()) && next < 0; ++i)
            if (nodes[i].parent == cur && nodes[i].token == g.back()) next = i;
          if (next < 0) break;
          path.push_back(next);
          cur = next;
        }
        st.drafted += int64_t(nodes.size());
        st.accepted += int64_t(path.size());
        st.verifies += 1;
        st.draft_depth += dn[o.lane];
        moves.push_back({o.lane, ln.C, Lc});
        for (size_t k = 0; k < path.size(); ++k) moves.push_back({o.lane, ln.C + 1 + path[k], Lc + 1 + int32_t(k)});
        for (size_t k = 0; k < g.size(); ++k) {
          const int row = k == 0 ? 0 : path[k - 1] + 1;
          take(o.lane, g[k], logits.data() + (at + size_t(row)) * V);
        }
        at += size_t(o.count);
      }
      if (!moves.empty() && !cfg.plant_skip_keep) KC_RETURN_IF_ERROR(be.keep(cache, moves.data(), int(moves.size())));
    }
    ++step;
    // Save prompt states, finish lanes, release (fenced), retire what the finished step used.
    for (int l = 0; l < L; ++l) {
      Lane& ln = lanes[l];
      if (ln.req < 0) continue;
      const ServeRequest& q = reqs[ln.req];
      if (q.save && res[ln.req].saved.empty() && ln.fed == q.prompt.size())
        KC_RETURN_IF_ERROR(be.pack(cache, l, 0, int64_t(q.prompt.size()) - 1, &res[ln.req].saved));
      if (cfg.plant_early_release && ln.paged && !ln.released_early && !ln.done &&
          ln.gen == q.max_tokens - 1) {
        pool.release_pages_now(ln.pages);
        ln.released_early = true;
      }
      if (!ln.done) continue;
      if (ln.paged && !ln.released_early) pool.release_pages(ln.pages, step);
      pool.release_run(l, step);
      cache.views[l] = kIdle;
      if (drafting) dcache.views[l] = kIdle;
      ln = Lane();
    }
    KC_RETURN_IF_ERROR(be.fence(step));
    KC_RETURN_IF_ERROR(retire_done());
    if (cfg.stop_after_first_token && first_token_seen) break;
  }
  st.wall_s = since(t0);
  st.peak_pages = pool.peak_pages();
  *out = std::move(res);
  if (stats) *stats = std::move(st);
  return Status::Ok();
}

}  // namespace kc::engine
