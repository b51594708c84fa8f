#include "server/server_stats.h"

#include <algorithm>

namespace ringfs::server {

void DurationHistogram::Observe(uint64_t nanoseconds) {
  const double seconds = static_cast<double>(nanoseconds) * 1e-9;
  size_t bucket = std::lower_bound(kBoundsSeconds.begin(), kBoundsSeconds.end(), seconds) -
                  kBoundsSeconds.begin();
  Bump(counts[bucket]);
  Bump(sum_ns, nanoseconds);
}

void SessionTable::Add(std::shared_ptr<const SessionStats> session) {
  absl::MutexLock lock(&mu_);
  sessions_[session->session_id] = std::move(session);
}

void SessionTable::Remove(uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  sessions_.erase(session_id);
}

std::shared_ptr<const SessionStats> SessionTable::Find(uint64_t session_id) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session_id);
  return it == sessions_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const SessionStats>> SessionTable::List() const {
  std::vector<std::shared_ptr<const SessionStats>> out;
  {
    absl::MutexLock lock(&mu_);
    out.reserve(sessions_.size());
    for (const auto& [id, session] : sessions_) out.push_back(session);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->session_id < b->session_id; });
  return out;
}

size_t SessionTable::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace ringfs::server
