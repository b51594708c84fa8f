// The kernel's per-connection FUSE knobs in fusectl (/sys/fs/fuse/connections/<id>/):
// max_background, congestion_threshold (read/write, root), waiting (read) and abort.
// Nothing in the kernel is per queue; these apply to the whole connection. Stateless; any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"

namespace ringfs::frontend {

struct KernelLimits {
  uint32_t connection = 0;  // fusectl id = minor number of the mount's device
  uint32_t max_background = 0;
  uint32_t congestion_threshold = 0;
  uint32_t waiting = 0;
};

// Mounts fusectl on /sys/fs/fuse/connections when it is not mounted yet.
absl::Status EnsureFusectlMounted();

absl::StatusOr<KernelLimits> ReadKernelLimits(dev_t device, int fuse_fd);

// Whether the connection behind a /dev/fuse descriptor is still there. Once it ended (unmounted
// or aborted) its device number, the fusectl id, is free for the next mount: a knob written by
// that number would change, abort or describe another FUSE mount. So the functions below take
// the connection's fd too and touch a knob only while it is alive. Device 0 is never a mount's; all
// the functions here refuse it.
bool ConnectionAlive(int fuse_fd);

// Values the kernel accepts: 1..65535 (root). Unset values are left alone.
absl::StatusOr<KernelLimits> WriteKernelLimits(dev_t device, int fuse_fd,
                                               std::optional<uint32_t> max_background,
                                               std::optional<uint32_t> congestion_threshold);

// Ends the connection at once: every pending request fails with ECONNABORTED.
absl::Status AbortConnection(dev_t device, int fuse_fd);

}  // namespace ringfs::frontend
