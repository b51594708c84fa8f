// Kernel file handles (name_to_handle_at / open_by_handle_at): what a node is remembered by
// while its fd is closed. A handle names one inode for its whole life, deleted files included
// (the kernel answers ESTALE for them), so it can be reopened without any path resolution.
// Opening needs CAP_DAC_READ_SEARCH and a non-O_PATH fd of the same mount ("mount fd").
// Stateless; callable from any thread.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringfs::server {

struct InodeHandle {
  int type = 0;        // file_handle.handle_type
  std::string bytes;   // file_handle.f_handle, opaque (at most MAX_HANDLE_SZ bytes)
  int mount_id = 0;    // the mount the handle was taken on; not part of the file's identity

  // Same file (type and bytes); handles include the inode's generation, so a reused inode
  // number gives a different handle.
  bool SameFile(const InodeHandle& other) const {
    return type == other.type && bytes == other.bytes;
  }
};

// The handle of the file behind `fd` (O_PATH included; a symlink is itself). EOPNOTSUPP when
// the filesystem cannot export handles.
absl::StatusOr<InodeHandle> HandleOf(int fd);

// An O_PATH fd of the file `handle` names, opened on the mount of `mount_fd`. ESTALE when the
// file no longer exists; EPERM without CAP_DAC_READ_SEARCH.
absl::StatusOr<UniqueFd> OpenByHandle(int mount_fd, const InodeHandle& handle);

// The fd open_by_handle_at wants as its mount fd, for the export root `export_fd` (O_PATH):
// the same directory opened O_RDONLY, because the kernel refuses O_PATH fds there.
absl::StatusOr<UniqueFd> OpenMountFd(int export_fd);

// Whether handles work on the export: takes the root's handle and reopens it. Run once at
// server start; an error (EOPNOTSUPP, EPERM, ...) says why nodes must keep their fds instead.
absl::Status ProbeInodeHandles(int export_fd);

}  // namespace ringfs::server
