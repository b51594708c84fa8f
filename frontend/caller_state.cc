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
  if ((flags & kPfExiting) != 0 && (exit_code < 0 || (exit_code & 0x7f) != 0)) {
    return CallerState::kDying;
  }
  return CallerState::kAlive;
}

namespace {

// The thread's own view of /proc/<tid>/<file> (not the whole process's: cheaper, and its own
// pending signals) into `buf`; empty if it cannot be read. A thread waiting for a request cannot
// be gone: not found means it is hidden from us (hidepid=, another pid namespace's /proc).
std::string_view ReadThreadFile(pid_t tid, const char* file, char* buf, size_t size) {
  if (tid <= 0) return {};
  const std::string id = std::to_string(tid);
  const std::string path = "/proc/" + id + "/task/" + id + "/" + file;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = ::read(fd, buf, size);
  ::close(fd);
  return n > 0 ? std::string_view(buf, static_cast<size_t>(n)) : std::string_view();
}

// The number after "\n<key>" (the key includes its colon), in `base`; nullopt if absent.
std::optional<uint64_t> StatusField(std::string_view status, std::string_view key, int base) {
  size_t at = 0;
  while (true) {
    at = status.find(key, at);
    if (at == std::string_view::npos) return std::nullopt;
    if (at == 0 || status[at - 1] == '\n') break;
    at += key.size();
  }
  const std::string value(status.substr(at + key.size(), 32));
  char* end = nullptr;
  const uint64_t parsed = std::strtoull(value.c_str(), &end, base);
  if (end == value.c_str()) return std::nullopt;
  return parsed;
}

}  // namespace

CallerState CallerStateOf(pid_t tid) {
  char buf[1024];  // about 300 bytes: comm is at most 64
  const std::string_view stat = ReadThreadFile(tid, "stat", buf, sizeof(buf));
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
  char buf[4096];  // about 1,500 bytes
  const std::string_view status = ReadThreadFile(tid, "status", buf, sizeof(buf));
  return !status.empty() && SignalledFromStatus(status);
}

}  // namespace ringfs::frontend
