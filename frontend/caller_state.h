// What /proc says about the thread behind a request: whether it is dying (/proc/<tid>/stat),
// and whether a signal waits for it (/proc/<tid>/status).
//
// Why: the kernel sends one INTERRUPT for a waiting request on the first signal, a caught
// SIGCHLD or SIGALRM included, and the mount answers EINTR. For most requests that is what the
// caller expects of a slow system call; a close() that fails with EINTR is reported as a failed
// close (cp, tar). So a FLUSH waiting for its file's early writes (async_write) ends early only
// when its caller is dying: SIGKILL pending, or exiting by a signal (a process killed inside
// write() closes its files from its exit, with no signal left to send an INTERRUPT for), which
// the channel looks at every tick. A plain exit() waits for its files like close() (NFS too).
//
// Why signals: on the ring the kernel loses the INTERRUPT of a caller signalled after its
// request was queued to a ring entry and before ringfs-mount's thread took it (FR_SENT is set
// only then, and unlike a /dev/fuse read the ring does not look at FR_INTERRUPTED when it sets
// it). Such a caller then waits uninterruptibly for the answer, even through kill -9; with the
// server stopped on a hard mount, forever. The channel looks at a long-waiting request's caller
// (CallerSignalled) and answers EINTR, as it would have to the INTERRUPT.
#pragma once

#include <sys/types.h>

#include <string_view>

namespace ringfs::frontend {

// kExiting: in a plain exit(), which waits for its files like close().
enum class CallerState { kAlive, kDying, kExiting, kUnknown };

// From the text of /proc/<tid>/stat: SIGKILL pending, a zombie, or exiting (PF_EXITING) with a
// signal as its exit code (or none shown) is kDying; exiting with an exit status is kExiting;
// text that does not parse is kUnknown.
CallerState CallerStateFromStat(std::string_view stat);
// kUnknown for tid 0 (a caller outside the mount's pid namespace), a file that cannot be read,
// or a /proc of another pid namespace than ringfs-mount's.
CallerState CallerStateOf(pid_t tid);

// From the text of /proc/<tid>/status: a signal it does not block is pending for the thread
// itself (SigPnd: a fatal signal puts SIGKILL there for every thread), or for its process
// (ShdPnd) when the process has no other thread that could take it. Text without these fields
// is false.
bool SignalledFromStatus(std::string_view status);
// Dying (CallerStateOf), or alive and SignalledFromStatus. False for an exiting caller (the
// kernel does not interrupt the closes of exit() for a late signal), tid 0, or a file that cannot
// be read.
bool CallerSignalled(pid_t tid);

}  // namespace ringfs::frontend
