#include "frontend/page_drops.h"

#include <errno.h>

#include "common/log.h"
#include "frontend/dir_attr_cache.h"  // MonotonicNs
#include "frontend/kernel_notifier.h"

namespace ringfs::frontend {

PageDrops::PageDrops(UniqueFd fuse_fd, KeptPages* kept, size_t max_queued, absl::Duration retry)
    : fuse_fd_(std::move(fuse_fd)), kept_(kept), max_queued_(max_queued), retry_(retry) {}

PageDrops::~PageDrops() { Stop(); }

void PageDrops::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void PageDrops::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PageDrops::Post(uint64_t nodeid) {
  absl::MutexLock lock(&mu_);
  if (queued_.contains(nodeid)) return;  // its write starts later than this decision anyway
  if (queued_.size() >= max_queued_) {
    ++failed_;
    return;
  }
  queued_.insert(nodeid);
  queue_.push_back(nodeid);
}

void PageDrops::Loop() {
  while (true) {
    uint64_t nodeid = 0;
    {
      absl::MutexLock lock(&mu_);
      busy_ = false;
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      if (later_.empty()) {
        mu_.Await(absl::Condition(&ready));
      } else {
        const uint64_t now_ns = MonotonicNs();
        const uint64_t due_ns = later_.front().first;
        if (due_ns > now_ns) {
          mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Nanoseconds(due_ns - now_ns));
        }
      }
      if (stop_) return;
      if (!queue_.empty()) {
        nodeid = queue_.front();
        queue_.pop_front();
      } else if (!later_.empty() && later_.front().first <= MonotonicNs()) {
        nodeid = later_.front().second;
        later_.pop_front();
      } else {
        continue;
      }
      queued_.erase(nodeid);  // a decision from now on posts it again
      busy_ = true;
    }
    // Read before the write starts: every drop decided up to now is done by it.
    const std::optional<uint64_t> token = kept_->DropStarting(nodeid);
    if (!token.has_value()) {
      absl::MutexLock lock(&mu_);
      ++retried_;
      if (queued_.insert(nodeid).second) {
        later_.emplace_back(MonotonicNs() + absl::ToInt64Nanoseconds(retry_), nodeid);
      }
      continue;
    }
    const int err = writer_ ? writer_(nodeid)
                            : WriteInvalInode(fuse_fd_.get(), nodeid, /*offset=*/0, /*length=*/0);
    // ENOENT: the kernel holds no inode of it, so no pages either.
    const bool done = err == 0 || err == ENOENT;
    if (done) kept_->DropWritten(nodeid, *token);
    absl::MutexLock lock(&mu_);
    if (done) {
      ++written_;
    } else {
      ++failed_;
      if (failed_ == 1) RINGFS_LOG_WARN("dropping a file's cached pages failed: errno %d", err);
    }
  }
}

bool PageDrops::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && later_.empty() && !busy_;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

uint64_t PageDrops::written() const {
  absl::MutexLock lock(&mu_);
  return written_;
}

uint64_t PageDrops::retried() const {
  absl::MutexLock lock(&mu_);
  return retried_;
}

uint64_t PageDrops::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace ringfs::frontend
