// Whether the process behind a request is being killed, from /proc/<pid>/status.
//
// Why: the kernel sends an INTERRUPT for a waiting request on any signal, a caught SIGCHLD or
// SIGALRM included, and the mount answers EINTR. For most requests that is what the caller
// expects of a slow system call; a close() that fails with EINTR is reported as a failed close
// (cp, tar), so a FLUSH waiting for its file's early writes (async_write) ends early only when
// the caller is dying (SIGKILL pending: its exit waits for the answer).
#pragma once

#include <sys/types.h>

#include <string_view>

namespace ringfs::frontend {

// The text of /proc/<pid>/status has SIGKILL in its SigPnd or ShdPnd mask.
bool KillPendingIn(std::string_view status);
// /proc/<pid>/status says so; false when it cannot be read (the process is gone).
bool CallerBeingKilled(pid_t pid);

}  // namespace ringfs::frontend
