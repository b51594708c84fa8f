// Where a gRPC service of ringfs listens and how a client names it (unix:PATH, HOST:PORT, or
// none), the token helpers of the TCP rule, and claiming a Unix socket path; shared by
// ringfs-mount's control service, ringfs-server's admin service and ringfsctl. Pure functions
// except ReadTokenFile and ClaimUnixSocketPath; any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringfs::rpc {

struct Endpoint {
  enum class Kind { kNone, kUnix, kTcp };
  Kind kind = Kind::kNone;
  std::string address;  // the socket path (kUnix) or HOST:PORT (kTcp)

  // The gRPC target/listening address: "unix:PATH" or "HOST:PORT".
  std::string GrpcAddress() const;
  // For logs and messages: "unix:PATH", "HOST:PORT" or "none".
  std::string ToString() const;
};

// "unix:PATH" (absolute) or "HOST:PORT" (port 0..65535; IPv6 as [ADDR]:PORT). Anything else
// is InvalidArgument.
absl::StatusOr<Endpoint> ParseAddress(std::string_view address);

// Reads a token file: its content without trailing whitespace; empty is InvalidArgument.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// The metadata value a client sends: "Bearer <token>".
std::string BearerValue(std::string_view token);

// Compares in time that depends only on the lengths, not on where the contents differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// Makes `path` free for a gRPC Unix-socket server to bind: removes a socket left behind by a
// process that died, and refuses (AlreadyExists) when the path is not a socket or a live process
// still serves it — gRPC would silently delete whatever file is there. `what` names the socket
// in messages ("control", "admin").
absl::Status ClaimUnixSocketPath(const std::string& path, std::string_view what);

}  // namespace ringfs::rpc
