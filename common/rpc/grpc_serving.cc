#include "common/rpc/grpc_serving.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/str_format.h"
#include "common/status.h"

namespace ringfs::rpc {

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(grpc::ServerBuilder& builder,
                                                              const Endpoint& endpoint,
                                                              std::string_view what) {
  std::unique_ptr<grpc::Server> server;
  if (endpoint.kind == Endpoint::Kind::kUnix) {
    mode_t old_umask = umask(0177);
    server = builder.BuildAndStart();
    umask(old_umask);
    if (server && chmod(endpoint.address.c_str(), 0600) != 0) {
      absl::Status status = ErrnoError(errno, absl::StrFormat("chmod %s", endpoint.address));
      server->Shutdown(std::chrono::system_clock::now());
      server->Wait();
      return status;
    }
  } else {
    server = builder.BuildAndStart();
  }
  if (!server) {
    return absl::UnavailableError(
        absl::StrFormat("cannot serve the %s service on %s", what, endpoint.ToString()));
  }
  return server;
}

absl::Status CheckBearer(const grpc::ServerContext& context,
                         std::string_view expected_authorization) {
  if (expected_authorization.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) {
    return absl::UnauthenticatedError("missing authorization metadata (Bearer token)");
  }
  std::string_view presented(it->second.data(), it->second.size());
  if (!ConstantTimeEquals(presented, expected_authorization)) {
    return absl::UnauthenticatedError("wrong token");
  }
  return absl::OkStatus();
}

}  // namespace ringfs::rpc
