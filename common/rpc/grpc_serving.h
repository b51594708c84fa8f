// What ringfs-mount's control service and ringfs-server's admin service share when they serve
// gRPC: starting the server on an Endpoint (a Unix socket is owner-only from its creation), and
// the bearer-token check of the TCP rule. Main thread for StartGrpcServer; CheckBearer from any.
#pragma once

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/rpc/endpoint.h"

namespace ringfs::rpc {

// BuildAndStart() of `builder` (already given its port and services) for `endpoint`. A Unix
// socket is created 0600 under a temporary umask of 0177, so there is no moment in which others
// could connect; only the main thread may create files meanwhile. `what` names the service in
// messages ("control", "admin"). Unavailable when gRPC cannot serve there.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(grpc::ServerBuilder& builder,
                                                              const Endpoint& endpoint,
                                                              std::string_view what);

// OK when `expected_authorization` (BearerValue of the token) is empty, or when the call's
// "authorization" metadata equals it (compared in constant time); Unauthenticated otherwise.
absl::Status CheckBearer(const grpc::ServerContext& context,
                         std::string_view expected_authorization);

}  // namespace ringfs::rpc
