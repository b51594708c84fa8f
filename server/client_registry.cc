#include "server/client_registry.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "common/status.h"
#include "server/handle_node_table.h"

namespace ringfs::server {

absl::StatusOr<std::shared_ptr<ClientState>> ClientRegistry::Create(
    const std::string& client_id) const {
  UniqueFd root(fcntl(export_root_fd_, F_DUPFD_CLOEXEC, 0));
  if (!root.valid()) return ErrnoError(errno, "dup export root");
  struct stat st {};
  if (fstat(root.get(), &st) != 0) return ErrnoError(errno, "stat export root");
  auto state = std::make_shared<ClientState>(options_.reply_cache);
  state->client_id = client_id;
  if (options_.node_fds != nullptr) {
    ASSIGN_OR_RETURN(state->nodes, HandleNodeTable::Create(std::move(root), st, options_.node_fds));
  } else {
    state->nodes = std::make_unique<PathNodeTable>(std::move(root), st);
  }
  return state;
}

absl::StatusOr<std::shared_ptr<ClientState>> ClientRegistry::GetOrCreate(
    const std::string& client_id) {
  if (client_id.empty()) return Create(client_id);
  absl::MutexLock lock(&mu_);
  if (auto it = clients_.find(client_id); it != clients_.end()) return it->second;
  ASSIGN_OR_RETURN(auto state, Create(client_id));
  clients_[client_id] = state;
  return state;
}

size_t ClientRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return clients_.size();
}

}  // namespace ringfs::server
