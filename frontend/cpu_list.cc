#include "frontend/cpu_list.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ringfs::frontend {

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  std::string trimmed(absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
  if (trimmed.empty()) return absl::InvalidArgumentError("empty CPU list");
  for (absl::string_view part : absl::StrSplit(trimmed, ',')) {
    std::vector<std::string> bounds = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    bool ok = (bounds.size() == 1 || bounds.size() == 2) && absl::SimpleAtoi(bounds[0], &first);
    last = first;
    if (ok && bounds.size() == 2) ok = absl::SimpleAtoi(bounds[1], &last);
    if (!ok || first < 0 || last < first || last > 65535) {
      return absl::InvalidArgumentError(
          absl::StrFormat("bad CPU list '%s' (at '%s')", trimmed, std::string(part)));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

absl::StatusOr<std::vector<int>> PossibleCpus() {
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::stringstream content;
  content << in.rdbuf();
  if (!in) return absl::UnavailableError("cannot read /sys/devices/system/cpu/possible");
  return ParseCpuList(content.str());
}

}  // namespace ringfs::frontend
