#include "server/handle_node_table.h"

#include <cerrno>
#include <optional>
#include <vector>

#include "common/status.h"
#include "proto/fuse_abi.h"
#include "server/export_fs.h"
#include "server/file_generation.h"

namespace ringfs::server {
namespace {

NodeRef MakeNode(uint64_t id, UniqueFd fd, dev_t dev, ino_t ino, mode_t type) {
  auto node = std::make_shared<Node>();
  node->id = id;
  node->fd = std::move(fd);
  node->dev = dev;
  node->ino = ino;
  node->type = type;
  return node;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HandleNodeTable>> HandleNodeTable::Create(
    UniqueFd root_fd, const struct stat& root_st, std::shared_ptr<NodeFdCache> cache) {
  ASSIGN_OR_RETURN(InodeHandle root_handle, HandleOf(root_fd.get()));
  ASSIGN_OR_RETURN(UniqueFd mount_fd, OpenMountFd(root_fd.get()));
  std::unique_ptr<HandleNodeTable> table(new HandleNodeTable(
      std::move(mount_fd), root_st.st_dev, root_st.st_ino, root_handle.mount_id, std::move(cache)));
  table->held_numbers_are_unique_ = InodeNumbersHeldLocally(root_fd.get());
  Entry root;
  root.lookups = 1;
  root.dev = root_st.st_dev;
  root.ino = root_st.st_ino;
  root.type = root_st.st_mode & S_IFMT;
  root.generation = HandleGeneration(root_handle);
  root.pinned = MakeNode(fuse::kRootNodeId, std::move(root_fd), root.dev, root.ino, root.type);
  absl::MutexLock lock(&table->mu_);
  table->by_inode_[{root.dev, root.ino}] = fuse::kRootNodeId;
  table->by_id_.emplace(fuse::kRootNodeId, std::move(root));
  return table;
}

HandleNodeTable::HandleNodeTable(UniqueFd mount_fd, dev_t root_dev, ino_t root_ino,
                                 int root_mount_id, std::shared_ptr<NodeFdCache> cache)
    : mount_fd_(std::move(mount_fd)),
      root_dev_(root_dev),
      root_ino_(root_ino),
      root_mount_id_(root_mount_id),
      cache_(std::move(cache)) {}

HandleNodeTable::~HandleNodeTable() {
  // The shared cache would otherwise keep this table's fds until its hand came by.
  std::vector<NodeRef> dropped;
  absl::MutexLock lock(&mu_);
  for (auto& [id, entry] : by_id_) {
    NodeRef open = entry.open.lock();
    if (open == nullptr) continue;
    dropped.push_back(cache_->Erase(*open));
    dropped.push_back(std::move(open));
  }
}

NodeRef HandleNodeTable::CacheLocked(Entry& entry, const NodeRef& node) const {
  entry.open = node;
  return cache_->Insert(node);
}

absl::StatusOr<NodeRef> HandleNodeTable::Get(uint64_t nodeid) const {
  InodeHandle handle;
  dev_t dev;
  ino_t ino;
  mode_t type;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(nodeid);
    if (it == by_id_.end()) return ErrnoError(ESTALE, "unknown node id");
    const Entry& entry = it->second;
    if (entry.pinned != nullptr) return entry.pinned;
    if (NodeRef node = entry.open.lock()) {
      node->used_recently.store(true, std::memory_order_relaxed);
      return node;
    }
    handle = entry.handle;
    dev = entry.dev;
    ino = entry.ino;
    type = entry.type;
  }
  // ESTALE here means the file was deleted: the handle carries the inode's generation.
  ASSIGN_OR_RETURN(UniqueFd fd, OpenByHandle(mount_fd_.get(), handle));
  ASSIGN_OR_RETURN(struct stat st, StatFd(fd.get()));
  // A filesystem without generations in its handles could hand back a new file on a reused
  // inode; the type or identity then differs and the node is just as stale.
  if (st.st_dev != dev || st.st_ino != ino || (st.st_mode & S_IFMT) != type) {
    return ErrnoError(ESTALE, "file handle opens another file");
  }
  NodeRef node = MakeNode(nodeid, std::move(fd), dev, ino, type);
  NodeRef evicted;  // both dropped after the lock, so no close() runs under it
  NodeRef raced;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_id_.find(nodeid);
    // Forgotten meanwhile: the node is still served, as to a Get that ran before the FORGET.
    if (it == by_id_.end()) return node;
    Entry& entry = it->second;
    if (NodeRef other = entry.open.lock()) {
      // Another worker reopened it at the same time: everyone uses one fd.
      other->used_recently.store(true, std::memory_order_relaxed);
      raced = std::exchange(node, std::move(other));
    } else {
      evicted = CacheLocked(entry, node);
    }
  }
  return node;
}

absl::StatusOr<EntryIds> HandleNodeTable::AddLookup(UniqueFd fd, const struct stat& st,
                                                    InodeHandle* new_handle) {
  // Taken before the lock (syscalls). No handle, or one from another mount or st_dev: the node
  // is pinned (a handle from another mount still gives the generation).
  std::optional<InodeHandle> handle;
  uint64_t generation;
  if (absl::StatusOr<InodeHandle> taken = HandleOf(fd.get()); taken.ok()) {
    generation = HandleGeneration(*taken);
    if (st.st_dev == root_dev_ && taken->mount_id == root_mount_id_) handle = *std::move(taken);
  } else {
    generation = GenerationWithoutHandle(fd.get(), st);
  }
  NodeRef node;     // both dropped after the lock, so no close() runs under it
  NodeRef evicted;
  absl::MutexLock lock(&mu_);
  const InodeKey key{st.st_dev, st.st_ino};
  if (auto it = by_inode_.find(key); it != by_inode_.end()) {
    const uint64_t id = it->second;
    Entry& entry = by_id_.at(id);
    if (id == fuse::kRootNodeId) return EntryIds{id, entry.generation};
    // A pinned node holds its inode, so the number cannot have been reused; without a handle
    // now there is nothing better to compare than (st_dev, st_ino).
    const bool same_file =
        entry.pinned != nullptr || !handle.has_value() || entry.handle.SameFile(*handle);
    if (same_file) {
      ++entry.lookups;
      if (entry.pinned == nullptr && entry.open.expired()) {
        // The lookup's fd is as good as a reopened one, and the client is likely to use it next.
        node = MakeNode(id, std::move(fd), entry.dev, entry.ino, entry.type);
        evicted = CacheLocked(entry, node);
      }
      // Otherwise `fd` closes after the lock: the node keeps its own fd.
      return EntryIds{id, entry.generation};
    }
    // The inode number was freed and now belongs to a new file: the old node's file was deleted
    // while the client still knew it. That node stays until forgotten (Get gives ESTALE); the
    // new file gets a node of its own.
    by_inode_.erase(it);
  }
  const uint64_t id = ids_.Next([this](uint64_t candidate) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return by_id_.contains(candidate);
  });
  Entry entry;
  entry.lookups = 1;
  entry.dev = st.st_dev;
  entry.ino = st.st_ino;
  entry.type = st.st_mode & S_IFMT;
  entry.generation = generation;
  node = MakeNode(id, std::move(fd), entry.dev, entry.ino, entry.type);
  if (handle.has_value()) {
    if (new_handle != nullptr) *new_handle = *handle;
    entry.handle = *std::move(handle);
    evicted = CacheLocked(entry, node);
  } else {
    entry.pinned = node;
  }
  by_inode_[key] = id;
  by_id_.emplace(id, std::move(entry));
  return EntryIds{id, generation, /*created=*/true};
}

