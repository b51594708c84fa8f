#include "controller/control_endpoint.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ringfs::controller {
namespace {

bool IsPlain(char c, bool first) {
  if (c == '.') return !first;
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '_';
}

}  // namespace

std::string EscapePath(std::string_view path) {
  // Split on '/', dropping empty components (leading, trailing and doubled slashes).
  std::string out;
  bool first_component = true;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view component = path.substr(start, end - start);
    if (!component.empty()) {
      if (!first_component) out += '-';
      for (size_t i = 0; i < component.size(); ++i) {
        char c = component[i];
        if (IsPlain(c, out.empty())) {
          out += c;
        } else {
          char escaped[5];
          std::snprintf(escaped, sizeof(escaped), "\\x%02x", static_cast<unsigned char>(c));
          out += escaped;
        }
      }
      first_component = false;
    }
    start = end + 1;
  }
  return out.empty() ? "-" : out;
}

std::string DefaultSocketPath(std::string_view mountpoint) {
  return absl::StrCat(kRuntimeDir, "/", EscapePath(std::string(mountpoint)), ".sock");
}

absl::StatusOr<rpc::Endpoint> ParseControlOption(std::string_view option,
                                                 std::string_view mountpoint) {
  if (option.empty()) {
    return rpc::Endpoint{rpc::Endpoint::Kind::kUnix, DefaultSocketPath(mountpoint)};
  }
  if (option == "none") return rpc::Endpoint{};
  absl::StatusOr<rpc::Endpoint> endpoint = rpc::ParseAddress(option);
  if (!endpoint.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("control=", std::string(option), ": ", endpoint.status().message()));
  }
  return endpoint;
}

}  // namespace ringfs::controller
