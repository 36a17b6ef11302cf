#include "kernels/backend/kernel_paths.h"

#include <algorithm>

namespace kc {
namespace {
thread_local KernelPaths* g_open = nullptr;  // the thread's innermost open log
}

KernelPaths::KernelPaths() : prev_(g_open) { g_open = this; }
KernelPaths::~KernelPaths() { g_open = prev_; }

void KernelPaths::note(const std::string& path) {
  if (!g_open) return;
  std::vector<std::string>& s = g_open->seen_;
  if (std::find(s.begin(), s.end(), path) == s.end()) s.push_back(path);
}

}  // namespace kc