absl::Status HandleNodeTable::Adopt(uint64_t nodeid, uint64_t nlookup, InodeHandle handle,
                                    UniqueFd fd, const struct stat& st) {
  if (nodeid == fuse::kRootNodeId) {
    if (st.st_dev == root_dev_ && st.st_ino == root_ino_) return absl::OkStatus();
    return ErrnoError(ESTALE, "node 1 is the export root");
  }
  if (nlookup == 0) return ErrnoError(EINVAL, "reclaim with no lookups");
  handle.mount_id = root_mount_id_;
  const uint64_t generation = HandleGeneration(handle);
  NodeRef node;     // both dropped after the lock, so no close() runs under it
  NodeRef evicted;
  absl::MutexLock lock(&mu_);
  const InodeKey key{st.st_dev, st.st_ino};
  if (auto it = by_id_.find(nodeid); it != by_id_.end()) {
    Entry& entry = it->second;
    const bool same_file = entry.pinned != nullptr
                               ? entry.dev == st.st_dev && entry.ino == st.st_ino
                               : entry.handle.SameFile(handle);
    if (!same_file) return ErrnoError(ESTALE, "node id already names another file");
    entry.lookups = nlookup;
    return absl::OkStatus();
  }
  if (ids_.Passed(nodeid)) {
    return ErrnoError(ESTALE, "node id belongs to this instance's own sequence");
  }
  if (auto it = by_inode_.find(key); it != by_inode_.end()) {
    const Entry& other = by_id_.at(it->second);
    // A node for an older file on a reused inode number is stale: the adopted id takes the key.
    if (other.pinned != nullptr || other.handle.SameFile(handle)) {
      return ErrnoError(ESTALE, "the file already has another node id");
    }
    by_inode_.erase(it);
  }
  Entry entry;
  entry.lookups = nlookup;
  entry.dev = st.st_dev;
  entry.ino = st.st_ino;
  entry.type = st.st_mode & S_IFMT;
  entry.generation = generation;
  entry.handle = std::move(handle);
  node = MakeNode(nodeid, std::move(fd), entry.dev, entry.ino, entry.type);
  evicted = CacheLocked(entry, node);
  by_inode_[key] = nodeid;
  by_id_.emplace(nodeid, std::move(entry));
  return absl::OkStatus();
}

