#include "common/boot_id.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"

namespace ringfs {

std::string ParseBootId(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.size() != 36) return "";
  for (size_t i = 0; i < line.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? line[i] != '-' : !absl::ascii_isxdigit(static_cast<unsigned char>(line[i]))) {
      return "";
    }
  }
  return std::string(line);
}

const std::string& ThisBootId() {
  static const std::string id = [] {
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::stringstream text;
    text << file.rdbuf();
    return ParseBootId(text.str());
  }();
  return id;
}

}  // namespace ringfs
