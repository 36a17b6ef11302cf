// Serving (engine/serve.h) on random configurations and request sets, on the cpu backend with
// the fixture model (stdlib-bytes-3m, its draft the first layer): every request that is served
// gives the tokens and logits rows (digests) of the same request served alone in a window, and
// a request is refused exactly by the documented rules. The serve gate replays fixed fixtures;
// this explores the space around them: lane kinds (window first, pages all, all windows), page
// sizes, prefill chunks, pools from tight to ample, chain and tree drafts, four cache formats,
// fences on time or late.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/generate.h"
#include "engine/serve.h"
#include "kernels/backend/forwarding.h"
#include "kernels/layout/bits.h"
#include "tests/engine/fixture_generate.h"

namespace kc::engine {
namespace {

const test::FixtureWithDraft& models(Format f) { return test::fixture_with_draft(f); }

// A request alone in one window lane, no drafting, prefill chunk 16: the reference.
const ServeResult& solo(Format f, const std::vector<int32_t>& prompt, int max_tokens) {
  static std::map<std::tuple<Format, std::vector<int32_t>, int>, ServeResult> cache;
  const auto key = std::make_tuple(f, prompt, max_tokens);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  ServeConfig c;
  c.all_windows = true;
  c.context = int(prompt.size()) + max_tokens;
  auto be = make_cpu_backend();
  std::vector<ServeResult> res;
  const Status st = serve(models(f).m, nullptr, *be, c, {{prompt, max_tokens, nullptr, false}}, &res, nullptr);
  RC_ASSERT(st.ok);
  RC_ASSERT(res.size() == 1u);
  RC_ASSERT(res[0].refused.empty());
  return cache.emplace(key, res[0]).first->second;
}

// The cpu backend whose steps finish `lag` fences late, as a device stream's may (fences_done
// behind the last fence, caught up by wait_fence): released pages and runs stay pending, and
// admission waits for them.
class LateFences final : public ForwardingBackend {
 public:
  LateFences(Backend& real, uint64_t lag) : ForwardingBackend(real), lag_(lag) {}
  Status fence(uint64_t step) override {
    last_ = step;
    return Status::Ok();
  }
  Status fences_done(uint64_t* done) override {
    *done = std::max(last_ > lag_ ? last_ - lag_ : 0, waited_);
    return Status::Ok();
  }
  Status wait_fence(uint64_t step) override {
    waited_ = std::max(waited_, std::min(step, last_));
    return Status::Ok();
  }

