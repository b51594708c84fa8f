#include "frontend/async_removals.h"

#include <unistd.h>

namespace ringfs::frontend {

void AsyncRemovals::Learn(uint64_t dir, const fuse_attr_out& attr, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  Dir& d = dirs_[dir];
  d.attr = attr;
  d.learned_ns = now_ns;
}

void AsyncRemovals::Forget(uint64_t dir) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return;
  if (it->second.outstanding == 0) {
    dirs_.erase(it);
  } else {
    it->second.learned_ns = 0;  // kept for its count of outstanding unlinks
  }
}

void AsyncRemovals::ForgetAll() {
  absl::MutexLock lock(&mu_);
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (it->second.outstanding == 0) {
      dirs_.erase(it++);
    } else {
      it->second.learned_ns = 0;
      ++it;
    }
  }
}

uint64_t AsyncRemovals::Begin(uint64_t dir, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  if (it == dirs_.end() || it->second.learned_ns == 0 ||
      now_ns - it->second.learned_ns > kFreshNs || it->second.outstanding >= kMaxPerDir) {
    return 0;
  }
  ++it->second.outstanding;
  const uint64_t seq = ++next_seq_;
  outstanding_.insert(seq);
  PublishLowestLocked();
  started_.fetch_add(1, std::memory_order_relaxed);
  return seq;
}

void AsyncRemovals::WakeAtNextEnd(int fd) {
  absl::MutexLock lock(&mu_);
  wake_.insert(fd);
}

void AsyncRemovals::Unregister(int fd) {
  absl::MutexLock lock(&mu_);
  wake_.erase(fd);
}

void AsyncRemovals::End(uint64_t seq, uint64_t dir) {
  absl::MutexLock lock(&mu_);
  outstanding_.erase(seq);
  PublishLowestLocked();
  // Under the lock: Unregister then knows no write to a closed (or reused) fd is under way.
  for (int fd : wake_) {
    const uint64_t one = 1;
    (void)!write(fd, &one, sizeof(one));
  }
  wake_.clear();
  auto it = dirs_.find(dir);
  if (it == dirs_.end()) return;
  if (it->second.outstanding > 0) --it->second.outstanding;
  if (it->second.outstanding == 0 && it->second.learned_ns == 0) dirs_.erase(it);
}

void AsyncRemovals::Failed() { failed_.fetch_add(1, std::memory_order_relaxed); }

uint64_t AsyncRemovals::Gate() const {
  absl::MutexLock lock(&mu_);
  return outstanding_.empty() ? 0 : next_seq_;
}

std::optional<fuse_attr_out> AsyncRemovals::DirAttrs(uint64_t dir) const {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  // Forgotten (an invalidation) while unlinks are outstanding: the server is asked, after them.
  if (it == dirs_.end() || it->second.outstanding == 0 || it->second.learned_ns == 0) {
    return std::nullopt;
  }
  fuse_attr_out out = it->second.attr;
  out.attr_valid = 0;
  out.attr_valid_nsec = kDirAttrsValidNs;
  return out;
}

size_t AsyncRemovals::outstanding() const {
  absl::MutexLock lock(&mu_);
  return outstanding_.size();
}

void AsyncRemovals::PublishLowestLocked() {
  lowest_outstanding_.store(outstanding_.empty() ? UINT64_MAX : *outstanding_.begin(),
                            std::memory_order_release);
}

}  // namespace ringfs::frontend
