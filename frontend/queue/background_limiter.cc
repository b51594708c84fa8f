#include "frontend/queue/background_limiter.h"

#include <algorithm>
#include <cassert>

namespace ringfs::frontend::queue {

bool BackgroundLimiter::TryAdmit(uint64_t token) {
  // Anyone already waiting goes first, even when a raised limit has not been drained yet.
  if (queued_count_ == 0 && HasRoom()) {
    Admit();
    return true;
  }
  PushQueued(token);
  ++queued_total_;
  return false;
}

std::optional<uint64_t> BackgroundLimiter::OnComplete() {
  assert(inflight_ > 0);
  if (inflight_ == 0) return std::nullopt;  // unmatched completion: never go below zero
  --inflight_;
  if (queued_count_ == 0 || !HasRoom()) return std::nullopt;
  Admit();
  return PopQueued();
}

absl::Status BackgroundLimiter::SetLimit(uint32_t limit) {
  if (limit == 0) {
    return absl::InvalidArgumentError(
        "background limit must be at least 1 (use 'unlimited' for no limit)");
  }
  limit_ = limit;
  return absl::OkStatus();
}

std::vector<uint64_t> BackgroundLimiter::DrainAdmissible() {
  std::vector<uint64_t> admitted;
  while (queued_count_ > 0 && HasRoom()) {
    Admit();
    admitted.push_back(PopQueued());
  }
  return admitted;
}

std::vector<uint64_t> BackgroundLimiter::TakeQueued() {
  std::vector<uint64_t> taken;
  taken.reserve(queued_count_);
  while (queued_count_ > 0) taken.push_back(PopQueued());
  return taken;
}

void BackgroundLimiter::Admit() {
  ++inflight_;
  ++admitted_total_;
  max_inflight_seen_ = std::max(max_inflight_seen_, inflight_);
}

void BackgroundLimiter::PushQueued(uint64_t token) {
  if (queued_count_ == queue_ring_.size()) {
    // Unroll the ring into a buffer twice the size, oldest first.
    std::vector<uint64_t> grown(std::max<size_t>(16, queue_ring_.size() * 2));
    for (size_t i = 0; i < queued_count_; ++i) {
      grown[i] = queue_ring_[(queue_head_ + i) & (queue_ring_.size() - 1)];
    }
    queue_ring_ = std::move(grown);
    queue_head_ = 0;
  }
  queue_ring_[(queue_head_ + queued_count_) & (queue_ring_.size() - 1)] = token;
  ++queued_count_;
}

uint64_t BackgroundLimiter::PopQueued() {
  const uint64_t token = queue_ring_[queue_head_];
  queue_head_ = (queue_head_ + 1) & (queue_ring_.size() - 1);
  --queued_count_;
  return token;
}

}  // namespace ringfs::frontend::queue
