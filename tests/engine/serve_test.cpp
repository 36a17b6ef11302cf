// Serving (engine/pool.h, engine/serve.h, engine/serve_gate.h) on the cpu backend: the
// pool's pages / runs / fences / own check; admission (waits for pages, refuses what can
// never fit while the others go on); drafted == plain and resumed == fresh on a
// synthetic model; the fixture validator (each bad class names its field, exit 2, nothing
// written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "contracts/json_type.h"
#include "engine/generate.h"
#include "engine/make_model.h"
#include "engine/serve.h"
#include "engine/serve_gate.h"
#include "kernels/codecs/bf16.h"
#include "kernels/codecs/fp8.h"
#include "tests/engine/fixture_generate.h"
#include "tests/engine/temp_dir.h"

namespace kc::engine {
namespace {

const std::string kSrc = KC_SOURCE_DIR;

TEST(Pool, PagesFromTheBottomRunsFromTheTop) {
  Pool p(10 * 256, 256);
  uint64_t off = 0;
  ASSERT_TRUE(p.claim_run(0, {{"a", 300, 0}, {"b", 100, 0}}, 768, &off).ok);
  EXPECT_EQ(off, 10u * 256 - 768);
  uint64_t b = 0;
  ASSERT_TRUE(p.find_run(0, "b", 100, &b).ok);
  EXPECT_EQ(b, off + 512);
  EXPECT_FALSE(p.find_run(0, "b", 101, &b).ok);  // bounds-checked
  EXPECT_FALSE(p.find_run(0, "c", 1, &b).ok);
  EXPECT_FALSE(p.find_run(1, "a", 1, &b).ok);
  EXPECT_EQ(p.free_pages(), 7);  // three pages' bytes under the run
  std::vector<int32_t> pages;
  ASSERT_TRUE(p.take_pages(1, 3, &pages));
  EXPECT_EQ(pages, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FALSE(p.take_pages(2, 5, &pages));  // only 4 left: nothing taken
  EXPECT_EQ(p.free_pages(), 4);
}

TEST(Pool, RunOnePartShortIsRefusedAtPlanning) {
  std::vector<RunPart> parts = {{"window", 1000, 0}, {"draft", 500, 0}};
  const uint64_t full = run_bytes_for(parts);
  EXPECT_TRUE(plan_run(&parts, full).ok);
  const Status st = plan_run(&parts, run_bytes_for({{"window", 1000, 0}}));
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("part draft"), std::string::npos) << st.message;
  Pool p(16 * 256, 256);
  uint64_t off = 0;
  EXPECT_FALSE(p.claim_run(0, parts, 1024, &off).ok);
  EXPECT_FALSE(p.has_run(0));
}

TEST(Pool, ReleaseIsFencedAndTheCheckNamesThePage) {
  Pool p(8 * 256, 256);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(p.take_pages(0, 4, &a));
  p.release_pages(a, 5);
  EXPECT_TRUE(p.check(0, a).ok);  // pending: still the lane's until step 5 finished
  EXPECT_FALSE(p.take_pages(1, 5, &b));
  p.retire(4);
  EXPECT_FALSE(p.take_pages(1, 5, &b));
  p.retire(5);
  EXPECT_EQ(p.take_freed().size(), 4u);
  ASSERT_TRUE(p.take_pages(1, 5, &b));
  const Status st = p.check(0, a);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("page 0, which is owned by lane 1"), std::string::npos) << st.message;
  p.release_pages_now({4});
  const Status st2 = p.check(1, b);
  EXPECT_NE(st2.message.find("page 4, which is free"), std::string::npos) << st2.message;
}

// The pool check refuses a page index equal to the page count, the first outside the arena, and -1
// (pool-check-page-at-end: the index equal to the count passed the bound and read the owner
// table one past its end).
TEST(Pool, CheckRefusesPagesOutsideTheArena) {
  Pool p(8 * 256, 256);
  std::vector<int32_t> a;
  ASSERT_TRUE(p.take_pages(0, 8, &a));
  EXPECT_TRUE(p.check(0, a).ok);
  for (int32_t bad : {8, -1}) {
    const Status st = p.check(0, {bad});
    EXPECT_FALSE(st.ok) << bad;
    EXPECT_NE(st.message.find("reads page " + std::to_string(bad) + ", outside the arena"), std::string::npos) << st.message;
  }
}

TEST(Pool, RunsDoNotGrowIntoPagesInUse) {
  Pool p(8 * 256, 256);
  std::vector<int32_t> a;
  ASSERT_TRUE(p.take_pages(0, 7, &a));
  uint64_t off = 0;
  EXPECT_FALSE(p.claim_run(1, {{"x", 512, 0}}, 512, &off).ok);
  EXPECT_TRUE(p.claim_run(1, {{"x", 256, 0}}, 256, &off).ok);
  EXPECT_EQ(off, 7u * 256);
}

// serve() claims a lane's run, then finds its pages taken by the run's own bytes and gives
// the run back (unclaim_run): the lane's live run goes, a run of the same lane still waiting
// for its fence stays (its bytes may still be read by an unfinished step). Session 31's
// coverage audit: unclaim_run and a pool whose only pending item is a run never ran.
TEST(Pool, UnclaimDropsTheLiveRunAndKeepsTheOneAwaitingItsFence) {
  Pool p(8 * 256, 256);
  uint64_t off = 0;
  ASSERT_TRUE(p.claim_run(0, {{"draft", 512, 0}}, 512, &off).ok);
  EXPECT_EQ(off, 6u * 256);
  p.release_run(0, 3);  // finished at step 3, not yet retired
  EXPECT_FALSE(p.has_run(0));
  EXPECT_TRUE(p.has_pending());
  ASSERT_TRUE(p.claim_run(0, {{"draft", 512, 0}}, 512, &off).ok);  // the next request on lane 0
  EXPECT_EQ(off, 4u * 256);                                        // below the fenced run
  std::vector<int32_t> pages;
  EXPECT_FALSE(p.take_pages(0, 5, &pages));  // the run took two pages' bytes: 4 free
  p.unclaim_run(0);
  EXPECT_FALSE(p.has_run(0));
  EXPECT_TRUE(p.has_pending()) << "the run awaiting step 3 was dropped with the live one";
  EXPECT_EQ(p.free_pages(), 6);  // pages under the fenced run only
  ASSERT_TRUE(p.claim_run(1, {{"draft", 512, 0}}, 512, &off).ok);
  EXPECT_EQ(off, 4u * 256) << "a run placed over bytes a step in flight may still read";
  p.unclaim_run(1);
  p.retire(2);
  EXPECT_TRUE(p.has_pending());
  p.retire(3);
  EXPECT_FALSE(p.has_pending());
  EXPECT_EQ(p.free_pages(), 8);
  ASSERT_TRUE(p.claim_run(1, {{"draft", 512, 0}}, 512, &off).ok);
  EXPECT_EQ(off, 6u * 256);
}

// A freed page is filled with Pool::kPoison so that a stale read is loud, never plausible: the
// byte 0x7f is E4M3's NaN in an fp8 page, and 0x7f7f is about 3.4e38 in a bf16 page (and NaN as
// a q4 group's fp16 scale). A zero poison would read as plausible zeros in every format
// (mutation sweep round 10: the serve tests compared the fill with kPoison, whatever it was).
TEST(Pool, PoisonReadsAsNanInFp8AndHugeInBf16) {
  EXPECT_NE(Pool::kPoison, 0);
  EXPECT_TRUE(std::isnan(kc::e4m3_decode(Pool::kPoison)));
  EXPECT_GT(kc::bf16_to_float(uint16_t(Pool::kPoison * 0x101)), 1e38f);
}

// Runs are claimed from the arena's last 256-byte boundary down (host mutation sweep, round 9:
// every test arena was a multiple of 256, so a run placed from the arena's very end, off the
// 256-byte grid, passed). An arena of 10 pages and 100 bytes puts a 512-byte run at page 8.
TEST(Pool, RunsSitBelowTheArenasLast256ByteBoundary) {
  Pool p(10 * 256 + 100, 256);
  uint64_t off = 0;
  ASSERT_TRUE(p.claim_run(0, {{"a", 300, 0}}, 512, &off).ok);
  EXPECT_EQ(off, 8u * 256);
  EXPECT_EQ(off % 256, 0u);
  EXPECT_EQ(p.free_pages(), 8);
}

using Tiny = test::FixtureWithDraft;
const Tiny& tiny(Format f) { return test::fixture_with_draft(f); }

std::vector<ServeRequest> requests(const std::vector<std::string>& texts, int max_tokens) {
  std::vector<ServeRequest> r;
  for (const std::string& t : texts) r.push_back({encode_prompt(t), max_tokens, nullptr, false});
  return r;
}

TEST(Serve, NeverFitsIsRefusedWhileOthersGoOnAndTightPoolsWait) {
  const Tiny& t = tiny(Format::bf16);
  auto be = make_cpu_backend();
  ServeConfig c;
  c.parallel = 3;
  c.page = 4;
  c.pages_all = true;
  c.context = 40;
  c.pool_pages = 8;  // one request of ~20 positions at a time: the others wait
  std::vector<ServeRequest> reqs = requests({"import os", "def f(x):", "class A:"}, 8);
  reqs.insert(reqs.begin() + 1, ServeRequest{encode_prompt(std::string(60, 'x')), 8, nullptr, false});
  std::vector<ServeResult> res;
  ServeStats st;
  ASSERT_TRUE(serve(t.m, nullptr, *be, c, reqs, &res, &st).ok);
  EXPECT_NE(res[1].refused.find("request 1 refused: needs 69 positions"), std::string::npos) << res[1].refused;
  for (int i : {0, 2, 3}) {
    EXPECT_TRUE(res[i].refused.empty()) << res[i].refused;
    EXPECT_EQ(res[i].tokens.size(), 8u);
  }
  EXPECT_LE(st.peak_pages, 8);
  // Solo results equal the queued ones.
  for (int i : {0, 2, 3}) {
    std::vector<ServeResult> one;
    ServeConfig s = c;
    s.parallel = 1;
    ASSERT_TRUE(serve(t.m, nullptr, *be, s, {reqs[i]}, &one, nullptr).ok);
    EXPECT_EQ(one[0].tokens, res[i].tokens);
    EXPECT_EQ(one[0].digests, res[i].digests);
  }
}

// The request rules at their edges, each refused for its request alone: a prompt of one
// token (two is the least), max_tokens 0 (1 is the least), and on pages alone one page more
// than the pool holds, while a request that needs exactly the pool's pages is served.
TEST(Serve, RequestRulesAtTheirEdges) {
  const Tiny& t = tiny(Format::bf16);
  auto be = make_cpu_backend();
  ServeConfig c;
  c.parallel = 2;
  c.page = 4;
  c.pages_all = true;
  c.context = 40;
  c.pool_pages = 5;
  const std::vector<ServeRequest> reqs = {
      {{65}, 4, nullptr, false},                                  // one token
      {{kTokEos, 65}, 4, nullptr, false},                         // two tokens
      {encode_prompt("ab"), 0, nullptr, false},                   // no token to make
      {encode_prompt("ab"), 1, nullptr, false},                   // one
      {encode_prompt(std::string(15, 'y')), 4, nullptr, false},  // 16 + 4 = 20 positions: 5 pages of 4
      {encode_prompt(std::string(16, 'y')), 4, nullptr, false},  // 21 positions: 6 pages
  };
  std::vector<ServeResult> res;
  const Status st = serve(t.m, nullptr, *be, c, reqs, &res, nullptr);
  ASSERT_TRUE(st.ok) << st.message;
  ASSERT_EQ(res.size(), reqs.size());
  EXPECT_EQ(res[0].refused, "request 0 refused: a prompt holds at least two tokens");
  EXPECT_EQ(res[2].refused, "request 2 refused: max_tokens must be at least 1");
  EXPECT_EQ(res[5].refused, "request 5 refused: needs 6 pages, the pool holds 5");
  for (int i : {1, 3, 4}) {
    EXPECT_TRUE(res[i].refused.empty()) << i << ": " << res[i].refused;
    EXPECT_TRUE(res[i].tokens.size() == size_t(reqs[i].max_tokens) || res[i].stopped_at_eos) << i;
  }
  EXPECT_EQ(res[4].pages, 5);
}

// A prompt token id one past the vocabulary (== vocab_size) is refused for its request
// alone; the last id of the vocabulary (vocab_size - 1) is served like any other.
TEST(Serve, ATokenIdOfTheVocabularySizeIsRefusedForItsRequestAlone) {
  const Tiny& t = tiny(Format::bf16);
  const int32_t V = int32_t(t.m.config().vocab_size);
  auto be = make_cpu_backend();
  ServeConfig c;
  c.parallel = 2;
  c.page = 4;
  c.context = 40;
  c.pool_pages = 20;
  auto reqs = requests({"import os", "def f(x):", "class A:"}, 4);
  reqs[1].prompt.push_back(V);      // one past the last id
  reqs[2].prompt.push_back(V - 1);  // the last id
  std::vector<ServeResult> res;
  const Status st = serve(t.m, nullptr, *be, c, reqs, &res, nullptr);
  ASSERT_TRUE(st.ok) << st.message;
  EXPECT_EQ(res[1].refused, "request 1 refused: token out of the vocabulary");
  EXPECT_TRUE(res[1].tokens.empty());
  for (int i : {0, 2}) {
    EXPECT_TRUE(res[i].refused.empty()) << i << ": " << res[i].refused;
    EXPECT_TRUE(res[i].tokens.size() == 4u || res[i].stopped_at_eos) << i;
  }
  reqs[1].prompt.back() = -1;
  ASSERT_TRUE(serve(t.m, nullptr, *be, c, reqs, &res, nullptr).ok);
  EXPECT_EQ(res[1].refused, "request 1 refused: token out of the vocabulary");
}

TEST(Serve, DraftedEqualsPlainAndSkippingKeepDoesNot) {
  for (Format f : {Format::bf16, Format::fp8}) {
    const Tiny& t = tiny(f);
    auto be = make_cpu_backend();
    ServeConfig c;
    c.parallel = 2;
    c.page = 7;
    c.context = 64;
    c.pool_pages = 32;
    const auto reqs = requests({"import os\n", "    def __init__(self", "x = "}, 12);
    std::vector<ServeResult> plain, drafted, broken;
    ASSERT_TRUE(serve(t.m, nullptr, *be, c, reqs, &plain, nullptr).ok);
    c.draft_tokens = 3;
    ServeStats st;
    ASSERT_TRUE(serve(t.m, &t.d, *be, c, reqs, &drafted, &st).ok);
    EXPECT_GT(st.drafted, 0);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(plain[i].tokens, drafted[i].tokens) << format_name(f) << " prompt " << i;
      EXPECT_EQ(plain[i].digests, drafted[i].digests) << format_name(f) << " prompt " << i;
    }
    c.plant_skip_keep = true;
    ASSERT_TRUE(serve(t.m, &t.d, *be, c, reqs, &broken, nullptr).ok);
    bool differs = false;
    for (size_t i = 0; i < reqs.size(); ++i) differs = differs || broken[i].digests != plain[i].digests;
    EXPECT_TRUE(differs) << format_name(f);
  }
}

