// Remembers that a node lacks one of a few extended attributes that programs ask for of every
// file, so the GETXATTR the kernel sends for it is answered by ringfs-mount (ENODATA) without a
// round trip. FUSE keeps no negative xattr cache of its own.
// The names (kAbsenceNames), and who asks for them:
//   - security.capability: the kernel, before the first write to a file and before every chown
//     of a file (cap_inode_need_killpriv). tar, rsync and cp -a paid two round trips per file
//     for it (issue 13: 1.9 of 10.5 requests per extracted file).
//   - security.selinux and system.posix_acl_access: `ls -l` (coreutils), for every file it
//     lists, to print a '.' or '+' after the mode: two round trips per listed file.
//   - system.posix_acl_default: the same programs, of directories.
// Learned from the server's ENODATA answers, and for security.capability alone from this mount's
// exclusive creates (a new file has no file capability; it may inherit an ACL from its directory's
// default ACL, and the server's kernel may label it). Forgotten, every name of the node at once,
// when this mount sends a SETXATTR for the node, when the server pushes an invalidation of the node
// (another mount changed it), and after `lifetime` (the attribute lifetime: an attribute set on
// the server directly is seen as late as a mode change). A chmod does not make an ACL appear,
// and a REMOVEXATTR only makes an absence truer, so neither forgets anything.
// Race: an ENODATA answer (or a create) is remembered only if the node was not forgotten since
// its request was sent (a ticket taken at send time), so a concurrent setcap or setfacl is never
// hidden.
// Thread-safe: shared by every channel of the mount.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

inline constexpr std::string_view kCapabilityXattr = "security.capability";
// Index 0 is kCapabilityXattr.
inline constexpr std::array<std::string_view, 4> kAbsenceNames = {
    kCapabilityXattr, "security.selinux", "system.posix_acl_access", "system.posix_acl_default"};

class XattrAbsenceCache {
 public:
  XattrAbsenceCache(uint64_t lifetime_ns, size_t max_nodes = 1 << 16)
      : lifetime_ns_(lifetime_ns), max_nodes_(max_nodes) {}

  // `name`'s index in kAbsenceNames, or -1: an attribute whose absence is not remembered.
  static int IndexOf(std::string_view name);
  // Whether GETXATTR `name` of `nodeid` can be answered ENODATA here.
  bool KnownAbsent(uint64_t nodeid, std::string_view name, uint64_t now_ns) const;
  // Taken when a GETXATTR of one of kAbsenceNames, or a create, is sent to the server; never 0.
  uint64_t Ticket() const;
  // The server answered ENODATA to a GETXATTR of kAbsenceNames[name] sent with `ticket`.
  void RecordAbsent(uint64_t nodeid, int name, uint64_t ticket, uint64_t now_ns);
  // This mount created `nodeid` with a request sent with `ticket` (an exclusive CREATE, MKNOD,
  // MKDIR or SYMLINK answered by the server): it has no security.capability. A CREATE without
  // O_EXCL may have opened a file that was there, capability and all, so it teaches nothing.
  void RecordCreated(uint64_t nodeid, uint64_t ticket, uint64_t now_ns);
  // The node's attributes may have changed in a way that matters (SETXATTR, an invalidation).
  void Drop(uint64_t nodeid);
  // Invalidations may have been lost (KernelNotifier::ResetKernelCaches): forget every absence,
  // and refuse to record the answers of GETXATTRs sent before.
  void Reset();

  size_t size() const;

 private:
  // Until when each of kAbsenceNames is known absent (0: not known).
  using Expiries = std::array<uint64_t, kAbsenceNames.size()>;

  void InsertLocked(uint64_t nodeid, int name, uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetDropsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t lifetime_ns_;
  const size_t max_nodes_;
  mutable absl::Mutex mu_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t floor_ ABSL_GUARDED_BY(mu_) = 1;  // tickets below it predate a reset: refused
  absl::flat_hash_map<uint64_t, Expiries> absent_until_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint64_t> dropped_at_ ABSL_GUARDED_BY(mu_);    // node -> seq
};

}  // namespace ringfs::frontend
