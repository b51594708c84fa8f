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

using Answer = KeptPages::AtOpenAnswer;

// Whether an open of `node` keeps the pages. An unconfirmed drop is confirmed at once, as
// PageDrops does after the answer.
bool Open(KeptPages& kept, uint64_t node, const fuse_attr* record, uint64_t now_ns) {
  const Answer answer = kept.AtOpen(node, record, now_ns);
  if (answer == Answer::kDropUnconfirmed) kept.DropWritten(node, *kept.DropStarting(node));
  return answer == Answer::kKeep;
}

// The first open drops the pages and sets the baseline; opens that find the file as it was keep
// them; a change of the change time, modification time or size drops them again.
TEST(KeptPagesTest, PagesAreKeptWhileTheFileIsAsTheBaselineFoundIt) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(Open(kept, 7, &v1, 10 * kSec));
  EXPECT_TRUE(Open(kept, 7, &v1, 20 * kSec));
  EXPECT_TRUE(Open(kept, 7, &v1, 30 * kSec));
  EXPECT_EQ(kept.kept(), 2u);
  const fuse_attr v2 = At(100, 1);  // one nanosecond later
  EXPECT_FALSE(Open(kept, 7, &v2, 40 * kSec));
  EXPECT_TRUE(Open(kept, 7, &v2, 50 * kSec)) << "the drop set the new baseline";
  fuse_attr grown = v2;
  grown.size = 11;
  EXPECT_FALSE(Open(kept, 7, &grown, 60 * kSec));
  fuse_attr touched = grown;
  touched.mtimensec = 5;
  EXPECT_FALSE(Open(kept, 7, &touched, 70 * kSec));
  EXPECT_FALSE(Open(kept, 8, &v1, 70 * kSec)) << "another file has its own baseline";
}

// An open without the server's record (the file changed too recently, or a server without open
// attrs) drops the pages and leaves no baseline: the next open drops them again.
TEST(KeptPagesTest, AnOpenWithoutARecordLeavesNoBaseline) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(Open(kept, 7, &v1, 10 * kSec));
  EXPECT_FALSE(Open(kept, 7, nullptr, 20 * kSec));
  EXPECT_FALSE(Open(kept, 7, &v1, 30 * kSec)) << "pages read after a recordless drop";
  EXPECT_TRUE(Open(kept, 7, &v1, 40 * kSec));
}

// A READ in flight when the kernel drops the pages, or answered just before, may put back what
// it read before the drop: the baseline that drop set is not trusted, and the next open drops
// the pages once more.
TEST(KeptPagesTest, AReadCrossingADropPoisonsTheBaselineItSet) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  const fuse_attr v2 = At(200);
  EXPECT_FALSE(Open(kept, 7, &v1, 10 * kSec));
  kept.IoSent(7, false);
  EXPECT_FALSE(Open(kept, 7, &v2, 11 * kSec));  // dropped with the READ in flight
  kept.IoEnded(7, 12 * kSec);
  EXPECT_FALSE(Open(kept, 7, &v2, 20 * kSec)) << "a READ crossed the drop";
  EXPECT_TRUE(Open(kept, 7, &v2, 30 * kSec));

  // Answered half a second before the drop: it may still land after it.
  kept.IoSent(7, false);
  kept.IoEnded(7, 40 * kSec);
  const fuse_attr v3 = At(300);
  EXPECT_FALSE(Open(kept, 7, &v3, 40 * kSec + kSec / 2));
  EXPECT_FALSE(Open(kept, 7, &v3, 50 * kSec));
  EXPECT_TRUE(Open(kept, 7, &v3, 60 * kSec));

  // Answered long before the drop: the baseline holds.
  kept.IoSent(7, false);
  kept.IoEnded(7, 70 * kSec);
  const fuse_attr v4 = At(400);
  EXPECT_FALSE(Open(kept, 7, &v4, 80 * kSec));
  EXPECT_TRUE(Open(kept, 7, &v4, 90 * kSec));
}

// After a reset no baseline is trusted; a READ in flight through it still poisons the next drop.
TEST(KeptPagesTest, AResetForgetsBaselinesButNotReadsInFlight) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(Open(kept, 7, &v1, 10 * kSec));
  kept.IoSent(7, false);
  kept.Reset();
  EXPECT_FALSE(Open(kept, 7, &v1, 20 * kSec));
  kept.IoEnded(7, 21 * kSec);
  EXPECT_FALSE(Open(kept, 7, &v1, 30 * kSec)) << "the READ crossed the drop after the reset";
  EXPECT_TRUE(Open(kept, 7, &v1, 40 * kSec));
}

// Past the bound, files with nothing in flight or landing are forgotten (their next open drops
// the pages); one with a READ in flight is never forgotten, and when every file has one, an open
// of a new file keeps nothing and records nothing.
TEST(KeptPagesTest, TheBoundForgetsOnlyFilesWithNothingInFlight) {
  KeptPages kept(/*max_nodes=*/2);
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(Open(kept, 1, &v1, 10 * kSec));
  kept.IoSent(2, false);
  EXPECT_FALSE(Open(kept, 2, &v1, 10 * kSec));
  EXPECT_FALSE(Open(kept, 3, &v1, 20 * kSec));  // file 1 goes
  EXPECT_EQ(kept.nodes(), 2u);
  EXPECT_FALSE(Open(kept, 1, &v1, 30 * kSec)) << "forgotten: its pages are dropped";
  kept.IoSent(1, false);
  kept.IoSent(3, false);
  EXPECT_FALSE(Open(kept, 4, &v1, 40 * kSec));
  EXPECT_FALSE(Open(kept, 4, &v1, 50 * kSec)) << "nowhere to record it";
  kept.IoEnded(2, 41 * kSec);
  EXPECT_FALSE(Open(kept, 2, &v1, 42 * kSec)) << "poisoned by the READ that crossed its drop";
}

