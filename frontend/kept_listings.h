// Directories whose listing the kernel may keep from one opendir to the next.
// Why: a listing went to the server at every opendir, so whatever lists a directory again
// (`rm -rf`: coreutils' fts opens and reads every directory twice before removing anything;
// `git status`, `find` or `ls` run twice, make's directory scans) paid the round trips again for
// names that had not changed. The kernel can keep a directory's listing in its page cache
// (FOPEN_CACHE_DIR, the readdir cache) and keeps it across opens when the OPENDIR answer says so
// (FOPEN_KEEP_CACHE); without that flag it drops the listing at the open. Its own checks (the
// directory's i_version, bumped by changes made through this mount, and its mtime) do not see
// a name another client made that this mount never looked up: the pushed entry invalidation
// finds no dentry, and the kernel then leaves the directory alone. So this mount decides at every
// OPENDIR (answered locally, LocalDirHandles) whether the kept listing is current.
//
// When it is: every READDIR that may have filled the kernel's copy since the kernel last dropped
// it was sent after the last change of the directory this mount heard of (a pushed invalidation
// of a name in it or of the directory, a name change this mount sent), while no change of this
// mount was unsettled (one in flight may run at the server after the READDIR), and less than
// `lifetime` ago (the entry lifetime: the names' dentries and attributes, which a kept listing
// does not bring again, were given with it). Otherwise the OPENDIR is answered without
// FOPEN_KEEP_CACHE, the kernel drops what it kept, and the READDIRs of that open fill it anew.
// A READDIR still in flight at such a drop, or answered less than a second before it (the
// kernel uses an answer when its task runs again), may fill the new copy with what it read
// before: that copy is never kept.
//
// The mount keeps a listing too: the first page of the last listing read from offset 0 by a
// READDIRPLUS (Answered), replayed to a later READDIRPLUS at offset 0 (Replay) while it is
// current by the same rule as above, judged by when its READDIR was sent.
// Why: the kernel's copy is only complete once a READDIR read past the end, and `rm -rf` (whose
// first open of each directory only checks that it is not empty: one getdents, then close) never
// reads past it. Its second open then went to the server again for the same names -- one of
// the two listings per directory it waits for. The replay carries no node ids: the kernel counts
// a lookup for each entry with one (the server would never hear of those), and the names'
// dentries and attributes were given with the listing replayed, within their lifetime.
//
// Forgotten when a connection to the server is lost or re-established, when invalidations may
// have been lost (Reset, as CompleteDirs), and never used while the server pushes none
// (Disable). Fed by CompleteDirs, which hears of the same events. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

// Who a listing is read for: the server acts as the caller's uid and gid (and the groups it
// looks up for that uid).
constexpr uint64_t CallerKey(uint32_t uid, uint32_t gid) { return uint64_t{uid} << 32 | gid; }

class KeptListings {
 public:
  // `max_page_bytes`: what the answers the mount keeps itself may hold together.
  explicit KeptListings(uint64_t lifetime_ns, size_t max_dirs = 1 << 16,
                        size_t max_page_bytes = 8 << 20)
      : lifetime_ns_(lifetime_ns), max_dirs_(max_dirs), max_page_bytes_(max_page_bytes) {}

  // The largest answer the mount keeps (the kernel asks for what getdents asked, up to
  // max_pages: 32 KiB for glibc's readdir).
  static constexpr size_t kMaxPage = 128 << 10;

  // An OPENDIR of `dir` is answered at `now_ns`: whether the kernel may keep the listing it
  // holds (FOPEN_KEEP_CACHE). When not, the kernel drops it at this open, and this is recorded.
  bool KeepAtOpen(uint64_t dir, uint64_t now_ns);
  // A READDIR or READDIRPLUS of `dir` is sent at `now_ns` (its answer may fill the kernel's
  // copy); `changes_unsettled`: a change of this mount was sent and not settled
  // (CompleteDirs::unsettled). ListingEnded when it is answered, however. Returns the ticket to
  // give Answered with its answer, or 0 when its answer may not be kept. `caller`: who asked
  // (CallerKey), the only one its page is replayed to.
  uint64_t ListingSent(uint64_t dir, bool changes_unsettled, uint64_t now_ns, uint64_t caller = 0);
  void ListingEnded(uint64_t dir, uint64_t now_ns);
  // The server's answer to a READDIRPLUS of `dir` at offset 0 for `size` bytes, sent at
  // `sent_ns` with `ticket` (ListingSent): kept for Replay unless a change was heard of since.
  void Answered(uint64_t dir, uint64_t ticket, uint64_t sent_ns, uint32_t size,
                std::span<const char> reply);
  // A READDIRPLUS of `dir` at offset 0 for `size` bytes by `caller` at `now_ns`: the kept
  // answer, when current and read for the same caller (the server checked that one's
  // permission), written to `out` (room for `size` bytes) without node ids; its length. The
  // kernel may fill its copy from it as from a READDIR sent when the kept one was.
  std::optional<size_t> Replay(uint64_t dir, uint32_t size, uint64_t caller, uint64_t now_ns,
                               char* out);
  // A name in `dir` may have changed, or the directory itself: a pushed invalidation, a
  // request of this mount that changes a name in it is about to be sent, or the kernel forgot
  // the directory (its copy went with the inode).
  void Changed(uint64_t dir);
  // Nothing kept before now is current (see above).
  void Reset();
  void Disable();
  // Whether the kernel is asked to keep listings at all (FOPEN_CACHE_DIR).
  bool enabled() const;

  size_t dirs() const;
  size_t pages() const;
  size_t page_bytes() const;

 private:
  // An answer handed to the kernel is used when its task runs again: until then it may still
  // fill the kernel's copy (KernelNotifier bounds such landings by a second too).
  static constexpr uint64_t kLandingNs = 1'000'000'000;

  struct Dir {
    uint64_t changed = 0;    // seq_ when a change was last heard of
    uint64_t ended_ns = 0;   // when a READDIR's answer last went to the kernel
    uint64_t fill_from = 0;  // seq_ of the oldest READDIR that may be in the kernel's copy
    uint64_t fill_ns = 0;    // when that READDIR was sent
    uint32_t in_flight = 0;  // READDIRs sent and not answered
    bool filled = false;     // a READDIR was sent since the kernel last dropped its copy
    bool poisoned = false;   // ... while a change was unsettled, or before the drop
    // The kept answer (Answered): empty when none.
    std::string page;
    uint64_t page_ticket = 0;  // the seq_ its READDIR was sent at
    uint64_t page_ns = 0;      // ... and when
    uint32_t page_size = 0;    // the size it asked for
    uint64_t page_caller = 0;  // who it was read for
    // The last READDIR sent: its ticket and caller (an answer to another is not kept).
    uint64_t last_ticket = 0;
    uint64_t last_caller = 0;
  };
  bool CurrentLocked(const Dir& d, uint64_t from, uint64_t from_ns, uint64_t now_ns) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropPageLocked(Dir& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Dir* FindLocked(uint64_t dir, bool create) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t lifetime_ns_;
  const size_t max_dirs_;
  const size_t max_page_bytes_;
  mutable absl::Mutex mu_;
  size_t pages_ ABSL_GUARDED_BY(mu_) = 0;       // Dirs with a kept answer
  size_t page_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // ... and its bytes
  bool disabled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;  // listings sent before it are never kept
  absl::flat_hash_map<uint64_t, Dir> dirs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::frontend
