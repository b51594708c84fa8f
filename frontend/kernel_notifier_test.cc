// KernelNotifier's repeats: a notification that finds nothing in the kernel while an answer that
// builds entries may be landing there is written again; otherwise it is not.
// The kernel is replaced by a writer that answers as the kernel would (ENOENT: nothing cached);
// it_coherence runs the real thing against mounts.
#include "frontend/kernel_notifier.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fuse.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "frontend/complete_dirs.h"
#include "frontend/kept_entries.h"

namespace ringfs::frontend {
namespace {

// Answers ENOENT to the first `misses` writes of each notification, then 0; keeps every write.
class FakeKernel {
 public:
  explicit FakeKernel(int misses) : misses_(misses) {}
  int Write(const wire::Invalidation& inv) {
    absl::MutexLock lock(&mu_);
    written_.push_back(inv);
    return static_cast<int>(std::count(written_.begin(), written_.end(), inv)) <= misses_ ? ENOENT
                                                                                         : 0;
  }
  size_t writes() const {
    absl::MutexLock lock(&mu_);
    return written_.size();
  }
  size_t writes_of(const wire::Invalidation& inv) const {
    absl::MutexLock lock(&mu_);
    return std::count(written_.begin(), written_.end(), inv);
  }

 private:
  const int misses_;
  mutable absl::Mutex mu_;
  std::vector<wire::Invalidation> written_;
};

class NotifierRepeatTest : public ::testing::Test {
 protected:
  void Start(FakeKernel* kernel) {
    notifier_.set_writer_for_test([kernel](const wire::Invalidation& inv) {
      return kernel->Write(inv);
    });
    notifier_.Start();
  }
  // Waits until `kernel` saw `writes` writes, and a little longer for any more.
  void Settle(const FakeKernel& kernel, size_t writes) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (kernel.writes() < writes && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    absl::SleepFor(absl::Milliseconds(1300));  // past the last repeat's delay
  }

