// Unlinks, SETATTRs and WRITEs answered before the server has run them (the async_unlink,
// async_setattr and async_write mount options), and the order every other request keeps with
// them.
//
// An UNLINK costs the caller two ring round trips, and one of them a server round trip: the
// UNLINK itself, then the directory's GETATTR the kernel's next permission check asks for (the
// unlink voided the directory's attributes). With the option the mount answers the UNLINK at
// once and sends it on (the channel keeps it, replays it after a lost connection, and owns its
// late answer), and answers that GETATTR from the directory's last attributes the server sent.
//
// Order: each such unlink gets a sequence number. Any other request that could see whether it
// ran (a LOOKUP, READDIR, CREATE, RMDIR, GETATTR, ...) is held in its channel until every
// unlink started before it was accepted has been answered by the server (Gate, Passed), so it
// can never overtake one it follows, whichever queue each went through. A request waits only
// for the unlinks before it: a stream of new ones cannot starve it.
//
// A SETATTR of a regular file (mode, owner, times; never a size) is answered early when the
// mount knows the file's attributes as the server last sent them (a create's, lookup's,
// getattr's or setattr's answer, sizes grown by this mount's writes) less than kFreshNs ago:
// the answer is those attributes with the change applied, valid for no time, so the kernel
// asks again (behind the SETATTR) before it shows any of them. Requests on that node (I/O
// included: a write must not overtake the times set before it) wait for its early SETATTRs
// (NodeGate), and so do those that could bring or change its attributes by name (NamesGate:
// a LOOKUP, READDIRPLUS, an UNLINK or RENAME that could remove it, ...). One SETATTR waits in
// its channel for the one before it on the same node: the server runs a connection's requests
// in any order.
//
// A WRITE through a write-only descriptor (no page cache behind it: frontend/open_reply.h) is
// answered early too, its bytes copied, up to kWriteBudget bytes outstanding per mount. It waits
// in its channel for the node's early SETATTRs before it and for its earlier early WRITEs that
// overlap it (BeginWrite); everything else on the node waits for it (NodeGate), and so does what
// meets files by name (NamesGate: a LOOKUP's size). Errors are kept per open file (the kernel's
// fh, as NFS keeps them per open file): its close (FLUSH) waits for its early WRITEs (WriteGate)
// and, like its next fsync, reports the first that failed (TakeWriteError): NFS's close-to-open.
// An open file with an error not yet reported writes synchronously; its RELEASE drops the error.
//
// Shared by all workers of a mount. Thread-safe; the lock is held only for a map operation.
#pragma once

#include <linux/fuse.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <optional>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

class AsyncRemovals {
 public:
  // Which requests may be answered early (the async_unlink, async_setattr and async_write
  // options), and whether SETATTRs that change nothing are answered (Unchanged; off with the
  // sync_noop_setattr option).
  AsyncRemovals(bool unlinks = true, bool setattrs = false, bool writes = false,
                bool noop_setattrs = false)
      : unlinks_(unlinks),
        setattrs_(setattrs),
        writes_(writes),
        noop_setattrs_(noop_setattrs),
        files_(setattrs || noop_setattrs),
        early_(unlinks || setattrs || writes) {}

