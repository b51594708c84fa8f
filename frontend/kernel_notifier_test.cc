// KernelNotifier's repeats: a notification that finds nothing in the kernel while an answer that
// builds entries may be landing there is written again; otherwise it is not.
// The kernel is replaced by a writer that answers as the kernel would (ENOENT: nothing cached);
// it_coherence runs the real thing against mounts.
#include "frontend/kernel_notifier.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

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
  const wire::Invalidation dir_{wire::InvalidationKind::kInode, 1, -1, 0, {}};
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

}  // namespace
}  // namespace ringfs::frontend
