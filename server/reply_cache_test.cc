#include "server/reply_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "proto/fuse_abi.h"

namespace ringfs::server {
namespace {

using Decision = ReplyCache::Decision;

TEST(ReplyCacheTest, CachesOnlyNonIdempotentOpcodes) {
  for (uint32_t op : {FUSE_CREATE, FUSE_MKNOD, FUSE_MKDIR, FUSE_SYMLINK, FUSE_LINK, FUSE_UNLINK,
                      FUSE_RMDIR, FUSE_RENAME, FUSE_RENAME2}) {
    EXPECT_TRUE(ReplyCache::Caches(op)) << op;
  }
  for (uint32_t op : {FUSE_LOOKUP, FUSE_GETATTR, FUSE_READ, FUSE_WRITE, FUSE_OPEN, FUSE_FORGET}) {
    EXPECT_FALSE(ReplyCache::Caches(op)) << op;
  }
}

TEST(ReplyCacheTest, SecondBeginReplaysTheFinishedReply) {
  ReplyCache cache;
  std::string reply;
  ASSERT_EQ(cache.Begin(7, 1, &reply), Decision::kExecute);
  cache.Finish(7, std::string("first reply"));
  EXPECT_EQ(cache.Begin(7, 1, &reply), Decision::kReplay);
  EXPECT_EQ(reply, "first reply");
  EXPECT_EQ(cache.replays(), 1u);
  EXPECT_EQ(cache.bytes(), 11 + ReplyCache::kEntryOverhead);
}

TEST(ReplyCacheTest, SameUniqueOtherContentIsNotAReplay) {
  ReplyCache cache;
  std::string reply;
  ASSERT_EQ(cache.Begin(7, 1, &reply), Decision::kExecute);
  cache.Finish(7, std::string("x"));
  EXPECT_EQ(cache.Begin(7, 2, &reply), Decision::kExecuteUncached);
  EXPECT_EQ(cache.replays(), 0u);
}

TEST(ReplyCacheTest, AbandonedClaimLetsTheNextOneExecute) {
  ReplyCache cache;
  std::string reply;
  ASSERT_EQ(cache.Begin(7, 1, &reply), Decision::kExecute);
  cache.Abandon(7);
  EXPECT_EQ(cache.Begin(7, 1, &reply), Decision::kExecute);
}

TEST(ReplyCacheTest, ReplayWaitsForTheRunningFirstExecution) {
  ReplyCache cache;
  std::string unused;
  ASSERT_EQ(cache.Begin(9, 5, &unused), Decision::kExecute);
  absl::Notification started;
  Decision decision = Decision::kExecute;
  std::string replayed;
  std::thread replay([&] {
    started.Notify();
    decision = cache.Begin(9, 5, &replayed);
  });
  started.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(20));  // let it block (the result holds either way)
  cache.Finish(9, std::string("done once"));
  replay.join();
  EXPECT_EQ(decision, Decision::kReplay);
  EXPECT_EQ(replayed, "done once");
}

TEST(ReplyCacheTest, OldestEntriesGoFirstWithinTheCountBound) {
  ReplyCache cache(ReplyCache::Options{.max_entries = 3, .max_bytes = 1 << 20});
  std::string reply;
  for (uint64_t u = 1; u <= 5; ++u) {
    ASSERT_EQ(cache.Begin(u, 0, &reply), Decision::kExecute);
    cache.Finish(u, std::string("r"));
  }
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.bytes(), 3 * (1 + ReplyCache::kEntryOverhead));
  EXPECT_EQ(cache.Begin(1, 0, &reply), Decision::kExecute);  // evicted
  EXPECT_EQ(cache.Begin(5, 0, &reply), Decision::kReplay);
}

TEST(ReplyCacheTest, ByteBoundEvictsAndRunningEntriesStay) {
  const size_t one = 100 + ReplyCache::kEntryOverhead;
  ReplyCache cache(ReplyCache::Options{.max_entries = 100, .max_bytes = 2 * one});
  std::string reply;
  ASSERT_EQ(cache.Begin(50, 0, &reply), Decision::kExecute);  // still running throughout
  for (uint64_t u = 1; u <= 3; ++u) {
    ASSERT_EQ(cache.Begin(u, 0, &reply), Decision::kExecute);
    cache.Finish(u, std::string(100, 'r'));
  }
  EXPECT_EQ(cache.bytes(), 2 * one);
  EXPECT_EQ(cache.size(), 3u);  // 2 finished + the running one
  cache.Finish(50, std::string("late"));
  EXPECT_EQ(cache.Begin(50, 0, &reply), Decision::kReplay);
}

}  // namespace
}  // namespace ringfs::server
