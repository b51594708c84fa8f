// Post-operation directory attributes the server sent with create/remove/rename replies
// (common/dir_attrs.h), kept until the kernel asks for that directory's attributes once.
// Shared by all workers of a mount: the GETATTR that follows a create may arrive on another
// queue than the create's reply. Thread-safe; the lock is held only for a map operation.
#pragma once

#include <linux/fuse.h>
#include <time.h>

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

// CLOCK_MONOTONIC in nanoseconds, the clock every `now_ns` below is read from.
inline uint64_t MonotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(now.tv_nsec);
}

class DirAttrCache {
 public:
  explicit DirAttrCache(size_t max_entries = 4096) : max_entries_(max_entries) {}

  // Remembers `attr` of `nodeid`, received at `now_ns`, until attr_valid has passed. Attributes
  // older than the ones already held (by ctime) are ignored: replies on different
  // connections may arrive out of order.
  void Offer(uint64_t nodeid, const fuse_attr_out& attr, uint64_t now_ns);

  // The attributes of `nodeid` if still valid, and forgets them: each post-op snapshot answers
  // at most one GETATTR, so the kernel's own attr cache stays the only long-lived copy.
  std::optional<fuse_attr_out> Take(uint64_t nodeid, uint64_t now_ns);

  // The directory was changed by a request without post-op attributes (SETATTR, xattrs).
  void Drop(uint64_t nodeid);
  // Invalidations may have been lost (KernelNotifier::ResetKernelCaches): forget everything.
  void Reset();

  size_t size() const;

 private:
  struct Entry {
    fuse_attr_out attr;
    uint64_t expires_ns;
  };
  void PruneLocked(uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::frontend