 private:
  uint64_t lag_, last_ = 0, waited_ = 0;
};

struct Req {
  std::string text;  // the prompt: encode_prompt(text)
  int max_tokens = 0;
};

RC_GTEST_PROP(ServeModel, ServedEqualsSoloAndRefusalsFollowTheRules, ()) {
  const Format f = *rc::gen::element(Format::bf16, Format::fp8, Format::q4, Format::mxfp4);
  ServeConfig c;
  c.parallel = *rc::gen::inRange(1, 4);
  c.page = *rc::gen::element(1, 3, 4, 7, 16);
  const int kind = *rc::gen::inRange(0, 4);  // lane 0 a window, pages for all, all windows, window_first off
  c.pages_all = kind == 1;
  c.all_windows = kind == 2;
  c.window_first = kind != 3;
  c.context = *rc::gen::inRange(8, 48);
  c.pool_pages = *rc::gen::inRange(0, 40);
  c.prefill_chunk = *rc::gen::element(1, 2, 5, 16);
  const int draft = *rc::gen::inRange(0, 5);  // off, chain of 1, chain of 3, tree {2, 1}, tree {3, 2}
  if (draft == 1) c.draft_tokens = 1;
  if (draft == 2) c.draft_tokens = 3;
  if (draft == 3) c.draft_tree = {2, 1};
  if (draft == 4) c.draft_tree = {3, 2};
  // 1-4 requests of 0-23 bytes (the prompt: <|eos|> and the bytes; under two tokens is refused)
  // and 1-7 tokens to make.
  std::vector<Req> reqs(*rc::gen::inRange(1, 5));
  for (Req& r : reqs) {
    r.text = *rc::gen::container<std::string>(size_t(*rc::gen::inRange(0, 24)),
                                              rc::gen::element('a', 'e', 'f', 'i', 'm', 'o', 'r', 't', ' ', '(', ')', ':', '\n'));
    r.max_tokens = *rc::gen::inRange(1, 8);
  }
  // Half the cases put the context, the pool or both at the first request's need (or one off):
  // the refusal rules and a lane's last position are decided there.
  const int64_t need0 = serve_positions(c, int64_t(reqs[0].text.size()) + 1, reqs[0].max_tokens);
  const int edge = *rc::gen::inRange(0, 4);  // neither, context, pool, both
  if (edge & 1) c.context = int(std::max<int64_t>(2, need0 + *rc::gen::element(-1, 0, 0, 1)));
  if (edge & 2) c.pool_pages = int(std::max<int64_t>(0, (need0 + c.page - 1) / c.page + *rc::gen::element(-1, 0, 0, 1)));
  const test::FixtureWithDraft& md = models(f);
  std::vector<ServeRequest> sr;
  for (const Req& r : reqs) sr.push_back({encode_prompt(r.text), r.max_tokens, nullptr, false});
  // Fences on time (the cpu backend itself), or 1, 2 or ~2^30 steps late (a decorator: the
  // engine then runs its host twins over it, the same arithmetic).
  const uint64_t lag = *rc::gen::element<uint64_t>(0, 0, 1, 2, uint64_t(1) << 30);
  auto cpu = make_cpu_backend();
  LateFences late(*cpu, lag);
  Backend& be = lag ? static_cast<Backend&>(late) : *cpu;
  std::vector<ServeResult> res;
  ServeStats st;
  const Status s = serve(md.m, draft ? &md.d : nullptr, be, c, sr, &res, &st);
  RC_ASSERT(s.ok);
  RC_ASSERT(res.size() == sr.size());
  RC_ASSERT(st.pool_violations.empty());
  RC_ASSERT(st.planning_errors.empty());

  const bool window_lane = c.all_windows || (c.window_first && !c.pages_all);
  const KvLayout lay = md.m.kv_layout(), dlay = md.d.kv_layout();
  const ServeArena plan = plan_serve_arena(c, lay, draft ? &dlay : nullptr);
  const int64_t total_pages = int64_t(plan.arena_bytes / plan.page_stride);
  int served = 0;
  for (size_t i = 0; i < sr.size(); ++i) {
    const ServeResult& r = res[i];
    const int64_t need = serve_positions(c, int64_t(sr[i].prompt.size()), sr[i].max_tokens);
    const int64_t pages = (need + c.page - 1) / c.page;
    const std::string head = "request " + std::to_string(i) + " refused: ";
    if (sr[i].prompt.size() < 2) {
      RC_ASSERT(r.refused == head + "a prompt holds at least two tokens");
      continue;
    }
    if (need > c.context) {
      RC_ASSERT(r.refused.rfind(head + "needs " + std::to_string(need) + " positions", 0) == 0);
      continue;
    }
    if (!window_lane && pages > total_pages) {
      RC_ASSERT(r.refused == head + "needs " + std::to_string(pages) + " pages, the pool holds " + std::to_string(total_pages));
      continue;
    }
    // What fits the pool's page region (or a window lane) is served; on pages alone, more than
    // the region may still be served while the other lanes' runs leave room, or else it is
    // refused once the pool is idle.
    if (!r.refused.empty()) {
      RC_ASSERT(!window_lane);
      RC_ASSERT(pages > c.pool_pages);
      RC_ASSERT(r.refused == head + "it fits in no lane of an idle pool");
      continue;
    }
    ++served;
    RC_ASSERT(r.lane >= 0 && r.lane < c.parallel);
    RC_ASSERT(r.paged == !(c.all_windows || (r.lane == 0 && window_lane)));
    const ServeResult& one = solo(f, sr[i].prompt, sr[i].max_tokens);
    RC_ASSERT(r.tokens == one.tokens);
    RC_ASSERT(r.digests == one.digests);
    RC_ASSERT(r.stopped_at_eos == one.stopped_at_eos);
    RC_ASSERT(r.eos_digest == one.eos_digest);
  }
  RC_ASSERT(int(st.admitted.size()) == served);
  RC_TAG(served == int(sr.size()) ? "all served" : served ? "some refused" : "none served");
}

// A random lane configuration for one request's serve (the resumed property's two runs).
ServeConfig random_lanes(int context) {
  ServeConfig c;
  c.parallel = *rc::gen::inRange(1, 3);
  c.page = *rc::gen::element(1, 3, 16);
  const int kind = *rc::gen::inRange(0, 3);  // lane 0 a window, pages for all, all windows
  c.pages_all = kind == 1;
  c.all_windows = kind == 2;
  c.context = context;
  c.pool_pages = (context + c.page - 1) / c.page * 2;
  c.prefill_chunk = *rc::gen::element(1, 4, 16);
  return c;
}

// The prompt cache: a request saved under one random lane configuration (window or pages,
// its own page size, beside another request or alone) and restored under another gives the
// tokens and logits rows of the request served alone from scratch.
RC_GTEST_PROP(ServeModel, ResumedEqualsFreshAcrossConfigurations, ()) {
  const Format f = *rc::gen::element(Format::bf16, Format::fp8, Format::q4, Format::mxfp4);
  const std::vector<int32_t> prompt = encode_prompt(*rc::gen::container<std::string>(
      size_t(*rc::gen::inRange(1, 18)), rc::gen::element('a', 'c', 'e', 'l', 'o', 's', 't', ' ', '.', '(', '\n')));
  const int max_tokens = *rc::gen::inRange(1, 5);
  const int context = int(prompt.size()) + max_tokens + *rc::gen::inRange(0, 5);
  const test::FixtureWithDraft& md = models(f);
  auto be = make_cpu_backend();
  const ServeRequest other{encode_prompt("x = 1"), 3, nullptr, false};

  ServeConfig a = random_lanes(context);
  std::vector<ServeRequest> first = {{prompt, max_tokens, nullptr, true}};
  if (*rc::gen::arbitrary<bool>()) first.insert(first.begin(), other);  // the saved request on another lane
  std::vector<ServeResult> saved;
  RC_ASSERT(serve(md.m, nullptr, *be, a, first, &saved, nullptr).ok);
  const ServeResult& fresh = saved.back();
  RC_ASSERT(fresh.refused.empty());
  RC_ASSERT(!fresh.saved.empty());

  ServeConfig b = random_lanes(context);
  std::vector<ServeRequest> second = {{prompt, max_tokens, &fresh.saved, false}};
  if (*rc::gen::arbitrary<bool>()) second.insert(second.begin(), other);
  std::vector<ServeResult> resumed;
  RC_ASSERT(serve(md.m, nullptr, *be, b, second, &resumed, nullptr).ok);
  const ServeResult& again = resumed.back();
  RC_ASSERT(again.refused.empty());

  const ServeResult& one = solo(f, prompt, max_tokens);
  for (const ServeResult* r : {&fresh, &again}) {
    RC_ASSERT(r->tokens == one.tokens);
    RC_ASSERT(r->digests == one.digests);
    RC_ASSERT(r->stopped_at_eos == one.stopped_at_eos);
    RC_ASSERT(r->eos_digest == one.eos_digest);
  }
  RC_TAG(fresh.paged ? "saved paged" : "saved window", again.paged ? "restored paged" : "restored window");
}

// generate (engine/generate.h), the engine's other decoding path, on random batches: every
// lane on a window or on pages of its own size, prefill in random chunks; each lane's tokens,
// end and logits rows (as digests) equal serve's solo run of the same request.
RC_GTEST_PROP(ServeModel, GenerateEqualsServeAlone, ()) {
  const Format f = *rc::gen::element(Format::bf16, Format::fp8, Format::q4, Format::mxfp4);
  std::vector<GenerateRequest> reqs(*rc::gen::inRange(1, 4));
  for (GenerateRequest& r : reqs) {
    r.prompt = encode_prompt(*rc::gen::container<std::string>(
        size_t(*rc::gen::inRange(1, 20)), rc::gen::element('a', 'd', 'e', 'f', 'i', 'n', 'r', 't', ' ', '(', ':', '\n')));
    r.max_tokens = *rc::gen::inRange(1, 7);
    r.page = *rc::gen::element(0, 0, 1, 2, 5, 16);
  }
  GenerateOptions o;
  o.prefill_chunk = *rc::gen::element(1, 3, 8, 64);
  o.keep_logits = true;
  auto cpu = make_cpu_backend();
  std::vector<GenerateResult> out;
  const Status st = generate(models(f).m, *cpu, reqs, o, &out);
  RC_ASSERT(st.ok);
  RC_ASSERT(out.size() == reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ServeResult& one = solo(f, reqs[i].prompt, reqs[i].max_tokens);
    RC_ASSERT(out[i].tokens == one.tokens);
    RC_ASSERT(out[i].stopped_at_eos == one.stopped_at_eos);
    RC_ASSERT(out[i].logits.size() == one.tokens.size() + (one.stopped_at_eos ? 1 : 0));
    for (size_t k = 0; k < one.tokens.size(); ++k)
      RC_ASSERT(fnv1a(out[i].logits[k].data(), out[i].logits[k].size() * sizeof(float)) == one.digests[k]);
    if (one.stopped_at_eos)
      RC_ASSERT(fnv1a(out[i].logits.back().data(), out[i].logits.back().size() * sizeof(float)) == one.eos_digest);
  }
}

}  // namespace
}  // namespace kc::engine
