// Files whose cached pages the kernel may keep from one open to the next.
// Why: the kernel drops a file's pages at every open unless the answer says FOPEN_KEEP_CACHE,
// so a file read again (a header every compile includes, a script, a library, a config) cost an
// OPEN, the READs of all its data again, and a GETATTR (each READ voids the atime, which the next
// stat asks for) -- three round trips for a small file whose data the kernel still held.
//
// When the pages are current: the server ends every OPEN reply with the file's attributes as the
// open found them (open attrs, common/dir_attrs.h). The kernel's pages were read while the file
// had the change time, modification time and size that the OPEN which last made the kernel drop
// them saw (the baseline), unless a READ still in flight at that drop, or answered less than a
// second before it, put back what it read before (then the copy is poisoned until the next drop).
// Any change of the file's data anywhere -- through this mount, another mount, or on the
// export directly while the server was down -- moves its change time, so an OPEN whose record
// shows the baseline's times and size may leave the pages alone; any other OPEN drops them and
// sets a new baseline. This is NFS's close-to-open check (the change attribute at open), and
// needs no pushed invalidation: it holds with no_invalidations too. The server leaves the
// record out for a file changed less than kOpenAttrsSettledNs before its clock, whose change
// time could not tell a later change in the same tick apart: such an open drops the pages and
// sets no baseline.
//
// Pages this mount's own writes left in the kernel (write-through, or the cache of
// writeback_cache) are newer than the baseline: the change time the writes gave the file makes
// the next open drop them, which costs a re-read, never a stale page.
//
// Not covered yet, hence the mount option `kept_pages` and off by default (README): two opens at
// once, where the second is answered "keep" against the baseline the first set before the
// first opener's task has made the kernel drop the old pages; changes on the storage node that
// leave the change time as it was (stores through a shared mapping, one write() copying for
// more than kOpenAttrsSettledNs after it set the times); a page whose write-back the server
// refused, which the kernel keeps with the bytes the server never stored.
//
// Bounded: past `max_nodes` files the ones with no READ in flight or landing are forgotten, and
// their next open drops the pages. Thread-safe (one mutex, a hash-map step per OPEN and READ).
#pragma once

#include <linux/fuse.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

class KeptPages {
 public:
  explicit KeptPages(size_t max_nodes = 1 << 16) : max_nodes_(max_nodes) {}

  // The server answered an OPEN of `nodeid`, and the kernel is about to get the answer at
  // `now_ns`; `record`: the file's attributes at the open, null when the reply carried none.
  // Returns whether the answer may say FOPEN_KEEP_CACHE. When it may not, the kernel drops the
  // file's pages at this open, and `record` becomes the baseline.
  bool AtOpen(uint64_t nodeid, const fuse_attr* record, uint64_t now_ns);
  // A READ of `nodeid` is sent (its answer fills the kernel's pages), and it ended (answered,
  // failed or given up) at `now_ns`.
  void ReadSent(uint64_t nodeid);
  void ReadEnded(uint64_t nodeid, uint64_t now_ns);
  // Nothing learned before is trusted (a new server instance, a lost connection).
  void Reset();

  // OPENs answered with FOPEN_KEEP_CACHE.
  uint64_t kept() const { return kept_.load(std::memory_order_relaxed); }
  size_t nodes() const;

 private:
  struct Node {
    bool baseline = false;  // the pages were read as the file was at the last drop ...
    int64_t ctime_ns = 0;   // ... with these times and size
    int64_t mtime_ns = 0;
    uint64_t size = 0;
    bool poisoned = false;  // a READ from before the last drop may have landed after it
    uint32_t in_flight = 0;
    uint64_t ended_ns = 0;  // when a READ last ended
  };
  // Null when the table is full of files with READs in flight or landing.
  Node* FindOrAddLocked(uint64_t nodeid, uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_nodes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> kept_{0};
};

}  // namespace ringfs::frontend
