#include "frontend/caller_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
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
  if ((flags & kPfExiting) != 0) {
    return exit_code < 0 || (exit_code & 0x7f) != 0 ? CallerState::kDying : CallerState::kExiting;
  }
  return CallerState::kAlive;
}

namespace {

// Whether /proc shows this process's pid namespace, the one the kernel gives callers' ids in
// (the mount's): else /proc/<tid> would be some other process. Looked at once.
bool ProcIsOurs() {
  static const bool ours = [] {
    char link[32] = {};
    const ssize_t n = ::readlink("/proc/self", link, sizeof(link) - 1);
    return n > 0 && std::string(link, static_cast<size_t>(n)) == std::to_string(::getpid());
  }();
  return ours;
}

// The thread's own view of /proc/<tid>/<file> (not the whole process's: cheaper, and its own
// pending signals), whole; empty if it cannot be read. A thread waiting for a request cannot be
// gone: not found means it is hidden from us (hidepid=, another pid namespace's /proc).
std::string ReadThreadFile(pid_t tid, const char* file) {
  if (tid <= 0 || !ProcIsOurs()) return {};
  const std::string id = std::to_string(tid);
  const std::string path = "/proc/" + id + "/task/" + id + "/" + file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[4096];
  // To the end: a status with many supplementary groups runs past one page.
  for (ssize_t n; text.size() < (1u << 20) && (n = ::read(fd, buf, sizeof(buf))) > 0;) {
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The number after "\n<key>" (the key includes its colon), in `base`, which must end its line;
// nullopt if absent or cut short.
std::optional<uint64_t> StatusField(std::string_view status, std::string_view key, int base) {
  size_t at = 0;
  while (true) {
    at = status.find(key, at);
    if (at == std::string_view::npos) return std::nullopt;
    if (at == 0 || status[at - 1] == '\n') break;
    at += key.size();
  }
  const size_t line_end = status.find('\n', at);
  if (line_end == std::string_view::npos) return std::nullopt;
  const std::string value(status.substr(at + key.size(), line_end - at - key.size()));
  char* end = nullptr;
  const uint64_t parsed = std::strtoull(value.c_str(), &end, base);
  if (end == value.c_str() || *end != '\0') return std::nullopt;
  return parsed;
}

}  // namespace

CallerState CallerStateOf(pid_t tid) {
  const std::string stat = ReadThreadFile(tid, "stat");
  if (stat.empty()) return CallerState::kUnknown;
  return CallerStateFromStat(stat);
}

bool SignalledFromStatus(std::string_view status) {
  const std::optional<uint64_t> own = StatusField(status, "SigPnd:", 16);
  const std::optional<uint64_t> shared = StatusField(status, "ShdPnd:", 16);
  const std::optional<uint64_t> blocked = StatusField(status, "SigBlk:", 16);
  const std::optional<uint64_t> threads = StatusField(status, "Threads:", 10);
  if (!own || !shared || !blocked || !threads) return false;
  if ((*own & ~*blocked) != 0) return true;
  // A process-wide signal wakes one thread that does not block it: with one thread, this one.
  // With more it may be another's, which the kernel does not interrupt this request for.
  return *threads == 1 && (*shared & ~*blocked) != 0;
}

bool CallerSignalled(pid_t tid) {
  switch (CallerStateOf(tid)) {
    case CallerState::kDying:
      return true;
    case CallerState::kAlive:
      break;
    case CallerState::kExiting:  // the kernel does not interrupt its exit's closes for a signal
    case CallerState::kUnknown:
      return false;
  }
  const std::string status = ReadThreadFile(tid, "status");
  return !status.empty() && SignalledFromStatus(status);
}

}  // namespace ringfs::frontend
