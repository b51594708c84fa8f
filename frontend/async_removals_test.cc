// AsyncRemovals: which unlinks, SETATTRs and WRITEs may be answered early, what waits for them,
// and the attributes answered meanwhile.
#include "frontend/async_removals.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <vector>

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

fuse_attr_out FileAttr(uint32_t mode, uint64_t size = 0) {
  fuse_attr_out out{};
  out.attr_valid = 60;
  out.attr.ino = 9;
  out.attr.mode = S_IFREG | mode;
  out.attr.nlink = 1;
  out.attr.uid = 1000;
  out.attr.gid = 1000;
  out.attr.size = size;
  out.attr.mtime = 100;
  out.attr.ctime = 100;
  return out;
}

fuse_setattr_in Chmod(uint32_t mode) {
  fuse_setattr_in in{};
  in.valid = FATTR_MODE | FATTR_FH;
  in.fh = 3;
  in.mode = mode;
  return in;
}

constexpr timespec kNow{5000, 42};

TEST(AsyncSetattrTest, OffUnlessAsked) {
  AsyncRemovals unlinks_only;  // async_unlink alone
  unlinks_only.LearnFile(9, FileAttr(0600), unlinks_only.Ticket(), kSec);
  EXPECT_FALSE(unlinks_only.BeginSetattr(9, Chmod(0644), kSec, kNow));
  AsyncRemovals setattrs_only(/*unlinks=*/false, /*setattrs=*/true);
  setattrs_only.Learn(7, DirAttr(0755), setattrs_only.Ticket(), kSec);
  EXPECT_EQ(setattrs_only.Begin(7, kSec), 0u) << "no early unlinks without async_unlink";
}

TEST(AsyncSetattrTest, AnswersWithTheChangeAppliedValidForNoTime) {
  AsyncRemovals async(false, true);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec, kNow)) << "nothing known of the file";
  async.LearnFile(9, FileAttr(0600), async.Ticket(), kSec);
  async.Wrote(9, 12000);
  async.Wrote(9, 4096);  // sizes only grow by writes
  fuse_setattr_in times{};
  times.valid = FATTR_MTIME | FATTR_ATIME_NOW;
  times.mtime = 1234;
  times.mtimensec = 5;
  auto a = async.BeginSetattr(9, times, kSec, kNow);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->after, 0u);
  EXPECT_EQ(a->answer.attr.mtime, 1234u);
  EXPECT_EQ(a->answer.attr.mtimensec, 5u);
  EXPECT_EQ(a->answer.attr.atime, 5000u);
  EXPECT_EQ(a->answer.attr.atimensec, 42u);
  EXPECT_EQ(a->answer.attr.ctime, 5000u) << "a change's ctime";
  EXPECT_EQ(a->answer.attr.size, 12000u);
  EXPECT_EQ(a->answer.attr_valid, 0u);
  EXPECT_EQ(a->answer.attr_valid_nsec, 0u);
  fuse_setattr_in chown{};
  chown.valid = FATTR_UID | FATTR_GID | FATTR_KILL_SUIDGID;
  chown.uid = 0;
  chown.gid = 5;
  auto b = async.BeginSetattr(9, chown, kSec, kNow);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->after, a->seq) << "behind the same node's last one";
  EXPECT_EQ(b->answer.attr.uid, 0u);
  EXPECT_EQ(b->answer.attr.gid, 5u);
  EXPECT_EQ(b->answer.attr.mtime, 1234u) << "built on the one before";
  auto c = async.BeginSetattr(9, Chmod(0644), kSec, kNow);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->answer.attr.mode, S_IFREG | 0644u);
  EXPECT_EQ(async.setattrs_started(), 3u);
  EXPECT_EQ(async.outstanding(), 3u);
}

