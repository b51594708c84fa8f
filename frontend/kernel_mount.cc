#include "frontend/kernel_mount.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "frontend/fusectl.h"

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

namespace {

// mountinfo escapes space, tab, newline and backslash in paths as octal.
std::string MountinfoEscape(const std::string& path) {
  std::string escaped;
  for (char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\\') {
      escaped += absl::StrFormat("\\%03o", static_cast<unsigned char>(c));
    } else {
      escaped += c;
    }
  }
  return escaped;
}

struct MountEntry {
  std::string point;  // escaped as in mountinfo
  std::string fstype;
  dev_t device = 0;
};

// The mount an open file lies on, found by the mount id in /proc/self/fdinfo: unlike fstatfs,
// that asks nothing of the file system.
absl::StatusOr<MountEntry> MountOfFd(int fd) {
  std::ifstream fdinfo(absl::StrFormat("/proc/self/fdinfo/%d", fd));
  std::string key, wanted;
  while (fdinfo >> key) {
    if (key == "mnt_id:") {
      fdinfo >> wanted;
      break;
    }
  }
  if (wanted.empty()) return absl::InternalError("no mnt_id in /proc/self/fdinfo");
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mountpoint options [optional fields...] - fstype source ...
    std::istringstream fields(line);
    std::string id, parent, numbers, root, word;
    MountEntry entry;
    fields >> id >> parent >> numbers >> root >> entry.point;
    if (id != wanted) continue;
    unsigned major_number = 0, minor_number = 0;
    if (sscanf(numbers.c_str(), "%u:%u", &major_number, &minor_number) == 2) {
      entry.device = makedev(major_number, minor_number);
    }
    while (fields >> word && word != "-") {
    }
    fields >> entry.fstype;
    return entry;
  }
  return absl::NotFoundError(absl::StrFormat("mount %s is not in /proc/self/mountinfo", wanted));
}

}  // namespace

absl::StatusOr<bool> DetachDeadRingfsMount(const std::string& mountpoint) {
  // Pin the mount on top of `mountpoint`, so that the checks and the detach below concern this
  // one mount even if another is mounted over it meanwhile. Opening with O_PATH asks nothing of
  // the file system.
  UniqueFd top(open(mountpoint.c_str(), O_PATH | O_CLOEXEC));
  if (!top.valid()) return ErrnoError(errno, absl::StrFormat("mountpoint %s", mountpoint));
  // ENOTCONN once the connection is gone; ECONNABORTED when it ends while the call waits.
  // statfs, not stat: FUSE always asks the connection for statfs, while a stat is answered
  // from the kernel's attribute cache (60 s by default) even after the connection died.
  struct statfs st {};
  if (fstatfs(top.get(), &st) == 0 || (errno != ENOTCONN && errno != ECONNABORTED)) return false;
  ASSIGN_OR_RETURN(MountEntry mount, MountOfFd(top.get()));
  if (mount.point != MountinfoEscape(mountpoint)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("mountpoint %s lies inside %s, a %s mount that no longer answers",
                        mountpoint, mount.point, mount.fstype));
  }
  if (mount.fstype != "fuse.ringfs") {
    return absl::FailedPreconditionError(absl::StrFormat(
        "mountpoint %s is a %s mount that no longer answers (ENOTCONN); it is not ringfs's to "
        "detach: unmount it yourself (umount -l %s)",
        mountpoint, mount.fstype, mountpoint));
  }
  // The magic link names the pinned mount's root, whatever is mounted at the path by now.
  const std::string pinned = absl::StrFormat("/proc/self/fd/%d", top.get());
  if (umount2(pinned.c_str(), MNT_DETACH) != 0) {
    return ErrnoError(errno, absl::StrFormat("detach the dead ringfs mount on %s", mountpoint));
  }
  return true;
}

absl::StatusOr<bool> UnmountFuse(const std::string& mountpoint, dev_t device, int fuse_fd) {
  // Pin what is mounted at the path now: after `umount -l` our mount is no longer there, and
  // the path may hold another mount by then (a new ringfs mount, anything). Only ours is
  // detached, through the pinned root. Lazily, because the pin itself keeps it busy: it
  // goes as soon as nothing uses it, the pin included.
  UniqueFd top(open(mountpoint.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!top.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return ErrnoError(errno, absl::StrFormat("mountpoint %s", mountpoint));
  }
  ASSIGN_OR_RETURN(MountEntry mount, MountOfFd(top.get()));
  // Device 0: this mount's device was never learned (MountedDevice failed right after mount(2));
  // then a ringfs mount at the path is taken for ours rather than leaving ours mounted.
  const bool ours = device != 0 ? mount.device == device : mount.fstype == "fuse.ringfs";
  if (!ours || mount.point != MountinfoEscape(mountpoint)) return false;
  // After the pin: while our connection is alive our superblock holds the number, so the match
  // above was ours (a connection aborted but still mounted is left for the next mount's
  // DetachDeadRingfsMount).
  if (fuse_fd >= 0 && !ConnectionAlive(fuse_fd)) return false;
  const std::string pinned = absl::StrFormat("/proc/self/fd/%d", top.get());
  if (umount2(pinned.c_str(), MNT_DETACH) != 0) {
    return ErrnoError(errno, absl::StrFormat("umount %s", mountpoint));
  }
  return true;
}

absl::StatusOr<dev_t> MountedDevice(const std::string& mountpoint) {
  const std::string escaped = MountinfoEscape(mountpoint);
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

size_t CountMountsInside(std::istream& mountinfo, dev_t device) {
  struct Mount {
    std::string id, parent, root, point;
  };
  std::vector<Mount> mounts;
  absl::flat_hash_map<std::string, size_t> ours;  // mount id -> index, for this file system
  std::string line;
  while (std::getline(mountinfo, line)) {
    // id parent major:minor root mountpoint ...
    std::istringstream fields(line);
    Mount mount;
    std::string numbers;
    fields >> mount.id >> mount.parent >> numbers >> mount.root >> mount.point;
    unsigned major_number = 0, minor_number = 0;
    if (sscanf(numbers.c_str(), "%u:%u", &major_number, &minor_number) == 2 &&
        makedev(major_number, minor_number) == device) {
      ours[mount.id] = mounts.size();
    }
    mounts.push_back(std::move(mount));
  }
  size_t inside = 0;
  for (const Mount& mount : mounts) {
    auto parent = ours.find(mount.parent);
    if (mount.id == mount.parent || parent == ours.end()) continue;
    // Stacked on the file system's own root (the parent mounts its root, and the child sits at
    // the same place): that dentry is never revalidated, so nothing detaches it. A ringfs
    // mount bound inside itself counts: its mountpoint is one of our dentries.
    const Mount& under = mounts[parent->second];
    if (under.root == "/" && mount.point == under.point) continue;
    ++inside;
  }
  return inside;
}

absl::StatusOr<size_t> MountsInside(dev_t device) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return absl::UnavailableError("cannot read /proc/self/mountinfo");
  return CountMountsInside(in, device);
}

bool UringModuleParameterEnabled() {
  std::ifstream in("/sys/module/fuse/parameters/enable_uring");
  char value = 'N';
  in >> value;
  return value == 'Y' || value == 'y' || value == '1';
}

}  // namespace ringfs::frontend
