// Test-only raw data-wire client: connects, handshakes, sends hand-built FUSE frames and reads
// replies with a timeout (tests never hang). Single-threaded use.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "proto/fuse_abi.h"
#include "proto/handshake.pb.h"

namespace ringfs::server::testing {

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

template <typename T>
std::string Bytes(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(T));
}

// `name` followed by its NUL.
inline std::string CName(std::string_view name) { return std::string(name) + '\0'; }

// A complete request frame: fuse_in_header (len filled in) + `args`.
std::string Frame(uint32_t opcode, uint64_t unique, uint64_t nodeid, const std::string& args,
                  uint32_t uid = 0, uint32_t gid = 0);

struct Reply {
  fuse_out_header header{};
  std::string body;
  template <typename T>
  T As() const {
    T value{};
    std::memcpy(&value, body.data(), std::min(sizeof(T), body.size()));
    return value;
  }
};

wire::ClientHello DefaultHello(const std::string& client_id = "test-client");

// The CPUs this process may run on (its affinity set), ascending: what the server's default
// --workers counts and places workers on (cpu_placement.h).
std::vector<int> AllowedCpus();

class TestClient {
 public:
  // Connects to `address` ("HOST:PORT" or "unix:PATH") and sends only the raw bytes given.
  static absl::StatusOr<std::unique_ptr<TestClient>> ConnectRaw(const std::string& address);
  // Connects and completes a handshake; `reply` receives the final ServerHello. With a
  // `secret` the hello gets a nonce (unless it has one) and a challenge is answered;
  // PermissionDenied when the server's proof is wrong (nothing is sent then).
  static absl::StatusOr<std::unique_ptr<TestClient>> Connect(const std::string& address,
                                                             const wire::ClientHello& hello,
                                                             wire::ServerHello* reply,
                                                             const std::string& secret = "");

  absl::Status Send(const std::string& bytes);
  absl::StatusOr<Reply> Receive(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Send + Receive, checking the reply's unique.
  absl::StatusOr<Reply> Call(const std::string& frame);
  // True when the server closed the connection within `timeout` (EOF or reset).
  bool WaitClosed(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  int fd() const { return fd_.get(); }

 private:
  explicit TestClient(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace ringfs::server::testing