TEST(AsyncSetattrTest, SynchronousWhenTheServerDecidesOrNothingIsKnown) {
  AsyncRemovals async(false, true);
  async.LearnFile(9, FileAttr(0600), async.Ticket(), kSec);
  fuse_setattr_in truncate = Chmod(0644);
  truncate.valid |= FATTR_SIZE;
  EXPECT_FALSE(async.BeginSetattr(9, truncate, kSec, kNow));
  fuse_setattr_in ctime = Chmod(0644);
  ctime.valid |= FATTR_CTIME;
  EXPECT_FALSE(async.BeginSetattr(9, ctime, kSec, kNow));
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(04755), kSec, kNow)) << "setuid asked for";
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec + AsyncRemovals::kFreshNs + 1, kNow))
      << "too old";
  async.LearnFile(10, FileAttr(02755), async.Ticket(), kSec);
  EXPECT_FALSE(async.BeginSetattr(10, Chmod(0644), kSec, kNow)) << "setgid held";
  async.LearnFile(11, DirAttr(0755), async.Ticket(), kSec);
  EXPECT_FALSE(async.BeginSetattr(11, Chmod(0700), kSec, kNow)) << "a directory";
  async.Forget(9);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec, kNow)) << "an invalidation";
  const uint64_t before_unlink = async.Ticket();  // a LOOKUP sent before the unlink
  async.LearnFile(9, FileAttr(0600), async.Ticket(), kSec);
  async.ForgetFiles();  // an unlink or rename: a link count changed
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec, kNow));
  async.LearnFile(9, FileAttr(0600), before_unlink, kSec);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec, kNow)) << "an answer from before it";
  EXPECT_EQ(async.setattrs_started(), 0u);
}

TEST(AsyncSetattrTest, RequestsOnTheNodeAndByNameWaitForIt) {
  AsyncRemovals async(true, true);
  async.Learn(7, DirAttr(0755), async.Ticket(), kSec);
  async.LearnFile(9, FileAttr(0600), async.Ticket(), kSec);
  EXPECT_EQ(async.NodeGate(9), 0u);
  EXPECT_EQ(async.NamesGate(), 0u);
  auto a = async.BeginSetattr(9, Chmod(0644), kSec, kNow);
  ASSERT_TRUE(a);
  EXPECT_EQ(async.NodeGate(9), a->seq);
  EXPECT_EQ(async.NodeGate(7), 0u) << "another node";
  EXPECT_EQ(async.NamesGate(), a->seq);
  EXPECT_EQ(async.Gate(), 0u) << "what waits for unlinks only does not wait for it";
  EXPECT_FALSE(async.Passed(async.NodeGate(9)));
  EXPECT_TRUE(async.DeferForget(9, 2)) << "its FORGET waits";
  const uint64_t sent = async.Ticket();  // the channel's ticket for the SETATTR it sends
  fuse_attr_out server = FileAttr(0644, 10);
  server.attr.ctime = 101;
  EXPECT_EQ(async.EndSetattr(a->seq, 9, &server, sent, 2 * kSec), 2u) << "the FORGET it held back";
  EXPECT_TRUE(async.Passed(a->seq));
  EXPECT_EQ(async.NodeGate(9), 0u);
  auto b = async.BeginSetattr(9, Chmod(0600), 2 * kSec + AsyncRemovals::kFreshNs / 2, kNow);
  ASSERT_TRUE(b) << "the server's answer is fresh attributes";
  EXPECT_EQ(b->answer.attr.size, 10u) << "the server's attributes replaced the guess";
  EXPECT_EQ(b->answer.attr.mode, S_IFREG | 0600u);
  EXPECT_EQ(b->after, 0u);
  // A write answered beside the next one: the server's answer may not have its size.
  const uint64_t sent_b = async.Ticket();
  async.Wrote(9, 20);
  (void)async.EndSetattr(b->seq, 9, &server, sent_b, 2 * kSec);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), 2 * kSec, kNow));
  // An unlink answered before a change's answer: that answer may hold the old link count.
  async.LearnFile(9, FileAttr(0600), async.Ticket(), 3 * kSec);
  auto c = async.BeginSetattr(9, Chmod(0644), 3 * kSec, kNow);
  ASSERT_TRUE(c);
  const uint64_t sent_c = async.Ticket();
  async.ForgetFiles();
  (void)async.EndSetattr(c->seq, 9, &server, sent_c, 3 * kSec);
  async.LearnFile(9, FileAttr(0600), sent_c, 3 * kSec);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), 3 * kSec, kNow));
}

