// The kernel variants a backend's launches picked, by name, for a contract's coverage (the
// receipt's numbers.coverage.kernel_path). A case's parameters do not say which kernel ran:
// the launchers choose, from the format, head_dim, grid size and the device, between the fma
// chain and the tensor cores, the cluster short path (and its cluster size) and the regular
// grid, a merge that reads kept partials or holds two batches of them (pipelined), the rope
// store's ring, bulk-copy and block-per-row kernels, and the keep's table and plane-by-plane
// kernels. The cuda launchers note each
// choice; nothing is kept unless a KernelPaths is open on the calling thread (a contract opens
// one per case), so a launch outside a contract costs one thread_local read (a launcher that
// builds its path's name asks active() first). The cpu backend notes nothing (its twins have
// one path each).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kc {

// The paths the cuda launchers note (kernels/attention/*.cu). The short path's name carries its
// cluster size, which depends on the device, so only its prefix is listed.
inline constexpr const char* kKernelPathNames[] = {
    "partial-fma", "partial-mma", "partial-mma-packed", "partial-short-cl", "partial-packed",
    "merge, 1 chunk", "merge, chunks > 1", "merge-kept, 1 chunk", "merge-kept, chunks > 1", "merge, pipelined", "merge-kept, pipelined",
    "rope-ring", "rope-ring, passes > 1", "rope-ring, deep", "rope-bulk", "rope-block", "rope-block, stages > 1",
    "keep-table", "keep-planes",
};
inline constexpr std::string_view kKernelPathShortPrefix = "partial-short-cl";

class KernelPaths {
 public:
  KernelPaths();
  ~KernelPaths();
  KernelPaths(const KernelPaths&) = delete;
  KernelPaths& operator=(const KernelPaths&) = delete;
  // Each path noted while this log was the thread's innermost open one, once, in the order first noted.
  const std::vector<std::string>& seen() const { return seen_; }
  // Records `path` in the thread's innermost open log, if any.
  static void note(const char* path);
  // Whether a log is open on this thread.
  static bool active();
  // Every name a launcher may note (kKernelPathNames; "partial-short-cl" followed by the
  // cluster size). An open log keeps a name outside the list as "unregistered: <name>", so a
  // launcher's new path cannot go missing from not_reached() unseen.
  static bool registered(std::string_view path);
  // The registered names (the short path as "partial-short-cl*") that none of `seen` matches:
  // the kernels that a run's cases never reached.
  static std::vector<std::string> not_reached(const std::vector<std::string>& seen);

 private:
  KernelPaths* prev_;
  std::vector<std::string> seen_;
};

}  // namespace kc
