#include "engine/pool.h"

#include <algorithm>

namespace kc::engine {

namespace {
uint64_t align256(uint64_t x) { return (x + 255) / 256 * 256; }
}  // namespace

Status plan_run(std::vector<RunPart>* parts, uint64_t run_bytes) {
  uint64_t at = 0;
  for (RunPart& p : *parts) {
    at = align256(at);
    if (at + p.bytes > run_bytes)
      return Status::Error("run planning: part " + p.name + " needs " + std::to_string(p.bytes) + " bytes at offset " +
                           std::to_string(at) + " but the run holds " + std::to_string(run_bytes) +
                           " bytes (refused before any byte is placed)");
    p.offset = at;
    at += p.bytes;
  }
  return Status::Ok();
}

uint64_t run_bytes_for(const std::vector<RunPart>& parts) {
  uint64_t at = 0;
  for (const RunPart& p : parts) at = align256(at) + p.bytes;
  return align256(at);
}

Pool::Pool(uint64_t arena_bytes, uint64_t page_stride) : arena_(arena_bytes), ps_(page_stride) {
  const size_t n = ps_ ? size_t(arena_ / ps_) : 0;
  owner_.assign(n, -1);
  pending_.assign(n, 0);
}

uint64_t Pool::lowest_run() const {
  uint64_t lo = arena_;
  for (const Run& r : runs_) lo = std::min(lo, r.off);
  return lo;
}

uint64_t Pool::page_top() const {
  for (size_t i = owner_.size(); i-- > 0;)
    if (owner_[i] >= 0 || pending_[i]) return (i + 1) * ps_;
  return 0;
}

int Pool::free_pages() const {
  const uint64_t lo = lowest_run();
  int n = 0;
  for (size_t i = 0; i < owner_.size(); ++i)
    if (owner_[i] < 0 && !pending_[i] && (i + 1) * ps_ <= lo) ++n;
  return n;
}

int Pool::pages_in_use() const {
  int n = 0;
  for (size_t i = 0; i < owner_.size(); ++i)
    if (owner_[i] >= 0 || pending_[i]) ++n;
  return n;
}

bool Pool::take_pages(int lane, int n, std::vector<int32_t>* pages) {
  if (free_pages() < n) return false;
  const uint64_t lo = lowest_run();
  pages->clear();
  for (size_t i = 0; i < owner_.size() && int(pages->size()) < n; ++i)
    if (owner_[i] < 0 && !pending_[i] && (i + 1) * ps_ <= lo) {
      owner_[i] = lane;
      pages->push_back(int32_t(i));
    }
  peak_pages_ = std::max(peak_pages_, pages_in_use());
  return true;
}

void Pool::release_pages(const std::vector<int32_t>& pages, uint64_t fence) {
  for (int32_t p : pages) pending_[p] = int64_t(fence) + 1;
}

void Pool::release_pages_now(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    owner_[p] = -1;
    pending_[p] = 0;
    freed_.push_back(p);
  }
}

Status Pool::claim_run(int lane, std::vector<RunPart> parts, uint64_t run_bytes, uint64_t* offset) {
  KC_RETURN_IF_ERROR(plan_run(&parts, run_bytes));
  if (has_run(lane)) return Status::Error("claim_run: lane " + std::to_string(lane) + " already holds a run");
  run_bytes = align256(run_bytes);
  // Highest gap first: runs sorted by offset, descending.
  std::vector<const Run*> by(runs_.size());
  for (size_t i = 0; i < runs_.size(); ++i) by[i] = &runs_[i];
  std::sort(by.begin(), by.end(), [](const Run* a, const Run* b) { return a->off > b->off; });
  const uint64_t floor = page_top();
  uint64_t top = arena_ / 256 * 256;
  for (size_t i = 0; i <= by.size(); ++i) {
    const uint64_t bottom = i < by.size() ? by[i]->off + by[i]->bytes : floor;
    if (top >= run_bytes && top - run_bytes >= std::max(bottom, floor)) {
      runs_.push_back({lane, top - run_bytes, run_bytes, std::move(parts)});
      *offset = top - run_bytes;
      return Status::Ok();
    }
    if (i < by.size()) top = by[i]->off;
  }
  return Status::Error("claim_run: no room for a run of " + std::to_string(run_bytes) + " bytes");
}

void Pool::release_run(int lane, uint64_t fence) {
  for (Run& r : runs_)
    if (r.lane == lane && !r.pending) {
      r.pending = true;
      r.fence = fence;
    }
}

void Pool::unclaim_run(int lane) {
  runs_.erase(std::remove_if(runs_.begin(), runs_.end(), [&](const Run& r) { return r.lane == lane && !r.pending; }),
              runs_.end());
}

bool Pool::has_pending() const {
  for (int64_t p : pending_)
    if (p) return true;
  for (const Run& r : runs_)
    if (r.pending) return true;
  return false;
}

bool Pool::has_run(int lane) const {
  for (const Run& r : runs_)
    if (r.lane == lane && !r.pending) return true;
  return false;
}

Status Pool::find_run(int lane, const std::string& part, uint64_t need, uint64_t* offset) const {
  for (const Run& r : runs_) {
    if (r.lane != lane || r.pending) continue;
    for (const RunPart& p : r.parts)
      if (p.name == part) {
        if (need > p.bytes)
          return Status::Error("find_run: lane " + std::to_string(lane) + " part " + part + ": " + std::to_string(need) +
                               " bytes asked, the part holds " + std::to_string(p.bytes));
        *offset = r.off + p.offset;
        return Status::Ok();
      }
    return Status::Error("find_run: lane " + std::to_string(lane) + " has no part " + part);
  }
  return Status::Error("find_run: lane " + std::to_string(lane) + " holds no run");
}

void Pool::retire(uint64_t done) {
  for (size_t i = 0; i < owner_.size(); ++i)
    if (pending_[i] && uint64_t(pending_[i] - 1) <= done) {
      pending_[i] = 0;
      owner_[i] = -1;
      freed_.push_back(int32_t(i));
    }
  runs_.erase(std::remove_if(runs_.begin(), runs_.end(), [&](const Run& r) { return r.pending && r.fence <= done; }),
              runs_.end());
}

Status Pool::check(int lane, const std::vector<int32_t>& pages) const {
  for (int32_t p : pages) {
    if (p < 0 || size_t(p) >= owner_.size())
      return Status::Error("pool check: lane " + std::to_string(lane) + " reads page " + std::to_string(p) +
                           ", outside the arena");
    if (owner_[p] != lane)
      return Status::Error("pool check: lane " + std::to_string(lane) + " reads page " + std::to_string(p) + ", which is " +
                           (owner_[p] < 0 ? std::string("free (released before the stream drained)")
                                          : "owned by lane " + std::to_string(owner_[p])));
  }
  return Status::Ok();
}

std::vector<int32_t> Pool::take_freed() {
  std::vector<int32_t> f;
  f.swap(freed_);
  return f;
}

}  // namespace kc::engine
