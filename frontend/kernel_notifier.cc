#include "frontend/kernel_notifier.h"

#include <errno.h>
#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>

#include "common/log.h"

namespace ringfs::frontend {

namespace {

// Between the writes of a repeated notification; about 1.1 s in all. An answer handed to the
// kernel is built into a dentry/inode as soon as the task that asked runs again: microseconds,
// milliseconds on a loaded machine.
constexpr absl::Duration kRepeatDelays[] = {absl::Milliseconds(1), absl::Milliseconds(10),
                                            absl::Milliseconds(100), absl::Seconds(1)};
// How long after an answer was handed to the kernel it may still be on its way into the cache.
constexpr uint64_t kAnswerLandingNs = 1'000'000'000;
constexpr size_t kMaxRepeats = 1 << 16;
// FUSE_NOTIFY_INC_EPOCH (protocol 7.44), spelled out: older <linux/fuse.h> lack it.
constexpr int32_t kNotifyIncEpoch = 8;

}  // namespace

KernelNotifier::KernelNotifier(UniqueFd fuse_fd, DirAttrCache* dir_attrs,
                               XattrAbsenceCache* xattrs, CompleteDirs* dirs,
                               KeptEntries* kept, size_t max_queued, absl::Duration dir_hold,
                               absl::Duration dir_gap)
    : fuse_fd_(std::move(fuse_fd)), dir_attrs_(dir_attrs), xattrs_(xattrs), dirs_(dirs), kept_(kept),
      max_queued_(max_queued), dir_hold_(dir_hold), dir_gap_(dir_gap) {}

KernelNotifier::~KernelNotifier() { Stop(); }

void KernelNotifier::Start() { thread_ = std::thread([this] { Loop(); }); }

void KernelNotifier::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void KernelNotifier::Post(std::vector<wire::Invalidation> records) {
  // Before the kernel hears of it: from now on a LOOKUP of the name goes to the server.
  bool lost = false;
  for (const wire::Invalidation& record : records) {
    if (record.kind == wire::InvalidationKind::kReset) {
      lost = true;
      RINGFS_LOG_WARN(
          "the server lost track of changes to the export (its watch of the export "
          "overflowed, or this mount's invalidations waited too long): every cache "
          "is reset");
    } else if (record.kind == wire::InvalidationKind::kEntry) {
      if (dirs_ != nullptr) dirs_->AddName(record.nodeid, record.name);
      if (kept_ != nullptr) kept_->DropName(record.nodeid, record.name);
      // The node the name had (unknown here) may have lost a link: no write record of it.
      if (dir_attrs_ != nullptr) dir_attrs_->NamesChanged();
    } else {
      if (dirs_ != nullptr) dirs_->Drop(record.nodeid);
      if (kept_ != nullptr) kept_->DropNode(record.nodeid);
      if (dir_attrs_ != nullptr) dir_attrs_->Drop(record.nodeid);  // again when delivered
    }
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& record : records) {
      if (record.kind == wire::InvalidationKind::kReset) continue;
      if (queue_.size() >= max_queued_) {
        ++counters_.dropped;
        lost = true;
        continue;
      }
      queue_.push_back(std::move(record));
    }
  }
  if (lost) {
    // What a lost record (or the changes a reset stands for) would have invalidated is not
    // known: everything goes, the mount's own knowledge at once, the kernel's when the loop gets
    // to it.
    if (dirs_ != nullptr) dirs_->Reset();
    if (kept_ != nullptr) kept_->Reset();
    ResetKernelCaches();
  }
}

void KernelNotifier::Hold() {
  absl::MutexLock lock(&mu_);
  held_ = true;
}

void KernelNotifier::Release() {
  absl::MutexLock lock(&mu_);
  held_ = false;
}

bool KernelNotifier::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && !busy_ && held_back_ == 0 && !reset_wanted_;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

KernelNotifier::Counters KernelNotifier::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

