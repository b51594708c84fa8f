// Entries the kernel forgot that ringfs-mount keeps, so that looking the same name up again
// costs no round trip.
// Why: the kernel forgets inodes it evicts (memory pressure, drop_caches, a large tree walked
// once), and every later access to such a name costs a LOOKUP first: an `rm` or `unlink` of files
// made a while ago paid two round trips each (LOOKUP, UNLINK), a stat pass over them one. sshfs
// keeps such entries in its own cache, without coherence; this keeps them coherently.
//
// How it stays right:
//  - The kernel's FORGET of a kept node is withheld (its lookups are kept here): the server keeps
//    the node, and its directory, in this client's table, so every change another client or the
//    export makes to the name is still pushed here (pushed entry invalidations drop the name).
//  - Names this mount changes are dropped before the request leaves (DropName, from the same
//    place CompleteDirs records them).
//  - A kept entry's attributes are those of the server's reply, valid as long as the server
//    said (attr_valid), and only while nothing changed the node since: a push about it, or any
//    request of this mount that may change it (Changed: writes, attribute and xattr changes,
//    names made in it, a change to one of its names; for files with several links, a change to
//    any name this mount did not record). A file is kept only while its attributes are known:
//    without them the kernel would ask the server for them right after the answer, which costs
//    more than the LOOKUP it saves (its lookups go back as soon as they are not known). A
//    directory is kept without them (handed back with attr_valid 0): keeping it keeps its node
//    id, so the names recorded in it stay usable, and one GETATTR serves all its children. A
//    node id never changes type, and the server never hands the same id out twice.
//  - An entry is recorded only when nothing could have changed it while its reply travelled: no
//    push about its directory or node since the request was sent (a ticket, as in
//    CompleteDirs), and no change of this mount unsettled meanwhile other than the request
//    itself (CompleteDirs::ChangeTicket/Quiet).
//  - Everything is dropped, and its lookups returned, on a lost or new connection, when the
//    notifier loses a push, at the entry lifetime, and past the bound.
//  - A push that reaches the kernel between an answer and the kernel building its inode finds
//    nothing to invalidate; the notifier writes it again while answers may be landing
//    (KernelNotifier), so answers keep their whole lifetime, name and attributes.
// Kept lookups of an entry that is dropped are returned: TakeReturns() hands them to a worker,
// which sends them to the server as FORGETs (on its next request or its channel's tick).
// Thread-safe: shared by every worker of the mount and the notifier; one short lock per call.
#pragma once

#include <linux/fuse.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

class KeptEntries {
 public:
  // `max_entries`: names recorded at once (expired ones are pruned first; beyond it nothing new
  // is recorded).
  explicit KeptEntries(size_t max_entries = 1 << 16) : max_entries_(max_entries) {}

  // Taken when a request that answers with an entry (LOOKUP, CREATE, MKNOD, MKDIR, SYMLINK) is
  // sent; 0 while disabled.
  uint64_t Ticket() const;
  // The server answered `name` in `dir` with `entry` (node id not 0) for a request sent with
  // `ticket`; `quiet`: no name-space change of this mount but the request itself was unsettled
  // meanwhile. Ignored when not quiet, for ticket 0, or when anything was heard of `dir` (or a
  // reset) since the ticket.
  void Record(uint64_t dir, std::string_view name, const fuse_entry_out& entry, uint64_t ticket,
              bool quiet, uint64_t now_ns);

  // The kernel forgets `nlookup` lookups of `node`: true when they are kept here (the FORGET is
  // not sent), which needs a recorded, unexpired name of it and its attributes.
  bool Keep(uint64_t node, uint64_t nlookup, uint64_t now_ns);
  // A LOOKUP of `name` in `dir`: when a kept entry answers it, fills `out` (attributes for what
  // is left of their lifetime) and hands one kept lookup back to the kernel.
  bool Answer(uint64_t dir, std::string_view name, uint64_t now_ns, fuse_entry_out* out);

  // A request of this mount that may change `node` is about to be sent: its attributes are no
  // longer known.
  void Changed(uint64_t node);
  // `name` in `dir` may change: a request of this mount is about to, or a push says it did.
  void DropName(uint64_t dir, std::string_view name);
  // `node` changed, and any name in it may have (a push of its attributes).
  void DropNode(uint64_t node);
  // The server no longer knows `node` (ESTALE): no name leads to it any more.
  void Gone(uint64_t node);
  // The server answered that `name` in `dir` leads nowhere (a negative LOOKUP): a name recorded
  // for it is stale (the export changed behind the server's back).
  void NoEntry(uint64_t dir, std::string_view name);
  // Nothing is known any more, and tickets taken before now are refused.
  void Reset();
  // Reset, and nothing is recorded again (the server does not push invalidations).
  void Disable();

  // Whether TakeReturns has work: lookups to return, or entries that may have expired.
  bool HasReturns(uint64_t now_ns) const {
    return returns_pending_.load(std::memory_order_relaxed) ||
           now_ns >= next_sweep_ns_.load(std::memory_order_relaxed);
  }
  // The kept lookups of entries dropped or expired, for FORGETs to the server.
  std::vector<fuse_forget_one> TakeReturns(uint64_t now_ns);

  size_t entries() const;  // names recorded
  uint64_t kept() const;   // lookups kept (FORGETs withheld)
  uint64_t sweeps() const;  // walks over every name to drop the expired ones

 private:
  struct Name {
    uint64_t node = 0;
    uint64_t generation = 0;
    uint64_t expires_ns = 0;
  };
  using Key = std::pair<uint64_t, std::string>;  // directory, name
  struct Node {
    uint64_t kept = 0;      // lookups the kernel forgot and the server was not told of
    std::vector<Key> keys;  // its recorded names (hard links: more than one); never empty
    fuse_attr attr{};
    uint64_t attr_expires_ns = 0;  // 0: not known
  };

  // Remembers that `id` (a directory or node) changed, so a ticket taken before is refused, and
  // forgets its attributes.
  void TouchLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Its attributes are no longer known: what is kept of it goes back (see Keep).
  void ForgetAttrLocked(uint64_t node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReturnKeptLocked(uint64_t id, Node& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(uint64_t dir, std::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepLocked(uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_entries_;
  mutable absl::Mutex mu_;
  bool disabled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;  // tickets below it are refused
  uint64_t kept_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t sweeps_ ABSL_GUARDED_BY(mu_) = 0;
  // No recorded name expires before it (names erased otherwise may have): while the table is
  // full, no sweep before then can make room.
  uint64_t earliest_expiry_ns_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
  uint64_t next_full_sweep_ns_ ABSL_GUARDED_BY(mu_) = 0;  // a second after the last sweep
  absl::flat_hash_map<Key, Name> names_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<std::string>> by_dir_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> touched_ ABSL_GUARDED_BY(mu_);  // id -> seq
  // Nodes with known attributes and more than one link: a change to a name this mount did not
  // record may be one of theirs.
  absl::flat_hash_set<uint64_t> linked_ ABSL_GUARDED_BY(mu_);
  std::vector<fuse_forget_one> returns_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> returns_pending_{false};
  std::atomic<uint64_t> next_sweep_ns_{UINT64_MAX};
};

}  // namespace ringfs::frontend
