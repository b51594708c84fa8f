// The per-client state shared by all connections of one mount (same client_id): its node table,
// handle table and reply cache. The kernel may use a node id or fh learned on one queue's
// connection on another, so the state is keyed by client_id, not by connection.
// A state lives while a session (connection) of its client holds a Lease, and for a reclaim
// grace period after the last one ends, so a mount that reconnects carries on; Reap() then
// frees it with its fds. The number of states and of sessions per client are capped.
// Thread-safe; the listener attaches sessions, workers drop leases, the server's reaper reaps.
// Lock order: the registry's mutex is a leaf (states are dropped after it is released).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/handle_seal.h"
#include "server/handle_table.h"
#include "server/invalidation_outbox.h"
#include "server/node_fd_cache.h"
#include "server/node_table.h"
#include "server/reply_cache.h"
#include "server/session_fence.h"

namespace ringfs::server {

struct ClientState {
  ClientState(ReplyCache::Options reply_cache, size_t max_open_files)
      : handles(max_open_files), replies(reply_cache) {}

  std::string client_id;
  std::unique_ptr<NodeTable> nodes;
  // Set when `nodes` keeps nodes by handle and the server has a handle key: the client may
  // negotiate node handles and reclaim (common/node_handle.h).
  std::shared_ptr<const HandleSeal> seal;
  HandleTable handles;
  ReplyCache replies;  // replies of this client's non-idempotent requests, for replays
  // Invalidations for this client's caches made by other clients' changes (coherence.h).
  InvalidationOutbox invalidations;
  // Which of this client's connections replaced which, so resent requests wait for the first
  // copies (session_fence.h). Shared: a session's ticket may outlive the state's last lease.
  std::shared_ptr<SessionFence> fence = std::make_shared<SessionFence>();
};

class ClientRegistry {
 public:
  struct Options {
    // Set: every client gets a HandleNodeTable whose open node fds live in this one cache.
    // Null: a PathNodeTable (one fd per node), for exports where file handles do not work
    // (see ProbeInodeHandles).
    std::shared_ptr<NodeFdCache> node_fds;
    // Seals node handles for clients (with node_fds only); null: no node handles offered.
    std::shared_ptr<const HandleSeal> seal;
    ReplyCache::Options reply_cache;
    // How long a client's state outlives its last session (NFS's grace is 90 s too).
    absl::Duration reclaim_grace = absl::Seconds(90);
    // Client states kept (with or without sessions); a new client beyond it is refused.
    uint32_t max_clients = 1024;
    // Sessions (connections) of one client at a time; one more is refused.
    uint32_t max_sessions_per_client = 256;
    // Open files and directories of one client (each holds an fd); more opens get ENFILE.
    uint32_t max_open_files_per_client = 4096;
    std::function<absl::Time()> now = [] { return absl::Now(); };  // the clock seam for tests
  };

  // One session's hold on its client's state; dropping it ends the session for the registry.
  // Movable; the registry must outlive it.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept { *this = std::move(other); }
    Lease& operator=(Lease&& other) noexcept;
    ~Lease() { Release(); }
    ClientState* get() const { return state_.get(); }
    ClientState* operator->() const { return state_.get(); }
    const std::shared_ptr<ClientState>& state() const { return state_; }

   private:
    friend class ClientRegistry;
    Lease(ClientRegistry* registry, std::shared_ptr<ClientState> state)
        : registry_(registry), state_(std::move(state)) {}
    void Release();
    ClientRegistry* registry_ = nullptr;
    std::shared_ptr<ClientState> state_;
  };

  // `export_root_fd` (O_PATH directory fd) is borrowed and must outlive the registry; every
  // client state gets its own dup of it as node 1.
  explicit ClientRegistry(int export_root_fd) : ClientRegistry(export_root_fd, Options{}) {}
  ClientRegistry(int export_root_fd, Options options)
      : export_root_fd_(export_root_fd), options_(std::move(options)) {}

  // A new session of `client_id`: its state, created on first use or taken up again within the
  // grace period. ResourceExhausted (message for the operator and the client) when the client
  // already has max_sessions_per_client sessions, or is new and max_clients states exist. An
  // empty client_id gets a fresh private state each time (it cannot be matched to anything),
  // freed with its session and not counted.
  absl::StatusOr<Lease> Attach(const std::string& client_id);

  // The state of `client_id` without a session (created on first use, reapable at once after
  // the grace period). For tests and tools.
  absl::StatusOr<std::shared_ptr<ClientState>> GetOrCreate(const std::string& client_id);

  // Frees the states whose last session ended at least reclaim_grace ago (their fds close once
  // no request in flight holds them). Returns how many were freed.
  size_t Reap();

  // Every state but `except` whose client asked for invalidations (coherence.h).
  std::vector<std::shared_ptr<ClientState>> Listeners(const ClientState* except) const;

  size_t size() const;
  size_t sessions(const std::string& client_id) const;
  const Options& options() const { return options_; }

 private:
  struct Entry {
    std::shared_ptr<ClientState> state;
    uint32_t sessions = 0;
    absl::Time idle_since;  // when `sessions` last dropped to 0 (or creation)
  };

  absl::StatusOr<std::shared_ptr<ClientState>> Create(const std::string& client_id) const;
  void Detach(const std::string& client_id);

  const int export_root_fd_;
  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> clients_ ABSL_GUARDED_BY(mu_);
};

// The registry key of a session's state: the client's authenticated name and its client_id
// ("name/client_id"; names never hold '/'), so one client can never attach to another's node
// ids and open files by sending its client_id. An empty client_id stays empty (a private
// state, see Attach).
std::string ClientStateKey(std::string_view client_name, std::string_view client_id);

// The default max_clients: a sixteenth of the soft RLIMIT_NOFILE, within [16, 65536]. A state
// without open files costs two to three fds (root dup, and the export root for reopening by
// handle), so idle states take at most about a sixth of the fd budget.
uint32_t DefaultMaxClients();
// The default max_open_files_per_client: a quarter of the soft RLIMIT_NOFILE, at least 64, so
// that one client cannot take the fds every other client needs.
uint32_t DefaultMaxOpenFilesPerClient();

}  // namespace ringfs::server
