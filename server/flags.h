// Command line of ringfs-server:
//   --export DIR --listen HOST:PORT|unix:PATH [--token-file F] [--workers N]
//   [--max-inflight N] [--ready-file F] [--log-level debug|info|warn|error] [--floor]
//   [--admin unix:PATH|HOST:PORT] [--metrics HOST:PORT] [--node-fd-cache N]
//   [--reclaim-grace SECONDS] [--max-clients N] [--max-sessions-per-client N]
//   [--idle-timeout SECONDS] [--max-open-files-per-client N]
// Both "--flag value" and "--flag=value" are accepted; --floor takes no value.
// Stateless; callable from any thread.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/config.h"

namespace ringfs::server {

// Usage text printed on bad flags.
std::string_view Usage();

// Parses and validates the flags (export dir exists, token file readable and non-empty, numbers
// in range). Errors are InvalidArgument with a message meant for the operator.
absl::StatusOr<ServerConfig> ParseFlags(int argc, const char* const* argv);

// Content of a token file with trailing whitespace removed; an empty token is an error.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace ringfs::server
