#include "server/node_fd_cache.h"

#include <sys/resource.h>

#include <algorithm>
#include <utility>

namespace ringfs::server {

NodeFdCache::NodeFdCache(size_t capacity) {
  absl::MutexLock lock(&mu_);
  slots_.resize(capacity);
  free_.reserve(capacity);
  // Popped from the back: slots fill in order 0, 1, 2, ...
  for (size_t i = capacity; i > 0; --i) free_.push_back(static_cast<int32_t>(i - 1));
}

NodeRef NodeFdCache::Insert(NodeRef node) {
  absl::MutexLock lock(&mu_);
  if (slots_.empty()) return nullptr;
  NodeRef evicted;
  int32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    // Every slot is full. Each step clears one used_recently bit, so within two turns the hand
    // finds a node that was not used since it last came by.
    for (;;) {
      slot = static_cast<int32_t>(hand_);
      hand_ = (hand_ + 1) % slots_.size();
      if (!slots_[slot]->used_recently.exchange(false, std::memory_order_relaxed)) break;
    }
    evicted = std::move(slots_[slot]);
    evicted->cache_slot = -1;
  }
  // A new node starts without its bit: a scan over many files that are looked up once pushes
  // out those nodes first, not the ones in use.
  node->used_recently.store(false, std::memory_order_relaxed);
  node->cache_slot = slot;
  slots_[slot] = std::move(node);
  return evicted;
}

NodeRef NodeFdCache::Erase(const Node& node) {
  absl::MutexLock lock(&mu_);
  const int32_t slot = node.cache_slot;
  if (slot < 0 || slots_[slot].get() != &node) return nullptr;
  NodeRef erased = std::move(slots_[slot]);
  erased->cache_slot = -1;
  free_.push_back(slot);
  return erased;
}

size_t NodeFdCache::size() const {
  absl::MutexLock lock(&mu_);
  return slots_.size() - free_.size();
}

size_t DefaultNodeFdCacheCapacity() {
  constexpr size_t kMin = 16;
  constexpr size_t kMax = 16384;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMax;
  return std::clamp<size_t>(static_cast<size_t>(limit.rlim_cur / 4), kMin, kMax);
}

}  // namespace ringfs::server