  // A directory's attributes from the server answer early unlinks in it for this long after
  // they came (each unlink's own answer brings them again).
  static constexpr uint64_t kFreshNs = 1'000'000'000;
  // Most early unlinks outstanding in one directory: past it they go the synchronous way.
  static constexpr uint32_t kMaxPerDir = 4096;
  // Nodes whose attributes are kept; past it those with nothing outstanding are pruned.
  static constexpr size_t kMaxDirs = 4096;
  // The SETATTR changes answered early: no size (the kernel drops pages, the server may refuse
  // it), no ctime (the kernel sends one only with a writeback cache). A chown always carries
  // FATTR_KILL_SUIDGID: a no-op on a file without setuid/setgid bits, the only ones answered.
  static constexpr uint32_t kEarlySetattrValid = FATTR_MODE | FATTR_UID | FATTR_GID | FATTR_ATIME |
                                                 FATTR_MTIME | FATTR_ATIME_NOW | FATTR_MTIME_NOW |
                                                 FATTR_FH | FATTR_LOCKOWNER | FATTR_KILL_SUIDGID;
  // How long the kernel may keep attributes DirAttrs answered. Each unlink voids them anyway;
  // this spares the second GETATTR of one unlink (its lookup's permission check, then its
  // own), and bounds how long the directory's times stay those from before the unlinks.
  static constexpr uint32_t kDirAttrsValidNs = 1'000'000;
  // Bytes of early WRITEs outstanding per mount: past it writes wait for the server again. The
  // channels hold a copy of each (BackendChannel::SubmitDetached).
  static constexpr uint64_t kWriteBudget = 32ull << 20;