TEST(AsyncSetattrTest, AnswersFromBeforeItAreNotLearnedAndAFailureForgets) {
  AsyncRemovals async(false, true);
  const uint64_t old_ticket = async.Ticket();
  async.LearnFile(9, FileAttr(0600), async.Ticket(), kSec);
  auto a = async.BeginSetattr(9, Chmod(0644), kSec, kNow);
  ASSERT_TRUE(a);
  fuse_attr_out stale = FileAttr(0600);
  stale.attr.ctime = 200;  // newer by ctime, but the server may not have run the chmod yet
  async.LearnFile(9, stale, old_ticket + 100, kSec);
  EXPECT_FALSE(async.DirAttrs(9)) << "a file with early SETATTRs is asked for at the server";
  auto b = async.BeginSetattr(9, Chmod(0640), kSec, kNow);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->answer.attr.mode, S_IFREG | 0640u);
  (void)async.EndSetattr(a->seq, 9, nullptr, async.Ticket(), kSec);
  (void)async.EndSetattr(b->seq, 9, nullptr, async.Ticket(), kSec);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec, kNow))
      << "what the server holds is not known after a failure";
  EXPECT_EQ(async.outstanding(), 0u);
}

TEST(AsyncSetattrTest, RepliesTeachAttributesAndWrites) {
  AsyncRemovals async(false, true);
  fuse_in_header create{};
  create.opcode = FUSE_CREATE;
  create.nodeid = 7;
  struct {
    fuse_entry_out entry;
    fuse_open_out open;
  } created{};
  created.entry.nodeid = 9;
  created.entry.attr = FileAttr(0600).attr;
  LearnFromReply(async, create, nullptr, 0, reinterpret_cast<const char*>(&created),
                 sizeof(created), async.Ticket(), kSec);
  fuse_in_header write{};
  write.opcode = FUSE_WRITE;
  write.nodeid = 9;
  fuse_write_in in{};
  in.offset = 8192;
  fuse_write_out out{};
  out.size = 100;
  const uint64_t before_write = async.Ticket();  // a GETATTR sent before the write
  LearnFromReply(async, write, &in, sizeof(in), reinterpret_cast<const char*>(&out), sizeof(out),
                 async.Ticket(), kSec);
  fuse_in_header old_getattr{};
  old_getattr.opcode = FUSE_GETATTR;
  old_getattr.nodeid = 9;
  fuse_attr_out short_file = FileAttr(0600, 0);
  short_file.attr.ctime = 100;
  LearnFromReply(async, old_getattr, nullptr, 0, reinterpret_cast<const char*>(&short_file),
                 sizeof(short_file), before_write, kSec);
  auto a = async.BeginSetattr(9, Chmod(0644), kSec, kNow);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->answer.attr.size, 8292u);
  (void)async.EndSetattr(a->seq, 9, &a->answer, async.Ticket(), kSec);
  fuse_in_header xattr{};
  xattr.opcode = FUSE_SETXATTR;  // an ACL may change the mode
  xattr.nodeid = 9;
  ForgetChanged(async, xattr, nullptr, 0);
  EXPECT_FALSE(async.BeginSetattr(9, Chmod(0644), kSec, kNow));
  fuse_in_header getattr{};
  getattr.opcode = FUSE_GETATTR;
  getattr.nodeid = 9;
  fuse_attr_out fresh = FileAttr(0600);
  LearnFromReply(async, getattr, nullptr, 0, reinterpret_cast<const char*>(&fresh), sizeof(fresh),
                 async.Ticket(), kSec);
  EXPECT_TRUE(async.BeginSetattr(9, Chmod(0644), kSec, kNow));
}

// Early WRITEs: what each waits for in its channel, what waits for them, the budget, and the
// error a failed one leaves for the next FLUSH or FSYNC of its open file.
constexpr uint64_t kFh = 77;

fuse_setattr_in Chown(uint32_t uid, uint32_t gid) {
  fuse_setattr_in in{};
  in.valid = FATTR_UID | FATTR_GID | FATTR_KILL_SUIDGID | FATTR_FH;
  in.fh = 3;
  in.uid = uid;
  in.gid = gid;
  return in;
}

