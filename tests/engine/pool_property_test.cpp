// The serving pool (engine/pool.h) against a model written here from its documented rules, on
// random sequences of operations: pages taken lowest first from below the lowest run, runs
// placed at the highest 256-aligned offset that overlaps no run and no page in use, release
// fenced (a released page or run stays in use until retire reaches its fence), unclaim at
// once. After every operation the pool's counts, its own check, find_run and the freed list
// equal the model's, and no page in use overlaps a run. RapidCheck shrinks a failing sequence
// to a short one.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/pool.h"

namespace kc::engine {
namespace {

uint64_t up256(uint64_t x) { return (x + 255) / 256 * 256; }
std::string part_name(size_t k) {
  std::string s = std::to_string(k);
  s.insert(s.begin(), 'p');
  return s;
}

// The model: what the pool should hold, kept in the plainest form.
struct ModelRun {
  int lane;
  uint64_t off, bytes;
  std::vector<RunPart> parts;  // offsets as the model placed them
  bool pending = false;
  uint64_t fence = 0;
};
struct Model {
  uint64_t arena = 0, ps = 0;
  std::vector<int> owner;                       // -1 free
  std::vector<std::optional<uint64_t>> fence;   // set while released and not retired
  std::vector<ModelRun> runs;
  std::vector<int32_t> freed;
  int peak = 0;

