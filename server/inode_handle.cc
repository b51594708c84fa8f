#include "server/inode_handle.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/status.h"
#include "server/export_fs.h"
#include "server/thread_creds.h"

namespace ringfs::server {
namespace {

// struct file_handle ends in a flexible array; this gives it the largest size the kernel uses.
struct HandleBuffer {
  file_handle header;
  unsigned char storage[MAX_HANDLE_SZ];
};

}  // namespace

absl::StatusOr<InodeHandle> HandleOf(int fd) {
  HandleBuffer buffer{};
  buffer.header.handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (name_to_handle_at(fd, "", &buffer.header, &mount_id, AT_EMPTY_PATH) != 0) {
    return ErrnoError(errno, "name_to_handle_at");
  }
  InodeHandle handle;
  handle.type = buffer.header.handle_type;
  handle.bytes.assign(reinterpret_cast<const char*>(buffer.header.f_handle),
                      buffer.header.handle_bytes);
  handle.mount_id = mount_id;
  return handle;
}

absl::StatusOr<UniqueFd> OpenByHandle(int mount_fd, const InodeHandle& handle) {
  if (handle.bytes.size() > MAX_HANDLE_SZ) return ErrnoError(EINVAL, "oversized file handle");
  HandleBuffer buffer{};
  buffer.header.handle_type = handle.type;
  buffer.header.handle_bytes = static_cast<unsigned int>(handle.bytes.size());
  std::memcpy(buffer.header.f_handle, handle.bytes.data(), handle.bytes.size());
  // open_by_handle_at needs CAP_DAC_READ_SEARCH, which a thread acting as a caller has dropped;
  // reopening a node the client already holds is not the caller's permission to check.
  ServerCredsScope as_server;
  for (int attempt = 0;; ++attempt) {
    int fd = open_by_handle_at(mount_fd, &buffer.header, O_PATH | O_CLOEXEC);
    if (fd >= 0) return UniqueFd(fd);
    if (errno == EINTR) continue;
    // A deleted file's inode number that a create is reusing at this moment: the kernel's
    // iget_locked finds it I_CREATING and ext4 reports ENOMEM. Microseconds later the answer is
    // the real one (ESTALE: another generation). Seen as a flaky test under parallel runs.
    if (errno == ENOMEM && attempt < 3) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    return ErrnoError(errno, "open_by_handle_at");
  }
}

absl::StatusOr<UniqueFd> OpenMountFd(int export_fd) {
  return Reopen(export_fd, O_RDONLY | O_DIRECTORY);
}

absl::Status ProbeInodeHandles(int export_fd) {
  ASSIGN_OR_RETURN(InodeHandle root, HandleOf(export_fd));
  ASSIGN_OR_RETURN(UniqueFd mount_fd, OpenMountFd(export_fd));
  ASSIGN_OR_RETURN(UniqueFd reopened, OpenByHandle(mount_fd.get(), root));
  ASSIGN_OR_RETURN(struct stat want, StatFd(export_fd));
  ASSIGN_OR_RETURN(struct stat got, StatFd(reopened.get()));
  if (want.st_dev != got.st_dev || want.st_ino != got.st_ino) {
    return ErrnoError(EIO, "the export root's handle opens another file");
  }
  return absl::OkStatus();
}

}  // namespace ringfs::server
