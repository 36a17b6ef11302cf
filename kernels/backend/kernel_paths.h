// The kernel variants a backend's launches picked, by name, for a contract's coverage (the
// receipt's numbers.coverage.kernel_path). A case's parameters do not say which kernel ran:
// the launchers choose, from the format, head_dim, grid size and the device, between the fma
// chain and the tensor cores, the cluster short path (and its cluster size) and the regular
// grid, a merge that reads kept partials, the rope store's ring, bulk-copy and block-per-row
// kernels, and the keep's table and plane-by-plane kernels. The cuda launchers note each
// choice; nothing is kept unless a KernelPaths is open on the calling thread (a contract opens
// one per case), so a launch outside a contract costs one thread_local read (a launcher that
// builds its path's name asks active() first). The cpu backend notes nothing (its twins have
// one path each).
#pragma once
#include <string>
#include <vector>

namespace kc {

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

 private:
  KernelPaths* prev_;
  std::vector<std::string> seen_;
};

}  // namespace kc
