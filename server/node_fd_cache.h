// The node fds a handle-based node table keeps open between requests, at most `capacity` of
// them. One cache is shared by the node tables of all clients, so the bound holds for the whole
// process however many clients there are. Replacement is CLOCK: a node used since the hand last
// passed it (Node::used_recently, set by the tables on every hit) gets a second chance. A node
// pushed out keeps its fd for as long as an executor still holds a NodeRef to it.
// Thread-safe. Lock order: a node table's mutex, then this cache's; the cache calls nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/node_table.h"

namespace ringfs::server {

class NodeFdCache {
 public:
  // `capacity` 0 keeps nothing: every Get of a handle-based table then reopens its node.
  explicit NodeFdCache(size_t capacity);
  NodeFdCache(const NodeFdCache&) = delete;
  NodeFdCache& operator=(const NodeFdCache&) = delete;

  // Keeps `node` (and so its fd) until it is pushed out or erased. Returns the node pushed out
  // to make room, or null; the caller drops it after releasing its own lock, so that a close()
  // never runs under a lock. REQUIRES: `node` is not in the cache.
  [[nodiscard]] NodeRef Insert(NodeRef node);

  // Takes `node` out if it is cached; returns it (for the caller to drop unlocked) or null.
  [[nodiscard]] NodeRef Erase(const Node& node);

  size_t capacity() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return slots_.size();
  }
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<NodeRef> slots_ ABSL_GUARDED_BY(mu_);    // fixed size: `capacity`
  std::vector<int32_t> free_ ABSL_GUARDED_BY(mu_);     // empty slots, used before evicting
  size_t hand_ ABSL_GUARDED_BY(mu_) = 0;
};

// The default capacity: a quarter of the soft RLIMIT_NOFILE, within [16, 16384]. The rest of the
// fd budget is left to pinned nodes (root, submounts), open files, sockets and io_urings.
size_t DefaultNodeFdCacheCapacity();

}  // namespace ringfs::server
