#include "server/auth_limits.h"

#include <algorithm>

namespace ringfs::server {

void AuthRateLimiter::Refill(Bucket* bucket, absl::Time now) const {
  double earned = absl::ToDoubleSeconds(now - bucket->updated) * options_.per_second;
  if (earned > 0) {
    bucket->tokens = std::min(options_.burst, bucket->tokens + earned);
    bucket->updated = now;
  }
}

bool AuthRateLimiter::TryAcquire(const std::string& source) {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(source);
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_sources) {
      // A full bucket says nothing a missing one would not: forget those.
      // A loop, not erase_if with a lambda: the lock analysis does not see mu_ held inside one.
      for (auto entry = buckets_.begin(); entry != buckets_.end();) {
        Refill(&entry->second, now);
        if (entry->second.tokens >= options_.burst) {
          buckets_.erase(entry++);
        } else {
          ++entry;
        }
      }
      // Still full: many sources are failing at once; take no new one until some recover.
      if (buckets_.size() >= options_.max_sources) return false;
    }
    it = buckets_.emplace(source, Bucket{options_.burst, now}).first;
  }
  Refill(&it->second, now);
  if (it->second.tokens < 1) return false;
  it->second.tokens -= 1;
  return true;
}

void AuthRateLimiter::Refund(const std::string& source) {
  absl::MutexLock lock(&mu_);
  auto it = buckets_.find(source);
  if (it != buckets_.end()) it->second.tokens = std::min(options_.burst, it->second.tokens + 1);
}

bool LogThrottle::Admit(uint64_t* suppressed) {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  if (now - window_start_ >= options_.window) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= options_.lines) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

uint64_t LogThrottle::TakeSuppressed() {
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  if (suppressed_ == 0 || now - window_start_ < options_.window) return 0;
  uint64_t n = suppressed_;
  suppressed_ = 0;
  return n;
}

}  // namespace ringfs::server