void HandleNodeTable::Forget(uint64_t nodeid, uint64_t nlookup) {
  NodeRef pinned;  // all dropped after the lock, so no close() runs under it
  NodeRef open;
  NodeRef cached;
  {
    absl::MutexLock lock(&mu_);
    if (nodeid == fuse::kRootNodeId) return;
    auto it = by_id_.find(nodeid);
    if (it == by_id_.end()) return;
    Entry& entry = it->second;
    entry.lookups = nlookup >= entry.lookups ? 0 : entry.lookups - nlookup;
    if (entry.lookups > 0) return;
    pinned = std::move(entry.pinned);
    open = entry.open.lock();
    if (open != nullptr) cached = cache_->Erase(*open);
    // The key may already belong to a newer node for a reused inode number.
    if (auto key = by_inode_.find(InodeKey{entry.dev, entry.ino});
        key != by_inode_.end() && key->second == nodeid) {
      by_inode_.erase(key);
    }
    by_id_.erase(it);
  }
}

bool HandleNodeTable::Contains(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  return by_id_.contains(nodeid);
}

NodeRef HandleNodeTable::HeldNode(const InodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = by_inode_.find(key);
  if (it == by_inode_.end()) return nullptr;
  const Entry& entry = by_id_.at(it->second);
  // Pinned nodes are trusted by number as AddLookup trusts them.
  if (entry.pinned != nullptr) return entry.pinned;
  // A node kept by handle holds an fd only while the cache or an executor has it, and on a
  // filesystem other hosts change its number may meanwhile name another file: AddLookup tells
  // them apart by handle, which a stat cannot.
  if (!held_numbers_are_unique_) return nullptr;
  return entry.open.lock();
}

std::optional<EntryIds> HandleNodeTable::AddLookupOf(const Node& node) {
  absl::MutexLock lock(&mu_);
  return CountHeldLookup(node, by_id_, by_inode_);
}

std::optional<InodeKey> HandleNodeTable::KeyOf(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  if (it == by_id_.end()) return std::nullopt;
  return InodeKey(it->second.dev, it->second.ino);
}

std::optional<uint64_t> HandleNodeTable::FindByInode(const InodeKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = by_inode_.find(key);
  if (it == by_inode_.end()) return std::nullopt;
  return it->second;
}

uint64_t HandleNodeTable::LookupCount(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  return it == by_id_.end() ? 0 : it->second.lookups;
}

size_t HandleNodeTable::size() const {
  absl::MutexLock lock(&mu_);
  return by_id_.size();
}

bool HandleNodeTable::IsPinned(uint64_t nodeid) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(nodeid);
  return it != by_id_.end() && it->second.pinned != nullptr;
}

}  // namespace ringfs::server
