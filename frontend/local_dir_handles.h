// Directory handles ringfs-mount hands out itself (handle-less listings, proto/wire_format.md):
// when the server lists a directory by its node from the export's own cookie, an OPENDIR needs
// nothing from it, so the mount answers OPENDIR with a handle of its own (bit 63 set, which no
// server handle has) and RELEASEDIR of one without a round trip, and sends the requests that
// carry one with fh 0. That is one round trip of the two every small directory's listing waited
// for (`ls`, `find`, `git status`), and two of the five per directory of `rm -rf`, whose fts
// opens each directory twice.
//
// What it changes, as on NFS (whose OPEN of a directory sends nothing either): permission to
// read the directory is checked by the server at each READDIR instead of at opendir(), so an
// opendir() the server would refuse (root squashed, removed through another client) fails at
// the first readdir() instead, and a directory made unreadable after opendir() stops listing.
// A server without the feature (an older one reached after a restart) gets fh 0 and refuses
// the listing: only directories opened while the feature was on.
//
// Membership, not the bit alone, makes a handle local: a server that did not grant the feature
// may hand out handles with bit 63 set, and those must reach it unchanged.
// Thread-safe: any worker hands out, looks up and releases handles.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

class LocalDirHandles {
 public:
  // A new handle (bit 63 set), unlike any other this mount has open (DirEnds keys listings by
  // it).
  uint64_t Open();
  // Whether `fh` is one of ours and still open.
  bool IsLocal(uint64_t fh) const;
  // RELEASEDIR of `fh`: true (and forgotten) when it is ours, answered without the server.
  bool Release(uint64_t fh);

  // In a request about to be sent (its argument struct `op_in`, `op_in_size` bytes, which stay
  // the caller's until it is answered): a local handle becomes fh 0 in READDIR, READDIRPLUS and
  // FSYNCDIR, and a SETATTR through one no longer names it (FATTR_FH cleared: the server changes
  // the node). Everything else is left alone.
  void ForServer(uint32_t opcode, char* op_in, size_t op_in_size) const;

  size_t open_count() const;

 private:
  // The fh at `at` in `op_in` if it is a local handle; then it is zeroed.
  bool ZeroLocalFh(char* op_in, size_t op_in_size, size_t at) const;

  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_set<uint64_t> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::frontend
