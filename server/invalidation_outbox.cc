#include "server/invalidation_outbox.h"

#include <algorithm>
#include <optional>

#include "common/log.h"

namespace ringfs::server {

void InvalidationOutbox::AddSink(uint64_t session_id, Wake wake, bool resets) {
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    enabled_ = true;
    sinks_.push_back({session_id, std::move(wake), resets});
    // Records that waited while the client had no session go out on this one.
    to_wake = NextWakeLocked();
  }
  if (to_wake) to_wake->second(to_wake->first);
}

void InvalidationOutbox::RemoveSink(uint64_t session_id) {
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    std::erase_if(sinks_, [&](const Sink& sink) { return sink.session_id == session_id; });
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
    if (dropped_now > 0) reset_owed_ = true;
    if (dropped_now > 0 && !drop_logged_) {
      drop_logged_ = true;  // once per backlog: it is logged again after the client caught up
      RINGFS_LOG_WARN(
          "client %s has %zu cache invalidations waiting (no connection reading "
          "them); dropping the oldest: it is told to drop its caches (a client "
          "older than cache resets: its caches may be stale until their timeouts "
          "expire)",
          owner_, pending_.size());
    }
    to_wake = NextWakeLocked();
  }
  if (to_wake) to_wake->second(to_wake->first);
}

void InvalidationOutbox::PushReset() {
  std::optional<std::pair<uint64_t, Wake>> to_wake;
  {
    absl::MutexLock lock(&mu_);
    if (!enabled_) return;
    reset_owed_ = true;
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
      const bool resets = std::any_of(sinks_.begin(), sinks_.end(), [&](const Sink& sink) {
        return sink.session_id == session_id && sink.resets;
      });
      if (reset_owed_ && resets) {
        // It is applied once the client reads it, after every change queued here was made.
        out.push_back({wire::InvalidationKind::kReset, 0, -1, 0, {}});
        ++resets_;
      } else {
        out.assign(std::make_move_iterator(pending_.begin()),
                   std::make_move_iterator(pending_.end()));
      }
      reset_owed_ = false;
      pending_.clear();
      drop_logged_ = false;
    } else {
      std::erase_if(sinks_, [&](const Sink& sink) { return sink.session_id == session_id; });
      to_wake = NextWakeLocked();
    }
  }
  if (to_wake) to_wake->second(to_wake->first);
  return out;
}

std::optional<std::pair<uint64_t, InvalidationOutbox::Wake>> InvalidationOutbox::NextWakeLocked() {
  if (wake_pending_ || (pending_.empty() && !reset_owed_) || sinks_.empty()) return std::nullopt;
  wake_pending_ = true;
  woken_ = sinks_.front().session_id;
  return std::make_pair(sinks_.front().session_id, sinks_.front().wake);
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

uint64_t InvalidationOutbox::resets() const {
  absl::MutexLock lock(&mu_);
  return resets_;
}

}  // namespace ringfs::server
