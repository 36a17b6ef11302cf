// KernelPaths (kernels/backend/kernel_paths.h): what the cuda launchers note reaches the
// innermost open log of the calling thread alone, once per path, and nothing is kept
// outside an open log.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
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
    KernelPaths::note("partial-mma");  // no log open on this thread
    KernelPaths theirs;
    KernelPaths::note("partial-fma");
    EXPECT_EQ(theirs.seen(), (Paths{"partial-fma"}));
  });
  t.join();
  EXPECT_TRUE(mine.seen().empty());
}

// The registry (kKernelPathNames) is what a run's missing paths are measured against: a name a
// launcher notes outside it is kept marked, and the short path's cluster size is free.
TEST(KernelPaths, NamesOutsideTheRegistryAreKeptMarked) {
  for (const char* n : kKernelPathNames)
    if (n != kKernelPathShortPrefix) EXPECT_TRUE(KernelPaths::registered(n)) << n;
  EXPECT_TRUE(KernelPaths::registered("partial-short-cl2"));
  EXPECT_TRUE(KernelPaths::registered("partial-short-cl16"));
  for (const char* n : {"partial-short-cl", "partial-short-clx", "partial-short-cl2 ", "merge", "partial-mma ", "", "rope"})
    EXPECT_FALSE(KernelPaths::registered(n)) << '"' << n << '"';
  KernelPaths log;
  KernelPaths::note("partial-mma");
  KernelPaths::note("partial-tma");
  KernelPaths::note("partial-short-cl4");
  EXPECT_EQ(log.seen(), (Paths{"partial-mma", "unregistered: partial-tma", "partial-short-cl4"}));
}

TEST(KernelPaths, NotReachedListsEveryRegisteredNameNoneOfTheSeenMatches) {
  Paths all;
  for (const char* n : kKernelPathNames) all.push_back(n == kKernelPathShortPrefix ? "partial-short-cl8" : n);
  EXPECT_TRUE(KernelPaths::not_reached(all).empty());
  EXPECT_EQ(KernelPaths::not_reached({}).size(), std::size(kKernelPathNames));
  Paths some = {"partial-mma", "partial-short-cl", "rope-block, stages > 1", "unregistered: keep-table"};
  const Paths missing = KernelPaths::not_reached(some);
  EXPECT_EQ(missing.size(), std::size(kKernelPathNames) - 2);
  EXPECT_NE(std::find(missing.begin(), missing.end(), "partial-short-cl*"), missing.end());  // the bare prefix is no size
  EXPECT_NE(std::find(missing.begin(), missing.end(), "keep-table"), missing.end());
  EXPECT_NE(std::find(missing.begin(), missing.end(), "rope-block"), missing.end());  // not the same path as its stages
  EXPECT_EQ(std::find(missing.begin(), missing.end(), "partial-mma"), missing.end());
}

}  // namespace
}  // namespace kc
