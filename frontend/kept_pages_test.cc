#include "frontend/kept_pages.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

fuse_attr At(uint64_t ctime, uint32_t ctimensec = 0, uint64_t size = 10) {
  fuse_attr a{};
  a.ctime = ctime;
  a.ctimensec = ctimensec;
  a.mtime = ctime;
  a.mtimensec = ctimensec;
  a.size = size;
  return a;
}

// The first open drops the pages and sets the baseline; opens that find the file as it was keep
// them; a change of the change time, modification time or size drops them again.
TEST(KeptPagesTest, PagesAreKeptWhileTheFileIsAsTheBaselineFoundIt) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(kept.AtOpen(7, &v1, 10 * kSec));
  EXPECT_TRUE(kept.AtOpen(7, &v1, 20 * kSec));
  EXPECT_TRUE(kept.AtOpen(7, &v1, 30 * kSec));
  EXPECT_EQ(kept.kept(), 2u);
  const fuse_attr v2 = At(100, 1);  // one nanosecond later
  EXPECT_FALSE(kept.AtOpen(7, &v2, 40 * kSec));
  EXPECT_TRUE(kept.AtOpen(7, &v2, 50 * kSec)) << "the drop set the new baseline";
  fuse_attr grown = v2;
  grown.size = 11;
  EXPECT_FALSE(kept.AtOpen(7, &grown, 60 * kSec));
  fuse_attr touched = grown;
  touched.mtimensec = 5;
  EXPECT_FALSE(kept.AtOpen(7, &touched, 70 * kSec));
  EXPECT_FALSE(kept.AtOpen(8, &v1, 70 * kSec)) << "another file has its own baseline";
}

// An open without the server's record (the file changed too recently, or a server without open
// attrs) drops the pages and leaves no baseline: the next open drops them again.
TEST(KeptPagesTest, AnOpenWithoutARecordLeavesNoBaseline) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(kept.AtOpen(7, &v1, 10 * kSec));
  EXPECT_FALSE(kept.AtOpen(7, nullptr, 20 * kSec));
  EXPECT_FALSE(kept.AtOpen(7, &v1, 30 * kSec)) << "pages read after a recordless drop";
  EXPECT_TRUE(kept.AtOpen(7, &v1, 40 * kSec));
}

// A READ in flight when the kernel drops the pages, or answered just before, may put back what
// it read before the drop: the baseline that drop set is not trusted, and the next open drops
// the pages once more.
TEST(KeptPagesTest, AReadCrossingADropPoisonsTheBaselineItSet) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  const fuse_attr v2 = At(200);
  EXPECT_FALSE(kept.AtOpen(7, &v1, 10 * kSec));
  kept.ReadSent(7);
  EXPECT_FALSE(kept.AtOpen(7, &v2, 11 * kSec));  // dropped with the READ in flight
  kept.ReadEnded(7, 12 * kSec);
  EXPECT_FALSE(kept.AtOpen(7, &v2, 20 * kSec)) << "a READ crossed the drop";
  EXPECT_TRUE(kept.AtOpen(7, &v2, 30 * kSec));

  // Answered half a second before the drop: it may still land after it.
  kept.ReadSent(7);
  kept.ReadEnded(7, 40 * kSec);
  const fuse_attr v3 = At(300);
  EXPECT_FALSE(kept.AtOpen(7, &v3, 40 * kSec + kSec / 2));
  EXPECT_FALSE(kept.AtOpen(7, &v3, 50 * kSec));
  EXPECT_TRUE(kept.AtOpen(7, &v3, 60 * kSec));

  // Answered long before the drop: the baseline holds.
  kept.ReadSent(7);
  kept.ReadEnded(7, 70 * kSec);
  const fuse_attr v4 = At(400);
  EXPECT_FALSE(kept.AtOpen(7, &v4, 80 * kSec));
  EXPECT_TRUE(kept.AtOpen(7, &v4, 90 * kSec));
}

// After a reset no baseline is trusted; a READ in flight through it still poisons the next drop.
TEST(KeptPagesTest, AResetForgetsBaselinesButNotReadsInFlight) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(kept.AtOpen(7, &v1, 10 * kSec));
  kept.ReadSent(7);
  kept.Reset();
  EXPECT_FALSE(kept.AtOpen(7, &v1, 20 * kSec));
  kept.ReadEnded(7, 21 * kSec);
  EXPECT_FALSE(kept.AtOpen(7, &v1, 30 * kSec)) << "the READ crossed the drop after the reset";
  EXPECT_TRUE(kept.AtOpen(7, &v1, 40 * kSec));
}

// Past the bound, files with nothing in flight or landing are forgotten (their next open drops
// the pages); one with a READ in flight is never forgotten, and when every file has one, an open
// of a new file keeps nothing and records nothing.
TEST(KeptPagesTest, TheBoundForgetsOnlyFilesWithNothingInFlight) {
  KeptPages kept(/*max_nodes=*/2);
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(kept.AtOpen(1, &v1, 10 * kSec));
  kept.ReadSent(2);
  EXPECT_FALSE(kept.AtOpen(2, &v1, 10 * kSec));
  EXPECT_FALSE(kept.AtOpen(3, &v1, 20 * kSec));  // file 1 goes
  EXPECT_EQ(kept.nodes(), 2u);
  EXPECT_FALSE(kept.AtOpen(1, &v1, 30 * kSec)) << "forgotten: its pages are dropped";
  kept.ReadSent(1);
  kept.ReadSent(3);
  EXPECT_FALSE(kept.AtOpen(4, &v1, 40 * kSec));
  EXPECT_FALSE(kept.AtOpen(4, &v1, 50 * kSec)) << "nowhere to record it";
  kept.ReadEnded(2, 41 * kSec);
  EXPECT_FALSE(kept.AtOpen(2, &v1, 42 * kSec)) << "poisoned by the READ that crossed its drop";
}

}  // namespace
}  // namespace ringfs::frontend
