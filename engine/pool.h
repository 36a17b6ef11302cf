// The serving pool: one arena of bytes. KV pages are taken from the bottom (page i at
// byte i * page_stride), per-lane runs from the top (a run holds a lane's fixed parts:
// its reserved window, its drafter's cache). Pages and runs never overlap: a page is
// usable only below the lowest run, a run only above the highest page in use, so
// fragmentation can only delay admission, never corrupt.
//
// Release is fenced: release_* marks pages / a run as pending with the fence (the step
// number) of the last work that used them; retire(done) frees what is pending up to
// `done`. The engine records a fence per step (Backend::fence) and retires up to the
// highest step the backend says finished (Backend::fences_done): on cpu the step just
// run; on cuda the last step whose event completed on the stream.
//
// check() is the pool's own check: every page a lane is about to read is owned by it;
// a violation names the page, the lane and what the page is (free, pending, another
// lane's).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/layout/status.h"

namespace kc::engine {

struct RunPart {
  std::string name;
  uint64_t bytes = 0;
  uint64_t offset = 0;  // inside the run (set by plan_run), 256-byte aligned
};

// Places `parts` one after another (256-byte aligned) inside a run of `run_bytes`;
// refuses, naming the first part that does not fit, when the run is too short.
Status plan_run(std::vector<RunPart>* parts, uint64_t run_bytes);
// The bytes a run needs for `parts` (what plan_run accepts).
uint64_t run_bytes_for(const std::vector<RunPart>& parts);

class Pool {
 public:
  Pool() = default;
  Pool(uint64_t arena_bytes, uint64_t page_stride);

  uint64_t arena_bytes() const { return arena_; }
  uint64_t page_stride() const { return ps_; }
  int total_pages() const { return int(owner_.size()); }
  int free_pages() const;          // free and below every run
  int pages_in_use() const;        // owned or pending
  int peak_pages() const { return peak_pages_; }

  // n free pages (lowest first) for `lane`; false (nothing taken) when fewer are free.
  bool take_pages(int lane, int n, std::vector<int32_t>* pages);
  void release_pages(const std::vector<int32_t>& pages, uint64_t fence);
  // Planted bug (the early-release control): frees at once, no fence.
  void release_pages_now(const std::vector<int32_t>& pages);

  // A run of `run_bytes` for `lane` holding `parts` (plan_run first: a run one part
  // short is refused here, before any byte is placed). *offset: the run's first byte.
  Status claim_run(int lane, std::vector<RunPart> parts, uint64_t run_bytes, uint64_t* offset);
  void release_run(int lane, uint64_t fence);
  // A run claimed but never used (admission backed out): gone at once, no fence.
  void unclaim_run(int lane);
  // Pages or runs released and not yet retired (their fence not reached).
  bool has_pending() const;
  // A part of `lane`'s run: its absolute offset and bytes; refuses an unknown lane or part,
  // or `need` bytes past the part's end.
  Status find_run(int lane, const std::string& part, uint64_t need, uint64_t* offset) const;
  bool has_run(int lane) const;

  void retire(uint64_t done);
  // Every page of `pages` is owned by `lane`; otherwise an error naming the page.
  Status check(int lane, const std::vector<int32_t>& pages) const;
  // Bytes that a freed page is filled with (debug poison), so a reader of a released
  // page reads garbage, not stale values.
  static constexpr uint8_t kPoison = 0x7f;
  // Pages freed since the last call (the engine poisons their bytes).
  std::vector<int32_t> take_freed();

 private:
  struct Run {
    int lane;
    uint64_t off, bytes;
    std::vector<RunPart> parts;
    bool pending = false;
    uint64_t fence = 0;
  };
  uint64_t lowest_run() const;
  uint64_t page_top() const;  // end of the highest page in use
  uint64_t arena_ = 0, ps_ = 0;
  std::vector<int> owner_;        // -1 free, >= 0 lane
  std::vector<int64_t> pending_;  // fence+1 while pending release, else 0
  std::vector<Run> runs_;
  std::vector<int32_t> freed_;
  int peak_pages_ = 0;
};

}  // namespace kc::engine
