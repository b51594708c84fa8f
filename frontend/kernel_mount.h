// Talking to the kernel's FUSE module outside the request path: opening /dev/fuse, mount(2) and
// unmount, the fusectl connection id, and the enable_uring module parameter.
// Stateless functions; callable from any thread.
#pragma once

#include <sys/types.h>

#include <istream>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringfs::frontend {

struct KernelMountParams {
  std::string source;      // shown as the device in /proc/mounts
  std::string mountpoint;  // absolute
  bool read_only = false;
};

// Opens /dev/fuse and mounts a fuse.ringfs file system on it (allow_other,
// default_permissions); returns the connection's fd.
absl::StatusOr<UniqueFd> MountFuse(const KernelMountParams& params);

// A second fd on the same FUSE connection (FUSE_DEV_IOC_CLONE), so each worker reads from and
// replies to its own device file. It is O_NONBLOCK: reads of it must go through io_uring.
absl::StatusOr<UniqueFd> CloneFuseFd(int fuse_fd);

// Makes way for a new mount at `mountpoint` when the mount on top of it is a fuse.ringfs mount
// whose ringfs-mount died (kill -9, a crash): its connection is gone, every access answers
// ENOTCONN, and mounting there fails until someone runs `umount -l`. Such a mount is detached
// (umount2 MNT_DETACH) and true returned. False when the mountpoint answers: a live mount, of any
// type, is left alone. A dead mount of another type is refused (FailedPrecondition): it is not
// ringfs's to remove.
absl::StatusOr<bool> DetachDeadRingfsMount(const std::string& mountpoint);

// Detaches the mount of file system `device` (a MountedDevice() result) from `mountpoint`,
// lazily: it disappears from the namespace at once and ends when its last open file is closed.
// Returns false, touching nothing, when the mount at `mountpoint` is not that one: after a
// `umount -l` the path may hold another mount, which is not ours to remove. Device 0 (unknown)
// matches any ringfs mount at the path. With `fuse_fd` (this mount's /dev/fuse descriptor, not
// -1) nothing is detached once that connection ended: the number may be the next mount's.
absl::StatusOr<bool> UnmountFuse(const std::string& mountpoint, dev_t device, int fuse_fd = -1);

bool UringModuleParameterEnabled();

// How many mounts sit on directories of file system `device` (a MountedDevice() result), in
// this process's mount namespace: mounts whose parent mount is one of that file system's,
// except those stacked on its root. CountMountsInside reads a mountinfo text (tests).
absl::StatusOr<size_t> MountsInside(dev_t device);
size_t CountMountsInside(std::istream& mountinfo, dev_t device);

// The device number of the file system mounted at `mountpoint`, read from /proc/self/mountinfo
// (stat() on a FUSE mount would ask the daemon, which may be the caller).
absl::StatusOr<dev_t> MountedDevice(const std::string& mountpoint);

}  // namespace ringfs::frontend
