// The filesystem credentials of the calling thread, so that the server's kernel checks every
// operation against the caller's identity (what nfsd does with its per-request credentials).
// Linux keeps fsuid, fsgid, supplementary groups and the effective capability set per thread;
// glibc's setgroups() would change every thread of the process, so the raw system calls are used.
// Acting as a non-root identity also drops every effective capability (CAP_SYS_ADMIN would still
// allow trusted.* xattrs, CAP_SETFCAP security.capability), and the way back to the server's
// own root identity is always open: setfsuid(0) needs no capability while the real uid is 0, and
// capset may raise effective capabilities that are permitted.
// Each thread caches what it acts as: a worker serving one user switches once, not per request.
#pragma once

#include <sys/types.h>

#include "absl/status/status.h"
#include "server/caller_identity.h"

namespace ringfs::server {

// Whether this process can act as others: it runs as root with CAP_SETUID, CAP_SETGID and the
// file capabilities permitted. Otherwise every operation runs as the server's own user.
bool CanActAsCallers();

// The calling thread acts as `who` from now on (a no-op when it already does).
// REQUIRES: CanActAsCallers(). On failure the thread is back at the server's identity.
[[nodiscard]] absl::Status ActAs(const CallerIdentity& who);

// The calling thread acts as the server itself (root with its capabilities).
void ActAsServer();

// For the scope: the server's own identity (file handles need CAP_DAC_READ_SEARCH; bookkeeping
// such as clearing set-id bits the client asked to clear is not the caller's permission to
// check); then back to what the thread acted as. Cheap when the thread already acts as root.
class ServerCredsScope {
 public:
  ServerCredsScope();
  ~ServerCredsScope();
  ServerCredsScope(const ServerCredsScope&) = delete;
  ServerCredsScope& operator=(const ServerCredsScope&) = delete;

 private:
  bool switched_ = false;
};

// Identity switches made by the calling thread (for tests and the cost measurement).
uint64_t ThreadCredSwitches();

}  // namespace ringfs::server
