#include "frontend/caller_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace ringfs::frontend {

namespace {

// The hexadecimal mask after `key` ("SigPnd:"), or 0.
uint64_t MaskAfter(std::string_view status, std::string_view key) {
  const size_t at = status.find(key);
  if (at == std::string_view::npos) return 0;
  const std::string rest(status.substr(at + key.size(), 32));
  return std::strtoull(rest.c_str(), nullptr, 16);
}

}  // namespace

bool KillPendingIn(std::string_view status) {
  constexpr uint64_t kKill = uint64_t{1} << (SIGKILL - 1);
  return ((MaskAfter(status, "\nSigPnd:") | MaskAfter(status, "\nShdPnd:")) & kKill) != 0;
}

bool CallerBeingKilled(pid_t pid) {
  if (pid <= 0) return false;
  const std::string path = "/proc/" + std::to_string(pid) + "/status";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  return n > 0 && KillPendingIn({buf, static_cast<size_t>(n)});
}

}  // namespace ringfs::frontend
