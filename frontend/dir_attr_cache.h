// Post-operation directory attributes the server sent with create/remove/rename replies
// (common/dir_attrs.h), kept until the kernel asks for that directory's attributes once.
// Shared by all workers of a mount: the GETATTR that follows a create may arrive on another
// queue than the create's reply. Thread-safe; the lock is held only for a map operation.
#pragma once

#include <linux/fuse.h>
#include <time.h>

#include <atomic>
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

// What a request sent to the server makes stale among write records (write attrs, OfferWrite),
// decided once from the request when it is sent (the forwarder's WritesVoided). It is applied
// then, and again when the request ends: requests on different connections run at the server
// in any order, so a WRITE sent after it may have been stat'ed before it ran.
struct RecordsVoided {
  uint64_t dropped = 0;  // a node whose records go (Drop); 0: none
  uint64_t read = 0;     // a node read: relatime may move its atime (Read); 0: none
  bool names = false;    // a name removed or moved, or a file maybe truncated (NamesChanged)
};

class DirAttrCache {
 public:
  explicit DirAttrCache(size_t max_entries = 4096) : max_entries_(max_entries) {}

  // Remembers `attr` of `nodeid`, received at `now_ns`, until attr_valid has passed. Attributes
  // older than the ones already held (by ctime) are ignored: replies on different
  // connections may arrive out of order.
  void Offer(uint64_t nodeid, const fuse_attr_out& attr, uint64_t now_ns);

  // A listing's record (listing attrs, common/dir_attrs.h) changed nothing, and its answer may
  // arrive after this mount learned of a newer state of the directory that left nothing here
  // to compare with: a change's record already taken, a chmod sent (Drop), a pushed
  // invalidation, a reset. So each listing takes a ticket before it is sent, every such event
  // raises a floor, and a record whose ticket is below its node's floor is ignored. Floors are
  // kept per stripe of node ids (kStripes): a collision only refuses a record.
  uint64_t Ticket();
  // Kept for kShortKeepNs at most (the stat that follows a listing comes at once; an unused
  // record must not crowd out the records of changes), answered with attr_valid as it came.
  void OfferListing(uint64_t nodeid, const fuse_attr_out& attr, uint64_t ticket, uint64_t now_ns);
  // A WRITE's record of its file (write attrs, common/dir_attrs.h), or an OPEN's (open attrs:
  // the file as the open found it, which also changed nothing), under the same ticket rule
  // and keep as a listing's, and also refused after NamesChanged. Writes of one file may be
  // answered out of order: a record older than the one held (by change time, then size, then
  // blocks: a write never shrinks a file, and the other changes drop the record) is ignored.
  // `reads` is Reads(nodeid) when the write was sent: a READ sent since (Read) voids the record's
  // atime.
  void OfferWrite(uint64_t nodeid, const fuse_attr_out& attr, uint64_t ticket, uint32_t reads,
                  uint64_t now_ns);
  // A READ (or a copy's source) of `nodeid` is being sent: under relatime the first read after
  // a write moves the file's atime, which no write record saw. Lock-free (every READ passes
  // here): a counter per stripe of node ids, compared when a write record would answer.
  void Read(uint64_t nodeid) { reads_[StripeOf(nodeid)].fetch_add(1); }
  uint32_t Reads(uint64_t nodeid) const { return reads_[StripeOf(nodeid)].load(); }

  // The attributes of `nodeid` if still valid, and forgets them: each post-op snapshot answers
  // at most one GETATTR, so the kernel's own attr cache stays the only long-lived copy. Called
  // for every plain GETATTR, answered here or not.
  std::optional<fuse_attr_out> Take(uint64_t nodeid, uint64_t now_ns);

  // The directory was changed by a request without post-op attributes (SETATTR, xattrs): when
  // it is sent, and again when its answer arrives (a listing forwarded meanwhile may have run
  // before it at the server).
  void Drop(uint64_t nodeid);
  // A change of the directory was answered: listings forwarded before it are refused (its own
  // record, when the server sent one, went through Offer).
  void Changed(uint64_t nodeid);
  // A name was removed or moved (UNLINK, RMDIR, RENAME, a pushed entry invalidation), or a
  // create may have truncated an existing file: the node it named is not known here, and its
  // link count or change time moved. Every write record goes, and none sent before is taken.
  void NamesChanged();
  // Invalidations may have been lost (KernelNotifier::ResetKernelCaches): forget everything.
  void Reset();
  void Apply(const RecordsVoided& voided);

  // A change that may have reached the server ended without its answer (a deadline, an
  // interrupt, a lost connection): it may still run there at any moment, after any record taken
  // from now on, and no request names what it changes. Everything held goes, and no record is
  // kept until Settle has been called as often (its late answer was read, or the channel
  // decided it never runs). Records of requests sent meanwhile are refused after that too.
  void Unsettle();
  void Settle(uint64_t count = 1);

  size_t size() const;

 private:
  static constexpr size_t kStripes = 256;
  static constexpr uint64_t kShortKeepNs = 1'000'000'000;

  enum class Kind { kChange, kListing, kWrite };
  struct Entry {
    fuse_attr_out attr;
    uint64_t expires_ns;  // the attributes' own lifetime: what an answer may still give
    uint64_t keep_ns;     // until when the entry may answer (listing and write records: sooner)
    Kind kind;
    uint32_t reads = 0;  // a write record's Reads() when its write was sent
  };
  void PruneLocked(uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertLocked(uint64_t nodeid, const fuse_attr_out& attr, uint64_t now_ns, uint64_t valid_ns,
                    Kind kind, uint32_t reads = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool BelowFloorLocked(uint64_t nodeid, uint64_t ticket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Something newer than any listing sent so far is known of `nodeid`.
  void RaiseFloorLocked(uint64_t nodeid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static size_t StripeOf(uint64_t nodeid) {
    return static_cast<size_t>((nodeid * 0x9e3779b97f4a7c15ull) >> 56) % kStripes;
  }

  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t floors_[kStripes] ABSL_GUARDED_BY(mu_) = {};
  uint64_t global_floor_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t write_floor_ ABSL_GUARDED_BY(mu_) = 0;  // NamesChanged
  size_t write_records_ ABSL_GUARDED_BY(mu_) = 0;  // entries of Kind::kWrite
  uint64_t unsettled_ ABSL_GUARDED_BY(mu_) = 0;    // Unsettle calls not yet settled
  std::atomic<uint32_t> reads_[kStripes] = {};
};

}  // namespace ringfs::frontend
