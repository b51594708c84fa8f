#include "common/rpc/endpoint.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace ringfs::rpc {
namespace {

absl::Status CheckHostPort(std::string_view address) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", std::string(address), "' is not unix:PATH or HOST:PORT"));
  }
  std::string host(address.substr(0, colon));
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']')) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", std::string(address), "': write IPv6 hosts as [ADDR]:PORT"));
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(std::string(address.substr(colon + 1)), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", std::string(address), "' has no valid port"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string Endpoint::GrpcAddress() const {
  return kind == Kind::kUnix ? "unix:" + address : address;
}

std::string Endpoint::ToString() const {
  return kind == Kind::kNone ? std::string("none") : GrpcAddress();
}

absl::StatusOr<Endpoint> ParseAddress(std::string_view address) {
  Endpoint endpoint;
  if (address.substr(0, 5) == "unix:") {
    std::string_view path = address.substr(5);
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("'", std::string(address), "': unix:PATH needs an absolute path"));
    }
    endpoint.kind = Endpoint::Kind::kUnix;
    endpoint.address = std::string(path);
    return endpoint;
  }
  if (absl::Status status = CheckHostPort(address); !status.ok()) return status;
  endpoint.kind = Endpoint::Kind::kTcp;
  endpoint.address = std::string(address);
  return endpoint;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read token file ", path));
  std::stringstream content;
  content << in.rdbuf();
  std::string token(absl::StripTrailingAsciiWhitespace(content.str()));
  if (token.empty())
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  return token;
}

std::string BearerValue(std::string_view token) {
  return absl::StrCat("Bearer ", std::string(token));
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Walk the longer input entirely; a length mismatch is folded into the result, not
  // returned early.
  size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

namespace {

bool UnixSocketInUse(const std::string& path) {
  sockaddr_un address{};
  if (path.size() >= sizeof(address.sun_path)) return false;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return false;
  return connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
}

}  // namespace

absl::Status ClaimUnixSocketPath(const std::string& path, std::string_view what) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return ErrnoError(errno, absl::StrFormat("stat %s", path));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("%s socket path %s exists and is not a socket", what, path));
  }
  if (UnixSocketInUse(path)) {
    return absl::AlreadyExistsError(
        absl::StrFormat("another process serves the %s socket %s", what, path));
  }
  if (unlink(path.c_str()) != 0) return ErrnoError(errno, absl::StrFormat("remove %s", path));
  return absl::OkStatus();
}

}  // namespace ringfs::rpc