TEST(NoopSetattrTest, AChownOrChmodToWhatTheFileHasIsAnsweredWithItsAttributes) {
  AsyncRemovals off(false, false, false, /*noop_setattrs=*/false);
  off.SetNoopSafe(true);
  off.LearnFile(9, FileAttr(0644), off.Ticket(), kSec);
  EXPECT_FALSE(off.Unchanged(9, Chown(1000, 1000), kSec)) << "not asked for";
  EXPECT_FALSE(off.BeginSetattr(9, Chmod(0600), kSec, kNow)) << "no early changes with it";

  AsyncRemovals async(false, false, false, /*noop_setattrs=*/true);
  async.SetNoopSafe(true);  // the server's hello: pushes, no squashing, writable
  EXPECT_FALSE(async.Unchanged(9, Chown(1000, 1000), kSec)) << "nothing known of the file";
  async.LearnFile(9, FileAttr(0644), async.Ticket(), kSec);
  async.Wrote(9, 5000);
  auto same = async.Unchanged(9, Chown(1000, 1000), kSec);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->attr.uid, 1000u);
  EXPECT_EQ(same->attr.mode, S_IFREG | 0644u);
  EXPECT_EQ(same->attr.ctime, 100u) << "the server's change time: nothing was changed there";
  EXPECT_EQ(same->attr.size, 5000u) << "as far as this mount's writes reached";
  EXPECT_EQ(same->attr_valid, 0u) << "the times may have moved with the writes";
  EXPECT_EQ(same->attr_valid_nsec, 0u);
  EXPECT_TRUE(async.Unchanged(9, Chmod(0644), kSec));
  fuse_setattr_in both = Chown(1000, 1000);
  both.valid |= FATTR_MODE;
  both.mode = S_IFREG | 0644;
  EXPECT_TRUE(async.Unchanged(9, both, kSec)) << "the file type bits are not compared";
  EXPECT_EQ(async.noop_setattrs_answered(), 3u);
  EXPECT_EQ(async.outstanding(), 0u) << "nothing is sent, nothing owed";
}

TEST(NoopSetattrTest, ReachesTheServerWhenItChangesSomethingOrTheMountMayNotKnow) {
  AsyncRemovals async(false, false, false, /*noop_setattrs=*/true);
  async.SetNoopSafe(true);  // the server's hello: pushes, no squashing, writable
  async.LearnFile(9, FileAttr(0644), async.Ticket(), kSec);
  EXPECT_FALSE(async.Unchanged(9, Chown(0, 1000), kSec)) << "another owner";
  EXPECT_FALSE(async.Unchanged(9, Chown(1000, 0), kSec)) << "another group";
  EXPECT_FALSE(async.Unchanged(9, Chmod(0600), kSec)) << "another mode";
  fuse_setattr_in times = Chmod(0644);
  times.valid |= FATTR_MTIME;
  EXPECT_FALSE(async.Unchanged(9, times, kSec)) << "times change";
  fuse_setattr_in truncate = Chmod(0644);
  truncate.valid |= FATTR_SIZE;
  EXPECT_FALSE(async.Unchanged(9, truncate, kSec));
  fuse_setattr_in ctime = Chmod(0644);
  ctime.valid |= FATTR_CTIME;
  EXPECT_FALSE(async.Unchanged(9, ctime, kSec)) << "a writeback cache's change time";
  fuse_setattr_in nothing{};
  nothing.valid = FATTR_FH;
  EXPECT_FALSE(async.Unchanged(9, nothing, kSec)) << "neither owner nor mode";
  EXPECT_FALSE(async.Unchanged(9, Chown(1000, 1000), kSec + AsyncRemovals::kFreshNs + 1))
      << "too old";
  async.LearnFile(10, FileAttr(04755), async.Ticket(), kSec);
  EXPECT_FALSE(async.Unchanged(10, Chown(1000, 1000), kSec)) << "a chown clears setuid";
  async.LearnFile(11, FileAttr(02755), async.Ticket(), kSec);
  EXPECT_FALSE(async.Unchanged(11, Chmod(02755), kSec)) << "setgid: the server's rules";
  async.Learn(12, DirAttr(0755), async.Ticket(), kSec);
  EXPECT_FALSE(async.Unchanged(12, Chmod(0755), kSec)) << "a directory";

  const uint64_t before = async.Ticket();  // a LOOKUP sent before the invalidation
  async.Forget(9);                         // another mount's chown, pushed
  EXPECT_FALSE(async.Unchanged(9, Chown(1000, 1000), kSec));
  async.LearnFile(9, FileAttr(0644), before, kSec);
  EXPECT_FALSE(async.Unchanged(9, Chown(1000, 1000), kSec)) << "an answer from before it";
  async.LearnFile(9, FileAttr(0644), async.Ticket(), kSec);
  EXPECT_TRUE(async.Unchanged(9, Chown(1000, 1000), kSec)) << "learned again";
  async.ForgetAll();  // a lost connection, a new server instance
  EXPECT_FALSE(async.Unchanged(9, Chown(1000, 1000), kSec));
  async.LearnFile(9, FileAttr(0644), async.Ticket(), kSec);
  fuse_in_header acl{};
  acl.opcode = FUSE_SETXATTR;
  acl.nodeid = 9;
  ForgetChanged(async, acl, nullptr, 0);  // an ACL moves the mode
  EXPECT_FALSE(async.Unchanged(9, Chmod(0644), kSec));
  EXPECT_EQ(async.noop_setattrs_answered(), 1u);
}

