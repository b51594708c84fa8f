#include "server/export_fs.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/status.h"

namespace ringfs::server {

NameBuffer::NameBuffer(std::string_view name) {
  size_t n = std::min(name.size(), sizeof(buf_) - 1);
  std::memcpy(buf_, name.data(), n);
  buf_[n] = '\0';
}

absl::StatusOr<UniqueFd> OpenBeneath(int parent_fd, std::string_view name, int flags,
                                     mode_t mode) {
  NameBuffer path(name);
  open_how how{};
  how.flags = static_cast<uint64_t>(flags) | O_NOFOLLOW | O_CLOEXEC;
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = syscall(SYS_openat2, parent_fd, path.c_str(), &how, sizeof(how));
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    if (errno == EINTR || errno == EAGAIN) continue;  // EAGAIN: a concurrent rename raced
    return ErrnoError(errno, "openat2");
  }
}

absl::StatusOr<UniqueFd> LookupBeneath(int parent_fd, std::string_view name) {
  return OpenBeneath(parent_fd, name, O_PATH);
}

std::string ProcFdPath(int fd) { return absl::StrFormat("/proc/self/fd/%d", fd); }

int ChmodFd(int fd, mode_t mode) {
  // Debian 12's headers predate the call; its number is the same on every architecture.
  constexpr long kFchmodat2 = 452;
  static std::atomic<bool> unsupported{false};
  if (!unsupported.load(std::memory_order_relaxed)) {
    if (syscall(kFchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0) return 0;
    if (errno != ENOSYS && errno != EPERM) return -1;
    // EPERM is also what a seccomp profile that predates the call answers (Docker's did): a
    // chmod that the old way allows says which it was.
    const int refused = errno;
    if (chmod(ProcFdPath(fd).c_str(), mode) != 0) return -1;
    if (refused == EPERM) {
      RINGFS_LOG_WARN(
          "fchmodat2 refused (EPERM) where chmod is allowed: a seccomp profile? "
          "using chmod of /proc/self/fd from now on");
    }
    unsupported.store(true, std::memory_order_relaxed);
    return 0;
  }
  return chmod(ProcFdPath(fd).c_str(), mode);
}

absl::StatusOr<UniqueFd> Reopen(int path_fd, int flags) {
  // O_DIRECT is the client's business (it bypasses the client's page cache); the server serves
  // from its own cache, and its I/O buffers are not aligned for O_DIRECT anyway. O_NONBLOCK
  // means nothing for the regular files and directories reopened here, except to io_uring,
  // which then hands a read of uncached pages back with EAGAIN instead of waiting for it, and to
  // leases: an open for writing during another open's lease test (open_for_writing.h) would
  // fail with EWOULDBLOCK instead of waiting microseconds.
  flags &= ~(O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW | O_PATH | O_DIRECT | O_NONBLOCK);
  std::string path = ProcFdPath(path_fd);
  int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "reopen");
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> PathFdOf(int open_fd) {
  std::string path = ProcFdPath(open_fd);
  int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "O_PATH reopen");
  return UniqueFd(fd);
}

absl::StatusOr<struct stat> StatFd(int fd) {
  struct stat st {};
  if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoError(errno, "fstatat");
  }
  return st;
}

bool InodeNumbersHeldLocally(int fd) {
  struct statfs fs {};
  if (fstatfs(fd, &fs) != 0) return false;
  switch (static_cast<uint32_t>(fs.f_type)) {
    case 0xEF53u:      // ext2/3/4
    case 0x58465342u:  // xfs
    case 0x9123683Eu:  // btrfs
    case 0x01021994u:  // tmpfs
    case 0xF2F52010u:  // f2fs
    case 0x2FC12FC1u:  // zfs
    case 0xCA451A4Eu:  // bcachefs
      return true;
    default:
      return false;
  }
}

}  // namespace ringfs::server
