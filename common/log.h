// Minimal thread-safe logging to stderr: one line per call, with level, time and thread name.
// Callable from any thread; a line is written with one write(2), so lines never interleave.
#pragma once

#include <string_view>

#include "absl/strings/str_format.h"

namespace ringfs {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

void SetLogLevel(LogLevel level);
void SetLogPrefix(std::string_view program);  // e.g. "ringfs-mount"
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view message);

template <typename... Args>
void Log(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrFormat(format, args...));
}

}  // namespace ringfs

#define RINGFS_LOG_INFO(...) ::ringfs::Log(::ringfs::LogLevel::kInfo, __VA_ARGS__)
#define RINGFS_LOG_WARN(...) ::ringfs::Log(::ringfs::LogLevel::kWarning, __VA_ARGS__)
#define RINGFS_LOG_ERROR(...) ::ringfs::Log(::ringfs::LogLevel::kError, __VA_ARGS__)
#define RINGFS_LOG_DEBUG(...) ::ringfs::Log(::ringfs::LogLevel::kDebug, __VA_ARGS__)