TEST(Serve, ResumedEqualsFreshAcrossLaneKinds) {
  const Tiny& t = tiny(Format::fp8);
  auto be = make_cpu_backend();
  ServeConfig c;
  c.parallel = 1;
  c.context = 64;
  c.pool_pages = 32;
  auto reqs = requests({"from typing import ", "    return self."}, 10);
  for (auto& r : reqs) r.save = true;
  std::vector<ServeResult> fresh;
  ASSERT_TRUE(serve(t.m, nullptr, *be, c, reqs, &fresh, nullptr).ok);  // window lane
  for (int page : {3, 16}) {
    ServeConfig r = c;
    r.pages_all = true;
    r.page = page;
    auto again = requests({"from typing import ", "    return self."}, 10);
    for (size_t i = 0; i < again.size(); ++i) again[i].restore = &fresh[i].saved;
    std::vector<ServeResult> resumed;
    ASSERT_TRUE(serve(t.m, nullptr, *be, r, again, &resumed, nullptr).ok);
    for (size_t i = 0; i < again.size(); ++i) {
      EXPECT_TRUE(resumed[i].paged);
      EXPECT_EQ(resumed[i].tokens, fresh[i].tokens) << "page " << page;
      EXPECT_EQ(resumed[i].digests, fresh[i].digests) << "page " << page;
    }
  }
}

