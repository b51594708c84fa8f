// Where the control service listens and how a client names it: the default Unix socket of a
// mount (/run/ringfs/<escaped mountpoint>.sock), unix:PATH, HOST:PORT, or none; plus the token
// helpers of the TCP rule. Pure functions except ReadTokenFile; any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringfs::controller {

inline constexpr char kRuntimeDir[] = "/run/ringfs";

// systemd-escape --path: "/mnt/data" -> "mnt-data", "/" -> "-". Redundant slashes are dropped,
// '/' becomes '-', bytes other than [A-Za-z0-9:_.] (and a leading '.') become \xNN.
std::string EscapePath(std::string_view path);

// /run/ringfs/<EscapePath(mountpoint)>.sock. REQUIRES: mountpoint is absolute and resolved.
std::string DefaultSocketPath(std::string_view mountpoint);

struct Endpoint {
  enum class Kind { kNone, kUnix, kTcp };
  Kind kind = Kind::kNone;
  std::string address;  // the socket path (kUnix) or HOST:PORT (kTcp)

  // The gRPC target/listening address: "unix:PATH" or "HOST:PORT".
  std::string GrpcAddress() const;
  // For logs and messages: "unix:PATH", "HOST:PORT" or "none".
  std::string ToString() const;
};

// The mount option control=: "" -> the mountpoint's default socket, "none", "unix:PATH"
// (absolute), "HOST:PORT" (port 0..65535; IPv6 as [ADDR]:PORT). Anything else is
// InvalidArgument.
absl::StatusOr<Endpoint> ParseControlOption(std::string_view option, std::string_view mountpoint);

// A client's ADDR: "unix:PATH" or "HOST:PORT". Anything else is InvalidArgument.
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

}  // namespace ringfs::controller