  bool in_use(size_t i) const { return owner[i] >= 0 || fence[i].has_value(); }
  uint64_t lowest_run() const {
    uint64_t lo = arena;
    for (const ModelRun& r : runs) lo = std::min(lo, r.off);
    return lo;
  }
  uint64_t page_top() const {  // end of the highest page in use
    uint64_t t = 0;
    for (size_t i = 0; i < owner.size(); ++i)
      if (in_use(i)) t = (i + 1) * ps;
    return t;
  }
  bool takable(size_t i) const { return !in_use(i) && (i + 1) * ps <= lowest_run(); }
  int free_pages() const {
    int n = 0;
    for (size_t i = 0; i < owner.size(); ++i) n += takable(i);
    return n;
  }
  int pages_in_use() const {
    int n = 0;
    for (size_t i = 0; i < owner.size(); ++i) n += in_use(i);
    return n;
  }
  const ModelRun* live_run(int lane) const {
    for (const ModelRun& r : runs)
      if (r.lane == lane && !r.pending) return &r;
    return nullptr;
  }
  // The highest 256-aligned offset where `bytes` (256-aligned) fit: inside the arena's
  // 256-aligned top, at or above every page in use, overlapping no run (released or not).
  std::optional<uint64_t> place(uint64_t bytes) const {
    const uint64_t top = arena / 256 * 256, floor = page_top();
    if (bytes > top) return std::nullopt;
    for (uint64_t x = top - bytes;; x -= 256) {
      if (x < floor) return std::nullopt;
      bool clear = true;
      for (const ModelRun& r : runs) clear = clear && (x + bytes <= r.off || r.off + r.bytes <= x);
      if (clear) return x;
      if (x < 256) return std::nullopt;
    }
  }
  std::vector<int32_t> pages_of(int lane, bool pending) const {
    std::vector<int32_t> v;
    for (size_t i = 0; i < owner.size(); ++i)
      if (owner[i] == lane && fence[i].has_value() == pending) v.push_back(int32_t(i));
    return v;
  }
};

// Parts placed one after another at 256-byte boundaries (plan_run's rule), or nullopt when
// the last one ends past run_bytes.
std::optional<std::vector<RunPart>> model_plan(std::vector<RunPart> parts, uint64_t run_bytes) {
  uint64_t at = 0;
  for (RunPart& p : parts) {
    at = up256(at);
    if (at + p.bytes > run_bytes) return std::nullopt;
    p.offset = at;
    at += p.bytes;
  }
  return parts;
}

struct Op {
  int kind, lane, n;
  int nparts;
  std::vector<int> part_bytes;  // the first nparts are the run's parts
  int slack;  // claim: run bytes minus what the parts need (-1: one byte short)
};

// A failing case prints its (shrunk) operations readably.
const char* const kOpNames[] = {"take", "release", "claim", "release_run", "unclaim", "retire", "retire", "claim_room"};
void showValue(const Op& op, std::ostream& os) {
  os << kOpNames[op.kind] << "(lane " << op.lane << ", n " << op.n << ", parts";
  for (int k = 0; k < op.nparts; ++k) os << " " << op.part_bytes[k];
  os << ", slack " << op.slack << ")";
}

rc::Gen<Op> gen_op() {
  return rc::gen::build<Op>(rc::gen::set(&Op::kind, rc::gen::inRange(0, 8)), rc::gen::set(&Op::lane, rc::gen::inRange(0, 3)),
                            rc::gen::set(&Op::n, rc::gen::inRange(0, 6)),
                            rc::gen::set(&Op::nparts, rc::gen::inRange(1, 4)),
                            rc::gen::set(&Op::part_bytes, rc::gen::container<std::vector<int>>(3, rc::gen::inRange(1, 3000))),
                            rc::gen::set(&Op::slack, rc::gen::element(-1, 0, 0, 0, 1, 255, 256, 701)));
}

// Everything the pool reports, against the model.
void compare(const Pool& p, Model& m, int lanes) {
  RC_ASSERT(p.total_pages() == int(m.owner.size()));
  RC_ASSERT(p.free_pages() == m.free_pages());
  RC_ASSERT(p.pages_in_use() == m.pages_in_use());
  RC_ASSERT(p.peak_pages() == m.peak);
  bool pending = false;
  for (size_t i = 0; i < m.owner.size(); ++i) pending = pending || m.fence[i].has_value();
  for (const ModelRun& r : m.runs) pending = pending || r.pending;
  RC_ASSERT(p.has_pending() == pending);
  for (int lane = 0; lane < lanes; ++lane) {
    const ModelRun* r = m.live_run(lane);
    RC_ASSERT(p.has_run(lane) == (r != nullptr));
    uint64_t off = 0;
    if (r) {
      for (const RunPart& part : r->parts) {
        RC_ASSERT(p.find_run(lane, part.name, part.bytes, &off).ok);
        RC_ASSERT(off == r->off + part.offset);
        RC_ASSERT(!p.find_run(lane, part.name, part.bytes + 1, &off).ok);
      }
      RC_ASSERT(!p.find_run(lane, "none", 0, &off).ok);
    } else {
      RC_ASSERT(!p.find_run(lane, "p0", 0, &off).ok);
    }
    // The own check: a lane's pages (released ones too, until retired) pass; a page that is
    // free or another lane's fails.
    std::vector<int32_t> mine = m.pages_of(lane, false), rel = m.pages_of(lane, true);
    mine.insert(mine.end(), rel.begin(), rel.end());
    RC_ASSERT(p.check(lane, mine).ok);
    for (size_t i = 0; i < m.owner.size(); ++i)
      if (m.owner[i] != lane) {
        RC_ASSERT(!p.check(lane, {int32_t(i)}).ok);
        break;
      }
  }
  RC_ASSERT(!p.check(0, {-1}).ok);
  RC_ASSERT(!p.check(0, {int32_t(m.owner.size())}).ok);
  // Layout: runs inside the arena's aligned top, 256-aligned, disjoint; no page in use reaches
  // into a run.
  for (size_t a = 0; a < m.runs.size(); ++a) {
    const ModelRun& r = m.runs[a];
    RC_ASSERT(r.off % 256 == 0 && r.bytes % 256 == 0 && r.off + r.bytes <= m.arena / 256 * 256);
    for (size_t b = a + 1; b < m.runs.size(); ++b)
      RC_ASSERT(r.off + r.bytes <= m.runs[b].off || m.runs[b].off + m.runs[b].bytes <= r.off);
  }
  RC_ASSERT(m.page_top() <= m.lowest_run());
}

// One pool and its model through `ops`.
void run_sequence(uint64_t arena, uint64_t ps, const std::vector<Op>& ops) {
  constexpr int kLanes = 3;
  Pool p(arena, ps);
  Model m;
  m.arena = arena;
  m.ps = ps;
  m.owner.assign(arena / ps, -1);
  m.fence.assign(arena / ps, std::nullopt);
  uint64_t step = 0;
  for (const Op& op : ops) {
    ++step;
    switch (op.kind) {
      case 0: {  // take n pages
        const bool want = m.free_pages() >= op.n;
        std::vector<int32_t> got;
        RC_ASSERT(p.take_pages(op.lane, op.n, &got) == want);
        if (want) {
          std::vector<int32_t> expect;
          for (size_t i = 0; i < m.owner.size() && int(expect.size()) < op.n; ++i)
            if (m.takable(i)) expect.push_back(int32_t(i));
          RC_ASSERT(got == expect);
          for (int32_t i : got) m.owner[i] = op.lane;
          m.peak = std::max(m.peak, m.pages_in_use());
        }
        break;
      }
      case 1: {  // release the lane's first (or, slack odd, last) n pages at this step's fence
        std::vector<int32_t> mine = m.pages_of(op.lane, false);
        if (op.slack % 2) std::reverse(mine.begin(), mine.end());
        mine.resize(std::min<size_t>(mine.size(), op.n));
        p.release_pages(mine, step);
        for (int32_t i : mine) m.fence[i] = step;
        break;
      }
      case 2:
      case 7: {  // claim a run (7: one part as large as the room above the pages, or 256 B more)
        std::vector<RunPart> parts;
        for (int k = 0; k < op.nparts; ++k) parts.push_back({part_name(k), uint64_t(op.part_bytes[k]), 0});
        if (op.kind == 7) {
          const uint64_t top = std::min(m.lowest_run(), m.arena / 256 * 256), floor = m.page_top();
          const uint64_t room = top > floor ? (top - floor) / 256 * 256 : 0;
          parts = {{"p0", std::max<uint64_t>(room + (op.n % 2) * 256, 1), 0}};
        }
        const uint64_t need = run_bytes_for(parts);
        const uint64_t run_bytes = op.slack < 0 ? model_plan(parts, ~0ull)->back().offset + parts.back().bytes - 1
                                   : op.kind == 7 ? need
                                                  : need + op.slack;
        const std::optional<std::vector<RunPart>> planned = model_plan(parts, run_bytes);
        const std::optional<uint64_t> at = planned && !m.live_run(op.lane) ? m.place(up256(run_bytes)) : std::nullopt;
        uint64_t off = 0;
        const Status st = p.claim_run(op.lane, parts, run_bytes, &off);
        RC_ASSERT(st.ok == at.has_value());
        if (at) {
          RC_ASSERT(off == *at);
          m.runs.push_back({op.lane, *at, up256(run_bytes), *planned});
        }
        break;
      }
      case 3:  // release the lane's run at this step's fence
        p.release_run(op.lane, step);
        for (ModelRun& r : m.runs)
          if (r.lane == op.lane && !r.pending) r.pending = true, r.fence = step;
        break;
      case 4:  // unclaim the lane's live run
        p.unclaim_run(op.lane);
        m.runs.erase(std::remove_if(m.runs.begin(), m.runs.end(), [&](const ModelRun& r) { return r.lane == op.lane && !r.pending; }),
                     m.runs.end());
        break;
      case 5:
      case 6: {  // retire up to a step at most n back
        const uint64_t done = step > uint64_t(op.n) ? step - op.n : 0;
        p.retire(done);
        for (size_t i = 0; i < m.owner.size(); ++i)
          if (m.fence[i] && *m.fence[i] <= done) {
            m.fence[i].reset();
            m.owner[i] = -1;
            m.freed.push_back(int32_t(i));
          }
        m.runs.erase(std::remove_if(m.runs.begin(), m.runs.end(), [&](const ModelRun& r) { return r.pending && r.fence <= done; }),
                     m.runs.end());
        RC_ASSERT(p.take_freed() == m.freed);
        m.freed.clear();
        break;
      }
    }
    compare(p, m, kLanes);
  }
}

RC_GTEST_PROP(PoolModel, EveryOperationLeavesThePoolAsItsRulesSay, ()) {
  // Four pools a case (400 sequences a run: a bug that needs two releases of one run before
  // its fence is retired showed in one run of three with 100). Arenas of 0-40 pages and a part
  // of one (pages of 16 B to 1000 B; runs of 1-3 parts of up to 3000 B): a few operations
  // fill the arena, so that runs meet pages and each other.
  for (int k = 0; k < 4; ++k) {
    const uint64_t ps = *rc::gen::element<uint64_t>(16, 100, 256, 768, 1000);
    const uint64_t arena = *rc::gen::inRange<uint64_t>(0, 41) * ps + *rc::gen::inRange<uint64_t>(0, ps);
    run_sequence(arena, ps, *rc::gen::container<std::vector<Op>>(gen_op()));  // RapidCheck's size: up to 100 operations
  }
}

// plan_run on its own: parts in order at 256-byte boundaries, refused exactly when the last
// part ends past the run, and run_bytes_for is the smallest 256-aligned size plan_run accepts.
RC_GTEST_PROP(PoolModel, PlanRunPlacesPartsInOrderAtBoundaries, ()) {
  const std::vector<int> sizes = *rc::gen::nonEmpty(rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 2000)));
  std::vector<RunPart> parts;
  for (size_t k = 0; k < sizes.size(); ++k) parts.push_back({part_name(k), uint64_t(sizes[k]), 0});
  const uint64_t need = run_bytes_for(parts);
  RC_ASSERT(need % 256 == 0);
  const uint64_t end = model_plan(parts, ~0ull)->back().offset + parts.back().bytes;
  RC_ASSERT(need == up256(end));
  const uint64_t run_bytes = *rc::gen::inRange<uint64_t>(end > 300 ? end - 300 : 0, need + 300);
  std::vector<RunPart> got = parts;
  const Status st = plan_run(&got, run_bytes);
  const auto want = model_plan(parts, run_bytes);
  RC_ASSERT(st.ok == want.has_value());
  RC_ASSERT(st.ok == (run_bytes >= end));
  if (st.ok)
    for (size_t k = 0; k < got.size(); ++k) RC_ASSERT(got[k].offset == (*want)[k].offset);
  else
    RC_ASSERT(st.message.find("part p") != std::string::npos);
}

}  // namespace
}  // namespace kc::engine
