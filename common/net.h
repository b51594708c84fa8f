// Socket addresses and blocking socket helpers used at connection setup (listen, connect,
// handshake). The data path never calls these: workers drive their sockets through io_uring.
// Stateless; callable from any thread.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ringfs {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  bool is_unix = false;
  std::string text;  // as the user wrote it, for messages
};

// "HOST:PORT", "[V6]:PORT" (numeric hosts or names) or "unix:PATH".
absl::StatusOr<SocketAddress> ParseSocketAddress(std::string_view text);
// The same, with every address a name resolves to (in resolver order, without repeats).
absl::StatusOr<std::vector<SocketAddress>> ResolveSocketAddresses(std::string_view text);

absl::StatusOr<UniqueFd> ListenOn(const SocketAddress& address, int backlog = 128);
absl::StatusOr<UniqueFd> ConnectTo(const SocketAddress& address,
                                   std::chrono::milliseconds timeout);

// Full-length blocking transfers that give up at `timeout` (ETIMEDOUT) or on EOF (ECONNRESET).
absl::Status SendAll(int fd, const void* data, size_t size, std::chrono::milliseconds timeout);
absl::Status ReceiveAll(int fd, void* data, size_t size, std::chrono::milliseconds timeout);

// Small socket options every data connection gets (TCP_NODELAY, buffer sizes); no-op on Unix.
void TuneDataSocket(int fd, bool is_unix);

}  // namespace ringfs
