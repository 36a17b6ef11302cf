#include "kernels/backend/kernel_paths.h"

#include <algorithm>

namespace kc {
namespace {
thread_local KernelPaths* g_open = nullptr;  // the thread's innermost open log
}

KernelPaths::KernelPaths() : prev_(g_open) { g_open = this; }
KernelPaths::~KernelPaths() { g_open = prev_; }

bool KernelPaths::active() { return g_open != nullptr; }

bool KernelPaths::registered(std::string_view path) {
  if (path.size() > kKernelPathShortPrefix.size() && path.substr(0, kKernelPathShortPrefix.size()) == kKernelPathShortPrefix)
    return std::all_of(path.begin() + kKernelPathShortPrefix.size(), path.end(), [](char c) { return c >= '0' && c <= '9'; });
  for (const char* n : kKernelPathNames)
    if (n != kKernelPathShortPrefix && path == n) return true;
  return false;
}

void KernelPaths::note(const char* path) {
  if (!g_open) return;
  std::string name = registered(path) ? std::string(path) : "unregistered: " + std::string(path);
  std::vector<std::string>& s = g_open->seen_;
  if (std::find(s.begin(), s.end(), name) == s.end()) s.push_back(std::move(name));
}

std::vector<std::string> KernelPaths::not_reached(const std::vector<std::string>& seen) {
  std::vector<std::string> missing;
  for (const char* n : kKernelPathNames) {
    const bool prefix = n == kKernelPathShortPrefix;
    const bool hit = std::any_of(seen.begin(), seen.end(), [&](const std::string& p) {
      return prefix ? registered(p) && p.rfind(kKernelPathShortPrefix, 0) == 0 : p == n;
    });
    if (!hit) missing.push_back(prefix ? std::string(n) + "*" : std::string(n));
  }
  return missing;
}

}  // namespace kc