// A chmod of this mount in flight beside a GETATTR: the server may run them in either order, and
// with a coarse clock both answers carry the same change time.
TEST(NoopSetattrTest, ASetattrsOwnAnswerIsWhatTheFileHoldsAfterIt) {
  AsyncRemovals async(false, false, false, /*noop_setattrs=*/true);
  async.SetNoopSafe(true);  // the server's hello: pushes, no squashing, writable
  async.LearnFile(9, FileAttr(0644), async.Ticket(), kSec);
  async.SetattrSent(9);  // chmod 0600
  const uint64_t chmod_ticket = async.Ticket();
  EXPECT_FALSE(async.Unchanged(9, Chmod(0644), kSec)) << "a chmod in flight";
  const uint64_t getattr_ticket = async.Ticket();  // sent after, run before it at the server
  async.LearnFile(9, FileAttr(0644), getattr_ticket, kSec);
  EXPECT_FALSE(async.Unchanged(9, Chmod(0644), kSec)) << "still in flight";
  async.LearnSetattr(9, FileAttr(0600), chmod_ticket, kSec);  // the same ctime (100)
  async.SetattrEnded(9, /*may_still_run=*/false);
  EXPECT_FALSE(async.Unchanged(9, Chmod(0644), kSec)) << "the chmod's answer, not the GETATTR's";
  EXPECT_TRUE(async.Unchanged(9, Chmod(0600), kSec));
  async.LearnFile(9, FileAttr(0644), getattr_ticket, kSec);  // the GETATTR's answer, late
  EXPECT_FALSE(async.Unchanged(9, Chmod(0644), kSec)) << "a request sent before the answer";

  // Two at once: the server ran them in some order, neither answer says which.
  async.SetattrSent(9);
  const uint64_t a = async.Ticket();
  async.SetattrSent(9);
  const uint64_t b = async.Ticket();
  async.LearnSetattr(9, FileAttr(0640), b, kSec);
  async.SetattrEnded(9, false);
  async.LearnSetattr(9, FileAttr(0604), a, kSec);
  async.SetattrEnded(9, false);
  EXPECT_FALSE(async.Unchanged(9, Chmod(0640), kSec));
  EXPECT_FALSE(async.Unchanged(9, Chmod(0604), kSec));
  async.LearnFile(9, FileAttr(0604), async.Ticket(), kSec);  // a GETATTR sent after both
  EXPECT_TRUE(async.Unchanged(9, Chmod(0604), kSec));

  // One that ended without its answer after it reached the server may run there any time.
  async.SetattrSent(9);
  async.SetattrEnded(9, /*may_still_run=*/true);
  async.LearnFile(9, FileAttr(0604), async.Ticket(), kSec);
  EXPECT_FALSE(async.Unchanged(9, Chmod(0604), kSec));

  // A server that pushes no invalidations, squashes root or serves the export read-only.
  async.LearnFile(10, FileAttr(0644), async.Ticket(), kSec);
  async.SetNoopSafe(false);
  EXPECT_FALSE(async.Unchanged(10, Chmod(0644), kSec));
  async.SetNoopSafe(true);
  EXPECT_TRUE(async.Unchanged(10, Chmod(0644), kSec));
}

