#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"

namespace ringfs {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::string* g_prefix = new std::string("ringfs");

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
void SetLogPrefix(std::string_view program) { *g_prefix = std::string(program); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void LogLine(LogLevel level, std::string_view message) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  tm parts{};
  gmtime_r(&now.tv_sec, &parts);
  char stamp[32];
  strftime(stamp, sizeof(stamp), "%H:%M:%S", &parts);
  std::string line = absl::StrFormat("%s %s.%03d %s[%d]: %s\n", LevelName(level), stamp,
                                     static_cast<int>(now.tv_nsec / 1000000), *g_prefix,
                                     static_cast<int>(gettid()), message);
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace ringfs