void KernelNotifier::Loop() {
  std::vector<wire::Invalidation> batch;
  bool reset = false;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      held_back_ = dir_due_.size();
      const absl::Time due = NextDue();
      const bool waiting = due != absl::InfiniteFuture();
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (!held_ && (!queue_.empty() || reset_wanted_));
      };
      auto can_write = [this, waiting]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (!held_ && (!queue_.empty() || reset_wanted_ || waiting));
      };
      mu_.Await(absl::Condition(&can_write));
      if (!stop_ && queue_.empty() && !reset_wanted_) {
        mu_.AwaitWithDeadline(absl::Condition(&ready), due);
      }
      if (stop_) return;
      if (held_) continue;
      batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
      queue_.clear();
      reset = std::exchange(reset_wanted_, false);
      busy_ = true;
    }
    Counters done;
    // First: records queued with it came after the reset was asked for, and may be newer.
    if (reset) ResetNow(done);
    for (const wire::Invalidation& inv : batch) Deliver(inv, absl::Now(), done);
    DeliverDue(absl::Now(), done);
    RepeatDue(done);
    batch.clear();
    absl::MutexLock lock(&mu_);
    counters_.written += done.written;
    counters_.not_cached += done.not_cached;
    counters_.failed += done.failed;
    counters_.dropped += done.dropped;
    // A repeat that could not be scheduled leaves an inode the kernel may be building from an
    // older answer: the reset that follows covers it (it lands after the answer).
    if (done.dropped > 0) reset_wanted_ = true;
    counters_.repeated += done.repeated;
    counters_.resets += done.resets;
    counters_.names_kept += done.names_kept;
  }
}

void KernelNotifier::ResetKernelCaches() {
  // The mount's own copies at once: the next GETATTR or GETXATTR may come before the loop runs.
  if (dir_attrs_ != nullptr) dir_attrs_->Reset();
  if (xattrs_ != nullptr) xattrs_->Reset();
  absl::MutexLock lock(&mu_);
  reset_wanted_ = true;
}

void KernelNotifier::ResetNow(Counters& done) {
  ++done.resets;
  // Names first, so a lookup that starts now already counts in the new epoch.
  const char* names = "marked stale";
  absl::StatusOr<size_t> submounts = submounts_ ? submounts_() : absl::StatusOr<size_t>(0);
  if (!submounts_) {
    ++done.names_kept;
    names = "kept until their lifetime ends (mount with reset_names to drop them too)";
  } else if (!submounts.ok() || *submounts > 0) {
    ++done.names_kept;
    names = "kept until their lifetime ends (something is mounted inside this mount, and the "
            "kernel would detach it)";
    if (!submounts.ok()) {
      RINGFS_LOG_WARN("cannot tell whether something is mounted inside this mount (%s): cached "
                      "names are not reset", submounts.status().message());
    }
  } else if (epoch_refused_) {
    ++done.names_kept;
    names = "kept until their lifetime ends (the kernel has no FUSE_NOTIFY_INC_EPOCH)";
  } else if (const int err = WriteEpoch(); err == EINVAL) {
    ++done.names_kept;
    epoch_refused_ = true;  // older than protocol 7.44: it will not learn it
    names = "kept until their lifetime ends (the kernel has no FUSE_NOTIFY_INC_EPOCH)";
  } else if (err != 0) {
    ++done.names_kept;
    ++done.failed;
    names = "kept until their lifetime ends (FUSE_NOTIFY_INC_EPOCH failed)";
    RINGFS_LOG_WARN("FUSE_NOTIFY_INC_EPOCH: %s", strerror(err));
  }
  size_t nodes = 0;
  std::vector<uint64_t> held;
  if (held_nodes_) held = held_nodes_();
  held.push_back(FUSE_ROOT_ID);  // the ledger does not count it: the kernel never forgets it
  for (size_t i = 0; i < held.size(); ++i) {
    // A million held nodes take seconds to write: do not hold up an unmount for them.
    if (i % 4096 == 4095 && Stopping()) break;
    wire::Invalidation inv;
    inv.kind = wire::InvalidationKind::kInode;
    inv.nodeid = held[i];
    inv.offset = 0;  // attributes and all cached data
    const int err = Write(inv);
    if (err == 0) {
      ++done.written;
      ++nodes;
    } else if (err == ENOENT) {
      ++done.not_cached;
      // As in Deliver: the kernel may still be building this node from an answer that predates
      // the reset (a LOOKUP the mount answered from a kept entry), and would keep those
      // attributes for their whole lifetime. A repeat that cannot be scheduled is not counted as
      // dropped: that would ask for another reset, and under load resets would follow each
      // other forever.
      if (AnswerMayBeLanding(MonotonicNs())) (void)Repeat(inv, absl::Now());
    } else {
      ++done.failed;
    }
  }
  RINGFS_LOG_INFO("invalidations from the server may have been lost: "
                  "cached attributes and data of %zu nodes dropped; cached names %s",
                  nodes, names);
}

