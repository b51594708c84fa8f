// Turns the server's cache invalidations (common/invalidation.h) into FUSE notifications
// written to /dev/fuse: FUSE_NOTIFY_INVAL_INODE (attributes, and cached data for a range) and
// FUSE_NOTIFY_INVAL_ENTRY (a name in a directory). Both transports use it: notifications always
// travel through /dev/fuse, also when requests come over the ring.
// Why a thread of its own: the kernel takes the directory's inode lock for INVAL_ENTRY and the
// page locks for INVAL_INODE; a request in flight may hold them while it waits for a reply that
// a reactor thread has to receive. Reactor threads only queue (Post never blocks).
// Also drops what the mount itself keeps of an invalidated node (DirAttrCache snapshots,
// XattrAbsenceCache), and tells CompleteDirs at once (in Post) which names may have appeared.
// A name change arrives as an entry record only; the kernel then marks the directory's
// attributes stale itself, but only if it holds a dentry for the name. When it does not (ENOENT),
// the directory gets an INVAL_INODE of its own, held back until `dir_hold` after the last
// attribute invalidation the server sent for that directory, and `dir_gap` after the previous
// such fallback: each INVAL_INODE voids the GETATTR replies in flight for the node, and a
// permission check whose refresh was voided uses the stale mode (EACCES; see the README,
// "Invalidations and permission checks"). The hold lets the refresh that follows a chmod through
// another mount land; the gap bounds how often a directory that another mount keeps creating in
// is invalidated.
// An INVAL_INODE that finds nothing in the kernel (ENOENT) is written again (after 1, 10, 100 and
// 1000 ms, while it keeps finding nothing) if an answer that may make the kernel build an inode
// (LOOKUP, CREATE, ...) was on its way into the kernel: accepted and not answered yet, or
// answered less than a second ago (AnswerBegins/AnswerEnds). Why: the kernel builds a new inode
// from such an answer only when the task that asked runs again, with no check of what was
// invalidated meanwhile (it has one for inodes it already holds: attr_version), so a
// notification written in between is lost and the answer's attributes, which may predate the
// change, then live for their whole lifetime. This matters most for the mount's own answers
// (KeptEntries), which can be older than any reply in flight, but applies to the server's too.
// INVAL_ENTRY is not repeated: the kernel holds the directory's lock from sending a LOOKUP (or
// create) until the dentry is built, and INVAL_ENTRY takes that lock, so it waits and then finds
// the dentry. Repeats of one node are merged (one pending at a time, its data range widened); a
// repeat that lands counts like an attribute invalidation from the server for the directory
// fallback's hold.
// When a connection to the server ended other than by the server's idle close (BackendChannel::
// Install decides), the server sent a reset record (it lost track of changes:
// common/invalidation.h), or the notifier itself dropped records (its queue full, too many repeats
// pending), invalidations may have been lost: those the server had
// sent on it, those it queued beyond its bound while the mount had no connection, and all of
// them on a new server instance, which does not know what this mount caches until it reclaims.
// ResetKernelCaches then makes the kernel drop what it learned before: FUSE_NOTIFY_INC_EPOCH
// (protocol 7.44) marks every dentry stale, so each name is looked up again at its next use,
// and an INVAL_INODE of every node the kernel holds (NodeLedger, and the root) drops cached
// attributes and data. The epoch is written only with set_submounts (the reset_names mount
// option) and only while nothing is mounted inside the mount in ringfs-mount's namespace: the
// kernel detaches a mount whose dentry fails revalidation (d_invalidate), in every namespace,
// so by default names keep their lifetime.
// Thread-safe. Stop() after the FUSE connection has ended (writes then fail at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/invalidation.h"
#include "common/unique_fd.h"
#include "frontend/complete_dirs.h"
#include "frontend/kept_entries.h"
#include "frontend/dir_attr_cache.h"
#include "frontend/xattr_cache.h"

namespace ringfs::frontend {

// Writes FUSE_NOTIFY_INVAL_INODE of `nodeid` to `fuse_fd`: the kernel marks its cached
// attributes stale and, unless `offset` is negative, drops its cached pages from `offset` on
// (`length` bytes; 0 or less: to the end). Returns the errno (0: taken; ENOENT: the kernel holds
// no inode of it). Blocks while a page to drop is locked by a request in flight.
int WriteInvalInode(int fuse_fd, uint64_t nodeid, int64_t offset, int64_t length);

class KernelNotifier {
 public:
  struct Counters {
    uint64_t written = 0;    // notifications the kernel took
    uint64_t not_cached = 0; // ENOENT: the kernel held nothing of that node or name
    uint64_t failed = 0;     // any other error (logged)
    uint64_t dropped = 0;    // queue full, or too many repeats pending (followed by a reset of
                             // the kernel's caches, as after a reconnect)
    uint64_t repeated = 0;   // written again because an answer was on its way into the kernel
    uint64_t resets = 0;     // ResetKernelCaches done (requests merged while one waited count once)
    uint64_t names_kept = 0; // of those, resets that could not mark the names stale (see above)
  };
  // Writes one notification to the kernel and returns the errno (0: taken). A seam for tests;
  // the default writes to the fuse fd.
  using Writer = std::function<int(const wire::Invalidation&)>;
  // Writes FUSE_NOTIFY_INC_EPOCH and returns the errno. A seam for tests, as Writer.
  using EpochWriter = std::function<int()>;
  // The node ids the kernel holds now (NodeLedger).
  using HeldNodes = std::function<std::vector<uint64_t>()>;
  // How many mounts sit on directories of this mount (MountsInside); an error counts as some.
  using Submounts = std::function<absl::StatusOr<size_t>()>;

