// KernelPaths (kernels/backend/kernel_paths.h): what the cuda launchers note reaches the
// innermost open log of the calling thread alone, once per path, and nothing is kept
// outside an open log.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kernels/backend/kernel_paths.h"

namespace kc {
namespace {

using Paths = std::vector<std::string>;

TEST(KernelPaths, NotesReachTheInnermostOpenLogOncePerPath) {
  KernelPaths::note("before any log");  // kept nowhere
  EXPECT_FALSE(KernelPaths::active());
  KernelPaths outer;
  EXPECT_TRUE(KernelPaths::active());
  KernelPaths::note("partial-mma");
  KernelPaths::note("merge-kept, chunks > 1");
  KernelPaths::note("partial-mma");
  {
    KernelPaths inner;
    KernelPaths::note("rope-ring");
    KernelPaths::note("partial-mma");
    EXPECT_EQ(inner.seen(), (Paths{"rope-ring", "partial-mma"}));
  }
  KernelPaths::note("keep-table");
  EXPECT_EQ(outer.seen(), (Paths{"partial-mma", "merge-kept, chunks > 1", "keep-table"}));
}

TEST(KernelPaths, AnotherThreadsNotesStayOnItsThread) {
  KernelPaths mine;
  std::thread t([] {
    KernelPaths::note("on the other thread, no log open");
    KernelPaths theirs;
    KernelPaths::note("partial-fma");
    EXPECT_EQ(theirs.seen(), (Paths{"partial-fma"}));
  });
  t.join();
  EXPECT_TRUE(mine.seen().empty());
}

}  // namespace
}  // namespace kc