void KernelNotifier::Deliver(const wire::Invalidation& inv, absl::Time now, Counters& done,
                             bool directory_fallback) {
  // The mount's own copy first: a GETATTR after the kernel forgot must not be answered
  // from a snapshot taken before the change.
  if (dir_attrs_ != nullptr) dir_attrs_->Drop(inv.nodeid);
  if (xattrs_ != nullptr && inv.kind == wire::InvalidationKind::kInode) {
    xattrs_->Drop(inv.nodeid);
  }
  wire::Invalidation written = inv;
  if (inv.kind == wire::InvalidationKind::kInode && inv.offset < 0 &&
      dir_due_.contains(inv.nodeid)) {
    // It stands in for the directory's fallback (erased below): the kept listing goes too.
    written.offset = 0;
  }
  const int err = Write(written);
  if (inv.kind == wire::InvalidationKind::kInode) {
    // Also covers a change of the directory's names that was waiting for it.
    const bool fallback = dir_due_.erase(inv.nodeid) > 0 && directory_fallback;
    if (err == 0) DropRepeat(inv.nodeid);  // landed: nothing to repeat for the node
    if (quiet_until_.size() >= 4096) {
      absl::erase_if(quiet_until_, [&](const auto& kv) { return kv.second <= now; });
    }
    absl::Time& quiet = quiet_until_[inv.nodeid];
    quiet = std::max(quiet, now + (fallback ? dir_gap_ : dir_hold_));
  } else if (err == ENOENT && !dir_due_.contains(inv.nodeid)) {
    // The kernel held no dentry of the name and so left the directory's attributes alone.
    auto quiet = quiet_until_.find(inv.nodeid);
    dir_due_[inv.nodeid] = quiet == quiet_until_.end() ? now : std::max(now, quiet->second);
  }
  if (err == 0) {
    ++done.written;
  } else if (err == ENOENT) {
    ++done.not_cached;
    if (inv.kind == wire::InvalidationKind::kInode && AnswerMayBeLanding(MonotonicNs()) &&
        !Repeat(inv, now)) {
      ++done.dropped;
    }
  } else {
    ++done.failed;
    RINGFS_LOG_DEBUG("invalidation of node %u%s%s: %s", inv.nodeid,
                     inv.name.empty() ? "" : " name ", inv.name, std::strerror(err));
  }
}

void KernelNotifier::DeliverDue(absl::Time now, Counters& done) {
  std::vector<uint64_t> due;
  for (const auto& [dir, when] : dir_due_) {
    if (when <= now) due.push_back(dir);
  }
  for (uint64_t dir : due) {
    // From offset 0: a directory's page cache is its kept listing (KeptListings), which a
    // caller that keeps the directory open and rewinds would otherwise still read.
    Deliver({wire::InvalidationKind::kInode, dir, 0, 0, {}}, now, done,
            /*directory_fallback=*/true);
  }
}

absl::Time KernelNotifier::NextDue() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [dir, when] : dir_due_) next = std::min(next, when);
  if (!repeat_due_.empty()) next = std::min(next, repeat_due_.begin()->first);
  return next;
}

bool KernelNotifier::AnswerMayBeLanding(uint64_t now_ns) const {
  // Read in this order: an answer that ends between the two reads is seen by the second.
  if (answers_in_flight_.load() > 0) return true;
  return now_ns < last_answer_end_ns_.load() + kAnswerLandingNs;
}

