#include "server/server.h"

#include "common/tls_context.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "server/handle_key.h"
#include "server/id_space.h"
#include "server/inode_handle.h"
#include "server/node_fd_cache.h"
#include "server/thread_creds.h"

namespace ringfs::server {

namespace {

// How long an admin change may wait for a worker to reach its mailbox.
constexpr absl::Duration kApplyTimeout = absl::Seconds(5);
// How often Drain looks at the requests in flight.
constexpr absl::Duration kDrainPoll = absl::Milliseconds(10);

admin::SessionInfo ToSessionInfo(const SessionStats& s) {
  admin::SessionInfo info;
  info.set_session_id(s.session_id);
  // The state key is "name/client_id" (ClientStateKey): the client_id is what the client sent.
  info.set_client_id(s.client_id.empty() ? s.client_id
                                         : s.client_id.substr(s.client_name.size() + 1));
  info.set_client_name(s.client_name);
  info.set_export_options(s.export_options);
  info.set_peer(s.peer);
  info.set_queue(s.queue);
  info.set_inflight(Read(s.inflight));
  info.set_max_inflight(s.max_inflight.load(std::memory_order_relaxed));
  info.set_requests_total(Read(s.requests));
  info.set_bytes_received(Read(s.bytes_received));
  info.set_bytes_sent(Read(s.bytes_sent));
  info.set_sends(Read(s.sends));
  info.set_connected_unix_ns(s.connected_unix_ns);
  info.set_worker(s.worker);
  info.set_this_host(s.same_host);
  return info;
}

// Who may connect (authenticator.h), from the clients file and --token-file. Without either
// everyone gets in, as before there was authentication: say so loudly once.
std::shared_ptr<Authenticator> MakeAuthenticator(const ServerConfig& config) {
  Authenticator::Options options;
  options.clients = config.clients;
  options.any_name_secret = config.token;
  options.defaults = config.export_options;
  auto auth = std::make_shared<Authenticator>(std::move(options));
  if (!auth->required()) {
    RINGFS_LOG_WARN("no --clients and no --token-file: every client is accepted without "
                    "authentication, under any name, with --export-options %s",
                    FormatExportOptions(config.export_options));
  } else {
    RINGFS_LOG_INFO("authentication required: %u named client(s)%s%s", config.clients.size(),
                    config.clients_file.empty() ? "" : " from " + config.clients_file,
                    config.token.empty() ? "" : ", and any name with the --token-file secret");
  }
  return auth;
}

}  // namespace

Server::Server(ServerConfig config) : config_(std::move(config)) {}

Server::~Server() { Stop(); }

absl::Status Server::Start() {
  export_fd_.Reset(open(config_.export_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!export_fd_.valid()) {
    return ErrnoError(errno, absl::StrFormat("open export '%s'", config_.export_dir));
  }
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  server_id_ = absl::StrFormat("%s:%d", host, getpid());
  // Also proves getrandom works before any table draws its id key (IdSpace::RandomKey).
  ASSIGN_OR_RETURN(instance_id_, DrawInstanceId());
  RINGFS_LOG_INFO("instance id %016x", instance_id_);
  ASSIGN_OR_RETURN(ClientRegistry::Options registry_options, NodeTableOptions());
  registry_options.reclaim_grace = absl::Seconds(config_.reclaim_grace_s);
  registry_options.max_clients =
      config_.max_clients != 0 ? config_.max_clients : DefaultMaxClients();
  registry_options.max_sessions_per_client = config_.max_sessions_per_client;
  registry_options.max_open_files_per_client = config_.max_open_files_per_client != 0
                                                   ? config_.max_open_files_per_client
                                                   : DefaultMaxOpenFilesPerClient();
  RINGFS_LOG_INFO("client states: freed %ds after their last session, at most %u clients of "
                  "at most %u sessions and %u open files each; idle connections closed after %ds",
                  config_.reclaim_grace_s, registry_options.max_clients,
                  registry_options.max_sessions_per_client,
                  registry_options.max_open_files_per_client, config_.idle_timeout_s);
  registry_ = std::make_unique<ClientRegistry>(export_fd_.get(), std::move(registry_options));
  coherence_ = std::make_unique<Coherence>(registry_.get());
  if (config_.export_watch) {
    export_watch_ = std::make_unique<ExportWatch>(config_.export_dir, coherence_.get());
    if (absl::Status watch = export_watch_->Start(); !watch.ok()) {
      RINGFS_LOG_WARN("changes made on the export directly (not through ringfs) are seen by "
                      "clients only when their caches expire: %s", watch.message());
      export_watch_.reset();
    } else {
      RINGFS_LOG_INFO("watching the export's filesystem for changes made on the server");
    }
  }
  auth_ = MakeAuthenticator(config_);  // before the reaper, which flushes its log
  reaper_ = std::thread([this] { ReapLoop(); });
  const bool act_as_callers = CanActAsCallers();
  if (config_.manage_gids) groups_ = std::make_unique<GroupCache>();
  if (act_as_callers) {
    RINGFS_LOG_INFO("requests run as their callers (%s; supplementary groups %s)",
                    FormatExportOptions(config_.export_options),
                    config_.manage_gids ? "from this server's user database" : "not used");
  } else {
    RINGFS_LOG_WARN("not running as root: every request runs as uid %u, whoever the caller; "
                    "files are created as that user and only its permissions are checked",
                    geteuid());
  }
  placement_ = CpuPlacement::Plan(config_.workers, config_.pin_workers);
  RINGFS_LOG_INFO("%s", placement_.description());
  std::vector<const WorkerStats*> stats;
  for (uint32_t i = 0; i < config_.workers; ++i) {
    Worker::Options options;
    options.index = i;
    options.cpu = placement_.cpu(i);
    options.floor = config_.floor;
    options.act_as_callers = act_as_callers;
    options.groups = groups_.get();
    options.sessions = &sessions_;
    options.coherence = coherence_.get();
    options.idle_timeout = absl::Seconds(config_.idle_timeout_s);
    options.bulk_window_bytes = config_.bulk_window_bytes;
    workers_.push_back(std::make_unique<Worker>(options));
    RETURN_IF_ERROR(workers_.back()->Start());
    stats.push_back(&workers_.back()->stats());
  }
  if (placement_.cpu(0) >= 0 && config_.worker_sched_idle && !CanLeaveSchedIdle()) {
    RINGFS_LOG_WARN(
        "--worker-sched idle is off: this process could make a worker SCHED_IDLE "
        "but not switch it back when other work starves it (it needs CAP_SYS_NICE or "
        "an RLIMIT_NICE of 20)");
  } else if (placement_.cpu(0) >= 0 && config_.worker_sched_idle) {
    std::vector<Worker*> pinned;
    for (auto& worker : workers_) pinned.push_back(worker.get());
    sched_watch_ = std::make_unique<WorkerSchedWatch>(std::move(pinned));
    sched_watch_->Start();
  }
  if (!config_.metrics.empty()) {
    metrics_ = std::make_unique<ServerMetrics>(std::move(stats), &sessions_, config_.metrics,
                                               auth_.get());
    RETURN_IF_ERROR(metrics_->Start());
  }
  // Before the listener: binding the Unix socket narrows the process umask for a moment, and
  // until clients are accepted no worker creates files.
  if (!config_.admin.empty()) {
    admin_ = std::make_unique<AdminServer>(this, config_.admin, config_.token);
    admin_->SetTls({config_.tls_cert, config_.tls_key, config_.tls_ca});
    RETURN_IF_ERROR(admin_->Start());
  }
  Listener::Options options;
  if (!config_.tls_cert.empty()) {
    ASSIGN_OR_RETURN(options.tls, tls::Context::ForServer(
                                      {config_.tls_cert, config_.tls_key, config_.tls_ca}));
  }
  options.listen = config_.listen;
  options.auth = auth_;
  options.export_options = config_.export_options;
  options.max_inflight = config_.max_inflight;
  options.server_id = server_id_;
  options.instance_id = instance_id_;
  absl::MutexLock lock(&listener_mu_);
  listener_ = std::make_unique<Listener>(options, registry_.get(), [this](ConnectionSetup setup) {
    if (draining_.load()) return;  // a handshake that was in progress when Drain began
    std::optional<uint32_t> local =
        setup.same_host ? placement_.WorkerOn(setup.queue) : std::nullopt;
    setup.colocated = local.has_value();
    uint64_t n = local.has_value() ? *local : next_worker_.fetch_add(1) % workers_.size();
    workers_[n]->Adopt(std::move(setup));
  });
  RETURN_IF_ERROR(listener_->Start());
  bound_address_ = listener_->bound_address();
  if (draining_.load()) listener_->StopAccepting();  // drained before it listened
  return absl::OkStatus();
}

void Server::Stop() {
  stopping_.store(true);  // ends the wait of a Drain call
  // prometheus-cpp's HTTP server needs up to ~2 s to stop; it does so while the rest stops (a
  // scrape only reads the stats and the session table, which outlive Stop()).
  std::thread metrics_stop;
  if (metrics_) metrics_stop = std::thread([this] { metrics_->Stop(); });
  // Then the admin service: no RPC runs on the components below while they stop.
  if (admin_) admin_->Stop();
  if (auth_) auth_->CancelWaits();  // refusals held back answer now: the listener joins them
  {
    absl::MutexLock lock(&listener_mu_);
    if (listener_) listener_->Stop();
  }
  if (export_watch_) export_watch_->Stop();
  if (sched_watch_) sched_watch_->Stop();  // it reads the workers' threads
  for (auto& worker : workers_) worker->Stop();
  if (reaper_.joinable()) {
    stop_reaper_.Notify();
    reaper_.join();
  }
  if (metrics_stop.joinable()) metrics_stop.join();
}

void Server::ReapLoop() {
  // A state is freed between grace and grace + period after its last session.
  const absl::Duration period = std::clamp(absl::Seconds(config_.reclaim_grace_s) / 4,
                                           absl::Milliseconds(50), absl::Seconds(5));
  while (!stop_reaper_.WaitForNotificationWithTimeout(period)) {
    if (auth_) auth_->FlushLog();  // a refusal flood that stopped is summarised in the log
    if (size_t freed = registry_->Reap(); freed > 0) {
      RINGFS_LOG_INFO("freed the state of %u client(s) without a session for %ds (%u kept)",
                      freed, config_.reclaim_grace_s, registry_->size());
    }
  }
}

absl::StatusOr<ClientRegistry::Options> Server::NodeTableOptions() const {
  ClientRegistry::Options options;
  // First, so a bad --handle-key refuses to start whatever the export supports.
  ASSIGN_OR_RETURN(std::string key,
                   HandleKeyForServer(config_.handle_key_file, config_.handle_key_explicit));
  // Decided once: a probe on the export root shows whether nodes can be reopened by handle.
  if (absl::Status probe = ProbeInodeHandles(export_fd_.get()); !probe.ok()) {
    RINGFS_LOG_WARN("file handles unusable on the export (%s): one open fd per known node",
                    probe.message());
    return options;
  }
  const size_t capacity =
      config_.node_fd_cache != 0 ? config_.node_fd_cache : DefaultNodeFdCacheCapacity();
  options.node_fds = std::make_shared<NodeFdCache>(capacity);
  RINGFS_LOG_INFO("nodes by file handle, at most %u node fds kept open", capacity);
  ASSIGN_OR_RETURN(InodeHandle root, HandleOf(export_fd_.get()));
  options.seal = std::make_shared<const HandleSeal>(std::move(key), std::move(root.bytes));
  return options;
}

const std::string& Server::bound_address() const { return bound_address_; }

admin::ListSessionsResponse Server::ListSessions() const {
  admin::ListSessionsResponse reply;
  for (const auto& session : sessions_.List()) *reply.add_sessions() = ToSessionInfo(*session);
  return reply;
}

admin::ListClientsResponse Server::ListClients() const {
  admin::ListClientsResponse reply;
  reply.set_authentication_required(auth_ != nullptr && auth_->required());
  auto add = [&](const std::string& name, const ExportOptions& options, std::string sources) {
    admin::ClientInfo* client = reply.add_clients();
    client->set_name(name);
    client->set_export_options(FormatExportOptions(options));
    client->set_allowed_sources(std::move(sources));
    return client;
  };
  absl::flat_hash_map<std::string, admin::ClientInfo*> by_name;
  for (const ClientEntry& entry : config_.clients) {
    by_name[entry.name] = add(entry.name, entry.options, entry.FromText());
  }
  // Sessions under no listed name: the --token-file entry (any name) or no authentication.
  admin::ClientInfo* others = nullptr;
  for (const auto& session : sessions_.List()) {
    auto it = by_name.find(session->client_name);
    admin::ClientInfo* client = it != by_name.end() ? it->second : others;
    if (client == nullptr) client = others = add("", config_.export_options, "any");
    *client->add_sessions() = ToSessionInfo(*session);
  }
  if (others == nullptr && !config_.token.empty()) add("", config_.export_options, "any");
  return reply;
}

admin::ExportInfo Server::GetExport() const {
  admin::ExportInfo info;
  info.set_path(config_.export_dir);
  std::vector<std::shared_ptr<const SessionStats>> live = sessions_.List();
  // Clients = distinct client ids among the live sessions; a session without an id is a client
  // of its own.
  absl::flat_hash_set<std::string> ids;
  uint64_t anonymous = 0;
  for (const auto& s : live) {
    if (s->client_id.empty()) {
      ++anonymous;
    } else {
      ids.insert(s->client_id);
    }
  }
  info.set_clients(ids.size() + anonymous);
  info.set_sessions(live.size());
  info.set_draining(draining_.load());
  info.set_server_id(server_id_);
  info.set_floor_mode(config_.floor);
  return info;
}

absl::StatusOr<admin::SessionInfo> Server::SetSessionLimit(uint64_t session_id,
                                                           uint32_t max_inflight) {
  std::shared_ptr<const SessionStats> session = sessions_.Find(session_id);
  if (session == nullptr) {
    return absl::NotFoundError(
        absl::StrFormat("no live session %u (ListSessions shows them)", session_id));
  }
  RETURN_IF_ERROR(
      workers_.at(session->worker)->SetSessionLimit(session_id, max_inflight, kApplyTimeout));
  // Read back what the worker applied.
  return ToSessionInfo(*session);
}

uint64_t Server::InflightTotal() const {
  uint64_t total = 0;
  for (const auto& session : sessions_.List()) total += Read(session->inflight);
  return total;
}

admin::DrainResponse Server::Drain(absl::Duration timeout, std::function<bool()> cancelled) {
  const absl::Time deadline = absl::Now() + timeout;
  if (!draining_.exchange(true)) RINGFS_LOG_INFO("draining: no new connections or requests");
  {
    absl::MutexLock lock(&listener_mu_);
    if (listener_) listener_->StopAccepting();
  }
  // Once every worker confirmed, no request that expects a reply gets past them.
  for (auto& worker : workers_) {
    if (absl::Status drained = worker->Drain(kApplyTimeout); !drained.ok()) {
      RINGFS_LOG_WARN("drain: %s", drained.message());
    }
  }
  uint64_t remaining = InflightTotal();
  while (remaining > 0 && absl::Now() < deadline && !cancelled() && !stopping_.load()) {
    absl::SleepFor(std::min(kDrainPoll, deadline - absl::Now()));
    remaining = InflightTotal();
  }
  admin::DrainResponse reply;
  reply.set_complete(remaining == 0);
  reply.set_remaining_inflight(remaining);
  RINGFS_LOG_INFO("drain: %s (%u requests in flight)", remaining == 0 ? "complete" : "timed out",
                  remaining);
  return reply;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& line) {
  std::string tmp = absl::StrFormat("%s.tmp.%d", path, getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return ErrnoError(errno, absl::StrFormat("create %s", tmp));
  bool ok = std::fprintf(f, "%s\n", line.c_str()) >= 0;
  ok = std::fflush(f) == 0 && ok;
  ok = fsync(fileno(f)) == 0 && ok;
  int err = errno;
  std::fclose(f);
  if (!ok) {
    unlink(tmp.c_str());
    return ErrnoError(err, absl::StrFormat("write %s", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    unlink(tmp.c_str());
    return ErrnoError(err, absl::StrFormat("rename to %s", path));
  }
  return absl::OkStatus();
}

}  // namespace ringfs::server
