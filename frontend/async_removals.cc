#include "frontend/async_removals.h"

#include <unistd.h>

#include <tuple>

namespace ringfs::frontend {

namespace {

// By ctime, then by the ticket (ctime can be coarser than two changes apart).
bool Older(const fuse_attr& a, uint64_t a_ticket, const fuse_attr& b, uint64_t b_ticket) {
  return std::tie(a.ctime, a.ctimensec, a_ticket) < std::tie(b.ctime, b.ctimensec, b_ticket);
}

}  // namespace

void AsyncRemovals::Learn(uint64_t dir, const fuse_attr_out& attr, uint64_t ticket,
                          uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (ticket <= pruned_floor_) return;
  Dir& d = FindOrAddLocked(dir);
  if (ticket <= d.floor) return;
  if (d.learned_ns != 0 && Older(attr.attr, ticket, d.attr.attr, d.ticket)) return;
  d.attr = attr;
  d.ticket = ticket;
  d.learned_ns = now_ns;
}

AsyncRemovals::Dir& AsyncRemovals::FindOrAddLocked(uint64_t dir) {
  auto it = dirs_.find(dir);
  if (it != dirs_.end()) return it->second;
  // Not in the map: its floor, if it had one, is below pruned_floor_, which the caller checked.
  if (dirs_.size() >= kMaxDirs) PruneLocked();
  return dirs_[dir];
}

void AsyncRemovals::PruneLocked() {
  // All that owe nothing: the next kMaxDirs directories learned pay for the next scan.
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (it->second.outstanding == 0 && it->second.deferred_forgets == 0) {
      dirs_.erase(it++);
    } else {
      ++it;
    }
  }
  pruned_floor_ = tickets_.load(std::memory_order_relaxed);
}

void AsyncRemovals::Forget(uint64_t dir) {
  absl::MutexLock lock(&mu_);
  // Every ticket given so far: a request sent before now may have run before the change.
  Dir& d = FindOrAddLocked(dir);
  d.learned_ns = 0;
  d.floor = tickets_.load(std::memory_order_relaxed);
}

void AsyncRemovals::ForgetAll() {
  absl::MutexLock lock(&mu_);
  const uint64_t floor = tickets_.load(std::memory_order_relaxed);
  for (auto& [dir, d] : dirs_) {
    d.learned_ns = 0;
    d.floor = floor;
  }
  pruned_floor_ = floor;  // for directories not in the map too
}

uint64_t AsyncRemovals::Begin(uint64_t dir, uint64_t now_ns) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  // learned_ns may be a little after now_ns (another worker's clock read): fresh.
  if (it == dirs_.end() || it->second.learned_ns == 0 ||
      it->second.learned_ns + kFreshNs < now_ns || it->second.outstanding >= kMaxPerDir) {
    return 0;
  }
  ++it->second.outstanding;
  const uint64_t seq = ++next_seq_;
  outstanding_.insert(seq);
  last_started_.store(seq, std::memory_order_release);
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

uint64_t AsyncRemovals::End(uint64_t seq, uint64_t dir) {
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
  if (it == dirs_.end()) return 0;
  if (it->second.outstanding > 0) --it->second.outstanding;
  if (it->second.outstanding > 0) return 0;
  const uint64_t forgets = it->second.deferred_forgets;
  it->second.deferred_forgets = 0;
  return forgets;
}

bool AsyncRemovals::DeferForget(uint64_t node, uint64_t nlookup) {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(node);
  if (it == dirs_.end() || it->second.outstanding == 0) return false;
  it->second.deferred_forgets += nlookup;
  return true;
}

void AsyncRemovals::Failed() { failed_.fetch_add(1, std::memory_order_relaxed); }

std::optional<fuse_attr_out> AsyncRemovals::DirAttrs(uint64_t dir, bool* owed) const {
  absl::MutexLock lock(&mu_);
  auto it = dirs_.find(dir);
  if (owed != nullptr) *owed = it != dirs_.end() && it->second.outstanding > 0;
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

size_t AsyncRemovals::directories() const {
  absl::MutexLock lock(&mu_);
  return dirs_.size();
}

void AsyncRemovals::PublishLowestLocked() {
  lowest_outstanding_.store(outstanding_.empty() ? UINT64_MAX : *outstanding_.begin(),
                            std::memory_order_release);
}

}  // namespace ringfs::frontend