bool KernelNotifier::Repeat(const wire::Invalidation& inv, absl::Time now) {
  auto it = repeats_.find(inv.nodeid);
  if (it == repeats_.end()) {
    if (repeats_.size() >= kMaxRepeats) return false;
    it = repeats_.emplace(inv.nodeid, Repeating{inv.offset, inv.length, 0, {}}).first;
  } else {
    Repeating& r = it->second;
    repeat_due_.erase(r.due);
    r.step = 0;
    if (inv.offset >= 0 && r.offset < 0) {
      r.offset = inv.offset;
      r.length = inv.length;
    } else if (inv.offset >= 0) {
      // Both ranges, and what lies between (length 0: to the end of the file).
      const bool to_end = r.length == 0 || inv.length == 0;
      const int64_t end = to_end ? 0 : std::max(r.offset + r.length, inv.offset + inv.length);
      r.offset = std::min(r.offset, inv.offset);
      r.length = to_end ? 0 : end - r.offset;
    }
  }
  it->second.due = repeat_due_.emplace(now + kRepeatDelays[0], inv.nodeid);
  return true;
}

void KernelNotifier::DropRepeat(uint64_t nodeid) {
  auto it = repeats_.find(nodeid);
  if (it == repeats_.end()) return;
  repeat_due_.erase(it->second.due);
  repeats_.erase(it);
}

void KernelNotifier::RepeatDue(Counters& done) {
  while (!repeat_due_.empty() && repeat_due_.begin()->first <= absl::Now()) {
    const uint64_t node = repeat_due_.begin()->second;
    repeat_due_.erase(repeat_due_.begin());
    auto it = repeats_.find(node);
    Repeating& r = it->second;
    ++done.repeated;
    // Only the kernel is told again: the mount's own caches dropped what it covers at Post.
    const int err = Write({wire::InvalidationKind::kInode, node, r.offset, r.length, {}});
    const absl::Time now = absl::Now();
    const size_t next = r.step + 1;
    if (err == ENOENT && next < std::size(kRepeatDelays) && AnswerMayBeLanding(MonotonicNs())) {
      r.step = next;
      r.due = repeat_due_.emplace(now + kRepeatDelays[next], node);
      continue;
    }
    if (err == 0) {
      // It voided the GETATTRs in flight for the node, as one from the server does: no
      // directory fallback right after it (see the header).
      absl::Time& quiet = quiet_until_[node];
      quiet = std::max(quiet, now + dir_hold_);
    }
    repeats_.erase(it);
  }
}

bool KernelNotifier::Stopping() const {
  absl::MutexLock lock(&mu_);
  return stop_;
}

int KernelNotifier::WriteEpoch() {
  if (epoch_writer_) return epoch_writer_();
  if (writer_) return EINVAL;  // a test that gave no epoch writer: as an older kernel
  fuse_out_header header{};
  header.len = sizeof(header);
  header.error = kNotifyIncEpoch;
  return write(fuse_fd_.get(), &header, sizeof(header)) < 0 ? errno : 0;
}

int WriteInvalInode(int fuse_fd, uint64_t nodeid, int64_t offset, int64_t length) {
  struct {
    fuse_out_header header;
    fuse_notify_inval_inode_out inode;
  } message{};
  message.header.len = sizeof(message);
  message.header.error = FUSE_NOTIFY_INVAL_INODE;
  message.inode.ino = nodeid;
  message.inode.off = offset;
  message.inode.len = length;
  return write(fuse_fd, &message, sizeof(message)) < 0 ? errno : 0;
}

int KernelNotifier::Write(const wire::Invalidation& inv) {
  if (writer_) return writer_(inv);
  if (inv.kind == wire::InvalidationKind::kInode) {
    return WriteInvalInode(fuse_fd_.get(), inv.nodeid, inv.offset, inv.length);
  }
  fuse_out_header header{};
  fuse_notify_inval_entry_out entry{};
  char nul = '\0';
  iovec iov[4];
  int count = 0;
  iov[count++] = {&header, sizeof(header)};
  header.error = FUSE_NOTIFY_INVAL_ENTRY;
  entry.parent = inv.nodeid;
  entry.namelen = static_cast<uint32_t>(inv.name.size());  // without the NUL that follows
  iov[count++] = {&entry, sizeof(entry)};
  iov[count++] = {const_cast<char*>(inv.name.data()), inv.name.size()};
  iov[count++] = {&nul, 1};
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += iov[i].iov_len;
  header.len = static_cast<uint32_t>(total);
  return writev(fuse_fd_.get(), iov, count) < 0 ? errno : 0;
}

}  // namespace ringfs::frontend