TEST(AsyncWriteTest, WritesWaitOnlyForWhatTheyCouldOverwriteOrBeOverwrittenBy) {
  AsyncRemovals off(true, true, false);
  EXPECT_FALSE(off.BeginWrite(9, kFh, 0, 100)) << "without async_write";
  AsyncRemovals async(false, true, true);
  std::optional<AsyncRemovals::EarlyWrite> first = async.BeginWrite(9, kFh, 0, 4096);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->gate, 0u) << "nothing before it";
  std::optional<AsyncRemovals::EarlyWrite> next = async.BeginWrite(9, kFh, 4096, 4096);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->gate, 0u) << "beside the first: any order at the server";
  std::optional<AsyncRemovals::EarlyWrite> again = async.BeginWrite(9, kFh + 1, 4000, 10);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->gate, next->seq) << "over bytes of both (another open file): after the last";
  std::optional<AsyncRemovals::EarlyWrite> other = async.BeginWrite(10, kFh + 2, 0, 4096);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->gate, 0u) << "another file";
  EXPECT_EQ(async.NodeGate(9), again->seq) << "everything else on the file waits for them";
  EXPECT_EQ(async.WriteGate(kFh), next->seq) << "the close of an open file, for its own";
  EXPECT_EQ(async.WriteGate(kFh + 1), again->seq);
  EXPECT_EQ(async.WriteGate(kFh + 3), 0u) << "an open file that wrote nothing early";
  EXPECT_EQ(async.NamesGate(), other->seq) << "and what meets files by name (a LOOKUP's size)";
  EXPECT_EQ(async.writes_started(), 4u);
  EXPECT_EQ(async.EndWrite(first->seq, 9, kFh, 4096, 0), 0u);
  EXPECT_EQ(async.EndWrite(next->seq, 9, kFh, 4096, 0), 0u);
  EXPECT_EQ(async.WriteGate(kFh), 0u);
  EXPECT_EQ(async.EndWrite(again->seq, 9, kFh + 1, 10, 0), 0u);
  EXPECT_EQ(async.NodeGate(9), 0u);
  std::optional<AsyncRemovals::EarlyWrite> fresh = async.BeginWrite(9, kFh, 0, 4096);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->gate, 0u) << "the earlier writes over these bytes are done";
  (void)async.EndWrite(fresh->seq, 9, kFh, 4096, 0);
  (void)async.EndWrite(other->seq, 10, kFh + 2, 4096, 0);
  EXPECT_EQ(async.outstanding(), 0u);
}

TEST(AsyncWriteTest, WritesAndSetattrsOfAFileKeepTheirOrder) {
  AsyncRemovals async(false, true, true);
  async.LearnFile(9, FileAttr(0600, 10), async.Ticket(), kSec);
  std::optional<AsyncRemovals::EarlyWrite> write = async.BeginWrite(9, kFh, 0, 100);
  ASSERT_TRUE(write);
  std::optional<AsyncRemovals::EarlySetattr> chmod = async.BeginSetattr(9, Chmod(0644), kSec, kNow);
  ASSERT_TRUE(chmod);
  EXPECT_EQ(chmod->after, write->seq) << "a utimes after a write: its mtime must not win";
  EXPECT_EQ(chmod->answer.attr.size, 100u) << "the size the early write made";
  std::optional<AsyncRemovals::EarlyWrite> after = async.BeginWrite(9, kFh, 1000, 100);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->gate, chmod->seq) << "a write after a change of the file waits for it";
  (void)async.EndWrite(write->seq, 9, kFh, 100, 0);
  (void)async.EndSetattr(chmod->seq, 9, nullptr, async.Ticket(), kSec);
  (void)async.EndWrite(after->seq, 9, kFh, 100, 0);
  EXPECT_EQ(async.outstanding(), 0u);
}

