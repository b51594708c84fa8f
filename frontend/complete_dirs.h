// Directories whose every name this mount knows, so that a LOOKUP of a name that is not among
// them is answered "no such entry" by ringfs-mount without a round trip.
// Why: creating a file costs the kernel a LOOKUP of the new name before the CREATE, even with
// O_EXCL (fuse_atomic_open looks the name up first), and the kernel keeps negative dentries only
// for names it has looked up. tar, rsync, cp -r and git checkout create thousands of names in
// directories they have just made: one round trip in three per created file was that LOOKUP.
// CephFS answers such lookups the same way from a directory it holds "complete".
//
// When a directory is known complete: the server found it empty at a moment from which every
// name made in it elsewhere is pushed here (a trailer, common/dir_attrs.h), and nothing about it
// was heard between sending the request and its answer (a ticket, as in XattrAbsenceCache). Two
// requests carry that word:
//  - MKDIR: the new directory was still empty once it was in this client's node table;
//  - LOOKUP answered "no such entry": its directory (already in the table, as the kernel holds
//    it) was empty. Here this mount's own requests matter too: a CREATE sent earlier on another
//    connection may not have run yet when the server looked, and the server pushes nothing back
//    to the client that made a change. So a LOOKUP's word counts only when no request of this
//    mount that changes anything (fuse::ChangesNothing is false) was unsettled (sent, its answer
//    not yet read from the server) from the moment the LOOKUP was sent to its answer
//    (BeginChange/EndChange).
// From then on its names are those this mount created, linked or renamed into it (recorded
// when the request is sent, before the server can answer) and those another client or a
// process on the server changed (pushed entry invalidations): any name recorded is "maybe
// present" and goes to the server. Recorded names are never removed; only the whole directory
// is forgotten.
// When the knowledge ends: after `lifetime` (the entry lifetime: a name created on the export
// without the server's export watch is missed for as long as a kernel negative dentry would miss
// it), when the kernel forgets the directory, when the server pushes an attribute invalidation
// of it, when a connection to the server is lost or re-established (pushes may have been lost
// meanwhile), when the notifier's queue overflows, and for a directory that outgrows the bounds.
// Only used while the server pushes invalidations (Disable() otherwise).
// Thread-safe: shared by every channel of the mount and the notifier; one short lock per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "frontend/kept_listings.h"

namespace ringfs::frontend {

class CompleteDirs {
 public:
  // `max_names`: names recorded over all directories; a directory whose next name would pass it
  // is forgotten. `max_dirs`: directories tracked at once (expired ones are pruned first).
  // `listing_lifetime_ns`: how long the kernel may keep a listing (KeptListings); 0: never.
  explicit CompleteDirs(uint64_t lifetime_ns, size_t max_dirs = 4096, size_t max_names = 1 << 18,
                        uint64_t listing_lifetime_ns = 0)
      : lifetime_ns_(lifetime_ns),
        max_dirs_(max_dirs),
        max_names_(max_names),
        listings_(listing_lifetime_ns) {}

  // Whether LOOKUP of `name` in `dir` can be answered "no such entry" at `now_ns`: 0 when not,
  // else for how many more nanoseconds the knowledge holds (the kernel may keep the answer that
  // long, no longer). Names longer than NAME_MAX are never answered (the server's ENAMETOOLONG).
  uint64_t KnownAbsent(uint64_t dir, std::string_view name, uint64_t now_ns) const;