// A cpu backend whose steps finish late: fences_done reports `lag` steps behind the last
// fence (never, with a huge lag, until wait_fence); fills are recorded.
class LateFences final : public Backend {
 public:
  explicit LateFences(uint64_t lag) : lag_(lag) {}
  std::string name() const override { return "late-fences"; }
  DeviceInfo device() const override { return real_->device(); }
  Status encode_rows(Format f, Cache& c, const float* x, const RowRef* r, int n) override { return real_->encode_rows(f, c, x, r, n); }
  Status decode_rows(Format f, const Cache& c, const RowRef* r, int n, float* o) override { return real_->decode_rows(f, c, r, n, o); }
  Status e4m3_encode_bits(uint64_t a, uint64_t n, uint8_t* o) override { return real_->e4m3_encode_bits(a, n, o); }
  // Runs (a window lane's window, a lane's drafter cache: views without a page table): a row
  // storing slot 0 at layer 0 starts a new request's window; the bytes it covers must not be
  // those of a window whose last step has not finished yet (fences_done). Each such reuse is
  // recorded in reused_early_.
  Status rope_store(Cache& c, const RopeParams& p, const RopeRow* r, int n, const float* q, const float* k, const float* v,
                    float* qo) override {
    uint64_t done = 0;
    (void)fences_done(&done);
    const uint64_t now = last_ + 1;  // the step being run
    for (int i = 0; i < n; ++i) {
      const ViewDesc& d = c.views[size_t(r[i].lane)];
      if (d.paged()) continue;
      const uint64_t b = d.base_off, e = b + c.lay.kv_bytes(uint64_t(d.ptok));
      if (p.layer == 0 && r[i].slot == 0)
        for (const Use& u : uses_)
          if (u.b < e && b < u.e && u.step > done && !(u.b == b && u.e == e && u.step == now))
            reused_early_.push_back("step " + std::to_string(now) + ": lane " + std::to_string(r[i].lane) +
                                    " starts a window at bytes " + std::to_string(b) + ".." + std::to_string(e) +
                                    ", which a window used in step " + std::to_string(u.step) +
                                    " (finished up to step " + std::to_string(done) + ")");
      bool seen = false;
      for (Use& u : uses_)
        if (u.b == b && u.e == e) u.step = now, seen = true;
      if (!seen) uses_.push_back({b, e, now});
    }
    return real_->rope_store(c, p, r, n, q, k, v, qo);
  }
  Status attention(const Cache& c, const AttnParams& p, const AttnRow* r, int n, const std::vector<int32_t>& t,
                   const float* q, float* o) override {
    return real_->attention(c, p, r, n, t, q, o);
  }
  Status pack(const Cache& c, int l, int64_t p0, int64_t n, std::vector<uint8_t>* b) override { return real_->pack(c, l, p0, n, b); }
  Status unpack(Cache& c, int l, int64_t p0, const std::vector<uint8_t>& b) override { return real_->unpack(c, l, p0, b); }
  Status keep(Cache& c, const KeepMove* m, int n) override { return real_->keep(c, m, n); }
  Status fill(Cache& c, const ByteRange* r, int n, uint8_t v) override {
    for (int i = 0; i < n; ++i) filled_.push_back({r[i].offset, r[i].bytes, v});
    return real_->fill(c, r, n, v);
  }
  Status fence(uint64_t step) override {
    last_ = step;
    return Status::Ok();
  }
  Status fences_done(uint64_t* done) override {
    const uint64_t lagged = last_ > lag_ ? last_ - lag_ : 0;
    *done = std::max(lagged, waited_);
    return Status::Ok();
  }
  Status wait_fence(uint64_t step) override {
    waited_ = std::max(waited_, std::min(step, last_));
    ++waits_;
    return Status::Ok();
  }
  struct Fill {
    uint64_t offset, bytes;
    uint8_t value;
  };
  std::vector<Fill> filled_;
  int waits_ = 0;
  std::vector<std::string> reused_early_;

