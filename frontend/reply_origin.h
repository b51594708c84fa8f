// Who produced an answer to the kernel: the server, or ringfs-mount on the caller's behalf (and
// why). Set by the backend channel, counted by the workers (worker_stats.h).
#pragma once

#include <cstdint>

namespace ringfs::frontend {

enum class ReplyOrigin : uint8_t {
  kServer,          // the server's reply, whatever its error
  kTimeout,         // ETIMEDOUT: no reply within timeout=
  kInterrupted,     // EINTR: the kernel interrupted the request
  kInvalidReply,    // EIO: the server's reply broke the wire rules
  kConnectionLost,  // EIO: the connection died while the reply was arriving
  kLocal,           // answered by ringfs-mount by design (local_answer.h, ENOSYS for the unknown)
  kBadRequest,      // EIO: a kernel request ringfs-mount could not take (length, size)
};

}  // namespace ringfs::frontend
