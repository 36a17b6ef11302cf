#include "kernels/backend/kernel_paths.h"

#include <algorithm>

namespace kc {
namespace {
thread_local KernelPaths* g_open = nullptr;  // the thread's innermost open log
}

KernelPaths::KernelPaths() : prev_(g_open) { g_open = this; }
KernelPaths::~KernelPaths() { g_open = prev_; }

bool KernelPaths::active() { return g_open != nullptr; }

void KernelPaths::note(const char* path) {
  if (!g_open) return;
  std::vector<std::string>& s = g_open->seen_;
  if (std::find(s.begin(), s.end(), path) == s.end()) s.push_back(path);
}

}  // namespace kc
