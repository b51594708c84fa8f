// The handle key: the secret that seals the node handles the server hands to clients
// (handle_seal.h). It must survive restarts, and servers of one export share it (they point
// --handle-key at the same file), so a client can reclaim on any of them what another sealed.
// Stateless functions; called once at server start.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ringfs::server {

inline constexpr size_t kHandleKeyBytes = 32;
inline constexpr char kDefaultHandleKeyFile[] = "/var/lib/ringfs/handle.key";

// The key in `path`. A missing file is created (mode 0600, written under a temporary
// O_CREAT|O_EXCL name and linked into place, so it appears complete) with kHandleKeyBytes from
// getrandom(2), and that is logged. An existing one must be a regular file that neither
// group nor others can read, holding at least kHandleKeyBytes bytes (all of it is the key);
// otherwise FailedPrecondition with a message for the operator.
absl::StatusOr<std::string> LoadOrCreateHandleKey(const std::string& path);

// The key for --handle-key (`path`, `explicit_path`: given on the command line). An explicit
// path must work. The default path (its directory created 0700 if missing) may fail when the
// server cannot create it (not root): then one warning is logged and a random key for this
// process is returned, so node handles will not survive a restart. Empty `path`: the random
// key, without a warning (tests).
absl::StatusOr<std::string> HandleKeyForServer(const std::string& path, bool explicit_path);

}  // namespace ringfs::server