  // `fuse_fd`: a /dev/fuse fd of the mount (a clone is fine). The caches may be null.
  KernelNotifier(UniqueFd fuse_fd, DirAttrCache* dir_attrs, XattrAbsenceCache* xattrs,
                 CompleteDirs* dirs = nullptr, KeptEntries* kept = nullptr,
                 size_t max_queued = 1 << 16, absl::Duration dir_hold = absl::Seconds(1),
                 absl::Duration dir_gap = absl::Milliseconds(20));
  ~KernelNotifier();
  KernelNotifier(const KernelNotifier&) = delete;
  KernelNotifier& operator=(const KernelNotifier&) = delete;

  void Start();
  void Stop();

  // Any thread; never blocks.
  void Post(std::vector<wire::Invalidation> records);

  // A request whose answer may make the kernel build a dentry or inode was accepted / has been
  // answered (its reply handed to the kernel). Any thread; lock-free. Calls must pair up; a
  // Begins without its Ends only makes notifications repeat for nothing.
  void AnswerBegins() { answers_in_flight_.fetch_add(1); }
  void AnswerEnds(uint64_t now_ns) {
    uint64_t seen = last_answer_end_ns_.load();
    while (seen < now_ns && !last_answer_end_ns_.compare_exchange_weak(seen, now_ns)) {
    }
    answers_in_flight_.fetch_sub(1);
  }

  int64_t answers_in_flight() const { return answers_in_flight_.load(); }  // tests

  // Before Start() (tests).
  void set_writer_for_test(Writer writer, EpochWriter epoch = {}) {
    writer_ = std::move(writer);
    epoch_writer_ = std::move(epoch);
  }

  // Before Start(). Without `held`, a reset drops the root's cached attributes only; without
  // `submounts`, it never marks names stale.
  void set_held_nodes(HeldNodes held) { held_nodes_ = std::move(held); }
  void set_submounts(Submounts submounts) { submounts_ = std::move(submounts); }

  // Everything the kernel cached before now may be stale (see above). Drops the mount's own
  // post-op directory attributes and xattr absences at once, then the loop thread resets the
  // kernel's caches. Any thread; never blocks. Calls that come while a reset waits to start are
  // merged into it.
  void ResetKernelCaches();

  // Until Release(), notifications queue instead of being written. The mount holds them while
  // it primes the root's attributes (MountSession::ProbeMount): an INVAL_INODE of the root
  // written while that GETATTR is in flight would make the kernel drop its reply.
  void Hold();
  void Release();

  // Waits until everything posted so far has been written, held-back directory invalidations
  // included, repeats not (tests). False on timeout.
  bool WaitIdle(absl::Duration timeout);

  Counters counters() const;

 private:
  void Loop();
  // Writes one notification; returns the errno (0: taken).
  int Write(const wire::Invalidation& inv);
  // Writes `inv` and does the bookkeeping of directory invalidations. Loop thread only.
  // `directory_fallback`: `inv` is a held-back directory invalidation (see above).
  void Deliver(const wire::Invalidation& inv, absl::Time now, Counters& done,
               bool directory_fallback = false);
  // Writes the held-back directory invalidations that are due. Loop thread only.
  void DeliverDue(absl::Time now, Counters& done);
  absl::Time NextDue() const;
  // Whether an answer may be on its way into the kernel (see above).
  bool AnswerMayBeLanding(uint64_t now_ns) const;
  // Schedules the first repeat of INVAL_INODE `inv` (merged with one pending for its node);
  // false when too many nodes wait.
  bool Repeat(const wire::Invalidation& inv, absl::Time now);
  void DropRepeat(uint64_t nodeid);
  void RepeatDue(Counters& done);
  // The kernel side of ResetKernelCaches. Loop thread only.
  void ResetNow(Counters& done);
  int WriteEpoch();
  bool Stopping() const;

  const UniqueFd fuse_fd_;
  DirAttrCache* const dir_attrs_;
  XattrAbsenceCache* const xattrs_;
  CompleteDirs* const dirs_;
  KeptEntries* const kept_;
  const size_t max_queued_;
  const absl::Duration dir_hold_;
  const absl::Duration dir_gap_;
  std::thread thread_;
  // Owned by the loop thread (read by nobody else).
  // node -> no directory fallback for it before then
  absl::flat_hash_map<uint64_t, absl::Time> quiet_until_;
  absl::flat_hash_map<uint64_t, absl::Time> dir_due_;  // directory -> when to invalidate it
  struct Repeating {
    int64_t offset = -1;  // the data range to invalidate too, widened by merges (-1: none)
    int64_t length = 0;
    size_t step = 0;  // index into the delays, of the write due at `due`
    std::multimap<absl::Time, uint64_t>::iterator due;
  };
  absl::flat_hash_map<uint64_t, Repeating> repeats_;  // node -> its pending repeat
  std::multimap<absl::Time, uint64_t> repeat_due_;    // when -> node
  Writer writer_;
  EpochWriter epoch_writer_;
  HeldNodes held_nodes_;
  Submounts submounts_;
  bool epoch_refused_ = false;  // the kernel answered EINVAL once (older than 7.44); loop thread
  std::atomic<int64_t> answers_in_flight_{0};
  std::atomic<uint64_t> last_answer_end_ns_{0};
  mutable absl::Mutex mu_;
  std::deque<wire::Invalidation> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // the thread is writing a batch
  size_t held_back_ ABSL_GUARDED_BY(mu_) = 0;  // dir_due_.size(), for WaitIdle
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool reset_wanted_ ABSL_GUARDED_BY(mu_) = false;
  Counters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::frontend
