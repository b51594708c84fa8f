#include "frontend/kernel_mount.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <sys/sysmacros.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ringfs::frontend {

absl::StatusOr<UniqueFd> MountFuse(const KernelMountParams& params) {
  UniqueFd fd(open("/dev/fuse", O_RDWR | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "open /dev/fuse");
  struct stat root {};
  if (stat(params.mountpoint.c_str(), &root) != 0) {
    return ErrnoError(errno, absl::StrFormat("mountpoint %s", params.mountpoint));
  }
  if (!S_ISDIR(root.st_mode)) {
    return ErrnoError(ENOTDIR, absl::StrFormat("mountpoint %s", params.mountpoint));
  }
  std::string data = absl::StrFormat(
      "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions", fd.get());
  unsigned long flags = MS_NOSUID | MS_NODEV | (params.read_only ? MS_RDONLY : 0);
  if (mount(params.source.c_str(), params.mountpoint.c_str(), "fuse.ringfs", flags,
            data.c_str()) != 0) {
    return ErrnoError(errno, absl::StrFormat("mount %s on %s", params.source, params.mountpoint));
  }
  return fd;
}

absl::StatusOr<UniqueFd> CloneFuseFd(int fuse_fd) {
  // Non-blocking on purpose: /dev/fuse honours only O_NONBLOCK (not IOCB_NOWAIT), and io_uring
  // retries a read inline once poll reports a request. Without O_NONBLOCK a read that loses the
  // race for that request to another reader blocks inside the worker's io_uring_enter, and the
  // worker stops answering the requests it has already forwarded.
  UniqueFd clone(open("/dev/fuse", O_RDWR | O_CLOEXEC | O_NONBLOCK));
  if (!clone.valid()) return ErrnoError(errno, "open /dev/fuse for clone");
  uint32_t master = static_cast<uint32_t>(fuse_fd);
  if (ioctl(clone.get(), FUSE_DEV_IOC_CLONE, &master) != 0) {
    return ErrnoError(errno, "FUSE_DEV_IOC_CLONE");
  }
  return clone;
}

absl::Status UnmountFuse(const std::string& mountpoint) {
  if (umount2(mountpoint.c_str(), UMOUNT_NOFOLLOW) == 0) return absl::OkStatus();
  if (errno == EINVAL || errno == ENOENT) return absl::OkStatus();  // not mounted (any more)
  if (errno == EBUSY && umount2(mountpoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
    return absl::OkStatus();
  }
  return ErrnoError(errno, absl::StrFormat("umount %s", mountpoint));
}

absl::StatusOr<dev_t> MountedDevice(const std::string& mountpoint) {
  // mountinfo escapes space, tab, newline and backslash in paths as octal.
  std::string escaped;
  for (char c : mountpoint) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      escaped += absl::StrFormat("\\%03o", static_cast<unsigned char>(c));
    } else {
      escaped += c;
    }
  }
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  dev_t found = 0;
  bool any = false;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint ...
    std::istringstream fields(line);
    std::string id, parent, numbers, root, point;
    fields >> id >> parent >> numbers >> root >> point;
    if (point != escaped) continue;
    unsigned major_number = 0, minor_number = 0;
    if (sscanf(numbers.c_str(), "%u:%u", &major_number, &minor_number) == 2) {
      found = makedev(major_number, minor_number);  // the last match is the top mount
      any = true;
    }
  }
  if (!any) return absl::NotFoundError(absl::StrFormat("%s is not a mountpoint", mountpoint));
  return found;
}

bool UringModuleParameterEnabled() {
  std::ifstream in("/sys/module/fuse/parameters/enable_uring");
  char value = 'N';
  in >> value;
  return value == 'Y' || value == 'y' || value == '1';
}

}  // namespace ringfs::frontend