  KernelNotifier notifier_{UniqueFd(open("/dev/null", O_WRONLY | O_CLOEXEC)), nullptr, nullptr};
  const wire::Invalidation attrs_{wire::InvalidationKind::kInode, 10, -1, 0, {}};
  const wire::Invalidation name_{wire::InvalidationKind::kEntry, 1, -1, 0, "f"};
  // The directory's fallback: attributes, and from offset 0 its kept listing (KeptListings).
  const wire::Invalidation dir_{wire::InvalidationKind::kInode, 1, 0, 0, {}};
};

TEST_F(NotifierRepeatTest, NothingIsRepeatedWhenNoAnswerWasOnItsWay) {
  FakeKernel kernel(/*misses=*/100);
  Start(&kernel);
  notifier_.Post({attrs_, name_});
  Settle(kernel, 3);
  EXPECT_EQ(kernel.writes_of(attrs_), 1u);
  EXPECT_EQ(kernel.writes_of(name_), 1u);
  EXPECT_EQ(kernel.writes_of(dir_), 1u);  // the directory's own fallback (no dentry of the name)
  EXPECT_EQ(notifier_.counters().repeated, 0u);
}

// A pushed attribute invalidation of a directory whose fallback is held back (a name change
// the kernel had no dentry for) is written in the fallback's place, and so drops the
// directory's kept listing too (offset 0): the fallback is not written any more.
TEST_F(NotifierRepeatTest, ADirectorysAttributeInvalidationStandsInForItsHeldFallback) {
  FakeKernel kernel(/*misses=*/1);
  Start(&kernel);
  const wire::Invalidation dir_attrs{wire::InvalidationKind::kInode, 1, -1, 0, {}};
  notifier_.Post({dir_attrs});  // holds the directory's fallback for a second
  notifier_.Post({name_});      // no dentry: the fallback is due in about a second
  notifier_.Post({dir_attrs});  // before that
  Settle(kernel, 3);
  EXPECT_EQ(kernel.writes_of(dir_), 1u) << "the kept listing was never dropped";
  EXPECT_EQ(kernel.writes_of(dir_attrs), 1u);
}

TEST_F(NotifierRepeatTest, AMissIsRepeatedWhileAnAnswerIsInFlightUntilItLands) {
  FakeKernel kernel(/*misses=*/2);  // each notification's first write and first repeat miss
  Start(&kernel);
  notifier_.AnswerBegins();  // a LOOKUP the kernel will build an inode from
  notifier_.Post({attrs_, name_});
  Settle(kernel, 7);
  EXPECT_EQ(kernel.writes_of(attrs_), 3u);  // landed at the second repeat: no more
  EXPECT_EQ(kernel.writes_of(dir_), 3u);    // the directory fallback likewise
  // Never a name: the kernel builds a dentry under the directory's lock, which INVAL_ENTRY
  // waits for, so a miss there means there was nothing to build.
  EXPECT_EQ(kernel.writes_of(name_), 1u);
  EXPECT_EQ(notifier_.counters().repeated, 4u);
  notifier_.AnswerEnds(MonotonicNs());
}

TEST_F(NotifierRepeatTest, AMissRightAfterAnAnswerIsRepeatedFourTimesAtMost) {
  FakeKernel kernel(/*misses=*/100);
  Start(&kernel);
  notifier_.AnswerBegins();
  notifier_.AnswerEnds(MonotonicNs());  // answered: the kernel may still be building from it
  notifier_.Post({attrs_});
  Settle(kernel, 5);
  // Four repeats, 1, 10, 100 and 1000 ms apart; then it gives up.
  EXPECT_EQ(kernel.writes_of(attrs_), 5u);
  EXPECT_EQ(notifier_.counters().not_cached, 1u);  // repeats are counted on their own
  EXPECT_EQ(notifier_.counters().repeated, 4u);
}

TEST_F(NotifierRepeatTest, RepeatsOfOneNodeAreMergedAndWidened) {
  FakeKernel kernel(/*misses=*/100);
  Start(&kernel);
  notifier_.AnswerBegins();
  const wire::Invalidation head{wire::InvalidationKind::kInode, 10, 0, 4096, {}};
  const wire::Invalidation tail{wire::InvalidationKind::kInode, 10, 8192, 4096, {}};
  notifier_.Post({attrs_, head, tail});  // three pushes about node 10, all missing
  Settle(kernel, 7);
  const wire::Invalidation both{wire::InvalidationKind::kInode, 10, 0, 12288, {}};
  EXPECT_EQ(kernel.writes_of(both), 4u);  // one chain, covering both ranges
  EXPECT_EQ(notifier_.counters().repeated, 4u);
  notifier_.AnswerEnds(MonotonicNs());
}

TEST_F(NotifierRepeatTest, ALandedNotificationIsNotRepeated) {
  FakeKernel kernel(/*misses=*/0);
  Start(&kernel);
  notifier_.AnswerBegins();
  notifier_.Post({attrs_, name_});
  Settle(kernel, 2);
  EXPECT_EQ(kernel.writes(), 2u);
  EXPECT_EQ(notifier_.counters().repeated, 0u);
  notifier_.AnswerEnds(MonotonicNs());
}

// ResetKernelCaches (a connection ended: invalidations may have been lost).
class NotifierResetTest : public ::testing::Test {
 protected:
  // `submounts` unset: as without reset_names.
  void Start(std::optional<absl::StatusOr<size_t>> submounts, int epoch_answer) {
    notifier_.set_writer_for_test(
        [this](const wire::Invalidation& inv) {
          absl::MutexLock lock(&mu_);
          written_.push_back(inv);
          return inv.nodeid == kNotCached ? ENOENT : 0;
        },
        [this, epoch_answer] {
          absl::MutexLock lock(&mu_);
          ++epochs_;
          return epoch_answer;
        });
    notifier_.set_held_nodes([] { return std::vector<uint64_t>{5, 6, kNotCached}; });
    if (submounts) notifier_.set_submounts([submounts] { return *submounts; });
    notifier_.Start();
  }
  std::vector<wire::Invalidation> written() {
    absl::MutexLock lock(&mu_);
    return written_;
  }
  int epochs() {
    absl::MutexLock lock(&mu_);
    return epochs_;
  }
  static wire::Invalidation AllOf(uint64_t node) {
    wire::Invalidation inv;
    inv.nodeid = node;
    inv.offset = 0;  // attributes and every cached page
    return inv;
  }

