// Remembers that a node has no `security.capability` extended attribute, so the GETXATTR the
// kernel sends for it is answered by ringfs-mount (ENODATA) without a round trip.
// Why: the kernel asks for security.capability before the first write to a file and before
// every chown of a file (cap_inode_need_killpriv), and FUSE keeps no negative xattr cache of its
// own. tar, rsync and cp -a pay two round trips per file for it (issue 13: 1.9 of 10.5 requests
// per extracted file).
// Learned from the server's ENODATA answers and from this mount's creates (a new file has no
// file capability). Forgotten when this mount sends a SETXATTR for the node, when the server
// pushes an invalidation of the node (another mount changed it), and after `lifetime` (the
// attribute lifetime: a capability set on the server directly is seen as late as a mode change).
// Race: an ENODATA answer is remembered only if the node was not forgotten since its GETXATTR
// was sent (a ticket taken at send time), so a concurrent setcap is never hidden.
// Thread-safe: shared by every channel of the mount.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

inline constexpr std::string_view kCapabilityXattr = "security.capability";

class XattrAbsenceCache {
 public:
  XattrAbsenceCache(uint64_t lifetime_ns, size_t max_nodes = 1 << 16)
      : lifetime_ns_(lifetime_ns), max_nodes_(max_nodes) {}

  // Whether GETXATTR `name` of `nodeid` can be answered ENODATA here.
  bool KnownAbsent(uint64_t nodeid, std::string_view name, uint64_t now_ns) const;
  // Taken when a GETXATTR of kCapabilityXattr is sent to the server; never 0.
  uint64_t Ticket() const;
  // The server answered ENODATA to a GETXATTR sent with `ticket`.
  void RecordAbsent(uint64_t nodeid, uint64_t ticket, uint64_t now_ns);
  // This mount created `nodeid` (CREATE, MKNOD, MKDIR, SYMLINK answered by the server).
  void RecordCreated(uint64_t nodeid, uint64_t now_ns);
  // The node's attributes may have changed in a way that matters (SETXATTR, an invalidation).
  void Drop(uint64_t nodeid);
  // Invalidations may have been lost (KernelNotifier::ResetKernelCaches): forget every absence,
  // and refuse to record the answers of GETXATTRs sent before.
  void Reset();

  size_t size() const;

 private:
  void InsertLocked(uint64_t nodeid, uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetDropsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t lifetime_ns_;
  const size_t max_nodes_;
  mutable absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;  // tickets below it predate a reset: refused
  absl::flat_hash_map<uint64_t, uint64_t> absent_until_ ABSL_GUARDED_BY(mu_);  // node -> expiry
  absl::flat_hash_map<uint64_t, uint64_t> dropped_at_ ABSL_GUARDED_BY(mu_);    // node -> seq
};

}  // namespace ringfs::frontend
