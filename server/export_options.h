// What one client may do on the export, NFS-style (exports(5)): identity squashing, the
// anonymous identity, read-only. A plain value: the server's --export-options give the default,
// a client's entry in the clients file (when there is one) its own; the listener puts the
// client's options into its sessions (ConnectionSetup), and the executor applies them to every
// request of those sessions. Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ringfs::server {

struct ExportOptions {
  enum class Squash {
    kRoot,  // root_squash (default): uid 0 and gid 0 act as anonuid/anongid
    kNone,  // no_root_squash: every caller acts as itself, root included
    kAll,   // all_squash: every caller acts as anonuid/anongid
  };
  Squash squash = Squash::kRoot;
  uint32_t anonuid = 65534;  // "nobody" on Debian
  uint32_t anongid = 65534;  // "nogroup"
  bool read_only = false;    // ro: every change answers EROFS

  bool operator==(const ExportOptions&) const = default;
};

// Parses "rw|ro,root_squash|no_root_squash|all_squash,anonuid=N,anongid=N" (any order, any
// subset; later words win; empty = the defaults). InvalidArgument names the bad word.
absl::StatusOr<ExportOptions> ParseExportOptions(std::string_view text);

// The canonical text of `options` (ParseExportOptions(FormatExportOptions(o)) == o), for logs,
// the admin service and ringfsctl.
std::string FormatExportOptions(const ExportOptions& options);

}  // namespace ringfs::server