 private:
  struct Use {
    uint64_t b, e, step;  // a window's bytes [b, e), the last step that stored into it
  };
  std::vector<Use> uses_;
  std::unique_ptr<Backend> real_ = make_cpu_backend();
  uint64_t lag_, last_ = 0, waited_ = 0;
};

TEST(Serve, PagesGoBackOnlyAfterTheirStepFinishedAndArePoisonedThroughTheBackend) {
  const Tiny& t = tiny(Format::bf16);
  ServeConfig c;
  c.parallel = 3;
  c.page = 4;
  c.pages_all = true;
  c.context = 40;
  c.pool_pages = 12;  // two requests of ~20 positions (5 pages) at a time: the third waits for room
  const auto reqs = requests({"import os", "def f(x):", "class A:", "x = 1"}, 8);
  std::vector<ServeResult> ref;
  ServeStats st_ref;
  LateFences now(0);
  ASSERT_TRUE(serve(t.m, nullptr, now, c, reqs, &ref, &st_ref).ok);
  EXPECT_EQ(now.waits_, 0);
  // Every freed page poisoned through Backend::fill, a whole page each.
  int poisoned = 0;
  for (const auto& f : now.filled_)
    if (f.value == Pool::kPoison) {
      ++poisoned;
      EXPECT_EQ(f.bytes, t.m.kv_layout().page_stride(4));
    }
  int pages = 0;
  for (const ServeRequest& r : reqs) pages += (int(r.prompt.size()) + r.max_tokens + 3) / 4;
  EXPECT_EQ(poisoned, pages);  // each request's pages, once, when its last step finished
  for (uint64_t lag : {uint64_t(3), uint64_t(1) << 40}) {
    LateFences late(lag);
    std::vector<ServeResult> res;
    ServeStats st;
    ASSERT_TRUE(serve(t.m, nullptr, late, c, reqs, &res, &st).ok) << lag;
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE(res[i].refused.empty()) << lag << ": " << res[i].refused;
      EXPECT_EQ(res[i].tokens, ref[i].tokens) << lag;
      EXPECT_EQ(res[i].digests, ref[i].digests) << lag;
    }
    EXPECT_TRUE(st.pool_violations.empty());
    // Room comes back later: at least as many rounds with requests waiting for it.
    EXPECT_GE(st.admission_waits, st_ref.admission_waits) << lag;
    if (lag > 100) {  // idle with the room fenced: serve waited for the step
      EXPECT_GT(late.waits_, 0);
    }
  }
}

