#include "frontend/fusectl.h"

#include <poll.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace ringfs::frontend {
namespace {

constexpr char kControlDir[] = "/sys/fs/fuse/connections";
constexpr long kFusectlMagic = 0x65735543;  // FUSE_CTL_SUPER_MAGIC
constexpr uint32_t kMaxKernelLimit = 65535;

std::string KnobPath(dev_t device, const char* knob) {
  return absl::StrFormat("%s/%u/%s", kControlDir, minor(device), knob);
}

absl::Status CheckDevice(dev_t device) {
  if (device == 0) return absl::FailedPreconditionError("the FUSE connection has ended");
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ReadKnob(dev_t device, int fuse_fd, const char* knob) {
  RETURN_IF_ERROR(CheckDevice(device));
  std::ifstream in(KnobPath(device, knob));
  // As in WriteKnob: opened while ours is alive, it is ours.
  if (in.is_open() && !ConnectionAlive(fuse_fd)) return CheckDevice(0);
  std::string text;
  if (!(in >> text)) return ErrnoError(ENOENT, absl::StrFormat("read %s", KnobPath(device, knob)));
  uint32_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InternalError(absl::StrFormat("%s holds '%s'", KnobPath(device, knob), text));
  }
  return value;
}

absl::Status WriteKnob(dev_t device, int fuse_fd, const char* knob, const std::string& value) {
  RETURN_IF_ERROR(CheckDevice(device));
  std::string path = KnobPath(device, knob);
  FILE* file = fopen(path.c_str(), "w");
  if (file == nullptr) return ErrnoError(errno, absl::StrFormat("open %s", path));
  // Looked at once the knob is open: the kernel aborts a connection (its fd polls POLLERR)
  // before it removes the connection's directory and frees its number, so a knob opened while
  // ours is alive is ours; one that is gone by the write changes nothing.
  if (!ConnectionAlive(fuse_fd)) {
    fclose(file);
    return CheckDevice(0);
  }
  bool ok = fputs(value.c_str(), file) >= 0;
  ok = (fclose(file) == 0) && ok;  // the kernel validates on write-back at close
  if (!ok) return ErrnoError(errno ? errno : EINVAL, absl::StrFormat("write %s", path));
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsureFusectlMounted() {
  struct statfs info {};
  if (statfs(kControlDir, &info) == 0 && info.f_type == kFusectlMagic) return absl::OkStatus();
  if (mount("fusectl", kControlDir, "fusectl", 0, nullptr) != 0 && errno != EBUSY) {
    return ErrnoError(errno, absl::StrFormat("mount fusectl on %s", kControlDir));
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelLimits> ReadKernelLimits(dev_t device, int fuse_fd) {
  RETURN_IF_ERROR(EnsureFusectlMounted());
  KernelLimits limits;
  limits.connection = minor(device);
  ASSIGN_OR_RETURN(limits.max_background, ReadKnob(device, fuse_fd, "max_background"));
  ASSIGN_OR_RETURN(limits.congestion_threshold, ReadKnob(device, fuse_fd, "congestion_threshold"));
  ASSIGN_OR_RETURN(limits.waiting, ReadKnob(device, fuse_fd, "waiting"));
  return limits;
}

absl::StatusOr<KernelLimits> WriteKernelLimits(dev_t device, int fuse_fd,
                                               std::optional<uint32_t> max_background,
                                               std::optional<uint32_t> congestion_threshold) {
  for (auto [name, value] : {std::pair{"max_background", max_background},
                             std::pair{"congestion_threshold", congestion_threshold}}) {
    if (value && (*value == 0 || *value > kMaxKernelLimit)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s must be between 1 and %u, not %u", name, kMaxKernelLimit, *value));
    }
  }
  RETURN_IF_ERROR(EnsureFusectlMounted());
  if (max_background) {
    RETURN_IF_ERROR(
        WriteKnob(device, fuse_fd, "max_background", absl::StrFormat("%u", *max_background)));
  }
  if (congestion_threshold) {
    RETURN_IF_ERROR(WriteKnob(device, fuse_fd, "congestion_threshold",
                              absl::StrFormat("%u", *congestion_threshold)));
  }
  return ReadKernelLimits(device, fuse_fd);
}

absl::Status AbortConnection(dev_t device, int fuse_fd) {
  RETURN_IF_ERROR(CheckDevice(device));
  RETURN_IF_ERROR(EnsureFusectlMounted());
  return WriteKnob(device, fuse_fd, "abort", "1");
}

bool ConnectionAlive(int fuse_fd) {
  // /dev/fuse polls POLLERR once the connection is gone (events 0: nothing else is asked).
  if (fuse_fd < 0) return false;  // poll would skip it and say nothing
  pollfd device{fuse_fd, 0, 0};
  const int n = poll(&device, 1, 0);
  return n == 0 || (n == 1 && (device.revents & (POLLERR | POLLNVAL | POLLHUP)) == 0);
}

}  // namespace ringfs::frontend
