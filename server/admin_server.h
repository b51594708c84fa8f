// Serves the AdminService on `ringfs-server --admin unix:PATH|HOST:PORT`. A Unix socket is
// created with mode 0600 (a stale socket nobody serves is replaced) and removed on Stop(); TCP
// requires the token (refused at Start() without one).
// Used by the Server's controlling thread: Start() once, Stop() once (also the destructor).
// REQUIRES for Start() with a Unix socket: no other thread creates files meanwhile (the process
// umask is narrowed while the socket is bound).
#pragma once

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/rpc/grpc_tls.h"
#include "server/admin_service.h"

namespace ringfs::server {

class AdminServer {
 public:
  // `backend` must outlive the server.
  AdminServer(AdminBackend* backend, std::string address, std::string token);
  // TLS on a TCP address (--tls-cert/--tls-key/--tls-ca). REQUIRES: before Start().
  void SetTls(rpc::TlsFiles files) { tls_ = std::move(files); }
  ~AdminServer();

  // InvalidArgument for an address that is not unix:/ABS or HOST:PORT, or TCP without a token.
  [[nodiscard]] static absl::Status CheckAddress(const std::string& address,
                                                 const std::string& token);

  [[nodiscard]] absl::Status Start();
  // Waits (briefly) for running calls to finish. Idempotent.
  void Stop();

  // "unix:PATH" or "HOST:PORT" with a TCP port 0 resolved (after Start()).
  const std::string& address() const { return address_; }

 private:
  AdminBackend* const backend_;
  std::string address_;
  const std::string token_;
  rpc::TlsFiles tls_;
  std::string unix_path_;
  std::unique_ptr<AdminService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace ringfs::server
