// ringfs.control.QueueControl (proto/control.proto): thin handlers over the mount's
// MountSession and QueueEngine. The engine owns the policy (validation, applying on the owning
// workers); a handler only turns the request into a QueueConfig change, calls the engine, and
// reads the state back. Statuses are absl inside and become gRPC statuses once, in Serve().
// Threads: gRPC's; the session must outlive the service. With a token every call must carry
// "authorization: Bearer <token>" (the TCP rule); without one (Unix socket, mode 0600) the
// socket's permissions are the access control.
#pragma once

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "frontend/mount_session.h"
#include "frontend/queue/queue_config.h"
#include "proto/control.grpc.pb.h"

namespace ringfs::controller {

class ControlService final : public control::QueueControl::Service {
 public:
  // `token` empty: no authentication.
  ControlService(frontend::MountSession* session, std::string token);

  // Ends running watches and refuses later calls (UNAVAILABLE); call before the server's
  // Shutdown() so that streaming calls do not hold it up.
  void Shutdown();

  grpc::Status ListQueues(grpc::ServerContext* context, const control::ListQueuesRequest* request,
                          control::QueueState* reply) override;
  grpc::Status SetActiveSet(grpc::ServerContext* context,
                            const control::SetActiveSetRequest* request,
                            control::QueueState* reply) override;
  grpc::Status SetBackgroundLimit(grpc::ServerContext* context,
                                  const control::SetBackgroundLimitRequest* request,
                                  control::QueueState* reply) override;
  grpc::Status SetPolicy(grpc::ServerContext* context, const control::SetPolicyRequest* request,
                         control::QueueState* reply) override;
  grpc::Status GetKernelLimits(grpc::ServerContext* context,
                               const control::GetKernelLimitsRequest* request,
                               control::KernelLimits* reply) override;
  grpc::Status SetKernelLimits(grpc::ServerContext* context,
                               const control::SetKernelLimitsRequest* request,
                               control::KernelLimits* reply) override;
  grpc::Status GetMountInfo(grpc::ServerContext* context,
                            const control::GetMountInfoRequest* request,
                            control::MountInfo* reply) override;
  grpc::Status WatchQueues(grpc::ServerContext* context, const control::WatchQueuesRequest* request,
                           grpc::ServerWriter<control::QueueState>* writer) override;

 private:
  // The RPC edge: authorizes, runs `body`, converts its status once.
  template <typename Body>
  grpc::Status Serve(grpc::ServerContext* context, Body&& body);
  absl::Status Authorize(const grpc::ServerContext& context) const;

  // FailedPrecondition with the classic transport.
  absl::StatusOr<frontend::QueueEngine*> Engine();
  // Reads the current config, lets `change` edit it, applies it, reads the state back.
  // Serialised so that concurrent changes do not overwrite each other.
  template <typename Change>
  absl::Status ChangeConfig(Change&& change, control::QueueState* reply)
      ABSL_LOCKS_EXCLUDED(change_mu_);
  absl::Status Watch(grpc::ServerContext* context, const control::WatchQueuesRequest& request,
                     grpc::ServerWriter<control::QueueState>* writer);

  frontend::MountSession* const session_;
  const std::string expected_authorization_;  // "Bearer <token>", or empty
  absl::Mutex change_mu_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace ringfs::controller
