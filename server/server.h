// The ringfs-server process minus flag parsing: opens the export, builds the client registry,
// the workers and the listener, and wires them. Start()/Stop() from one controlling thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/unique_fd.h"
#include "server/client_registry.h"
#include "server/config.h"
#include "server/listener.h"
#include "server/worker.h"

namespace ringfs::server {

class Server {
 public:
  explicit Server(ServerConfig config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Opens the export, starts the workers, then listens. On success bound_address() is valid.
  absl::Status Start();
  // Stops accepting, closes every connection, joins all threads. Idempotent.
  void Stop();

  const std::string& bound_address() const;
  ClientRegistry* registry() { return registry_.get(); }

 private:
  const ServerConfig config_;
  UniqueFd export_fd_;
  std::unique_ptr<ClientRegistry> registry_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Listener> listener_;
  std::atomic<uint64_t> next_worker_{0};
};

// Writes `line` + "\n" to `path` atomically (temporary file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& line);

}  // namespace ringfs::server
