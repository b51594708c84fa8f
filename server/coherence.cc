#include "server/coherence.h"

#include <fcntl.h>

#include <optional>
#include <string>
#include <type_traits>
#include <variant>

namespace ringfs::server {
namespace {

using wire::Invalidation;
using wire::InvalidationKind;

Invalidation Attrs(uint64_t nodeid) { return {InvalidationKind::kInode, nodeid, -1, 0, {}}; }

Invalidation Data(uint64_t nodeid, uint64_t offset, uint64_t length) {
  return {InvalidationKind::kInode, nodeid, static_cast<int64_t>(offset),
          static_cast<int64_t>(length), {}};
}

Invalidation Entry(uint64_t parent, std::string_view name) {
  return {InvalidationKind::kEntry, parent, -1, 0, std::string(name)};
}

}  // namespace

std::vector<Invalidation> ChangesOf(const Request& request) {
  const uint64_t node = request.nodeid;
  return std::visit(
      [&](const auto& a) -> std::vector<Invalidation> {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, CreateArgs> || std::is_same_v<T, MkdirArgs> ||
                      std::is_same_v<T, MknodArgs> || std::is_same_v<T, SymlinkArgs> ||
                      std::is_same_v<T, UnlinkArgs> || std::is_same_v<T, RmdirArgs>) {
          // Only the name: the kernel marks the directory's attributes stale along with a name
          // it holds (fuse_reverse_inval_entry -> fuse_dir_changed), without making in-flight
          // GETATTR replies of the directory void as an INVAL_INODE does; a receiver that did
          // not hold the name invalidates the directory itself (KernelNotifier).
          return {Entry(node, a.name)};
        } else if constexpr (std::is_same_v<T, LinkArgs>) {
          return {Entry(node, a.name), Attrs(a.oldnodeid)};  // the file's link count and ctime
        } else if constexpr (std::is_same_v<T, RenameArgs>) {
          return {Entry(node, a.oldname), Entry(a.newdir, a.newname)};
        } else if constexpr (std::is_same_v<T, SetattrArgs>) {
          // A new size drops the cached pages beyond it (from the new end on).
          if (a.in.valid & FATTR_SIZE) return {Data(node, a.in.size, 0)};
          return {Attrs(node)};
        } else if constexpr (std::is_same_v<T, WriteArgs>) {
          return {Data(node, a.offset, a.data.size())};
        } else if constexpr (std::is_same_v<T, FallocateArgs>) {
          return {Data(node, a.offset, a.length)};
        } else if constexpr (std::is_same_v<T, CopyFileRangeArgs>) {
          return {Data(a.nodeid_out, a.off_out, a.len)};
        } else if constexpr (std::is_same_v<T, OpenArgs>) {
          if (a.flags & O_TRUNC) return {Data(node, 0, 0)};
          return {};
        } else if constexpr (std::is_same_v<T, SetxattrArgs> ||
                             std::is_same_v<T, RemovexattrArgs>) {
          // ctime, and the client's cached extended attributes of the node.
          return {Attrs(node)};
        } else {
          return {};
        }
      },
      request.args);
}

size_t Coherence::Publish(const ClientState& origin, std::span<const Invalidation> changes,
                          std::span<const KeyedChange> files) const {
  if (changes.empty() && files.empty()) return 0;
  // One look at the registry for both kinds (a mutex and a vector with two or more clients).
  std::vector<std::shared_ptr<ClientState>> others = registry_->Listeners(&origin);
  if (others.empty()) return 0;
  // Each change in server terms (the file it names), once.
  std::vector<KeyedChange> keyed;
  keyed.reserve(changes.size() + files.size());
  for (const Invalidation& change : changes) {
    if (std::optional<InodeKey> key = origin.nodes->KeyOf(change.nodeid)) {
      keyed.push_back({*key, change});
    }
  }
  keyed.insert(keyed.end(), files.begin(), files.end());
  return PushTo(others, keyed);
}

size_t Coherence::PublishKeyed(std::span<const KeyedChange> changes,
                               const ClientState* except) const {
  if (changes.empty()) return 0;
  std::vector<std::shared_ptr<ClientState>> clients = registry_->Listeners(except);
  return PushTo(clients, changes);
}

size_t Coherence::PublishReset() const {
  std::vector<std::shared_ptr<ClientState>> clients = registry_->Listeners(nullptr);
  for (const auto& client : clients) client->invalidations.PushReset();
  return clients.size();
}

size_t Coherence::PushTo(std::span<const std::shared_ptr<ClientState>> clients,
                         std::span<const KeyedChange> changes) const {
  size_t pushed = 0;
  for (const auto& client : clients) {
    std::vector<Invalidation> records;
    for (const KeyedChange& keyed : changes) {
      std::optional<uint64_t> id = client->nodes->FindByInode(keyed.key);
      if (!id) continue;
      Invalidation record = keyed.change;
      record.nodeid = *id;
      records.push_back(std::move(record));
    }
    pushed += records.size();
    client->invalidations.Push(std::move(records));
  }
  return pushed;
}

}  // namespace ringfs::server
