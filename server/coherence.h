// Keeps the caches of several clients of one export coherent: after a request of one client
// changed something, every other client that holds the changed node (in its node table) is
// pushed an invalidation for it (common/invalidation.h), in its own node ids. A client that
// does not hold a node has nothing of it cached, so it is told nothing.
// Runs on the worker thread that executed the request, after the change reached the export and
// before its reply is queued; it takes only mutexes (the registry's, each client's node table's
// and outbox's), never a syscall.
// Changes made on the server's filesystem by anything but ringfs come in through ExportWatch
// (export_watch.h) and PublishKeyed.
#pragma once

#include <span>
#include <vector>

#include "common/invalidation.h"
#include "server/client_registry.h"
#include "server/request.h"

namespace ringfs::server {

// What `request` changed if it succeeded, in the requesting client's node ids: the names it
// created, removed or renamed (kEntry on the directory; the directory's own attributes go stale
// with the name in the receiving kernel, so no kInode of the directory) and the nodes whose
// attributes or data it changed (kInode, with the written range for data). Empty for requests
// that change nothing (reads, lookups, opens without O_TRUNC, ...).
std::vector<wire::Invalidation> ChangesOf(const Request& request);

class Coherence {
 public:
  // REQUIRES: `registry` outlives this.
  explicit Coherence(ClientRegistry* registry) : registry_(registry) {}

  // A change named by the file it concerns (`key`: the node, or the directory of a kEntry);
  // `change.nodeid` is ignored.
  struct KeyedChange {
    InodeKey key;
    wire::Invalidation change;
  };

  // Pushes `changes` (in `origin`'s node ids), and `files` (files its request changed without
  // naming them, OpContext::changed_files), to every other client holding the nodes, in one
  // batch per client. Returns how many records were pushed, for tests and stats.
  size_t Publish(const ClientState& origin, std::span<const wire::Invalidation> changes,
                 std::span<const KeyedChange> files = {}) const;
  // Pushes changes named by file to every client holding the nodes but `except`: changes made by
  // someone other than a client (the export changed on the server, export_watch.h; `except`
  // null).
  size_t PublishKeyed(std::span<const KeyedChange> changes,
                      const ClientState* except = nullptr) const;
  // Changes were missed (the export watch's event queue overflowed): every listening client is
  // told to drop all it caches (InvalidationOutbox::PushReset). Returns how many were told.
  size_t PublishReset() const;
  // Whether any client listens (else changes need not even be resolved).
  bool HasListeners() const { return !registry_->Listeners(nullptr).empty(); }
  // Whether a client other than `origin` listens. Cheap with one client (no allocation).
  bool HasOtherListeners(const ClientState& origin) const {
    return !registry_->Listeners(&origin).empty();
  }

 private:
  // Pushes to each of `clients` the changes it holds a node of.
  size_t PushTo(std::span<const std::shared_ptr<ClientState>> clients,
                std::span<const KeyedChange> changes) const;

  ClientRegistry* const registry_;
};

}  // namespace ringfs::server
