// AsyncRemovals: which unlinks may be answered early, what waits for them, and the directory
// attributes answered meanwhile.
#include "frontend/async_removals.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace ringfs::frontend {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

fuse_attr_out DirAttr(uint32_t mode, uint64_t valid_s = 60) {
  fuse_attr_out out{};
  out.attr_valid = valid_s;
  out.attr.ino = 7;
  out.attr.mode = 040000 | mode;
  out.attr.nlink = 2;
  return out;
}

TEST(AsyncRemovalsTest, OnlyWithFreshAttributesOfTheDirectory) {
  AsyncRemovals async;
  EXPECT_EQ(async.Begin(7, kSec), 0u) << "nothing known of the directory";
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  EXPECT_EQ(async.Begin(8, kSec), 0u) << "another directory";
  EXPECT_EQ(async.Begin(7, kSec + AsyncRemovals::kFreshNs + 1), 0u) << "too old";
  uint64_t seq = async.Begin(7, 2 * kSec - 1);
  EXPECT_GT(seq, 0u);
  EXPECT_EQ(async.outstanding(), 1u);
  EXPECT_EQ(async.started(), 1u);
  (void)async.End(seq, 7);
  EXPECT_EQ(async.outstanding(), 0u);
  async.Forget(7);
  EXPECT_EQ(async.Begin(7, kSec), 0u) << "forgotten (an invalidation)";
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  async.ForgetAll();
  EXPECT_EQ(async.Begin(7, kSec), 0u) << "forgotten (a connection ended)";
}

TEST(AsyncRemovalsTest, ARequestWaitsForTheUnlinksBeforeItOnly) {
  AsyncRemovals async;
  EXPECT_EQ(async.Gate(), 0u) << "none outstanding: no wait";
  EXPECT_TRUE(async.Passed(0));
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  const uint64_t first = async.Begin(7, kSec);
  const uint64_t second = async.Begin(7, kSec);
  const uint64_t gate = async.Gate();
  EXPECT_EQ(gate, second);
  EXPECT_FALSE(async.Passed(gate));
  const uint64_t third = async.Begin(7, kSec);  // after the request: not waited for
  (void)async.End(second, 7);
  EXPECT_FALSE(async.Passed(gate)) << "the first is still outstanding";
  (void)async.End(first, 7);
  EXPECT_TRUE(async.Passed(gate)) << "the third started after the request";
  EXPECT_FALSE(async.Passed(async.Gate()));
  (void)async.End(third, 7);
  EXPECT_EQ(async.Gate(), 0u);
}

TEST(AsyncRemovalsTest, TheDirectorysAttributesAnswerWhileItsUnlinksAreOutstanding) {
  AsyncRemovals async;
  async.Learn(7, DirAttr(0750), async.Ticket(), kSec);
  EXPECT_FALSE(async.DirAttrs(7)) << "nothing outstanding: the server is asked";
  const uint64_t seq = async.Begin(7, kSec);
  std::optional<fuse_attr_out> attr = async.DirAttrs(7);
  ASSERT_TRUE(attr);
  EXPECT_EQ(attr->attr.mode, 040750u);
  EXPECT_EQ(attr->attr_valid, 0u);
  EXPECT_EQ(attr->attr_valid_nsec, AsyncRemovals::kDirAttrsValidNs);
  fuse_attr_out newer = DirAttr(0700);
  newer.attr.ctime = 5;
  async.Learn(7, newer, async.Ticket(), kSec);  // an unlink's own answer
  EXPECT_EQ(async.DirAttrs(7)->attr.mode, 040700u);
  // Older (ctime 0), arriving late on another connection.
  async.Learn(7, DirAttr(0777), async.Ticket(), kSec);
  EXPECT_EQ(async.DirAttrs(7)->attr.mode, 040700u);
  const uint64_t sent_before = async.Ticket();
  async.Forget(7);
  EXPECT_FALSE(async.DirAttrs(7)) << "stale: the GETATTR goes to the server, after the unlinks";
  fuse_attr_out late = DirAttr(0777);
  late.attr.ctime = 9;
  async.Learn(7, late, sent_before, kSec);
  EXPECT_FALSE(async.DirAttrs(7)) << "the answer to a request sent before the Forget";
  fuse_attr_out after = DirAttr(0711);
  after.attr.ctime = 9;
  async.Learn(7, after, async.Ticket(), kSec);
  EXPECT_EQ(async.DirAttrs(7)->attr.mode, 040711u) << "sent after: learned";
  (void)async.End(seq, 7);
  EXPECT_FALSE(async.DirAttrs(7));
}

TEST(AsyncRemovalsTest, ForgetsOfADirectoryWaitForItsUnlinks) {
  AsyncRemovals async;
  EXPECT_FALSE(async.DeferForget(7, 1)) << "nothing outstanding";
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  const uint64_t a = async.Begin(7, kSec);
  const uint64_t b = async.Begin(7, kSec);
  EXPECT_TRUE(async.DeferForget(7, 2));
  EXPECT_TRUE(async.DeferForget(7, 1));
  EXPECT_FALSE(async.DeferForget(8, 1));
  EXPECT_EQ(async.End(a, 7), 0u) << "one still outstanding";
  EXPECT_EQ(async.End(b, 7), 3u);
  EXPECT_FALSE(async.DeferForget(7, 1));
}

TEST(AsyncRemovalsTest, StaleDirectoriesArePrunedPastTheCap) {
  AsyncRemovals async;
  for (uint64_t dir = 1; dir <= AsyncRemovals::kMaxDirs; ++dir) {
    async.Learn(dir, DirAttr(0755), async.Ticket(), kSec);
  }
  const uint64_t seq = async.Begin(1, kSec);
  // Past the cap: those owing nothing go.
  async.Learn(100'000, DirAttr(0755), async.Ticket(), 3 * kSec);
  EXPECT_EQ(async.directories(), 2u) << "the one owing an unlink and the one just learned";
  EXPECT_TRUE(async.DirAttrs(1)) << "a directory with unlinks outstanding stays";
  EXPECT_GT(async.Begin(100'000, 3 * kSec), 0u);
  (void)async.End(seq, 1);
}

TEST(AsyncRemovalsTest, AtMostSoManyOutstandingInOneDirectory) {
  AsyncRemovals async;
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  for (uint32_t i = 0; i < AsyncRemovals::kMaxPerDir; ++i) ASSERT_GT(async.Begin(7, kSec), 0u);
  EXPECT_EQ(async.Begin(7, kSec), 0u);
}

TEST(AsyncRemovalsTest, AWaiterIsWokenAtTheNextEndOnce) {
  AsyncRemovals async;
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  ASSERT_TRUE(wake.valid());
  const uint64_t a = async.Begin(7, kSec);
  const uint64_t b = async.Begin(7, kSec);
  async.WakeAtNextEnd(wake.get());
  (void)async.End(a, 7);
  uint64_t value = 0;
  ASSERT_EQ(read(wake.get(), &value, sizeof(value)), 8);
  EXPECT_EQ(value, 1u);
  (void)async.End(b, 7);  // one-shot: not registered again
  EXPECT_EQ(read(wake.get(), &value, sizeof(value)), -1);
  async.WakeAtNextEnd(wake.get());
  async.Unregister(wake.get());
  (void)async.End(async.Begin(7, kSec), 7);
  EXPECT_EQ(read(wake.get(), &value, sizeof(value)), -1);
}

}  // namespace
}  // namespace ringfs::frontend