  // A ticket for a request being sent: Learn takes the attributes its answer brings only if it
  // was sent after the last Forget of their directory.
  uint64_t Ticket() { return tickets_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // Attributes of `dir` the server sent (a post-operation trailer, common/dir_attrs.h, or a
  // SETATTR's answer) in answer to a request with `ticket`, at `now_ns`. Older ones than those
  // held (by ctime, then ticket) are ignored: answers on different connections arrive in any
  // order. So are those of a node with early SETATTRs outstanding (EndSetattr brings them).
  void Learn(uint64_t dir, const fuse_attr_out& attr, uint64_t ticket, uint64_t now_ns);
  // The same for a regular file (a CREATE's, LOOKUP's, GETATTR's or SETATTR's answer); a no-op
  // unless files().
  void LearnFile(uint64_t node, const fuse_attr_out& attr, uint64_t ticket, uint64_t now_ns);
  // A WRITE through this mount ended at `end` (offset + bytes written): the file is at least
  // that long, and answers to requests sent before now may not say so (they bring no
  // attributes). Times and blocks are not known; answers made from these attributes are valid
  // for no time, so the kernel never shows them.
  void Wrote(uint64_t node, uint64_t end);
  // What the mount knew of `dir`'s attributes may be stale (an invalidation, a SETATTR or xattr
  // change sent or answered): not used again until the answer to a request sent after now
  // brings them.
  void Forget(uint64_t dir);
  // Pushes may have been lost (a connection ended): forget every directory's attributes.
  void ForgetAll();
  // A SETATTR of `node` not answered early is being sent (Forget, and counted until it ends).
  void SetattrSent(uint64_t node);
  // Its successful answer: the file's attributes after it, taken over what is known whatever
  // their change time, unless another SETATTR of the node was in flight beside it (the server
  // may have run them in either order), or a change of this mount is outstanding.
  void LearnSetattr(uint64_t node, const fuse_attr_out& attr, uint64_t ticket, uint64_t now_ns);
  // It ended, answered or not (after LearnSetattr). `may_still_run`: it reached the server and
  // ended without its answer (a deadline, an interrupt, a lost connection): what is learned of
  // the node is never used for Unchanged again.
  void SetattrEnded(uint64_t node, bool may_still_run);
  // Whether the server pushes invalidations and runs every caller as itself on a writable
  // export (each connection's hello says): otherwise nothing is answered by Unchanged (a change
  // elsewhere would go unseen for a second; a squashed root or a read-only export gets EPERM or
  // EROFS at the server even for a change of nothing).
  void SetNoopSafe(bool on) { noop_safe_.store(on, std::memory_order_relaxed); }
  // A name was removed or replaced (UNLINK, RENAME): some file's link count and ctime changed.
  // Forgets every regular file's attributes, and answers to requests sent before now bring none
  // (a no-op unless files()).
  void ForgetFiles();

  // An UNLINK in `dir` may be answered now: its sequence number (> 0), or 0 when it must go the
  // synchronous way (no fresh attributes of `dir` to answer the kernel's next GETATTR with).
  uint64_t Begin(uint64_t dir, uint64_t now_ns);
  // The server answered unlink `seq` in `dir` (or it ended otherwise). Returns the lookups of
  // `dir` whose FORGET waited for its last outstanding unlink (DeferForget), to be sent now.
  [[nodiscard]] uint64_t End(uint64_t seq, uint64_t dir);
  // The kernel forgot `nlookup` lookups of `node`: true when they must wait because unlinks in
  // it are outstanding (a FORGET that overtook one could make the server drop the directory it
  // names, and the unlink fail with ESTALE); End hands them back.
  bool DeferForget(uint64_t node, uint64_t nlookup);

  // A SETATTR of `node` may be answered now: its sequence number and the answer, or nullopt
  // when it must go the synchronous way (not enabled, attributes unknown or stale, a change not
  // answered early, setuid/setgid bits involved, too many outstanding). `*after`: the early
  // SETATTR of the same node it must not overtake (0: none). `now_real`: the ctime it gives.
  struct EarlySetattr {
    uint64_t seq = 0;
    uint64_t after = 0;
    fuse_attr_out answer{};
  };
  std::optional<EarlySetattr> BeginSetattr(uint64_t node, const fuse_setattr_in& in,
                                           uint64_t now_ns, const timespec& now_real);
  // A SETATTR of `node` that would change nothing: the owner, group and mode it sets (only
  // those) are the file's, as the server sent them less than kFreshNs ago with no change of this
  // mount outstanding, and neither has setuid/setgid bits (a chown clears them). Its answer
  // (those attributes, valid for no time: writes since may have moved the times), or nullopt
  // when the SETATTR must go to the server. Nothing is sent: the server would change nothing but
  // the change time (CephFS's client does the same under its shared capability).
  std::optional<fuse_attr_out> Unchanged(uint64_t node, const fuse_setattr_in& in, uint64_t now_ns);
  // The server answered early SETATTR `seq` of `node`, sent with `ticket`, with `attr` at
  // `now_ns` (null: it failed, or ended without an answer: the attributes are forgotten).
  // Returns as End does.
  [[nodiscard]] uint64_t EndSetattr(uint64_t seq, uint64_t node, const fuse_attr_out* attr,
                                    uint64_t ticket, uint64_t now_ns);

  // What a request accepted now must wait for: the last unlink started, or 0 when none is
  // outstanding.
  uint64_t Gate() const {
    return lowest_outstanding_.load(std::memory_order_acquire) == UINT64_MAX
               ? 0
               : last_started_.load(std::memory_order_acquire);
  }
  // ... for a request on `node` (any opcode, I/O included): its last early SETATTR or WRITE
  // outstanding.
  uint64_t NodeGate(uint64_t node) const;
  // Whether early SETATTRs are answered at all (async_setattr).
  bool setattrs() const { return setattrs_; }
  // Whether early WRITEs are answered at all (async_write).
  bool writes() const { return writes_; }
  // Whether SETATTRs that change nothing are answered (Unchanged).
  bool noop_setattrs() const { return noop_setattrs_; }
  // Whether regular files' attributes are learned (async_setattr or noop_setattrs).
  bool files() const { return files_; }
  // ... for a request that could bring or change some file's attributes by name: the last early
  // SETATTR or WRITE started.
  uint64_t NamesGate() const {
    return lowest_outstanding_.load(std::memory_order_acquire) == UINT64_MAX
               ? 0
               : last_change_.load(std::memory_order_acquire);
  }

  // A WRITE of `size` bytes at `offset` of `node` through open file `fh` may be answered now:
  // its sequence number and what it waits for in its channel (the node's early SETATTRs, and its
  // early WRITEs when it overlaps one), or nullopt when it must go the synchronous way (not
  // enabled, over the budget, an error of `fh` not yet reported, too many outstanding). The file
  // is then at least offset + size long (as Wrote).
  struct EarlyWrite {
    uint64_t seq = 0;
    uint64_t gate = 0;
  };
  std::optional<EarlyWrite> BeginWrite(uint64_t node, uint64_t fh, uint64_t offset, uint32_t size);
  // The server answered early WRITE `seq` of `size` bytes to `node` through `fh`: `error` 0, or
  // the errno it failed with (the next FLUSH or FSYNC of `fh` reports it). Returns as End does.
  [[nodiscard]] uint64_t EndWrite(uint64_t seq, uint64_t node, uint64_t fh, uint32_t size,
                                  int error);
  // What a FLUSH of open file `fh` waits for: its last early WRITE outstanding (0: none).
  uint64_t WriteGate(uint64_t fh) const;
  // The errno of the first early WRITE through `fh` that failed and was not reported yet, then
  // forgotten (0: none). Lock-free while no write failed.
  int TakeWriteError(uint64_t fh);
  // The kernel released `fh` (its RELEASE is being sent): an error not reported yet has nobody
  // left to be reported to (it was logged and counted).
  void Released(uint64_t fh);
  // Every unlink up to `gate` has been answered by the server. Lock-free.
  bool Passed(uint64_t gate) const {
    return gate == 0 || lowest_outstanding_.load(std::memory_order_acquire) > gate;
  }

  // Write to eventfd `fd` at the next End (a request gated in another worker's channel may
  // pass now). Registrations are one-shot; REQUIRES: `fd` stays open until Unregister.
  void WakeAtNextEnd(int fd);
  void Unregister(int fd);

  // The answer to a GETATTR of `dir` while early unlinks in it are outstanding (`*owed`): its
  // last attributes from the server, valid for kDirAttrsValidNs (the server's own come once
  // they are done). None once they were forgotten: the GETATTR then goes to the server, after
  // the unlinks, and no snapshot of the DirAttrCache (taken before them) may answer it.
  std::optional<fuse_attr_out> DirAttrs(uint64_t dir, bool* owed = nullptr) const;

  // An early unlink failed at the server (or ended without its answer).
  void Failed();
  void SetattrFailed() { setattrs_failed_.fetch_add(1, std::memory_order_relaxed); }
  // An early SETATTR was folded into the one before it (BackendChannel::MergeSetattr).
  void SetattrFolded() { setattrs_folded_.fetch_add(1, std::memory_order_relaxed); }

  uint64_t started() const { return started_.load(std::memory_order_relaxed); }
  uint64_t failed() const { return failed_.load(std::memory_order_relaxed); }
  uint64_t setattrs_started() const { return setattrs_started_.load(std::memory_order_relaxed); }
  uint64_t setattrs_failed() const { return setattrs_failed_.load(std::memory_order_relaxed); }
  uint64_t setattrs_folded() const { return setattrs_folded_.load(std::memory_order_relaxed); }
  uint64_t writes_started() const { return writes_started_.load(std::memory_order_relaxed); }
  uint64_t noop_setattrs_answered() const {
    return noop_setattrs_answered_.load(std::memory_order_relaxed);
  }
  uint64_t writes_failed() const { return writes_failed_.load(std::memory_order_relaxed); }
  size_t outstanding() const;
  size_t directories() const;

 private:
  struct Dir {
    fuse_attr_out attr{};
    uint64_t ticket = 0;      // of the request whose answer brought `attr`
    uint64_t floor = 0;       // Forget: answers to requests with tickets up to this are stale
    uint64_t learned_ns = 0;  // 0: no attributes (or forgotten)
    uint32_t outstanding = 0;       // early unlinks in it and early SETATTRs and WRITEs of it
    uint32_t changes = 0;           // of those, early SETATTRs and WRITEs of it
    uint64_t last_change = 0;       // the seq of the last of them (NodeGate)
    uint32_t setattrs = 0;          // of the changes, SETATTRs
    uint64_t last_setattr = 0;      // the seq of the last of them
    uint32_t writes = 0;            // of the changes, WRITEs
    uint64_t last_write = 0;        // the seq of the last of them (WriteGate)
    uint64_t write_lo = 0;          // the bytes the outstanding WRITEs cover lie in [lo, hi)
    uint64_t write_hi = 0;
    uint64_t deferred_forgets = 0;  // DeferForget
    uint32_t sync_setattrs = 0;     // SETATTRs not answered early, sent and not ended
    bool overlapped = false;        // two of them were in flight at once since it was last 0
    bool unsettled = false;         // one may still run at the server (SetattrEnded)
  };
  uint64_t StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LearnLocked(uint64_t dir, const fuse_attr_out& attr, uint64_t ticket, uint64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t EndLocked(uint64_t seq, uint64_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishLowestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PruneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Dir& FindOrAddLocked(uint64_t dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Nothing learned of `d` answers any more, nor does an answer to a request sent before now
  // (it may have run before the change).
  void UnlearnLocked(Dir& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Dir> dirs_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> outstanding_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<int> wake_ ABSL_GUARDED_BY(mu_);
  // Open files (the kernel's fh) with early WRITEs outstanding or an error of one not reported.
  struct OpenFile {
    uint32_t writes = 0;
    uint64_t last_write = 0;  // WriteGate
    int error = 0;            // TakeWriteError
    bool released = false;    // Released: errors are no longer kept
  };
  // Drops `fh`'s error (reported, or `released`: nobody left to report it to).
  void ClearErrorLocked(uint64_t fh, bool released) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::flat_hash_map<uint64_t, OpenFile> open_files_ ABSL_GUARDED_BY(mu_);
  size_t errors_held_locked_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t write_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of early WRITEs outstanding
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Directories pruned forgot everything: answers to requests sent before are stale for all.
  uint64_t pruned_floor_ ABSL_GUARDED_BY(mu_) = 0;
  // ForgetFiles: regular files' attributes learned with tickets up to this are stale.
  uint64_t files_floor_ ABSL_GUARDED_BY(mu_) = 0;
  const bool unlinks_;
  const bool setattrs_;
  const bool writes_;
  const bool noop_setattrs_;
  const bool files_;
  // Whether anything is answered early (and so ever outstanding): without, directories'
  // attributes are neither learned nor asked for.
  const bool early_;
  std::atomic<uint64_t> tickets_{0};
  std::atomic<uint64_t> last_change_{0};      // NamesGate()
  std::atomic<size_t> errors_held_{0};        // open files with an error, read without the lock
  std::atomic<uint64_t> lowest_outstanding_{UINT64_MAX};
  std::atomic<uint64_t> last_started_{0};  // Gate(): published before the unlink is answered
  std::atomic<uint64_t> started_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> setattrs_started_{0};
  std::atomic<uint64_t> setattrs_failed_{0};
  std::atomic<uint64_t> setattrs_folded_{0};
  std::atomic<uint64_t> writes_started_{0};
  std::atomic<uint64_t> noop_setattrs_answered_{0};
  std::atomic<bool> noop_safe_{false};  // SetNoopSafe
  std::atomic<uint64_t> writes_failed_{0};
};

// What the server's successful answer to a request tells `async` of attributes (a SETATTR's,
// GETATTR's, CREATE's or LOOKUP's; how far a WRITE reached). `op_in`: the request's argument
// struct; `body`: the answer's.
void LearnFromReply(AsyncRemovals& async, const fuse_in_header& header, const void* op_in,
                    size_t op_in_size, const char* body, size_t body_size, uint64_t ticket,
                    uint64_t now_ns);
// A request that may have changed a node's attributes in ways its answer does not tell was
// answered (or ended): what `async` knew of them is forgotten.
void ForgetChanged(AsyncRemovals& async, const fuse_in_header& header, const void* op_in,
                   size_t op_in_size);

}  // namespace ringfs::frontend
