#include "server/session_fence.h"

#include <algorithm>
#include <utility>

namespace ringfs::server {

SessionTicket& SessionTicket::operator=(SessionTicket&& other) noexcept {
  if (this != &other) {
    End();
    fence_ = std::move(other.fence_);
    session_id_ = std::exchange(other.session_id_, 0);
    superseded_ = std::move(other.superseded_);
    waits_ = std::move(other.waits_);
  }
  return *this;
}

bool SessionTicket::Attach(std::function<void()> close) {
  return fence_ == nullptr || fence_->Attach(session_id_, std::move(close));
}

bool SessionTicket::Await(std::function<void()> wake) {
  return fence_ != nullptr && fence_->Await(session_id_, waits_, std::move(wake));
}

void SessionTicket::End() {
  if (fence_ != nullptr) std::exchange(fence_, nullptr)->End(session_id_);
}

SessionTicket SessionFence::Begin(uint64_t session_id, uint64_t replaces) {
  SessionTicket ticket;
  ticket.fence_ = shared_from_this();
  ticket.session_id_ = session_id;
  ticket.superseded_ = std::make_shared<std::atomic<bool>>(false);
  absl::MutexLock lock(&mu_);
  live_[session_id] = Session{.superseded = ticket.superseded_};
  // A connection that replaces none (the client's first on a queue) has nothing resent.
  if (replaces == 0) return ticket;
  if (auto old = live_.find(replaces); old != live_.end() && replaces != session_id) {
    if (!old->second.superseded->exchange(true)) {
      replaced_total_.fetch_add(1, std::memory_order_relaxed);
      if (old->second.close) std::exchange(old->second.close, nullptr)();
    }
  }
  // Every superseded session, not only the one replaced, even when that one has ended: a
  // connection lost before its own predecessor ended leaves that one running, and which
  // session replaced which is not kept once one ends.
  for (const auto& [id, session] : live_) {
    if (session.superseded->load()) ticket.waits_.push_back(id);
  }
  return ticket;
}

bool SessionFence::Attach(uint64_t session_id, std::function<void()> close) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(session_id);
  if (it == live_.end() || it->second.superseded->load()) return false;
  it->second.close = std::move(close);
  return true;
}

bool SessionFence::Await(uint64_t session_id, const std::vector<uint64_t>& waits,
                         std::function<void()> wake) {
  absl::MutexLock lock(&mu_);
  Waiter waiter{.wake = std::move(wake)};
  for (uint64_t id : waits) {
    if (live_.contains(id)) waiter.waits.push_back(id);
  }
  if (waiter.waits.empty()) return false;
  waiters_[session_id] = std::move(waiter);
  return true;
}

void SessionFence::End(uint64_t session_id) {
  absl::MutexLock lock(&mu_);
  live_.erase(session_id);
  waiters_.erase(session_id);
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::erase(it->second.waits, session_id);
    if (it->second.waits.empty()) {
      it->second.wake();
      waiters_.erase(it++);
    } else {
      ++it;
    }
  }
}

size_t SessionFence::live() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

size_t SessionFence::superseded() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(live_.begin(), live_.end(),
                       [](const auto& entry) { return entry.second.superseded->load(); });
}

}  // namespace ringfs::server