TEST(AsyncWriteTest, AWriteEndingLetsNoAnswerSentBeforeItBringTheSize) {
  AsyncRemovals async(false, true, true);
  async.LearnFile(9, FileAttr(0600, 10), async.Ticket(), kSec);
  const uint64_t getattr = async.Ticket();  // sent before the write, answered after it
  std::optional<AsyncRemovals::EarlyWrite> write = async.BeginWrite(9, kFh, 0, 5000);
  ASSERT_TRUE(write);
  const uint64_t racing = async.Ticket();  // ticket taken after BeginWrite, not gated
  (void)async.EndWrite(write->seq, 9, kFh, 5000, 0);
  async.LearnFile(9, FileAttr(0600, 10), getattr, kSec);
  async.LearnFile(9, FileAttr(0600, 10), racing, kSec);
  std::optional<AsyncRemovals::EarlySetattr> chmod = async.BeginSetattr(9, Chmod(0644), kSec, kNow);
  ASSERT_TRUE(chmod);
  EXPECT_EQ(chmod->answer.attr.size, 5000u) << "a size from before the write was learned";
}

TEST(AsyncWriteTest, AFailedWriteIsReportedOnceToItsOpenFile) {
  AsyncRemovals async(false, false, true);
  EXPECT_EQ(async.TakeWriteError(kFh), 0);
  std::optional<AsyncRemovals::EarlyWrite> write = async.BeginWrite(9, kFh, 0, 100);
  ASSERT_TRUE(write);
  (void)async.EndWrite(write->seq, 9, kFh, 100, ENOSPC);
  EXPECT_EQ(async.writes_failed(), 1u);
  EXPECT_FALSE(async.BeginWrite(9, kFh, 100, 100)) << "its error is not reported yet";
  std::optional<AsyncRemovals::EarlyWrite> other = async.BeginWrite(9, kFh + 1, 0, 100);
  EXPECT_TRUE(other) << "another open file of the same file";
  EXPECT_EQ(async.TakeWriteError(kFh + 1), 0) << "not its error";
  EXPECT_EQ(async.TakeWriteError(kFh), ENOSPC);
  EXPECT_EQ(async.TakeWriteError(kFh), 0) << "reported once";
  EXPECT_TRUE(async.BeginWrite(9, kFh, 100, 100));
  // Released with a write owed that then fails: nobody is left to report it to.
  async.Released(kFh + 1);
  (void)async.EndWrite(other->seq, 9, kFh + 1, 100, EIO);
  EXPECT_EQ(async.TakeWriteError(kFh + 1), 0);
  // Released with an error held: dropped, and another open file's error still reported.
  std::optional<AsyncRemovals::EarlyWrite> a = async.BeginWrite(9, kFh + 5, 0, 10);
  std::optional<AsyncRemovals::EarlyWrite> b = async.BeginWrite(9, kFh + 6, 0, 10);
  ASSERT_TRUE(a && b);
  (void)async.EndWrite(a->seq, 9, kFh + 5, 10, EIO);
  async.Released(kFh + 5);
  EXPECT_EQ(async.TakeWriteError(kFh + 5), 0);
  (void)async.EndWrite(b->seq, 9, kFh + 6, 10, EDQUOT);
  EXPECT_EQ(async.TakeWriteError(kFh + 6), EDQUOT);
  EXPECT_EQ(async.TakeWriteError(kFh), 0);
}

TEST(AsyncWriteTest, EarlyWritesStayWithinTheBudget) {
  AsyncRemovals async(false, false, true);
  constexpr uint32_t kMiB = 1 << 20;
  constexpr uint64_t kWrites = AsyncRemovals::kWriteBudget / kMiB;
  std::vector<AsyncRemovals::EarlyWrite> held;
  for (uint64_t i = 0; i < kWrites; ++i) {
    std::optional<AsyncRemovals::EarlyWrite> w = async.BeginWrite(9, kFh, i * kMiB, kMiB);
    ASSERT_TRUE(w) << i;
    held.push_back(*w);
  }
  EXPECT_FALSE(async.BeginWrite(9, kFh, AsyncRemovals::kWriteBudget, 1)) << "over the budget";
  for (const AsyncRemovals::EarlyWrite& w : held) (void)async.EndWrite(w.seq, 9, kFh, kMiB, 0);
  // All of it is free again: as much can be owed once more.
  for (uint64_t i = 0; i < kWrites; ++i) {
    std::optional<AsyncRemovals::EarlyWrite> w = async.BeginWrite(9, kFh, i * kMiB, kMiB);
    ASSERT_TRUE(w) << "budget not returned, " << i;
  }
}

}  // namespace
}  // namespace ringfs::frontend