// Two opens at once: the first drop of pages the kernel may hold is not done before the
// opener's task runs on, so no open keeps the pages until the mount has made the kernel drop
// them itself (PageDrops), after the last such decision. A file never read or written through
// the mount has nothing to drop: no confirmation is asked for.
TEST(KeptPagesTest, NoOpenKeepsPagesUntilTheKernelDroppedTheOldOnes) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  const fuse_attr v2 = At(200);
  EXPECT_EQ(kept.AtOpen(7, &v1, 10 * kSec), Answer::kDrop) << "never read: nothing to drop";
  EXPECT_EQ(kept.AtOpen(7, &v1, 11 * kSec), Answer::kKeep);
  kept.IoSent(7, /*write=*/false);
  kept.IoEnded(7, 12 * kSec);
  EXPECT_EQ(kept.AtOpen(7, &v1, 20 * kSec), Answer::kKeep);

  // The file changed: the first open drops; the second, before the drop is confirmed, too.
  EXPECT_EQ(kept.AtOpen(7, &v2, 30 * kSec), Answer::kDropUnconfirmed);
  const uint64_t early = *kept.DropStarting(7);
  EXPECT_EQ(kept.AtOpen(7, &v2, 30 * kSec), Answer::kDropUnconfirmed);
  kept.DropWritten(7, early);
  EXPECT_EQ(kept.AtOpen(7, &v2, 31 * kSec), Answer::kDropUnconfirmed)
      << "a drop written before the last decision does not confirm it";
  kept.DropWritten(7, *kept.DropStarting(7));
  EXPECT_EQ(kept.AtOpen(7, &v2, 32 * kSec), Answer::kKeep);
  EXPECT_EQ(kept.AtOpen(8, &v2, 32 * kSec), Answer::kDrop) << "another file never read";

  // A drop that sets no trusted baseline asks for no confirmation: no record, or a READ in
  // flight (poisoned); the next drop with a record asks.
  EXPECT_EQ(kept.AtOpen(7, nullptr, 40 * kSec), Answer::kDrop);
  kept.IoSent(7, /*write=*/false);
  EXPECT_EQ(kept.AtOpen(7, &v1, 41 * kSec), Answer::kDrop) << "poisoned";
  EXPECT_FALSE(kept.DropStarting(7).has_value()) << "a READ in flight: the drop would wait";
  kept.IoEnded(7, 42 * kSec);
  EXPECT_EQ(kept.AtOpen(7, &v1, 50 * kSec), Answer::kDropUnconfirmed);
  kept.DropWritten(7, *kept.DropStarting(7));
  EXPECT_EQ(kept.AtOpen(7, &v1, 51 * kSec), Answer::kKeep);
}

// A WRITE's bytes are in the kernel's pages, and the server may have refused them (ENOSPC,
// written back later): the next open drops the pages, even when the file is as it was.
TEST(KeptPagesTest, AWritePoisonsTheBaseline) {
  KeptPages kept;
  const fuse_attr v1 = At(100);
  EXPECT_FALSE(Open(kept, 7, &v1, 10 * kSec));
  EXPECT_TRUE(Open(kept, 7, &v1, 11 * kSec));
  kept.IoSent(7, /*write=*/true);
  kept.IoEnded(7, 12 * kSec);
  EXPECT_FALSE(Open(kept, 7, &v1, 20 * kSec)) << "the write failed: the file is as it was";
  EXPECT_TRUE(Open(kept, 7, &v1, 30 * kSec));
}

// A forgotten file's pages may still be in the kernel: once the table has forgotten one, the
// first drop of any file it then adds asks for a confirmation.
TEST(KeptPagesTest, AfterForgettingEveryNewFileMayHoldPages) {
  KeptPages kept(/*max_nodes=*/1);
  const fuse_attr v1 = At(100);
  EXPECT_EQ(kept.AtOpen(1, &v1, 10 * kSec), Answer::kDrop);
  kept.IoSent(1, /*write=*/false);
  kept.IoEnded(1, 11 * kSec);
  EXPECT_EQ(kept.AtOpen(2, &v1, 20 * kSec), Answer::kDropUnconfirmed)
      << "file 1 goes; file 2 was never read here, but may have been before an earlier forget";
  EXPECT_EQ(kept.AtOpen(1, &v1, 30 * kSec), Answer::kDropUnconfirmed) << "forgotten after a READ";
  EXPECT_EQ(kept.AtOpen(1, &v1, 31 * kSec), Answer::kDropUnconfirmed);
  kept.DropWritten(1, *kept.DropStarting(1));
  EXPECT_EQ(kept.AtOpen(1, &v1, 32 * kSec), Answer::kKeep);
}

}  // namespace
}  // namespace ringfs::frontend