// The same for runs (a window lane's window, every lane's drafter cache): a finished lane's
// run goes back to the pool only once the step that last used it finished, so with a backend
// whose steps finish late no new request's window starts on bytes a running step still uses.
// Drafting (chains of 2) on a window lane and a paged lane, 5 requests queued behind 2 lanes.
TEST(Serve, RunsGoBackOnlyAfterTheirStepFinished) {
  const Tiny& t = tiny(Format::bf16);
  ServeConfig c;
  c.parallel = 2;
  c.page = 4;
  c.context = 40;
  c.pool_pages = 24;
  c.draft_tokens = 2;
  const auto reqs = requests({"import os", "def f(x):", "class A:", "x = 1", "y = 2"}, 6);
  std::vector<ServeResult> ref;
  LateFences now(0);
  ASSERT_TRUE(serve(t.m, &t.d, now, c, reqs, &ref, nullptr).ok);
  EXPECT_TRUE(now.reused_early_.empty()) << now.reused_early_.front();
  for (uint64_t lag : {uint64_t(1), uint64_t(2), uint64_t(3), uint64_t(1) << 40}) {
    LateFences late(lag);
    std::vector<ServeResult> res;
    ServeStats st;
    ASSERT_TRUE(serve(t.m, &t.d, late, c, reqs, &res, &st).ok) << lag;
    EXPECT_TRUE(late.reused_early_.empty()) << "lag " << lag << ": " << late.reused_early_.front();
    EXPECT_GT(st.verifies, 0);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE(res[i].refused.empty()) << lag << ": " << res[i].refused;
      EXPECT_EQ(res[i].tokens, ref[i].tokens) << lag;
      EXPECT_EQ(res[i].digests, ref[i].digests) << lag;
    }
  }
}

// The gates' comparison (compare_serve_results): every field it compares, each differing alone,
// makes it report the first difference; equal results compare equal.
TEST(ServeGate, TheComparisonSeesEveryTokenTheEndAndTheRowThatChoseEos) {
  ServeResult a;
  a.tokens = {10, 11, 12};
  a.digests = {1, 2, 3};
  a.stopped_at_eos = true;
  a.eos_digest = 99;
  int64_t at = 0;
  EXPECT_EQ(compare_serve_results(a, a, true, &at), "");
  EXPECT_EQ(at, -1);
  ServeResult b = a;
  b.tokens[1] = 13;
  EXPECT_NE(compare_serve_results(a, b, true, &at).find("first differing token 1: 11 vs 13"), std::string::npos);
  b = a;
  b.digests[2] = 4;
  EXPECT_NE(compare_serve_results(a, b, true, &at).find("logits bytes differ"), std::string::npos);
  EXPECT_EQ(at, 2);
  EXPECT_EQ(compare_serve_results(a, b, false, &at), "");  // digests off
  b = a;
  b.stopped_at_eos = false;
  EXPECT_NE(compare_serve_results(a, b, true, &at).find("stopped at <|eos|>, the other did not"), std::string::npos);
  // Both stopped at <|eos|>: the row that chose it is compared too (a prompt that stops at once
  // has nothing else to compare).
  b = a;
  b.eos_digest = 98;
  EXPECT_NE(compare_serve_results(a, b, true, &at).find("both stopped at <|eos|>, the logits bytes of that row differ"),
            std::string::npos);
  EXPECT_EQ(at, 3);
  ServeResult e, f;
  e.stopped_at_eos = f.stopped_at_eos = true;
  e.eos_digest = 5;
  f.eos_digest = 6;
  EXPECT_NE(compare_serve_results(e, f, true, &at), "");
  EXPECT_EQ(at, 0);
  b = a;
  b.tokens.pop_back();
  b.digests.pop_back();
  b.stopped_at_eos = false;
  EXPECT_NE(compare_serve_results(a, b, true, &at).find("first differing token 2: 12 vs end"), std::string::npos);
  b = a;
  b.refused = "request 0 refused: why";
  EXPECT_NE(compare_serve_results(a, b, true, &at).find("refused: request 0 refused: why"), std::string::npos);
}

TEST(Backend, FillRefusesARangeOutsideTheCacheAndCpuHasNoDeviceMemory) {
  auto be = make_cpu_backend();
  Cache c;
  c.mem.assign(64, 1);
  ByteRange bad{60, 8};
  const Status st = be->fill(c, &bad, 1, 0);
  ASSERT_FALSE(st.ok);
  EXPECT_NE(st.message.find("fill: range 0"), std::string::npos) << st.message;
  for (uint8_t b : c.mem) EXPECT_EQ(b, 1);  // nothing written
  // At the exact edge: one byte past the end refused (the range check is offset + bytes > size,
  // not > size + 1), a range ending at the end filled.
  ByteRange one_past{57, 8};
  ASSERT_FALSE(be->fill(c, &one_past, 1, 0).ok);
  for (uint8_t b : c.mem) EXPECT_EQ(b, 1);
  ByteRange ok[2] = {{0, 4}, {60, 4}};
  ASSERT_TRUE(be->fill(c, ok, 2, 0x7f).ok);
  EXPECT_EQ(c.mem[3], 0x7f);
  EXPECT_EQ(c.mem[4], 1);
  EXPECT_EQ(c.mem[63], 0x7f);
  EXPECT_FALSE(be->memory_stats().applicable);  // cpu: not applicable, never a fake 0
}

// --- the fixture validator and the command's exit 2 ---

nlohmann::json good_fixture() {
  return nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/serve/ci.json"));
}

int run_command(const nlohmann::json& fx, const std::string& dir, const std::string& out, std::string* err_text) {
  const std::string path = dir + "/fx.json";
  std::ofstream(path) << fx.dump(2);
  std::ostringstream o, e;
  ServeGateCommand cmd;
  cmd.fixture = path;
  cmd.out_file = out;
  const int rc = serve_gate_command(cmd, o, e);
  *err_text = e.str();
  return rc;
}

TEST(ServeFixture, ShippedFixturesParse) {
  ServeFixture f;
  std::string err;
  EXPECT_TRUE(parse_serve_fixture(good_fixture(), kSrc + "/fixtures/serve", &f, &err)) << err;
  ASSERT_EQ(f.parallel.size(), 1u);
  EXPECT_GT(int(f.prompts.size()), f.parallel[0]);
  for (const char* name : {"suite12.json"}) {
    const nlohmann::json j = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/serve/" + name));
    ServeFixture g;
    EXPECT_TRUE(parse_serve_fixture(j, kSrc + "/fixtures/serve", &g, &err)) << name << ": " << err;
  }
}

