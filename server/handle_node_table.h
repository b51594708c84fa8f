// A NodeTable that remembers nodes by kernel file handles (inode_handle.h, not the open-file
// handles of handle_table.h), so a client may know any number of files while the server keeps
// only a bounded number of fds open: a node's O_PATH fd lives in the shared NodeFdCache, and a
// Get of a node whose fd was pushed out reopens it with open_by_handle_at (ESTALE once the file
// is gone). Nodes that cannot be reopened that way keep their fd for life ("pinned", as in
// PathNodeTable): the root, files on another mount or st_dev (a submount inside the export), and
// files whose filesystem gives no handle.
// Ids, the (st_dev, st_ino) dedupe, lookup counting and Forget behave as in PathNodeTable, except
// that an inode number reused by a new file (the old file deleted while its node was still known)
// gets a new node: the handles differ in their generation. Entry generations are
// HandleGeneration of the node's handle (file_generation.h).
// Thread-safe; open_by_handle_at runs without the table's lock. Lock order: mu_, then the cache's.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "server/id_space.h"
#include "server/inode_handle.h"
#include "server/node_fd_cache.h"
#include "server/node_table.h"

namespace ringfs::server {

class HandleNodeTable final : public NodeTable {
 public:
  // `root_fd` is an O_PATH fd of the export directory; it becomes node 1. Fails when the root
  // has no handle or cannot be opened for use as the mount fd.
  static absl::StatusOr<std::unique_ptr<HandleNodeTable>> Create(
      UniqueFd root_fd, const struct stat& root_st, std::shared_ptr<NodeFdCache> cache);
  ~HandleNodeTable() override;

  absl::StatusOr<NodeRef> Get(uint64_t nodeid) const override;
  bool Contains(uint64_t nodeid) const override;
  absl::StatusOr<EntryIds> AddLookup(UniqueFd fd, const struct stat& st,
                                     InodeHandle* new_handle = nullptr) override;
  void Forget(uint64_t nodeid, uint64_t nlookup) override;
  NodeRef HeldNode(const InodeKey& key) const override;
  std::optional<EntryIds> AddLookupOf(const Node& node) override;
  std::optional<InodeKey> KeyOf(uint64_t nodeid) const override;
  std::optional<uint64_t> FindByInode(const InodeKey& key) const override;
  uint64_t LookupCount(uint64_t nodeid) const override;
  size_t size() const override;

  HandleNodeTable* AsHandleNodeTable() override { return this; }

  // Reclaim (common/node_handle.h): makes `nodeid`, an id from another instance, name the file
  // `fd` (an O_PATH fd of the file `handle` names, opened and checked by the caller) with
  // `nlookup` lookups. ESTALE when this table could have handed `nodeid` out itself
  // (IdSpace::Passed), when `nodeid` already names another file, or when the file already has
  // another id here (one node per inode). When `nodeid` already names this file its count is
  // set to `nlookup`, so a replayed batch is harmless. The root (1) succeeds for the export
  // root only and is never counted. EINVAL for `nlookup` 0.
  [[nodiscard]] absl::Status Adopt(uint64_t nodeid, uint64_t nlookup, InodeHandle handle,
                                   UniqueFd fd, const struct stat& st);

  // The export root as reclaim checks containment against it.
  struct ExportRoot {
    int mount_fd;  // for open_by_handle_at
    dev_t dev;
    ino_t ino;
    int mount_id;
  };
  ExportRoot export_root() const {
    return ExportRoot{mount_fd_.get(), root_dev_, root_ino_, root_mount_id_};
  }

  // For tests: whether the node keeps its fd for life (false also for unknown ids).
  bool IsPinned(uint64_t nodeid) const;

 private:
  struct Entry {
    uint64_t lookups = 0;
    dev_t dev = 0;
    ino_t ino = 0;
    mode_t type = 0;
    uint64_t generation = 0;
    InodeHandle handle;              // unused when pinned
    NodeRef pinned;                  // set: the fd is kept for the node's life
    std::weak_ptr<const Node> open;  // else: the node's fd while the cache or an executor has it
  };

  HandleNodeTable(UniqueFd mount_fd, dev_t root_dev, ino_t root_ino, int root_mount_id,
                  std::shared_ptr<NodeFdCache> cache);
  // Makes `node` the open node of `entry` and caches it. Returns what the cache pushed out, for
  // the caller to drop after unlocking.
  NodeRef CacheLocked(Entry& entry, const NodeRef& node) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UniqueFd mount_fd_;  // the export root opened O_RDONLY, for open_by_handle_at
  // Nodes on another st_dev or mount than the root's are pinned: reopening them through the
  // root's mount would lose that mount's flags (read-only, nosuid, ...).
  const dev_t root_dev_;
  const ino_t root_ino_;
  const int root_mount_id_;
  // InodeNumbersHeldLocally of the root's filesystem: HeldNode may then trust a held node kept by
  // handle without comparing handles.
  bool held_numbers_are_unique_ = false;
  const std::shared_ptr<NodeFdCache> cache_;

  mutable absl::Mutex mu_;
  // `open` is refreshed by Get, hence mutable.
  mutable absl::flat_hash_map<uint64_t, Entry> by_id_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<InodeKey, uint64_t> by_inode_ ABSL_GUARDED_BY(mu_);
  // Never reused, and unrelated to any other table's ids, so a stale id from the kernel can
  // never name a different file. Skips ids already in by_id_.
  IdSpace ids_ ABSL_GUARDED_BY(mu_) = IdSpace(/*first_id=*/2);
};

}  // namespace ringfs::server