  // Taken when a MKDIR is sent to the server; 0 while disabled.
  uint64_t Ticket() const;
  // Taken when a LOOKUP is sent; 0 (no word will count) while disabled or while a change is
  // unsettled (BeginChange).
  uint64_t LookupTicket() const;
  // The MKDIR sent with `ticket` made `dir`, and the server found it empty. Ignored for ticket 0,
  // or when anything about `dir` was heard, or the cache was reset, since the ticket was taken.
  // Names already recorded for `dir` are kept.
  void RecordCreated(uint64_t dir, uint64_t ticket, uint64_t now_ns);
  // A LOOKUP in `dir` sent with `ticket` found no entry, and the server found `dir` empty. As
  // RecordCreated, and also ignored when a change was sent since the ticket, or one is still
  // unsettled.
  void RecordFoundEmpty(uint64_t dir, uint64_t ticket, uint64_t now_ns);
  // A request that may change something (not fuse::ChangesNothing, or an OPEN with O_TRUNC) is
  // sent / settled: its answer was read from the server, or it never reached it. One that
  // reached a server and got no answer stays unsettled until the channel reaches another server
  // process, or for a grace period (60 s) after the same one is reached again.
  void BeginChange();
  void EndChange(uint64_t count = 1);
  // For other caches that must know that no change of this mount raced a reply
  // (KeptEntries): taken before a request is sent (0 while any change is unsettled), and checked
  // once its answer was settled: nothing unsettled, and no change sent since the ticket but the
  // request itself (`self`: it is one).
  uint64_t ChangeTicket() const;
  bool Quiet(uint64_t ticket, bool self) const;
  // `name` may now exist in `dir`: this mount is about to send a request that may create it, or
  // another client or the export changed it (a pushed entry invalidation).
  void AddName(uint64_t dir, std::string_view name);
  // Nothing is known about `dir` any more (the kernel forgot it; its attributes changed).
  void Drop(uint64_t dir);
  // Nothing is known about any directory, and tickets taken before now are refused: a lost or
  // new connection, or a lost invalidation.
  void Reset();
  // Reset, and never known again (the server does not push invalidations).
  void Disable();

  // Listings the kernel may keep across opens (KeptListings), told of every event above that
  // changes a directory's names; a READDIR sent is judged by the changes unsettled now.
  bool ListingsKept() const { return listings_.enabled(); }
  bool KeepListingAtOpen(uint64_t dir, uint64_t now_ns) {
    return listings_.KeepAtOpen(dir, now_ns);
  }
  // KeptListings::ListingSent's ticket.
  uint64_t ListingSent(uint64_t dir, uint64_t now_ns, uint64_t caller = 0);
  void ListingEnded(uint64_t dir, uint64_t now_ns) { listings_.ListingEnded(dir, now_ns); }
  // The first page of a listing kept by the mount itself (KeptListings::Answered, Replay).
  void ListingAnswered(uint64_t dir, uint64_t ticket, uint64_t sent_ns, uint32_t size,
                       std::span<const char> reply) {
    listings_.Answered(dir, ticket, sent_ns, size, reply);
  }
  std::optional<size_t> ReplayListing(uint64_t dir, uint32_t size, uint64_t caller, uint64_t now_ns,
                                      char* out) {
    return listings_.Replay(dir, size, caller, now_ns, out);
  }
  // A name change of this mount in `dir` is sent (a removal: AddName records the others), or
  // ended, however.
  void ListingChanged(uint64_t dir) { listings_.Changed(dir); }
  size_t listed_dirs() const { return listings_.dirs(); }
  size_t kept_pages() const { return listings_.pages(); }

  size_t dirs() const;   // directories known complete (expired ones included until pruned)
  size_t names() const;  // names recorded in them
  uint64_t prunes() const;     // walks over every directory to drop the expired ones
  uint64_t unsettled() const;  // changes sent and not settled

 private:
  struct Dir {
    uint64_t expires_ns = 0;
    absl::flat_hash_set<std::string> names;
  };
  // Remembers that `dir` was heard of, so a ticket taken before is refused.
  void TouchLocked(uint64_t dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordLocked(uint64_t dir, uint64_t ticket, uint64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(absl::flat_hash_map<uint64_t, Dir>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResetLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t lifetime_ns_;
  const size_t max_dirs_;
  const size_t max_names_;
  mutable absl::Mutex mu_;
  bool disabled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;  // tickets below it are refused
  size_t names_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t prunes_ ABSL_GUARDED_BY(mu_) = 0;
  // No directory known expires before it (those erased otherwise may have): while the table is
  // full, no prune before then can make room.
  uint64_t earliest_expiry_ns_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
  uint64_t next_prune_ns_ ABSL_GUARDED_BY(mu_) = 0;  // a second after the last prune
  uint64_t unsettled_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_change_ ABSL_GUARDED_BY(mu_) = 0;  // seq_ when the last one was sent
  uint64_t begun_ ABSL_GUARDED_BY(mu_) = 0;  // name-space changes sent, ever
  absl::flat_hash_map<uint64_t, Dir> dirs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> touched_ ABSL_GUARDED_BY(mu_);  // dir -> seq
  KeptListings listings_;  // its own lock, never taken under mu_
};

}  // namespace ringfs::frontend
