// Serves the control service of one mount on its endpoint (see endpoint.h): creates
// /run/ringfs for the default socket, binds the Unix socket with mode 0600, requires the token
// on TCP, and removes the socket file again on Stop().
// Used by the main thread: Start() once after the mount is up, Stop() once after it ended.
// The session must outlive the server.
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/rpc/endpoint.h"
#include "common/rpc/grpc_tls.h"
#include "controller/control_service.h"
#include "frontend/mount_session.h"

namespace ringfs::controller {

struct ControlServerOptions {
  std::string control;     // the mount option control= (see ParseControlOption)
  std::string token_file;  // control_token_file=; required for TCP
  std::string mountpoint;  // absolute, resolved
  // TLS on a TCP control address: the mount's tls_cert=/tls_key= (none: plaintext).
  rpc::TlsFiles tls;
};

class ControlServer {
 public:
  ControlServer(frontend::MountSession* session, ControlServerOptions options);
  ~ControlServer();  // Stop()

  // Checks what can be checked before mounting: the endpoint's syntax and, for TCP, that the
  // token file is readable and not empty.
  [[nodiscard]] static absl::Status CheckOptions(const ControlServerOptions& options);

  // Nothing to do for control=none. Refuses to take over a socket path that another live
  // process still serves.
  [[nodiscard]] absl::Status Start();
  // Idempotent.
  void Stop();

  // Where the service listens (a TCP port 0 resolved to the bound port); "none" when off.
  std::string endpoint() const { return endpoint_.ToString(); }

 private:
  absl::Status PrepareUnixPath(const std::string& path);

  frontend::MountSession* const session_;
  const ControlServerOptions options_;
  rpc::Endpoint endpoint_;
  std::unique_ptr<ControlService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace ringfs::controller
