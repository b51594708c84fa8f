// The ringfs-server process minus flag parsing: opens the export, builds the client registry,
// the workers, the optional metrics endpoint and admin service, and the listener, and wires
// them. It is also the admin service's backend: it owns the policy of the admin RPCs and
// applies changes through the owning workers' mailboxes.
// Start()/Stop() from one controlling thread; the AdminBackend methods from any thread between
// them (the admin service stops first in Stop()).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/unique_fd.h"
#include "server/admin_server.h"
#include "server/admin_service.h"
#include "server/authenticator.h"
#include "server/client_registry.h"
#include "server/coherence.h"
#include "server/config.h"
#include "server/cpu_placement.h"
#include "server/export_watch.h"
#include "server/group_cache.h"
#include "server/listener.h"
#include "server/server_metrics.h"
#include "server/server_stats.h"
#include "server/worker.h"
#include "server/worker_sched.h"

namespace ringfs::server {

class Server final : public AdminBackend {
 public:
  explicit Server(ServerConfig config);
  ~Server() override;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Opens the export, starts the workers, the metrics endpoint and the admin service, then
  // listens. On success bound_address() is valid.
  absl::Status Start();
  // Stops the admin service and metrics, stops accepting, closes every connection, joins all
  // threads. Idempotent.
  void Stop();

  const std::string& bound_address() const;
  // After Start(), "" when off: where the admin service and /metrics are served.
  std::string admin_address() const { return admin_ ? admin_->address() : std::string(); }
  std::string metrics_address() const { return metrics_ ? metrics_->address() : std::string(); }
  ClientRegistry* registry() { return registry_.get(); }
  // After Start(): who may connect, and the counts of refusals by reason.
  const Authenticator* authenticator() const { return auth_.get(); }
  // After Start(): this process's ServerHello.instance_id.
  uint64_t instance_id() const { return instance_id_; }

  // AdminBackend.
  admin::ListSessionsResponse ListSessions() const override;
  admin::ExportInfo GetExport() const override;
  admin::ListClientsResponse ListClients() const override;
  absl::StatusOr<admin::SessionInfo> SetSessionLimit(uint64_t session_id,
                                                     uint32_t max_inflight) override;
  admin::DrainResponse Drain(absl::Duration timeout, std::function<bool()> cancelled) override;

 private:
  uint64_t InflightTotal() const;
  // How the client states keep their nodes (file handles or one fd each), logged once, and
  // the seal of their node handles. Fails when --handle-key names an unusable key.
  absl::StatusOr<ClientRegistry::Options> NodeTableOptions() const;

  // Frees client states whose grace period ended, until Stop().
  void ReapLoop();

  const ServerConfig config_;
  std::string server_id_;
  uint64_t instance_id_ = 0;  // ServerHello.instance_id, drawn by Start()
  CpuPlacement placement_;    // set by Start() before the workers start
  std::unique_ptr<WorkerSchedWatch> sched_watch_;  // with pinned workers
  UniqueFd export_fd_;
  std::unique_ptr<ClientRegistry> registry_;
  std::unique_ptr<Coherence> coherence_;  // shares the registry's lifetime; before the workers
  std::unique_ptr<ExportWatch> export_watch_;  // null: off or unavailable
  std::unique_ptr<GroupCache> groups_;  // null with --no-manage-gids
  std::shared_ptr<Authenticator> auth_;  // shared with the listener
  std::thread reaper_;
  absl::Notification stop_reaper_;
  SessionTable sessions_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<AdminServer> admin_;
  std::atomic<uint64_t> next_worker_{0};
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopping_{false};

  // Serialises the listener's Start/StopAccepting/Stop between the controlling thread and a
  // Drain call.
  absl::Mutex listener_mu_;
  std::unique_ptr<Listener> listener_ ABSL_GUARDED_BY(listener_mu_);
  std::string bound_address_;  // set once by Start()
};

// Writes `line` + "\n" to `path` atomically (temporary file + rename).
absl::Status WriteFileAtomically(const std::string& path, const std::string& line);

}  // namespace ringfs::server
