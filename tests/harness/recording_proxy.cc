#include "tests/harness/recording_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace ringfs::testing {
namespace {

int ConnectUpstream(const std::string& address) {
  size_t colon = address.rfind(':');
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  if (inet_pton(AF_INET, address.substr(0, colon).c_str(), &in.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool RecordingProxy::Start(std::string* error) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(in);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&in), &len) != 0) {
    *error = std::string("proxy listen: ") + std::strerror(errno);
    return false;
  }
  address_ = "127.0.0.1:" + std::to_string(ntohs(in.sin_port));
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this] { Run(); });
  return true;
}

void RecordingProxy::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  (void)!write(stop_fd_, &one, sizeof(one));
  thread_.join();
  close(listen_fd_);
  close(stop_fd_);
}

std::string RecordingProxy::captured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return captured_;
}

// One thread relays every pair with poll(): enough for a test's few connections.
void RecordingProxy::Run() {
  struct Pair {
    int a, b;  // a: the client side, b: upstream
  };
  std::vector<Pair> pairs;
  std::vector<char> buf(256 * 1024);
  for (;;) {
    std::vector<pollfd> fds = {{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Pair& p : pairs) {
      fds.push_back({p.a, POLLIN, 0});
      fds.push_back({p.b, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        int up = ConnectUpstream(upstream_);
        if (up < 0) {
          close(client);
        } else {
          pairs.push_back({client, up});
          ++connections_;
        }
      }
    }
    std::vector<bool> dead(pairs.size(), false);
    for (size_t i = 0; i < pairs.size(); ++i) {
      for (int side = 0; side < 2; ++side) {
        const pollfd& pfd = fds[2 + 2 * i + side];
        if (pfd.revents == 0) continue;
        int from = side == 0 ? pairs[i].a : pairs[i].b;
        int to = side == 0 ? pairs[i].b : pairs[i].a;
        ssize_t n = recv(from, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          dead[i] = true;
          continue;
        }
        if (n < 0) continue;
        {
          std::lock_guard<std::mutex> lock(mu_);
          captured_.append(buf.data(), static_cast<size_t>(n));
        }
        for (ssize_t off = 0; off < n;) {
          ssize_t w = send(to, buf.data() + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
          if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
              pollfd out{to, POLLOUT, 0};
              poll(&out, 1, 1000);
              continue;
            }
            dead[i] = true;
            break;
          }
          off += w;
        }
      }
    }
    std::vector<Pair> live;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (dead[i]) {
        close(pairs[i].a);
        close(pairs[i].b);
      } else {
        live.push_back(pairs[i]);
      }
    }
    pairs.swap(live);
  }
  for (const Pair& p : pairs) {
    close(p.a);
    close(p.b);
  }
}

}  // namespace ringfs::testing
