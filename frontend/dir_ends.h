// Where the listing of each open directory ends, so that the READDIR the kernel sends after the
// last entry (it only learns of the end from an empty answer) is answered here, empty, without a
// round trip: one of the three a small directory's listing waits for (OPENDIR, READDIRPLUS, that
// READDIR), and one per directory of `rm -rf` and `find`.
//
// Why the answer is the server's: ringfs-server serves a directory handle's listing from a
// snapshot it takes at offset 0 (server/ops_dir.cc), entry i having cookie i + 1, and fills an
// answer until the next entry does not fit (proto/wire_format.md, "Replies"). An answer with room
// left for the longest possible entry therefore holds the snapshot's last entry, and a READDIR of
// the same handle at that entry's cookie gets nothing until a READDIR at offset 0 takes a new
// snapshot -- whose answer this learns from again. (A server that lost the handle, restarted
// and reclaimed, takes a new snapshot wherever the next READDIR starts: it could list entries
// made since. Not listing them is what POSIX allows for entries added after opendir/rewinddir.)
// A handle-less listing (frontend/local_dir_handles.h) has no snapshot: each READDIR reads the
// directory itself from the export's cookie, so such an answer says the directory ended there
// when the server read it, and answering the next READDIR empty leaves out only names made
// after that -- the same allowance.
//
// Keyed by the kernel's file handle; forgotten at RELEASEDIR. Past 65,536 open directories the
// ones beyond are not learned (their ends go to the server, as before). Thread-safe: a
// directory's requests reach any queue (the kernel serializes them per open file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

// The longest name the kernel takes in a listing (FUSE_NAME_MAX in fs/fuse/fuse_i.h, not in the
// uapi header); a Linux export never has names over 255 bytes.
inline constexpr size_t kListingNameMax = 1024;

class DirEnds {
 public:
  explicit DirEnds(size_t max_handles = 1 << 16) : max_handles_(max_handles) {}

  // Whether a READDIR/READDIRPLUS of `fh` at `offset` lies at its listing's known end.
  bool AtEnd(uint64_t fh, uint64_t offset) const;

  // A READDIR (`plus`: READDIRPLUS) of `fh` at `offset` for `size` bytes goes to the server as
  // request `unique`. The kernel sends one at a time per open directory (a killed caller's may
  // still be out when the next comes: the unique tells them apart).
  void Asking(uint64_t fh, uint64_t unique, uint64_t offset, uint32_t size, bool plus);

  // The answer to request `unique` of `fh`: `error` (a positive errno, or 0 with the entries in
  // `reply`). Any error forgets the end.
  void Learn(uint64_t fh, uint64_t unique, int error, std::span<const char> reply);

  // The mount answered a READDIR of `fh` at `offset` for `size` bytes itself with `reply`, filled
  // as the server fills its answers (KeptListings::Replay): learned as Asking, then Learn.
  void Answered(uint64_t fh, uint64_t offset, uint32_t size, bool plus,
                std::span<const char> reply);

  // RELEASEDIR of `fh`: the server may reuse the number.
  void Released(uint64_t fh);

  size_t size() const;

 private:
  struct Handle {
    bool known_end = false;
    uint64_t end = 0;  // the last cookie of the listing
    // The READDIR out at the server, if any.
    uint64_t unique = 0;
    uint64_t offset = 0;
    uint32_t size = 0;
    bool plus = false;
  };
  // `fh`'s entry, added if absent; nullptr when the table is full.
  Handle* FindOrAddLocked(uint64_t fh) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_handles_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Handle> handles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::frontend
