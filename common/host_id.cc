#include "common/host_id.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"

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

std::string HostIdFromBootId(std::string_view boot_id) {
  if (boot_id.empty()) return "";
  const std::string input = "ringfs host id\n" + std::string(boot_id);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha256(), nullptr) != 1 ||
      length < 16) {
    return "";
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), 16));
}

const std::string& ThisHostId() {
  static const std::string id = [] {
    std::ifstream file("/proc/sys/kernel/random/boot_id");
    std::stringstream text;
    text << file.rdbuf();
    return HostIdFromBootId(ParseBootId(text.str()));
  }();
  return id;
}

}  // namespace ringfs
