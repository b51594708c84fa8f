#include "frontend/caller_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ringfs::frontend {

namespace {

// include/linux/sched.h: the task is in do_exit() (its files are closed after this is set).
constexpr uint64_t kPfExiting = 0x00000004;

}  // namespace

CallerState CallerStateFromStat(std::string_view stat) {
  // "tid (comm) state ppid ...": comm may hold spaces and parentheses, the last ')' ends it.
  const size_t paren = stat.rfind(')');
  if (paren == std::string_view::npos) return CallerState::kUnknown;
  const std::string rest(stat.substr(paren + 1));
  // Fields after comm, from 0: state (field 3 of proc(5)), ..., flags (9), ..., signal (31), ...,
  // exit_code (52, since Linux 3.5; set before do_exit() closes the files).
  const char* p = rest.c_str();
  char state = 0;
  uint64_t flags = 0, pending = 0;
  int64_t exit_code = -1;
  for (int field = 0; field <= 49; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0' || *p == '\n') {
      if (field <= 28) return CallerState::kUnknown;
      break;  // no exit_code
    }
    const char* start = p;
    while (*p != ' ' && *p != '\0' && *p != '\n') ++p;
    if (field == 0) state = *start;
    if (field == 6) flags = std::strtoull(start, nullptr, 10);
    if (field == 28) pending = std::strtoull(start, nullptr, 10);
    if (field == 49) exit_code = std::strtoll(start, nullptr, 10);
  }
  const uint64_t kill = uint64_t{1} << (SIGKILL - 1);
  if (state == 'Z' || state == 'X' || (pending & kill) != 0) return CallerState::kDying;
  // Exiting: killed by a signal (a SIGKILL is no longer pending then) is dying; a plain exit()
  // closes its files like close() does, and waits for them (close-to-open).
  if ((flags & kPfExiting) != 0 && (exit_code < 0 || (exit_code & 0x7f) != 0)) {
    return CallerState::kDying;
  }
  return CallerState::kAlive;
}

CallerState CallerStateOf(pid_t tid) {
  if (tid <= 0) return CallerState::kUnknown;
  // The thread's own view (not the whole process's): cheaper, and its own pending signals.
  const std::string id = std::to_string(tid);
  const std::string path = "/proc/" + id + "/task/" + id + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  // A thread waiting for its close cannot be gone: not found means it is hidden from us
  // (hidepid=, another pid namespace's /proc).
  if (fd < 0) return CallerState::kUnknown;
  char buf[1024];  // about 300 bytes: comm is at most 64
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0) return CallerState::kUnknown;
  return CallerStateFromStat({buf, static_cast<size_t>(n)});
}

}  // namespace ringfs::frontend
