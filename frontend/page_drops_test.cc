#include "frontend/page_drops.h"

#include <errno.h>
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "absl/synchronization/notification.h"

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;
using Answer = KeptPages::AtOpenAnswer;

fuse_attr At(uint64_t ctime) {
  fuse_attr a{};
  a.ctime = a.mtime = ctime;
  a.size = 10;
  return a;
}

// A file whose pages were read, and which then changed: the open that sees the change needs a
// confirmed drop.
void ReadThenChange(KeptPages& kept, uint64_t node) {
  const fuse_attr v1 = At(100);
  ASSERT_EQ(kept.AtOpen(node, &v1, 10 * kSec), Answer::kDrop);
  kept.IoSent(node, /*write=*/false);
  kept.IoEnded(node, 11 * kSec);
  const fuse_attr v2 = At(200);
  ASSERT_EQ(kept.AtOpen(node, &v2, 20 * kSec), Answer::kDropUnconfirmed);
}

// A drop the kernel took, or for a node it holds no inode of (ENOENT), confirms the decisions
// made before the write started; any other answer confirms nothing.
TEST(PageDropsTest, TheKernelsAnswerConfirmsTheDrop) {
  KeptPages kept;
  std::vector<uint64_t> written;
  std::atomic<int> answer{0};
  PageDrops drops(UniqueFd(), &kept);
  drops.set_writer_for_test([&](uint64_t nodeid) {
    written.push_back(nodeid);
    return answer.load();
  });
  drops.Start();
  const fuse_attr v2 = At(200);
  for (int err : {0, ENOENT}) {
    const uint64_t node = err == 0 ? 7 : 8;
    ReadThenChange(kept, node);
    answer = err;
    drops.Post(node);
    ASSERT_TRUE(drops.WaitIdle(absl::Seconds(10)));
    EXPECT_EQ(kept.AtOpen(node, &v2, 30 * kSec), Answer::kKeep) << err;
  }
  ReadThenChange(kept, 9);
  answer = ENOTCONN;
  drops.Post(9);
  ASSERT_TRUE(drops.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(kept.AtOpen(9, &v2, 30 * kSec), Answer::kDropUnconfirmed) << "not confirmed";
  EXPECT_EQ((std::vector<uint64_t>{7, 8, 9}), written);
  EXPECT_EQ(drops.written(), 2u);
  EXPECT_EQ(drops.failed(), 1u);
}

// Posts of one file merge while it waits; a decision made while its write is under way is
// posted again and written again (the write under way may have started before it).
TEST(PageDropsTest, PostsMergeWhileWaitingButNotWhileWriting) {
  KeptPages kept;
  absl::Notification writing, go_on;
  std::atomic<int> writes{0};
  PageDrops drops(UniqueFd(), &kept);
  drops.set_writer_for_test([&](uint64_t) {
    if (writes.fetch_add(1) == 0) {
      writing.Notify();
      go_on.WaitForNotification();
    }
    return 0;
  });
  ReadThenChange(kept, 7);
  drops.Post(7);
  drops.Post(7);
  drops.Start();
  writing.WaitForNotification();
  const fuse_attr v2 = At(200);
  ASSERT_EQ(kept.AtOpen(7, &v2, 21 * kSec), Answer::kDropUnconfirmed) << "not confirmed yet";
  drops.Post(7);
  drops.Post(7);
  go_on.Notify();
  ASSERT_TRUE(drops.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(writes.load(), 2);
  EXPECT_EQ(kept.AtOpen(7, &v2, 30 * kSec), Answer::kKeep);
}

// Past `max_queued` files waiting, a post is dropped and counted; its file stays unconfirmed.
TEST(PageDropsTest, AFullQueueLeavesTheFileUnconfirmed) {
  KeptPages kept;
  PageDrops drops(UniqueFd(), &kept, /*max_queued=*/1);
  drops.set_writer_for_test([](uint64_t) { return 0; });
  ReadThenChange(kept, 7);
  ReadThenChange(kept, 8);
  drops.Post(7);
  drops.Post(8);
  EXPECT_EQ(drops.failed(), 1u);
  drops.Start();
  ASSERT_TRUE(drops.WaitIdle(absl::Seconds(10)));
  const fuse_attr v2 = At(200);
  EXPECT_EQ(kept.AtOpen(7, &v2, 30 * kSec), Answer::kKeep);
  EXPECT_EQ(kept.AtOpen(8, &v2, 30 * kSec), Answer::kDropUnconfirmed);
}

// While a READ or WRITE of the file is in flight the drop is put off (it would wait for that
// request's page locks), and written once nothing is.
TEST(PageDropsTest, ADropWaitsUntilNoRequestOfTheFileIsInFlight) {
  KeptPages kept;
  std::atomic<int> writes{0};
  PageDrops drops(UniqueFd(), &kept, 1 << 16, absl::Milliseconds(1));
  drops.set_writer_for_test([&](uint64_t) {
    writes.fetch_add(1);
    return 0;
  });
  drops.Start();
  ReadThenChange(kept, 7);
  kept.IoSent(7, /*write=*/false);  // the opener's own READ
  drops.Post(7);
  const auto deadline = absl::Now() + absl::Seconds(10);
  while (drops.retried() < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GE(drops.retried(), 3u);
  EXPECT_EQ(writes.load(), 0) << "written while a READ was in flight";
  kept.IoEnded(7, 21 * kSec);
  ASSERT_TRUE(drops.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(writes.load(), 1);
  const fuse_attr v2 = At(200);
  EXPECT_EQ(kept.AtOpen(7, &v2, 30 * kSec), Answer::kKeep);
}

}  // namespace
}  // namespace ringfs::frontend
