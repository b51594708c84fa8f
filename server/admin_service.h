// ringfs.admin.ServerAdmin (proto/admin.proto): thin handlers. Each checks the token (the TCP
// rule) and the request, then calls the AdminBackend (the Server), which owns the policy and
// applies changes through the workers' mailboxes. Statuses are absl inside and become gRPC
// statuses once, in Serve(). Threads: gRPC's; the backend must outlive the service.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/admin.grpc.pb.h"

namespace ringfs::server {

// Largest per-session in-flight limit (as --max-inflight).
inline constexpr uint32_t kMaxSessionLimit = 65536;

// What the admin service reads and changes. Any thread.
class AdminBackend {
 public:
  virtual ~AdminBackend() = default;
  virtual admin::ListSessionsResponse ListSessions() const = 0;
  virtual admin::ExportInfo GetExport() const = 0;
  virtual admin::ListClientsResponse ListClients() const = 0;
  // NotFound for a session that is not live. The reply is the session read back after the
  // owning worker applied the limit. REQUIRES: ValidateSessionLimit() accepted the values.
  virtual absl::StatusOr<admin::SessionInfo> SetSessionLimit(uint64_t session_id,
                                                             uint32_t max_inflight) = 0;
  // Stops accepting connections and requests, then waits up to `timeout` (or until `cancelled`
  // returns true) for the requests in flight to be answered.
  virtual admin::DrainResponse Drain(absl::Duration timeout, std::function<bool()> cancelled) = 0;
};

// InvalidArgument unless 1 <= max_inflight <= kMaxSessionLimit. (Which sessions exist is the
// backend's to say: NotFound.)
[[nodiscard]] absl::Status ValidateSessionLimit(const admin::SetSessionLimitRequest& request);

class AdminService final : public admin::ServerAdmin::Service {
 public:
  // `token` empty: no authentication (Unix socket, mode 0600); otherwise every call must carry
  // "authorization: Bearer <token>".
  AdminService(AdminBackend* backend, std::string token);

  grpc::Status ListSessions(grpc::ServerContext* context, const admin::ListSessionsRequest* request,
                            admin::ListSessionsResponse* reply) override;
  grpc::Status GetExport(grpc::ServerContext* context, const admin::GetExportRequest* request,
                         admin::ExportInfo* reply) override;
  grpc::Status ListClients(grpc::ServerContext* context, const admin::ListClientsRequest* request,
                           admin::ListClientsResponse* reply) override;
  grpc::Status SetSessionLimit(grpc::ServerContext* context,
                               const admin::SetSessionLimitRequest* request,
                               admin::SessionInfo* reply) override;
  grpc::Status Drain(grpc::ServerContext* context, const admin::DrainRequest* request,
                     admin::DrainResponse* reply) override;

 private:
  // The RPC edge: authorizes, runs `body`, converts its status once.
  template <typename Body>
  grpc::Status Serve(grpc::ServerContext* context, Body&& body);
  absl::Status Authorize(const grpc::ServerContext& context) const;

  AdminBackend* const backend_;
  const std::string expected_authorization_;  // "Bearer <token>", or empty
};

}  // namespace ringfs::server
