#include "server/client_registry.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status.h"
#include "server/handle_node_table.h"

namespace ringfs::server {

ClientRegistry::Lease& ClientRegistry::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    registry_ = std::exchange(other.registry_, nullptr);
    state_ = std::move(other.state_);
  }
  return *this;
}

void ClientRegistry::Lease::Release() {
  if (registry_ != nullptr && state_ != nullptr && !state_->client_id.empty()) {
    registry_->Detach(state_->client_id);
  }
  registry_ = nullptr;
  state_.reset();
}

absl::StatusOr<std::shared_ptr<ClientState>> ClientRegistry::Create(
    const std::string& client_id) const {
  UniqueFd root(fcntl(export_root_fd_, F_DUPFD_CLOEXEC, 0));
  if (!root.valid()) return ErrnoError(errno, "dup export root");
  struct stat st {};
  if (fstat(root.get(), &st) != 0) return ErrnoError(errno, "stat export root");
  auto state = std::make_shared<ClientState>(options_.reply_cache,
                                             options_.max_open_files_per_client);
  state->client_id = client_id;
  state->invalidations.set_owner(client_id);
  if (options_.node_fds != nullptr) {
    ASSIGN_OR_RETURN(state->nodes, HandleNodeTable::Create(std::move(root), st, options_.node_fds));
    state->seal = options_.seal;
  } else {
    state->nodes = std::make_unique<PathNodeTable>(std::move(root), st);
  }
  return state;
}

absl::StatusOr<ClientRegistry::Lease> ClientRegistry::Attach(const std::string& client_id) {
  if (client_id.empty()) {
    ASSIGN_OR_RETURN(auto state, Create(client_id));
    return Lease(this, std::move(state));
  }
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(client_id);
  if (it == clients_.end()) {
    if (clients_.size() >= options_.max_clients) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "too many clients: %u client states are kept (--max-clients; a state is freed %s "
          "after its last session)",
          clients_.size(), absl::FormatDuration(options_.reclaim_grace)));
    }
    ASSIGN_OR_RETURN(auto state, Create(client_id));
    it = clients_.emplace(client_id, Entry{.state = std::move(state)}).first;
  } else if (it->second.sessions >= options_.max_sessions_per_client) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("too many sessions: client has %u (--max-sessions-per-client)",
                        it->second.sessions));
  }
  ++it->second.sessions;
  return Lease(this, it->second.state);
}

absl::StatusOr<std::shared_ptr<ClientState>> ClientRegistry::GetOrCreate(
    const std::string& client_id) {
  if (client_id.empty()) return Create(client_id);
  absl::MutexLock lock(&mu_);
  if (auto it = clients_.find(client_id); it != clients_.end()) return it->second.state;
  ASSIGN_OR_RETURN(auto state, Create(client_id));
  clients_[client_id] = Entry{.state = state, .idle_since = options_.now()};
  return state;
}

void ClientRegistry::Detach(const std::string& client_id) {
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(client_id);
  if (it == clients_.end() || it->second.sessions == 0) return;
  if (--it->second.sessions == 0) it->second.idle_since = options_.now();
}

size_t ClientRegistry::Reap() {
  std::vector<std::shared_ptr<ClientState>> freed;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.now();
    for (auto it = clients_.begin(); it != clients_.end();) {
      auto next = std::next(it);
      if (it->second.sessions == 0 && now - it->second.idle_since >= options_.reclaim_grace) {
        freed.push_back(std::move(it->second.state));
        clients_.erase(it);
      }
      it = next;
    }
  }
  // The states (and their fds) go here, outside the lock.
  return freed.size();
}

std::vector<std::shared_ptr<ClientState>> ClientRegistry::Listeners(
    const ClientState* except) const {
  std::vector<std::shared_ptr<ClientState>> out;
  {
    absl::MutexLock lock(&mu_);
    if (clients_.size() < 2 && except != nullptr) return out;  // the common case: one client
    out.reserve(clients_.size());
    for (const auto& [key, entry] : clients_) {
      if (entry.state.get() != except) out.push_back(entry.state);
    }
  }
  // Outside the registry's lock, which is a leaf.
  std::erase_if(out, [](const auto& state) { return !state->invalidations.enabled(); });
  return out;
}

size_t ClientRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return clients_.size();
}

size_t ClientRegistry::sessions(const std::string& client_id) const {
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(client_id);
  return it == clients_.end() ? 0 : it->second.sessions;
}

uint32_t DefaultMaxClients() {
  constexpr uint32_t kMin = 16;
  constexpr uint32_t kMax = 65536;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMax;
  return static_cast<uint32_t>(std::clamp<rlim_t>(limit.rlim_cur / 16, kMin, kMax));
}

uint32_t DefaultMaxOpenFilesPerClient() {
  constexpr uint32_t kMin = 64;
  constexpr uint32_t kMax = 1u << 20;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return kMax;
  return static_cast<uint32_t>(std::clamp<rlim_t>(limit.rlim_cur / 4, kMin, kMax));
}

std::string ClientStateKey(std::string_view client_name, std::string_view client_id) {
  if (client_id.empty()) return std::string();
  std::string key(client_name);
  key += '/';
  key += client_id;
  return key;
}

}  // namespace ringfs::server
