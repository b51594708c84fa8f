#include "frontend/server_binding.h"

#include <algorithm>
#include <utility>

namespace ringfs::frontend {

ServerBinding::ServerBinding(std::vector<SocketAddress> servers) : servers_(std::move(servers)) {}

ServerBinding::Target ServerBinding::Current() const {
  absl::MutexLock lock(&mu_);
  return {current_, servers_[current_]};
}

void ServerBinding::ConnectFailed(size_t index) {
  absl::MutexLock lock(&mu_);
  if (index == current_) current_ = (current_ + 1) % servers_.size();
}

void ServerBinding::SetCurrent(size_t index) {
  absl::MutexLock lock(&mu_);
  current_ = index % servers_.size();
}

ServerBinding::Verdict ServerBinding::Arrived(uint64_t instance, size_t index, uint64_t* epoch) {
  absl::MutexLock lock(&mu_);
  if (bound_ == 0) {
    // The first connection of the mount: there is nothing to re-establish.
    bound_ = instance;
    *epoch = epoch_;
    return Verdict::kReady;
  }
  if (instance == bound_) {
    if (reclaiming_) return Verdict::kWait;
    *epoch = epoch_;
    return Verdict::kReady;
  }
  // Another instance. While a lead still works on the bound one, wait: it either finishes
  // (and this channel then reconnects) or gives up (and this one may take over).
  if (reclaiming_) return Verdict::kWait;
  if (index != current_) return Verdict::kStale;
  bound_ = instance;
  reclaiming_ = true;
  return Verdict::kLead;
}

void ServerBinding::Finished(uint64_t instance, uint64_t epoch, uint64_t refused, bool counted) {
  absl::MutexLock lock(&mu_);
  if (instance != bound_) return;
  reclaiming_ = false;
  epoch_ = std::max(epoch_, epoch);
  if (counted) ++reclaims_;
  refused_ += refused;
}

uint64_t ServerBinding::reclaims() const {
  absl::MutexLock lock(&mu_);
  return reclaims_;
}

uint64_t ServerBinding::reclaim_refused() const {
  absl::MutexLock lock(&mu_);
  return refused_;
}

void ServerBinding::Abandoned(uint64_t instance) {
  absl::MutexLock lock(&mu_);
  if (instance != bound_ || !reclaiming_) return;
  reclaiming_ = false;
  // Nothing is bound that holds the state: the next channel to arrive anywhere leads.
  bound_ = ~uint64_t{0};
}

uint64_t ServerBinding::bound() const {
  absl::MutexLock lock(&mu_);
  return bound_;
}

}  // namespace ringfs::frontend
