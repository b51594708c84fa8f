// The per-client state shared by all connections of one mount (same client_id): its node table,
// handle table and reply cache. The kernel may use a node id or fh learned on one queue's connection on
// another, so the state is keyed by client_id, not by connection.
// Thread-safe; the listener creates/looks up states, workers use them.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/handle_table.h"
#include "server/node_fd_cache.h"
#include "server/node_table.h"
#include "server/reply_cache.h"

namespace ringfs::server {

struct ClientState {
  explicit ClientState(ReplyCache::Options reply_cache) : replies(reply_cache) {}

  std::string client_id;
  std::unique_ptr<NodeTable> nodes;
  HandleTable handles;
  ReplyCache replies;  // replies of this client's non-idempotent requests, for replays
};

class ClientRegistry {
 public:
  struct Options {
    // Set: every client gets a HandleNodeTable whose open node fds live in this one cache.
    // Null: a PathNodeTable (one fd per node), for exports where file handles do not work
    // (see ProbeInodeHandles).
    std::shared_ptr<NodeFdCache> node_fds;
    ReplyCache::Options reply_cache;
  };

  // `export_root_fd` (O_PATH directory fd) is borrowed and must outlive the registry; every
  // client state gets its own dup of it as node 1.
  explicit ClientRegistry(int export_root_fd) : ClientRegistry(export_root_fd, Options{}) {}
  ClientRegistry(int export_root_fd, Options options)
      : export_root_fd_(export_root_fd), options_(std::move(options)) {}

  // The state of `client_id`, created on first use. States are kept after the last connection
  // of a client closes, so a client that reconnects (after a network blip) carries on with the
  // node ids and handles the kernel still holds. An empty client_id gets a fresh private state
  // each time (it cannot be matched to anything).
  absl::StatusOr<std::shared_ptr<ClientState>> GetOrCreate(const std::string& client_id);

  size_t size() const;

 private:
  absl::StatusOr<std::shared_ptr<ClientState>> Create(const std::string& client_id) const;

  const int export_root_fd_;
  const Options options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<ClientState>> clients_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::server
