// Confinement primitives: the only ways the server turns client-supplied names into files.
// A name is always one validated component resolved under a directory fd with
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) and O_NOFOLLOW, so no request can reach
// outside the export, and a symlink in the export is never followed. Reopening a node goes
// through /proc/self/fd of the server's own O_PATH fd (not client path resolution).
// Stateless; callable from any thread.
#pragma once

#include <sys/stat.h>

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringfs::server {

// A NUL-terminated copy of one component (the decoder already limited it to 255 bytes).
class NameBuffer {
 public:
  explicit NameBuffer(std::string_view name);
  const char* c_str() const { return buf_; }

 private:
  char buf_[256];
};

// openat2(parent_fd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode) with RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS. REQUIRES: `name` is a single component (no '/', not "..").
absl::StatusOr<UniqueFd> OpenBeneath(int parent_fd, std::string_view name, int flags,
                                     mode_t mode = 0);

// An O_PATH fd of `name` in `parent_fd`; a symlink is returned as itself.
absl::StatusOr<UniqueFd> LookupBeneath(int parent_fd, std::string_view name);

// "/proc/self/fd/<fd>".
std::string ProcFdPath(int fd);

// chmod of the file behind `fd` (an O_PATH fd too, where fchmod fails): fchmodat2 with
// AT_EMPTY_PATH (Linux 6.6), else chmod of its /proc/self/fd link, a path walk through procfs
// per call. Returns 0, or -1 with errno set.
int ChmodFd(int fd, mode_t mode);

// Opens the file behind our O_PATH fd for I/O. O_CREAT, O_EXCL, O_NOCTTY and O_NOFOLLOW are
// dropped (the path is a magic link we made ourselves); symlinks fail with ELOOP.
absl::StatusOr<UniqueFd> Reopen(int path_fd, int flags);

// An O_PATH fd for the file an open fd refers to.
absl::StatusOr<UniqueFd> PathFdOf(int open_fd);

// lstat-like stat of the file behind any fd (O_PATH included), never following.
absl::StatusOr<struct stat> StatFd(int fd);

// Whether `fd`'s filesystem is one this host alone changes (ext4, xfs, btrfs, tmpfs, f2fs, zfs,
// bcachefs), where an inode held open keeps its number from any other file. On NFS, CephFS,
// Lustre, GPFS, SMB or FUSE another host may delete a file this server holds and make a new one
// with the same number: there only a handle (name_to_handle_at) tells them apart.
bool InodeNumbersHeldLocally(int fd);

}  // namespace ringfs::server