  static constexpr uint64_t kNotCached = 7;
  // Declared before the notifier: its thread may still call the writers while it stops.
  absl::Mutex mu_;
  std::vector<wire::Invalidation> written_ ABSL_GUARDED_BY(mu_);
  int epochs_ ABSL_GUARDED_BY(mu_) = 0;
  DirAttrCache dir_attrs_;
  XattrAbsenceCache xattrs_{/*lifetime_ns=*/60'000'000'000};
  KernelNotifier notifier_{UniqueFd(open("/dev/null", O_WRONLY | O_CLOEXEC)), &dir_attrs_,
                           &xattrs_};
};

TEST_F(NotifierResetTest, MarksNamesStaleAndDropsEveryHeldNode) {
  Start(absl::StatusOr<size_t>(0), 0);
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs(), 1);
  // Every held node and the root (which the ledger does not count), attributes and data.
  EXPECT_EQ(written(), (std::vector<wire::Invalidation>{AllOf(5), AllOf(6), AllOf(kNotCached),
                                                        AllOf(FUSE_ROOT_ID)}));
  KernelNotifier::Counters counters = notifier_.counters();
  EXPECT_EQ(counters.resets, 1u);
  EXPECT_EQ(counters.names_kept, 0u);
  EXPECT_EQ(counters.written, 3u);
  EXPECT_EQ(counters.not_cached, 1u);
  // Nothing answered in flight: a node the kernel does not hold is not tried again.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(written().size(), 4u);
}

// A held node the kernel does not have yet while an answer is on its way (a LOOKUP answered
// before the reset, from what the mount kept): it may be building the node from that answer, so
// the reset's invalidation of it is written again, as a server's would be.
TEST_F(NotifierResetTest, AHeldNodeMissedWhileAnAnswerIsLandingIsTriedAgain) {
  Start(absl::StatusOr<size_t>(0), 0);
  notifier_.AnswerBegins();
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  const auto writes_of = [this](uint64_t node) {
    const auto all = written();
    return std::count(all.begin(), all.end(), AllOf(node));
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (writes_of(kNotCached) < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_GE(writes_of(kNotCached), 3);  // the reset's write and the repeats 1 and 10 ms later
  EXPECT_GE(notifier_.counters().repeated, 2u);
  EXPECT_EQ(notifier_.counters().dropped, 0u);
  EXPECT_EQ(writes_of(5), 1);                  // landed: not repeated
  EXPECT_EQ(notifier_.counters().resets, 1u);  // a repeat does not ask for another reset
  notifier_.AnswerEnds(MonotonicNs());
}

TEST_F(NotifierResetTest, WithoutResetNamesOnlyAttributesAndDataGo) {
  Start(std::nullopt, 0);
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs(), 0);
  EXPECT_EQ(written().size(), 4u);
  EXPECT_EQ(notifier_.counters().names_kept, 1u);
}

TEST_F(NotifierResetTest, KeepsNamesWhileSomethingIsMountedInside) {
  Start(absl::StatusOr<size_t>(1), 0);
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs(), 0);  // the kernel would detach that mount
  EXPECT_EQ(written().size(), 4u);  // attributes and data are dropped all the same
  EXPECT_EQ(notifier_.counters().names_kept, 1u);
}

TEST_F(NotifierResetTest, KeepsNamesWhenSubmountsCannotBeCounted) {
  Start(absl::StatusOr<size_t>(absl::UnavailableError("no mountinfo")), 0);
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs(), 0);
  EXPECT_EQ(notifier_.counters().names_kept, 1u);
}

TEST_F(NotifierResetTest, AKernelWithoutEpochsIsAskedOnce) {
  Start(absl::StatusOr<size_t>(0), EINVAL);  // older than protocol 7.44
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  notifier_.ResetKernelCaches();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs(), 1);
  KernelNotifier::Counters counters = notifier_.counters();
  EXPECT_EQ(counters.resets, 2u);
  EXPECT_EQ(counters.names_kept, 2u);
  EXPECT_EQ(counters.failed, 0u);  // not a failure: the kernel does not know the notification
  EXPECT_EQ(written().size(), 8u);
}

TEST_F(NotifierResetTest, ResetsAskedForWhileOneWaitsAreDoneOnce) {
  notifier_.Hold();
  Start(absl::StatusOr<size_t>(0), 0);
  for (int i = 0; i < 3; ++i) notifier_.ResetKernelCaches();  // e.g. every queue reconnecting
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(epochs(), 0);  // held
  notifier_.Release();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs(), 1);
  EXPECT_EQ(notifier_.counters().resets, 1u);
  EXPECT_EQ(written().size(), 4u);
}

TEST_F(NotifierResetTest, TheMountsOwnCopiesGoAtOnce) {
  notifier_.Hold();  // the loop never runs: what is checked happens in the caller's thread
  Start(absl::StatusOr<size_t>(0), 0);
  fuse_attr_out attr{};
  attr.attr_valid = 60;
  attr.attr.ctime = 1;
  dir_attrs_.Offer(9, attr, /*now_ns=*/1);
  xattrs_.RecordCreated(9, xattrs_.Ticket(), /*now_ns=*/1);
  const uint64_t ticket = xattrs_.Ticket();  // a GETXATTR sent before the reset
  notifier_.ResetKernelCaches();
  EXPECT_FALSE(dir_attrs_.Take(9, 2).has_value());
  EXPECT_FALSE(xattrs_.KnownAbsent(9, kCapabilityXattr, 2));
  xattrs_.RecordAbsent(10, /*name=*/0, ticket, 2);  // its ENODATA, answered after the reset
  EXPECT_FALSE(xattrs_.KnownAbsent(10, kCapabilityXattr, 3));
  notifier_.Release();
  ASSERT_TRUE(notifier_.WaitIdle(absl::Seconds(5)));
}

