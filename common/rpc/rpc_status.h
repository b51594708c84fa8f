// The one place where an absl::Status becomes a grpc::Status (the RPC edge, STYLE.md 5).
// Stateless; any thread.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ringfs::rpc {

// Same code (absl's codes are gRPC's canonical codes), same message; OK stays OK.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The reverse, for clients that work with absl::Status inside (ringfsctl).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ringfs::rpc
