// Whether the thread behind a request is dying, from /proc/<tid>/stat.
//
// Why: the kernel sends one INTERRUPT for a waiting request on the first signal, a caught
// SIGCHLD or SIGALRM included, and the mount answers EINTR. For most requests that is what the
// caller expects of a slow system call; a close() that fails with EINTR is reported as a failed
// close (cp, tar). So a FLUSH waiting for its file's early writes (async_write) ends early only
// when its caller is dying: SIGKILL pending, or exiting by a signal (a process killed inside
// write() closes its files from its exit, with no signal left to send an INTERRUPT for), which
// the channel looks at every tick. A plain exit() waits for its files like close() (NFS too).
#pragma once

#include <sys/types.h>

#include <string_view>

namespace ringfs::frontend {

enum class CallerState { kAlive, kDying, kUnknown };

// From the text of /proc/<tid>/stat: SIGKILL pending, a zombie, or exiting (PF_EXITING) with a
// signal as its exit code (or none shown) is kDying; text that does not parse is kUnknown.
CallerState CallerStateFromStat(std::string_view stat);
// kUnknown for tid 0 (a caller outside the mount's pid namespace) or a file that cannot be read.
CallerState CallerStateOf(pid_t tid);

}  // namespace ringfs::frontend