TEST(NotifierLossTest, RecordsTheQueueCannotTakeResetTheKernelsCaches) {
  KernelNotifier notifier(UniqueFd(open("/dev/null", O_WRONLY | O_CLOEXEC)), nullptr, nullptr,
                          nullptr, nullptr, /*max_queued=*/2);
  std::atomic<int> epochs{0};
  notifier.set_writer_for_test([](const wire::Invalidation&) { return 0; },
                               [&epochs] { return ++epochs, 0; });
  notifier.set_held_nodes([] { return std::vector<uint64_t>{5}; });
  notifier.set_submounts([] { return absl::StatusOr<size_t>(size_t{0}); });
  notifier.Hold();
  notifier.Start();
  std::vector<wire::Invalidation> records(2);
  records[0].nodeid = 1;
  records[1].nodeid = 2;
  notifier.Post(records);
  notifier.Release();
  ASSERT_TRUE(notifier.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs.load(), 0);  // nothing lost yet
  notifier.Hold();
  records.push_back(records[0]);
  records.back().nodeid = 3;
  notifier.Post(records);  // three for a queue of two
  notifier.Release();
  ASSERT_TRUE(notifier.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs.load(), 1);
  KernelNotifier::Counters counters = notifier.counters();
  EXPECT_EQ(counters.dropped, 1u);
  EXPECT_EQ(counters.resets, 1u);
  EXPECT_EQ(counters.written, 2u + 2u + 2u);  // two, then two, and node 5 and the root
}

// The server lost track of changes (its export watch overflowed): a reset record resets the
// kernel's caches as a lost record does; it is not written itself, the records beside it are.
TEST(NotifierLossTest, AResetRecordFromTheServerResetsTheKernelsCaches) {
  DirAttrCache dir_attrs;
  CompleteDirs dirs(/*lifetime_ns=*/60'000'000'000);
  KeptEntries kept;
  KernelNotifier notifier(UniqueFd(open("/dev/null", O_WRONLY | O_CLOEXEC)), &dir_attrs, nullptr,
                          &dirs, &kept);
  // Directory 4 made empty by this mount; the name "f" in 1 kept for node 8 the kernel forgot.
  dirs.RecordCreated(4, dirs.Ticket(), /*now_ns=*/1);
  ASSERT_GT(dirs.KnownAbsent(4, "x", 2), 0u);
  fuse_entry_out entry{};
  entry.nodeid = 8;
  entry.entry_valid = entry.attr_valid = 60;
  entry.attr.ino = 8;
  entry.attr.mode = 0100644;
  kept.Record(1, "f", entry, kept.Ticket(), /*quiet=*/true, 1);
  ASSERT_TRUE(kept.Keep(8, 1, 2));
  std::atomic<int> epochs{0};
  std::vector<uint64_t> written;
  absl::Mutex mu;
  notifier.set_writer_for_test(
      [&](const wire::Invalidation& inv) {
        absl::MutexLock lock(&mu);
        written.push_back(inv.nodeid);
        return 0;
      },
      [&epochs] { return ++epochs, 0; });
  notifier.set_held_nodes([] { return std::vector<uint64_t>{5}; });
  notifier.set_submounts([] { return absl::StatusOr<size_t>(size_t{0}); });
  notifier.Hold();
  notifier.Start();
  fuse_attr_out attr{};
  attr.attr_valid = 60;
  attr.attr.ctime = 1;
  dir_attrs.Offer(9, attr, /*now_ns=*/1);
  std::vector<wire::Invalidation> records(2);
  records[0].kind = wire::InvalidationKind::kReset;
  records[1].nodeid = 3;
  notifier.Post(records);
  EXPECT_FALSE(dir_attrs.Take(9, 2).has_value()) << "the mount's own copies go at once";
  EXPECT_EQ(dirs.KnownAbsent(4, "x", 3), 0u) << "an empty directory is no longer known";
  fuse_entry_out out{};
  EXPECT_FALSE(kept.Answer(1, "f", 3, &out)) << "a kept entry no longer answers a LOOKUP";
  notifier.Release();
  ASSERT_TRUE(notifier.WaitIdle(absl::Seconds(5)));
  EXPECT_EQ(epochs.load(), 1);
  KernelNotifier::Counters counters = notifier.counters();
  EXPECT_EQ(counters.resets, 1u);
  EXPECT_EQ(counters.dropped, 0u);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(std::count(written.begin(), written.end(), 0u), 0) << "the reset is not written";
  EXPECT_EQ(std::count(written.begin(), written.end(), 3u), 1);
  EXPECT_EQ(std::count(written.begin(), written.end(), 5u), 1) << "held nodes are dropped";
}

}  // namespace
}  // namespace ringfs::frontend
