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
// writeback_cache) may hold bytes the server refused (ENOSPC): a WRITE poisons the copy, so the
// next open drops the pages. A successful write moves the change time anyway.
//
// Two opens at once: the kernel drops the pages when the opener's task runs on with the answer,
// so a second open answered "keep" against the baseline the first just set could read the old
// pages before that drop. So a drop of pages the kernel may hold (a READ or WRITE was sent for
// the file) stays unconfirmed until the mount has made the kernel drop them itself
// (PageDrops writes FUSE_NOTIFY_INVAL_INODE after the decision); no open is answered "keep"
// meanwhile.
//
// Not covered: a change on the storage node that leaves the change time as it was and whose
// writer is gone before the next open (stores through a shared mapping on tmpfs, unmapped since).
// While anything has the file open for writing, the server sends no record (open_for_writing.h).
//
// Bounded: past `max_nodes` files the ones with no READ or WRITE in flight or landing are
// forgotten, and their next open drops the pages (unconfirmed: they may hold some). Thread-safe
// (one mutex, a hash-map step per OPEN, READ and WRITE).
#pragma once

#include <linux/fuse.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

class KeptPages {
 public:
  explicit KeptPages(size_t max_nodes = 1 << 16) : max_nodes_(max_nodes) {}

  enum class AtOpenAnswer {
    kKeep,             // FOPEN_KEEP_CACHE
    kDrop,             // the kernel drops the pages (it holds none, or the drop is confirmed)
    kDropUnconfirmed,  // ... and may hold pages: the caller has PageDrops confirm the drop
  };
  // The server answered an OPEN of `nodeid`, and the kernel is about to get the answer at
  // `now_ns`; `record`: the file's attributes at the open, null when the reply carried none.
  // Unless the answer may keep the pages, the kernel drops them at this open, and `record`
  // becomes the baseline.
  AtOpenAnswer AtOpen(uint64_t nodeid, const fuse_attr* record, uint64_t now_ns);
  // A READ or WRITE of `nodeid` is sent (a READ's answer fills the kernel's pages; a WRITE's
  // bytes are in them already), and it ended (answered, failed or given up) at `now_ns`.
  void IoSent(uint64_t nodeid, bool write);
  void IoEnded(uint64_t nodeid, uint64_t now_ns);
  // PageDrops is about to make the kernel drop the pages of `nodeid`: returns what to pass to
  // DropWritten once the kernel has (or held no inode of it); nothing while a READ or WRITE of
  // it is in flight (the drop would wait for its pages' locks, and so would an unmount behind
  // it, for as long as the server does not answer: PageDrops tries again later).
  std::optional<uint64_t> DropStarting(uint64_t nodeid);
  void DropWritten(uint64_t nodeid, uint64_t token);
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
    bool poisoned = false;       // a READ from before the last drop may have landed after it, or a
                                 // WRITE's bytes may not be the server's
    bool may_hold = false;       // a READ or WRITE was sent: the kernel may hold pages
    uint64_t drop_gen = 0;       // the last unconfirmed drop (next_gen_ when it was decided) ...
    uint64_t confirmed_gen = 0;  // ... and the last one the kernel is known to have done
    uint32_t in_flight = 0;      // READs and WRITEs
    uint64_t ended_ns = 0;       // when one last ended
  };
  // Null when the table is full of files with READs in flight or landing.
  Node* FindOrAddLocked(uint64_t nodeid, uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_nodes_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_gen_ ABSL_GUARDED_BY(mu_) = 0;
  bool forgot_ ABSL_GUARDED_BY(mu_) = false;  // a node was forgotten: a new one may hold pages
  std::atomic<uint64_t> kept_{0};
};

}  // namespace ringfs::frontend
