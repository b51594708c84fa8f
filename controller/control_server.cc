#include "controller/control_server.h"

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
#include "common/rpc/grpc_serving.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "controller/control_endpoint.h"

namespace ringfs::controller {
namespace {

// Streaming calls end at once after ControlService::Shutdown(); this only bounds stragglers.
constexpr auto kShutdownGrace = std::chrono::seconds(2);


// The TCP rule: no token, no service.
absl::StatusOr<std::string> TcpToken(const rpc::Endpoint& endpoint, const std::string& token_file) {
  if (token_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("control=%s (TCP) needs control_token_file=FILE", endpoint.address));
  }
  return rpc::ReadTokenFile(token_file);
}

}  // namespace

ControlServer::ControlServer(frontend::MountSession* session, ControlServerOptions options)
    : session_(session), options_(std::move(options)) {}

ControlServer::~ControlServer() { Stop(); }

absl::Status ControlServer::PrepareUnixPath(const std::string& path) {
  if (path.rfind(std::string(kRuntimeDir) + "/", 0) == 0) {
    if (mkdir(kRuntimeDir, 0755) != 0 && errno != EEXIST) {
      return ErrnoError(errno, absl::StrFormat("create %s", kRuntimeDir));
    }
  }
  // A socket left behind by a mount that died without Stop() is replaced.
  return rpc::ClaimUnixSocketPath(path, "control");
}

absl::Status ControlServer::CheckOptions(const ControlServerOptions& options) {
  ASSIGN_OR_RETURN(rpc::Endpoint endpoint, ParseControlOption(options.control, options.mountpoint));
  if (endpoint.kind == rpc::Endpoint::Kind::kTcp) {
    RETURN_IF_ERROR(TcpToken(endpoint, options.token_file).status());
  }
  return absl::OkStatus();
}

absl::Status ControlServer::Start() {
  ASSIGN_OR_RETURN(endpoint_, ParseControlOption(options_.control, options_.mountpoint));
  if (endpoint_.kind == rpc::Endpoint::Kind::kNone) {
    RINGFS_LOG_INFO("control service off (control=none)");
    return absl::OkStatus();
  }
  std::string token;
  if (endpoint_.kind == rpc::Endpoint::Kind::kTcp) {
    ASSIGN_OR_RETURN(token, TcpToken(endpoint_, options_.token_file));
  } else {
    RETURN_IF_ERROR(PrepareUnixPath(endpoint_.address));
  }

  service_ = std::make_unique<ControlService>(session_, std::move(token));
  grpc::ServerBuilder builder;
  int bound_port = 0;
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   rpc::ServerCredentialsFor(endpoint_, options_.tls));
  builder.AddListeningPort(endpoint_.GrpcAddress(), credentials,
                           endpoint_.kind == rpc::Endpoint::Kind::kTcp ? &bound_port : nullptr);
  builder.RegisterService(service_.get());
  // Only the main thread creates files at this point (StartGrpcServer's umask).
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      rpc::StartGrpcServer(builder, endpoint_, "control");
  if (!server.ok()) {
    service_.reset();
    if (endpoint_.kind == rpc::Endpoint::Kind::kUnix) unlink(endpoint_.address.c_str());
    return server.status();
  }
  server_ = *std::move(server);
  if (endpoint_.kind == rpc::Endpoint::Kind::kTcp) {
    std::string host = endpoint_.address.substr(0, endpoint_.address.rfind(':'));
    endpoint_.address = absl::StrFormat("%s:%d", host, bound_port);
  }
  RINGFS_LOG_INFO(
      "control service on %s%s", endpoint_.ToString(),
      endpoint_.kind != rpc::Endpoint::Kind::kTcp ? " (mode 0600)"
      : options_.tls.cert.empty()                 ? " (token required)"
                                                  : " (TLS, token required)");
  return absl::OkStatus();
}

void ControlServer::Stop() {
  if (!server_) return;
  service_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
  server_.reset();
  service_.reset();
  if (endpoint_.kind == rpc::Endpoint::Kind::kUnix) unlink(endpoint_.address.c_str());
  RINGFS_LOG_INFO("control service on %s stopped", endpoint_.ToString());
}

}  // namespace ringfs::controller
