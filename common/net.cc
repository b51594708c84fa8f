#include "common/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ringfs {
namespace {

using Clock = std::chrono::steady_clock;

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

absl::Status WaitFor(int fd, short events, Clock::time_point deadline, std::string_view what) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = poll(&p, 1, RemainingMs(deadline));
    if (n > 0) return absl::OkStatus();
    if (n == 0) return ErrnoError(ETIMEDOUT, what);
    if (errno != EINTR) return ErrnoError(errno, what);
  }
}

}  // namespace

absl::StatusOr<std::vector<SocketAddress>> ResolveSocketAddresses(std::string_view text) {
  SocketAddress out;
  out.text = std::string(text);
  if (text.starts_with("unix:")) {
    std::string_view path = text.substr(5);
    sockaddr_un un{};
    if (path.empty() || path.size() >= sizeof(un.sun_path)) {
      return absl::InvalidArgumentError(absl::StrFormat("bad unix socket path in '%s'", text));
    }
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, path.data(), path.size());
    std::memcpy(&out.storage, &un, sizeof(un));
    out.length = sizeof(un);
    out.is_unix = true;
    return std::vector<SocketAddress>{out};
  }
  std::string_view host, port;
  if (text.starts_with("[")) {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrFormat("expected [ADDR]:PORT, got '%s'", text));
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrFormat("expected HOST:PORT, got '%s'", text));
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  uint32_t port_number = 0;
  if (port.empty() || !absl::SimpleAtoi(std::string(port), &port_number) || port_number > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat("bad port in '%s'", text));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  std::string host_string(host.empty() ? "0.0.0.0" : host);
  int rc = getaddrinfo(host_string.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", host_string, "': ", gai_strerror(rc)));
  }
  std::vector<SocketAddress> all;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    SocketAddress one = out;
    std::memcpy(&one.storage, ai->ai_addr, ai->ai_addrlen);
    one.length = ai->ai_addrlen;
    if (one.storage.ss_family == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&one.storage)->sin_port = htons(port_number);
    } else {
      reinterpret_cast<sockaddr_in6*>(&one.storage)->sin6_port = htons(port_number);
    }
    bool seen = false;
    for (const SocketAddress& other : all) {
      seen = seen || (other.length == one.length &&
                      std::memcmp(&other.storage, &one.storage, one.length) == 0);
    }
    if (!seen) all.push_back(one);
  }
  freeaddrinfo(result);
  if (all.size() > 1) {
    // Tell the addresses of one name apart in messages.
    for (SocketAddress& one : all) {
      char numeric[INET6_ADDRSTRLEN] = "?";
      const void* where = one.storage.ss_family == AF_INET
                              ? static_cast<const void*>(
                                    &reinterpret_cast<sockaddr_in*>(&one.storage)->sin_addr)
                              : &reinterpret_cast<sockaddr_in6*>(&one.storage)->sin6_addr;
      inet_ntop(one.storage.ss_family, where, numeric, sizeof(numeric));
      one.text = absl::StrFormat("%s (%s)", one.text, numeric);
    }
  }
  return all;
}

absl::StatusOr<SocketAddress> ParseSocketAddress(std::string_view text) {
  absl::StatusOr<std::vector<SocketAddress>> all = ResolveSocketAddresses(text);
  if (!all.ok()) return all.status();
  SocketAddress first = std::move(all->front());
  first.text = std::string(text);
  return first;
}

absl::StatusOr<UniqueFd> ListenOn(const SocketAddress& address, int backlog) {
  UniqueFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoError(errno, "socket");
  if (address.is_unix) {
    // A socket file left by an earlier run would make bind fail; one that still accepts
    // connections belongs to a live process and is left alone.
    const auto* un = reinterpret_cast<const sockaddr_un*>(&address.storage);
    struct stat existing {};
    if (lstat(un->sun_path, &existing) == 0 && S_ISSOCK(existing.st_mode)) {
      UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
      if (connect(probe.get(), reinterpret_cast<const sockaddr*>(&address.storage),
                  address.length) == 0) {
        return ErrnoError(EADDRINUSE, absl::StrFormat("%s: a server is listening there",
                                                      address.text));
      }
      unlink(un->sun_path);
    }
  } else {
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  }
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    return ErrnoError(errno, absl::StrCat("bind ", address.text));
  }
  if (listen(fd.get(), backlog) != 0) return ErrnoError(errno, absl::StrCat("listen ", address.text));
  return fd;
}

absl::StatusOr<UniqueFd> ConnectTo(const SocketAddress& address,
                                   std::chrono::milliseconds timeout) {
  UniqueFd fd(socket(address.storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoError(errno, "socket");
  auto deadline = Clock::now() + timeout;
  std::string what = absl::StrCat("connect ", address.text);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    if (errno != EINPROGRESS) return ErrnoError(errno, what);
    RETURN_IF_ERROR(WaitFor(fd.get(), POLLOUT, deadline, what));
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return ErrnoError(err, what);
  }
  int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  TuneDataSocket(fd.get(), address.is_unix);
  return fd;
}

absl::Status SendAll(int fd, const void* data, size_t size, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "send"));
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoError(errno, "send");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReceiveAll(int fd, void* data, size_t size, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  char* p = static_cast<char*>(data);
  while (size > 0) {
    RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "receive"));
    ssize_t n = recv(fd, p, size, MSG_DONTWAIT);
    if (n == 0) return ErrnoError(ECONNRESET, "receive: peer closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ErrnoError(errno, "receive");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

void TuneDataSocket(int fd, bool is_unix) {
  if (is_unix) return;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace ringfs
