// A TCP proxy on 127.0.0.1 that relays every connection to one upstream address and records
// every byte it relays (both directions), so a test can check what crossed the wire. Test-only.
// Start() once from the test thread; Stop() (also the destructor) joins the relay thread;
// captured() may be called from the test thread at any time.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace ringfs::testing {

class RecordingProxy {
 public:
  explicit RecordingProxy(std::string upstream) : upstream_(std::move(upstream)) {}
  ~RecordingProxy() { Stop(); }
  RecordingProxy(const RecordingProxy&) = delete;
  RecordingProxy& operator=(const RecordingProxy&) = delete;

  // Listens on 127.0.0.1:0; false (with `error`) when it cannot.
  bool Start(std::string* error);
  void Stop();
  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  std::string captured() const;
  size_t connections() const { return connections_.load(); }

 private:
  void Run();

  const std::string upstream_;
  std::string address_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  std::thread thread_;
  std::atomic<size_t> connections_{0};
  mutable std::mutex mu_;
  std::string captured_;  // guarded by mu_
};

}  // namespace ringfs::testing
