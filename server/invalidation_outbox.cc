#include "server/invalidation_outbox.h"

#include <algorithm>
#include <optional>

#include "common/log.h"

namespace ringfs::server {

void InvalidationOutbox::AddSink(uint64_t session_id, Wake wake) {
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    enabled_ = true;
    sinks_.emplace_back(session_id, std::move(wake));
    // Records that waited while the client had no session go out on this one.
    to_wake = NextWakeLocked();
  }
  if (to_wake) to_wake->second(to_wake->first);
}

void InvalidationOutbox::RemoveSink(uint64_t session_id) {
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    std::erase_if(sinks_, [&](const auto& sink) { return sink.first == session_id; });
    if (wake_pending_ && woken_ == session_id) {
      wake_pending_ = false;
      to_wake = NextWakeLocked();
    }
  }
  if (to_wake) to_wake->second(to_wake->first);
}

void InvalidationOutbox::Push(std::vector<wire::Invalidation> records) {
  if (records.empty()) return;
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    if (!enabled_) return;
    for (auto& record : records) pending_.push_back(std::move(record));
    pushed_ += records.size();
    size_t dropped_now = 0;
    while (pending_.size() > max_pending_) {
      pending_.pop_front();
      ++dropped_now;
    }
    dropped_ += dropped_now;
    if (dropped_now > 0 && !drop_logged_) {
      drop_logged_ = true;  // once per backlog: it is logged again after the client caught up
      RINGFS_LOG_WARN("client %s has %zu cache invalidations waiting (no connection reading "
                      "them); dropping the oldest: its caches may be stale until their "
                      "timeouts expire", owner_, pending_.size());
    }
    to_wake = NextWakeLocked();
  }
  if (to_wake) to_wake->second(to_wake->first);
}

std::vector<wire::Invalidation> InvalidationOutbox::Take(uint64_t session_id, bool can_send) {
  std::vector<wire::Invalidation> out;
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    wake_pending_ = false;
    if (can_send) {
      out.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
      pending_.clear();
      drop_logged_ = false;
    } else {
      std::erase_if(sinks_, [&](const auto& sink) { return sink.first == session_id; });
      to_wake = NextWakeLocked();
    }
  }
  if (to_wake) to_wake->second(to_wake->first);
  return out;
}

std::optional<std::pair<uint64_t, InvalidationOutbox::Wake>> InvalidationOutbox::NextWakeLocked() {
  if (wake_pending_ || pending_.empty() || sinks_.empty()) return std::nullopt;
  wake_pending_ = true;
  woken_ = sinks_.front().first;
  return sinks_.front();
}

bool InvalidationOutbox::enabled() const {
  absl::MutexLock lock(&mu_);
  return enabled_;
}

size_t InvalidationOutbox::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

uint64_t InvalidationOutbox::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

uint64_t InvalidationOutbox::pushed() const {
  absl::MutexLock lock(&mu_);
  return pushed_;
}

}  // namespace ringfs::server