TEST(ServeFixture, Suite12IsTheSuiteItNames) {
  // 12 prompts: 8 short questions of 11-15 tokens and filler logs of 1,201 / 2,804 /
  // 4,413 / 6,003 tokens (tokens = the prompt's bytes + the leading <|eos|>), 96 new
  // tokens, --parallel 8 and 4, pages of 256 with and without pages-all, bf16 and fp8.
  ServeFixture f;
  std::string err;
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/serve/suite12.json"));
  ASSERT_TRUE(parse_serve_fixture(j, kSrc + "/fixtures/serve", &f, &err)) << err;
  ASSERT_EQ(f.prompts.size(), 12u);
  std::vector<size_t> tokens;
  for (const std::string& p : f.prompts) tokens.push_back(encode_prompt(p).size());
  std::vector<size_t> shorts, longs;
  for (size_t t : tokens) (t <= 15 ? shorts : longs).push_back(t);
  ASSERT_EQ(shorts.size(), 8u);
  for (size_t t : shorts) EXPECT_GE(t, 11u);
  std::sort(longs.begin(), longs.end());
  EXPECT_EQ(longs, (std::vector<size_t>{1201, 2804, 4413, 6003}));
  EXPECT_EQ(f.new_tokens, 96);
  EXPECT_EQ(f.parallel, (std::vector<int>{8, 4}));
  EXPECT_EQ(f.pages, (std::vector<int>{256}));
  EXPECT_TRUE(f.pages_all);
  EXPECT_EQ(f.formats, (std::vector<std::string>{"bf16", "fp8"}));
}

// A fixture without prefill_chunk prefills by the schema's default, 16 prompt rows per lane per
// round; both shipped fixtures give the field, so nothing else reads ServeFixture's default
// (mutation sweep round 10: a default of 256 passed every test).
TEST(ServeFixture, NoPrefillChunkTakesTheSchemasDefault) {
  const auto schema = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/schema/serve-fixture.schema.json"));
  nlohmann::json j = nlohmann::json::parse(std::ifstream(kSrc + "/fixtures/serve/ci.json"));
  j.erase("prefill_chunk");
  ServeFixture f;
  std::string err;
  ASSERT_TRUE(parse_serve_fixture(j, kSrc + "/fixtures/serve", &f, &err)) << err;
  EXPECT_EQ(f.prefill_chunk, 16);
  EXPECT_EQ(f.prefill_chunk, schema["properties"]["prefill_chunk"]["default"].get<int>());
}

// JSON Schema's integers are numbers with no fraction, written either way (16, 16.0, 1.6e1): the
// schema accepts a fixture with 16.0 wherever it wants an integer, so the validator does too and
// reads the same fixture (the fixture fuzz found every integer field refused as a float).
TEST(ServeFixture, WholeValuedFloatsAreIntegersAsInTheSchema) {
  const nlohmann::json j = good_fixture();
  nlohmann::json g = j;
  for (const char* k : {"new_tokens", "pool_pages", "context", "prefill_chunk"}) g[k] = g[k].get<double>();
  g["parallel"] = g["parallel"].get<double>();
  for (auto& x : g["pages"]) x = x.get<double>();
  g["draft"]["tokens"] = g["draft"]["tokens"].get<double>();
  for (auto& x : g["draft"]["tree"]) x = x.get<double>();
  ASSERT_TRUE(g["new_tokens"].is_number_float());
  ServeFixture a, b;
  std::string err;
  ASSERT_TRUE(parse_serve_fixture(j, kSrc + "/fixtures/serve", &a, &err)) << err;
  ASSERT_TRUE(parse_serve_fixture(g, kSrc + "/fixtures/serve", &b, &err)) << err;
  EXPECT_EQ(b.new_tokens, a.new_tokens);
  EXPECT_EQ(b.pool_pages, a.pool_pages);
  EXPECT_EQ(b.context, a.context);
  EXPECT_EQ(b.prefill_chunk, a.prefill_chunk);
  EXPECT_EQ(b.parallel, a.parallel);
  EXPECT_EQ(b.pages, a.pages);
  EXPECT_EQ(b.draft_tokens, a.draft_tokens);
  EXPECT_EQ(b.draft_tree, a.draft_tree);
  // The layers form of the draft too.
  g["draft"].erase("model");
  g["draft"]["layers"] = 1.0;
  ASSERT_TRUE(parse_serve_fixture(g, kSrc + "/fixtures/serve", &b, &err)) << err;
  EXPECT_EQ(b.draft_layers, 1);
}

TEST(ServeFixture, JsonIntegerReadsEveryFormAndClampsWhatDoesNotFit) {
  const auto val = [](const char* text) { return nlohmann::json::parse(text); };
  long long x = 7;
  EXPECT_TRUE(json_integer(val("16"), &x));
  EXPECT_EQ(x, 16);
  EXPECT_TRUE(json_integer(val("16.0"), &x));
  EXPECT_EQ(x, 16);
  EXPECT_TRUE(json_integer(val("1.6e1"), &x));
  EXPECT_EQ(x, 16);
  EXPECT_TRUE(json_integer(val("-3"), &x));
  EXPECT_EQ(x, -3);
  EXPECT_TRUE(json_integer(val("-0.0"), &x));
  EXPECT_EQ(x, 0);
  EXPECT_TRUE(json_integer(val("18446744073709551615"), &x));  // unsigned: clamped, not -1
  EXPECT_EQ(x, 1LL << 62);
  EXPECT_TRUE(json_integer(val("-9223372036854775808"), &x));
  EXPECT_EQ(x, -(1LL << 62));
  EXPECT_TRUE(json_integer(val("1e300"), &x));
  EXPECT_EQ(x, 1LL << 62);
  EXPECT_TRUE(json_integer(val("-1e300"), &x));
  EXPECT_EQ(x, -(1LL << 62));
  EXPECT_TRUE(json_integer(val("4611686018427387904"), &x));  // 2^62 itself
  EXPECT_EQ(x, 1LL << 62);
  x = 7;
  for (const char* bad : {"16.5", "-0.25", "\"16\"", "true", "null", "[16]", "{}"}) {
    EXPECT_FALSE(json_integer(val(bad), &x)) << bad;
    EXPECT_EQ(x, 7) << bad;
  }
  EXPECT_FALSE(json_integer(nlohmann::json(std::numeric_limits<double>::infinity()), &x));
  EXPECT_FALSE(json_integer(nlohmann::json(std::numeric_limits<double>::quiet_NaN()), &x));
  EXPECT_EQ(x, 7);
}

