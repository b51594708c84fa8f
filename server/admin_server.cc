#include "server/admin_server.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/rpc/endpoint.h"
#include "common/rpc/grpc_serving.h"
#include "common/status.h"
#include "common/unique_fd.h"

namespace ringfs::server {
namespace {

// gRPC's Shutdown() waits this long whatever runs; the calls are short (a Drain's wait ends
// when the Server stops).
constexpr auto kShutdownGrace = std::chrono::milliseconds(300);



}  // namespace

AdminServer::AdminServer(AdminBackend* backend, std::string address, std::string token)
    : backend_(backend), address_(std::move(address)), token_(std::move(token)) {}

AdminServer::~AdminServer() { Stop(); }

absl::Status AdminServer::CheckAddress(const std::string& address, const std::string& token) {
  absl::StatusOr<rpc::Endpoint> endpoint = rpc::ParseAddress(address);
  if (!endpoint.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--admin %s: %s", address, endpoint.status().message()));
  }
  if (endpoint->kind == rpc::Endpoint::Kind::kTcp && token.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--admin %s (TCP) needs --token-file: the admin service requires the token on TCP",
        address));
  }
  return absl::OkStatus();
}

absl::Status AdminServer::Start() {
  RETURN_IF_ERROR(CheckAddress(address_, token_));
  ASSIGN_OR_RETURN(rpc::Endpoint endpoint, rpc::ParseAddress(address_));
  const bool tcp = endpoint.kind == rpc::Endpoint::Kind::kTcp;
  if (!tcp) {
    unix_path_ = endpoint.address;
    RETURN_IF_ERROR(rpc::ClaimUnixSocketPath(unix_path_, "admin"));
  }
  // On a Unix socket the file mode (0600, root) is the access control.
  service_ = std::make_unique<AdminService>(backend_, tcp ? token_ : std::string());
  grpc::ServerBuilder builder;
  int bound_port = 0;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   rpc::ServerCredentialsFor(endpoint, tls_));
  builder.AddListeningPort(endpoint.GrpcAddress(), credentials, tcp ? &bound_port : nullptr);
  builder.RegisterService(service_.get());
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      rpc::StartGrpcServer(builder, endpoint, "admin");
  if (!server.ok()) {
    service_.reset();
    if (!unix_path_.empty()) unlink(unix_path_.c_str());
    unix_path_.clear();
    return server.status();
  }
  server_ = *std::move(server);
  if (tcp) {
    address_ = absl::StrFormat("%s:%d", endpoint.address.substr(0, endpoint.address.rfind(':')),
                               bound_port);
  }
  RINGFS_LOG_INFO("admin service on %s%s", address_,
                  !tcp                ? " (mode 0600)"
                  : tls_.cert.empty() ? " (token required)"
                                      : " (TLS, token required)");
  return absl::OkStatus();
}

void AdminServer::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
  server_.reset();
  service_.reset();
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
  RINGFS_LOG_INFO("admin service on %s stopped", address_);
}

}  // namespace ringfs::server
