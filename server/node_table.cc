#include "server/node_table.h"

#include <cerrno>

#include "common/status.h"
#include "proto/fuse_abi.h"
#include "server/file_generation.h"

namespace ringfs::server {

PathNodeTable::PathNodeTable(UniqueFd root_fd, const struct stat& root_st) {
  auto root = std::make_shared<Node>();
  root->id = fuse::kRootNodeId;
  root->fd = std::move(root_fd);
  root->dev = root_st.st_dev;
  root->ino = root_st.st_ino;
  root->type = root_st.st_mode & S_IFMT;
  const uint64_t id = root->id;
  const uint64_t generation = GenerationOf(root->fd.get(), root_st);
  absl::MutexLock lock(&mu_);
  by_inode_[{root->dev, root->ino}] = id;
  by_id_[id] = Entry{std::move(root), 1, generation};
}

absl::StatusOr<NodeRef> PathNodeTable::Get(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  if (it == by_id_.end()) return ErrnoError(ESTALE, "unknown node id");
  return it->second.node;
}

bool PathNodeTable::Contains(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  return by_id_.contains(nodeid);
}

std::optional<EntryIds> PathNodeTable::CountKnownLocked(const InodeKey& key) {
  auto it = by_inode_.find(key);
  if (it == by_inode_.end()) return std::nullopt;
  Entry& entry = by_id_.at(it->second);
  if (it->second != fuse::kRootNodeId) ++entry.lookups;
  return EntryIds{it->second, entry.generation};
}

absl::StatusOr<EntryIds> PathNodeTable::AddLookup(UniqueFd fd, const struct stat& st,
                                                  InodeHandle* /*new_handle*/) {
  const InodeKey key{st.st_dev, st.st_ino};
  {
    absl::MutexLock lock(&mu_);
    // `fd` closes on return: the node keeps its first fd.
    if (std::optional<EntryIds> known = CountKnownLocked(key)) return *known;
  }
  // Syscalls, so unlocked; only for files the table does not know yet.
  const uint64_t generation = GenerationOf(fd.get(), st);
  absl::MutexLock lock(&mu_);
  if (std::optional<EntryIds> known = CountKnownLocked(key)) return *known;  // raced
  auto node = std::make_shared<Node>();
  node->id = ids_.Next([this](uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return by_id_.contains(id);
  });
  node->fd = std::move(fd);
  node->dev = st.st_dev;
  node->ino = st.st_ino;
  node->type = st.st_mode & S_IFMT;
  const uint64_t id = node->id;
  by_inode_[key] = id;
  by_id_[id] = Entry{std::move(node), 1, generation};
  return EntryIds{id, generation, /*created=*/true};
}

void PathNodeTable::Forget(uint64_t nodeid, uint64_t nlookup) {
  NodeRef dropped;  // released after the lock, so a close() never runs under mu_
  {
    absl::MutexLock lock(&mu_);
    if (nodeid == fuse::kRootNodeId) return;
    auto it = by_id_.find(nodeid);
    if (it == by_id_.end()) return;
    Entry& entry = it->second;
    entry.lookups = nlookup >= entry.lookups ? 0 : entry.lookups - nlookup;
    if (entry.lookups > 0) return;
    dropped = std::move(entry.node);
    by_inode_.erase(InodeKey{dropped->dev, dropped->ino});
    by_id_.erase(it);
  }
}

NodeRef PathNodeTable::HeldNode(const InodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = by_inode_.find(key);
  if (it == by_inode_.end()) return nullptr;
  return by_id_.at(it->second).node;  // every node here keeps its fd for life
}

std::optional<EntryIds> PathNodeTable::AddLookupOf(const Node& node) {
  absl::MutexLock lock(&mu_);
  // Here a held number never maps to a newer node; the check is HandleNodeTable's, kept shared.
  return CountHeldLookup(node, by_id_, by_inode_);
}

std::optional<InodeKey> PathNodeTable::KeyOf(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  if (it == by_id_.end()) return std::nullopt;
  return InodeKey(it->second.node->dev, it->second.node->ino);
}

std::optional<uint64_t> PathNodeTable::FindByInode(const InodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = by_inode_.find(key);
  if (it == by_inode_.end()) return std::nullopt;
  return it->second;
}

uint64_t PathNodeTable::LookupCount(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  return it == by_id_.end() ? 0 : it->second.lookups;
}

size_t PathNodeTable::size() const {
  absl::MutexLock lock(&mu_);
  return by_id_.size();
}

}  // namespace ringfs::server