TEST(ServeFixture, EachBadClassExits2NamingTheFieldAndWritesNothing) {
  test::TempDir dir;
  const std::string model = kSrc + "/fixtures/models/stdlib-bytes-3m";
  struct Bad {
    std::string field;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Bad> bad = {
      {"field name: missing", [](nlohmann::json& j) { j.erase("name"); }},
      {"field model: ", [](nlohmann::json& j) { j["model"] = "/no/such/model"; }},
      {"field prompts[1]: must be a non-empty string", [](nlohmann::json& j) { j["prompts"][1] = ""; }},
      {"field prompts: must be a non-empty array", [](nlohmann::json& j) { j["prompts"] = nlohmann::json::array(); }},
      {"field new_tokens: must be an integer", [](nlohmann::json& j) { j["new_tokens"] = "16"; }},
      {"field new_tokens: must be in 3..4096", [](nlohmann::json& j) { j["new_tokens"] = 0; }},
      {"field new_tokens: must be in 3..4096", [](nlohmann::json& j) { j["new_tokens"] = 2; }},  // never drafts
      {"field parallel: must be in 2..64", [](nlohmann::json& j) { j["parallel"] = 1; }},      // a solo run
      {"field parallel[1]: must be in 2..64", [](nlohmann::json& j) { j["parallel"] = {2, 1}; }},
      {"field pages[1]: repeats 16", [](nlohmann::json& j) { j["pages"] = {16, 16}; }},
      {"field draft.tree: must branch somewhere", [](nlohmann::json& j) { j["draft"]["tree"] = {1, 1}; }},
      {"field parallel: must be smaller than the number of prompts", [](nlohmann::json& j) { j["parallel"] = 5; }},
      {"field pages[1]: must be an integer in 1..65536", [](nlohmann::json& j) { j["pages"][1] = 0; }},
      {"field pages_all: must be true or false", [](nlohmann::json& j) { j["pages_all"] = 1; }},
      {"field pool_pages: missing", [](nlohmann::json& j) { j.erase("pool_pages"); }},
      {"field context: must hold the longest prompt", [](nlohmann::json& j) { j["context"] = 20; }},
      {"field pool_pages: must hold the longest prompt", [](nlohmann::json& j) { j["pool_pages"] = 1; }},
      {"field pool_pages: must hold the longest prompt",
       [](nlohmann::json& j) {  // the first page size only: the control pages-released-before-drained
         j["pages_all"] = false;
         j["pool_pages"] = 1;
       }},
      {"field cache_formats[1]: must be bf16, fp8, q4 or mxfp4", [](nlohmann::json& j) { j["cache_formats"][1] = "fp16"; }},
      {"field parallel[1]: repeats 2", [](nlohmann::json& j) { j["parallel"] = {2, 2}; }},
      {"field parallel[0]: must be an integer", [](nlohmann::json& j) { j["parallel"] = {"2"}; }},
      {"field parallel: must be an integer or an array of 1 to 8 integers",
       [](nlohmann::json& j) { j["parallel"] = nlohmann::json::array(); }},
      {"field parallel[1]: must be smaller than the number of prompts", [](nlohmann::json& j) { j["parallel"] = {2, 5}; }},
      {"field cache_formats[1]: repeats bf16", [](nlohmann::json& j) { j["cache_formats"][1] = "bf16"; }},
      {"field draft.tokens: missing", [](nlohmann::json& j) { j["draft"].erase("tokens"); }},
      {"field draft.layers: must be below the model's 4 layers",
       [](nlohmann::json& j) {
         j["draft"].erase("model");
         j["draft"]["layers"] = 4;
       }},
      {"field draft: give exactly one of layers", [](nlohmann::json& j) { j["draft"]["layers"] = 1; }},
      {"field draft.model: ", [](nlohmann::json& j) { j["draft"]["model"] = "/no/such/draft"; }},
      {"field draft.tree[1]: must be an integer in 1..8", [](nlohmann::json& j) { j["draft"]["tree"] = {2, 0}; }},
      {"field draft.tree: holds 84 nodes, at most 64", [](nlohmann::json& j) { j["draft"]["tree"] = {4, 4, 4}; }},
      // 7^1 + .. + 7^11 nodes: cast to int it wrapped negative and passed the bound.
      {"field draft.tree: holds over 2^31 nodes, at most 64",
       [](nlohmann::json& j) { j["draft"]["tree"] = std::vector<int>(11, 7); }},
      {"field draft.tree: holds over 2^31 nodes, at most 64",
       [](nlohmann::json& j) { j["draft"]["tree"] = std::vector<int>(16, 8); }},
      // An arena no machine holds (2^20 pages of 65536 positions): refused before any arm
      // allocates it (it ended in an allocation failure with no receipt).
      {"field pool_pages: 1048576 pages of 65536 positions",
       [](nlohmann::json& j) {
         j["pages"] = {65536};
         j["pool_pages"] = 1 << 20;
         j["draft"].erase("model");
         j["draft"]["layers"] = 1;
       }},
      {"field context: must hold the longest prompt", [](nlohmann::json& j) { j["draft"]["tree"] = {2, 2, 2, 2, 2}; }},
      {"field golden.bf16: must be an array of 5 hashes", [](nlohmann::json& j) { j["golden"]["bf16"] = {"0000000000000000"}; }},
      {"field golden.bf16[0]: must be 16 lowercase hex digits",
       [](nlohmann::json& j) { j["golden"]["bf16"][0] = "XYZ"; }},
      {"field golden.fp16: not a cache format (bf16, fp8, q4, mxfp4)",
       [](nlohmann::json& j) { j["golden"]["fp16"] = j["golden"]["bf16"]; }},
      {"field golden.bf16.gpu: not a backend (cpu, cuda)",
       [](nlohmann::json& j) { j["golden"]["bf16"] = {{"gpu", j["golden"]["bf16"]}}; }},
      {"field golden.bf16.cuda[0]: must be 16 lowercase hex digits",
       [](nlohmann::json& j) { j["golden"]["bf16"] = {{"cuda", std::vector<std::string>(5, "XYZ")}}; }},
      {"field colour: unknown field", [](nlohmann::json& j) { j["colour"] = "red"; }},
      // The schema's type rules for the two free-text fields (the fixture fuzz: a number passed).
      {"field $schema: must be a string", [](nlohmann::json& j) { j["$schema"] = 1; }},
      {"field note: must be a string", [](nlohmann::json& j) { j["note"] = {"a", "b"}; }},
      // A fraction is no integer; a whole value past every bound is out of range, never wrapped
      // (2^64 - 1 read as a long long is -1).
      {"field new_tokens: must be an integer", [](nlohmann::json& j) { j["new_tokens"] = 16.5; }},
      {"field new_tokens: must be in 3..4096", [](nlohmann::json& j) { j["new_tokens"] = 1e300; }},
      {"field new_tokens: must be in 3..4096", [](nlohmann::json& j) { j["new_tokens"] = UINT64_MAX; }},
      {"field pages[0]: must be an integer in 1..65536",
       [](nlohmann::json& j) { j["pages"][0] = 0x1p70; }},
  };
  for (const Bad& b : bad) {
    nlohmann::json j = good_fixture();
    j["model"] = model;
    if (!j.contains("golden")) j["golden"] = {{"bf16", std::vector<std::string>(5, "0000000000000000")}};
    b.edit(j);
    const std::string out = dir.file("receipt.json");
    std::string err;
    EXPECT_EQ(run_command(j, dir.str(), out, &err), 2) << b.field;
    EXPECT_NE(err.find(b.field), std::string::npos) << "want '" << b.field << "' in: " << err;
    EXPECT_FALSE(std::filesystem::exists(out)) << b.field;
  }
  std::string err;
  const std::string path = dir.file("not-json.json");
  std::ofstream(path) << "{ nope";
  std::ostringstream o, e;
  ServeGateCommand cmd;
  cmd.fixture = path;
  cmd.out_file = dir.file("receipt.json");
  EXPECT_EQ(serve_gate_command(cmd, o, e), 2);
  EXPECT_NE(e.str().find("not JSON"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(cmd.out_file));
  // A repeated key (the last value would win: "new_tokens": 2 beside 6 passed).
  nlohmann::json j = good_fixture();
  j["model"] = model;
  std::string text = j.dump();
  const size_t at = text.find("\"new_tokens\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"new_tokens\":2,");
  std::ofstream(path) << text;
  std::ostringstream o2, e2;
  EXPECT_EQ(serve_gate_command(cmd, o2, e2), 2);
  EXPECT_NE(e2.str().find("field new_tokens: appears twice"), std::string::npos) << e2.str();
  EXPECT_FALSE(std::filesystem::exists(cmd.out_file));
}

TEST(ServeFixture, TokenHashAndSha256) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(token_hash({}), "cbf29ce484222325");
}

// ---- host mutation sweep round 19 (reports/mutation-sweep/host-19-local/) ----

// The number in a refusal's "... = N" (the context's sum) or ": N pages" (the pool's).
int number_after(const std::string& text, const std::string& marker) {
  const size_t at = text.rfind(marker);
  return at == std::string::npos ? -1 : std::atoi(text.c_str() + at + marker.size());
}

// A fixture at its own bounds is valid: a context of exactly the longest prompt + new_tokens + the
// larger draft + 1, and a pool of exactly the pages the longest prompt + new_tokens take alone,
// parse; one less of either is refused (sg-context-exact-refused, sg-pool-pages-exact-refused).
// And at most two page sizes.
TEST(ServeFixture, ContextPoolAndPagesAtTheirBounds) {
  const std::string dir = kSrc + "/fixtures/serve";
  ServeFixture f;
  std::string err;
  nlohmann::json j = good_fixture();
  j["context"] = 2;
  ASSERT_FALSE(parse_serve_fixture(j, dir, &f, &err));
  const int context = number_after(err, " + 1 = ");
  ASSERT_GT(context, 2) << err;
  j["context"] = context;
  EXPECT_TRUE(parse_serve_fixture(j, dir, &f, &err)) << "context " << context << ": " << err;
  j["context"] = context - 1;
  EXPECT_FALSE(parse_serve_fixture(j, dir, &f, &err)) << "context " << context - 1;
  j = good_fixture();
  j["pages"] = {16};
  j["pool_pages"] = 1;
  ASSERT_FALSE(parse_serve_fixture(j, dir, &f, &err));
  const int pool = number_after(err, "alone on pages of 16: ");
  ASSERT_GT(pool, 1) << err;
  j["pool_pages"] = pool;
  EXPECT_TRUE(parse_serve_fixture(j, dir, &f, &err)) << "pool_pages " << pool << ": " << err;
  j["pool_pages"] = pool - 1;
  EXPECT_FALSE(parse_serve_fixture(j, dir, &f, &err)) << "pool_pages " << pool - 1;
  // One or two page sizes, as the schema says (maxItems 2): a third is refused (sg-three-page-sizes).
  j = good_fixture();
  j["pages"] = {16, 7, 32};
  EXPECT_FALSE(parse_serve_fixture(j, dir, &f, &err));
  EXPECT_NE(err.find("field pages: must be an array of one or two page sizes"), std::string::npos) << err;
}

}  // namespace
}  // namespace kc::engine
