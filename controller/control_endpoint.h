// Where ringfs-mount's control service listens and how ringfsctl finds it from a mountpoint: the
// mount's default Unix socket /run/ringfs/<escaped mountpoint>.sock, or what control= names
// (the address forms of common/rpc/endpoint.h, or none). Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/rpc/endpoint.h"

namespace ringfs::controller {

inline constexpr char kRuntimeDir[] = "/run/ringfs";

// systemd-escape --path: "/mnt/data" -> "mnt-data", "/" -> "-". Redundant slashes are dropped,
// '/' becomes '-', bytes other than [A-Za-z0-9:_.] (and a leading '.') become \xNN.
std::string EscapePath(std::string_view path);

// /run/ringfs/<EscapePath(mountpoint)>.sock. REQUIRES: mountpoint is absolute and resolved.
std::string DefaultSocketPath(std::string_view mountpoint);

// The mount option control=: "" -> the mountpoint's default socket, "none", "unix:PATH"
// (absolute), "HOST:PORT" (port 0..65535; IPv6 as [ADDR]:PORT). Anything else is
// InvalidArgument.
absl::StatusOr<rpc::Endpoint> ParseControlOption(std::string_view option,
                                                 std::string_view mountpoint);

}  // namespace ringfs::controller
