// Keeps the caches of several clients of one export coherent: after a request of one client
// changed something, every other client that holds the changed node (in its node table) is
// pushed an invalidation for it (common/invalidation.h), in its own node ids. A client that
// does not hold a node has nothing of it cached, so it is told nothing.
// Runs on the worker thread that executed the request, after the change reached the export and
// before its reply is queued; it takes only mutexes (the registry's, each client's node table's
// and outbox's), never a syscall.
// What it does not see: changes made on the server's filesystem by anything but ringfs
// (documented in the README; those are seen when the clients' timeouts expire).
#pragma once

#include <span>
#include <vector>

#include "common/invalidation.h"
#include "server/client_registry.h"
#include "server/request.h"

namespace ringfs::server {

// What `request` changed if it succeeded, in the requesting client's node ids: the names it
// created, removed or renamed (kEntry on the directory) and the nodes whose attributes or data
// it changed (kInode, with the written range for data). Empty for requests that change nothing
// (reads, lookups, opens without O_TRUNC, ...).
std::vector<wire::Invalidation> ChangesOf(const Request& request);

class Coherence {
 public:
  // REQUIRES: `registry` outlives this.
  explicit Coherence(ClientRegistry* registry) : registry_(registry) {}

  // Pushes `changes` (in `origin`'s node ids) to every other client holding the nodes.
  // Returns how many records were pushed, for tests and stats.
  size_t Publish(const ClientState& origin, std::span<const wire::Invalidation> changes) const;

 private:
  ClientRegistry* const registry_;
};

}  // namespace ringfs::server
