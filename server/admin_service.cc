#include "server/admin_service.h"

#include <string_view>

#include "absl/strings/str_format.h"
#include "common/rpc/endpoint.h"
#include "common/rpc/grpc_serving.h"
#include "common/rpc/rpc_status.h"

namespace ringfs::server {

absl::Status ValidateSessionLimit(const admin::SetSessionLimitRequest& request) {
  if (request.max_inflight() < 1 || request.max_inflight() > kMaxSessionLimit) {
    return absl::InvalidArgumentError(absl::StrFormat("max_inflight must be in 1..%u, got %u",
                                                      kMaxSessionLimit, request.max_inflight()));
  }
  return absl::OkStatus();
}

AdminService::AdminService(AdminBackend* backend, std::string token)
    : backend_(backend),
      expected_authorization_(token.empty() ? std::string() : rpc::BearerValue(token)) {}

absl::Status AdminService::Authorize(const grpc::ServerContext& context) const {
  return rpc::CheckBearer(context, expected_authorization_);
}

template <typename Body>
grpc::Status AdminService::Serve(grpc::ServerContext* context, Body&& body) {
  absl::Status status = Authorize(*context);
  if (status.ok()) status = body();
  return rpc::ToGrpcStatus(status);
}

grpc::Status AdminService::ListSessions(grpc::ServerContext* context,
                                        const admin::ListSessionsRequest* request,
                                        admin::ListSessionsResponse* reply) {
  return Serve(context, [&] {
    *reply = backend_->ListSessions();
    return absl::OkStatus();
  });
}

grpc::Status AdminService::GetExport(grpc::ServerContext* context,
                                     const admin::GetExportRequest* request,
                                     admin::ExportInfo* reply) {
  return Serve(context, [&] {
    *reply = backend_->GetExport();
    return absl::OkStatus();
  });
}

grpc::Status AdminService::ListClients(grpc::ServerContext* context,
                                       const admin::ListClientsRequest* request,
                                       admin::ListClientsResponse* reply) {
  return Serve(context, [&] {
    *reply = backend_->ListClients();
    return absl::OkStatus();
  });
}

grpc::Status AdminService::SetSessionLimit(grpc::ServerContext* context,
                                           const admin::SetSessionLimitRequest* request,
                                           admin::SessionInfo* reply) {
  return Serve(context, [&]() -> absl::Status {
    if (absl::Status valid = ValidateSessionLimit(*request); !valid.ok()) return valid;
    absl::StatusOr<admin::SessionInfo> info =
        backend_->SetSessionLimit(request->session_id(), request->max_inflight());
    if (!info.ok()) return info.status();
    *reply = *std::move(info);
    return absl::OkStatus();
  });
}

grpc::Status AdminService::Drain(grpc::ServerContext* context, const admin::DrainRequest* request,
                                 admin::DrainResponse* reply) {
  return Serve(context, [&] {
    *reply = backend_->Drain(absl::Milliseconds(request->timeout_ms()),
                             [context] { return context->IsCancelled(); });
    return absl::OkStatus();
  });
}

}  // namespace ringfs::server
