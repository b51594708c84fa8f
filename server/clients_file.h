// The server's clients file (--clients FILE): who may connect, with which secret, from where,
// and with which export options. One client per line, '#' starts a comment:
//
//   NAME secret=PATH|hex:HEX [options=EXPORT_OPTIONS] [from=PREFIX[,PREFIX...]]
//
// NAME is 1..64 of [A-Za-z0-9._-]; PATH is a secret file (relative to the clients file's
// directory; its content with trailing whitespace removed, as --token-file); options= as
// --export-options (default: the server's --export-options); from= address prefixes the client
// may connect from (default: anywhere). The clients file and every secret file must not be
// accessible to group or others. Read once at start; a plain value afterwards, any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/address_prefix.h"
#include "server/export_options.h"

namespace ringfs::server {

struct ClientEntry {
  // Empty only for the --token-file entry, which any client name may use.
  std::string name;
  std::string secret;  // never empty
  ExportOptions options;
  std::vector<AddressPrefix> from;  // empty: any source

  bool AllowsSource(const sockaddr_storage& peer) const;
  std::string FromText() const;  // "any" or the prefixes, comma-separated
};

// 1..64 of [A-Za-z0-9._-]: what a clients file may list, and what a client may call itself
// under --token-file (never a '/', which separates name and client_id in the state key).
bool IsValidClientName(std::string_view name);

// Parses the clients file at `path`. InvalidArgument (with the file, the line number and what
// is wrong) for a bad line, a duplicate name, a missing secret, or a file or secret file that
// group or others may access; no entries at all is an error too.
absl::StatusOr<std::vector<ClientEntry>> ReadClientsFile(const std::string& path,
                                                         const ExportOptions& defaults);

// A secret file's content with trailing whitespace removed. InvalidArgument when it cannot be
// read, is empty, or (with `private_only`) group or others may access it.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, bool private_only);

}  // namespace ringfs::server
