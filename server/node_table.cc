#include "server/node_table.h"

#include <cerrno>

#include "common/status.h"
#include "proto/fuse_abi.h"

namespace ringfs::server {

PathNodeTable::PathNodeTable(UniqueFd root_fd, const struct stat& root_st) {
  auto root = std::make_shared<Node>();
  root->id = fuse::kRootNodeId;
  root->fd = std::move(root_fd);
  root->dev = root_st.st_dev;
  root->ino = root_st.st_ino;
  root->type = root_st.st_mode & S_IFMT;
  const uint64_t id = root->id;
  absl::MutexLock lock(&mu_);
  by_inode_[{root->dev, root->ino}] = id;
  by_id_[id] = Entry{std::move(root), 1};
}

absl::StatusOr<NodeRef> PathNodeTable::Get(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  if (it == by_id_.end()) return ErrnoError(ENOENT, "unknown node id");
  return it->second.node;
}

absl::StatusOr<uint64_t> PathNodeTable::AddLookup(UniqueFd fd, const struct stat& st) {
  absl::MutexLock lock(&mu_);
  InodeKey key{st.st_dev, st.st_ino};
  if (auto it = by_inode_.find(key); it != by_inode_.end()) {
    if (it->second != fuse::kRootNodeId) ++by_id_[it->second].lookups;
    return it->second;  // `fd` closes here: the node keeps its first fd
  }
  auto node = std::make_shared<Node>();
  node->id = next_id_++;
  node->fd = std::move(fd);
  node->dev = st.st_dev;
  node->ino = st.st_ino;
  node->type = st.st_mode & S_IFMT;
  uint64_t id = node->id;
  by_inode_[key] = id;
  by_id_[id] = Entry{std::move(node), 1};
  return id;
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
