// Maps the node ids the server hands to a client to the files they stand for, with the FUSE
// lookup count of each. NodeTable is the interface executors use. PathNodeTable (here) keeps one
// O_PATH fd per node, so open fds grow with the nodes a client knows; it is the fallback when
// file handles cannot be used. HandleNodeTable (handle_node_table.h) remembers nodes by kernel
// file handles and keeps fds open for a bounded number of them only.
// Ids come from the table's own IdSpace (id_space.h): never reused, and never handed out by
// another table or server instance, so an id from an older instance is unknown here (ESTALE),
// never another file. They live until FORGET; one node per (st_dev, st_ino).
// Thread-safe: every method may be called from any worker thread.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "proto/fuse_abi.h"
#include "server/id_space.h"

namespace ringfs::server {

// Immutable once created, apart from the cache bookkeeping. Shared ownership keeps `fd` open for
// an executor that is using the node while a concurrent FORGET drops it from the table, or while
// the fd cache evicts it.
struct Node {
  uint64_t id = 0;
  UniqueFd fd;  // O_PATH, never followed through a symlink
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t type = 0;  // S_IFMT bits at lookup time

  // NodeFdCache's: set on use, cleared by the clock hand; and the cache slot holding this node,
  // -1 if none (read and written under the cache's mutex only).
  mutable std::atomic<bool> used_recently{false};
  mutable int32_t cache_slot = -1;
};
using NodeRef = std::shared_ptr<const Node>;

// What an entry reply names: the node id and the file's generation (file_generation.h).
struct EntryIds {
  uint64_t nodeid = 0;
  uint64_t generation = 0;
  bool created = false;  // this AddLookup made the node (the client learns a new id)
};

struct InodeHandle;
class HandleNodeTable;

using InodeKey = std::pair<uint64_t, uint64_t>;  // (st_dev, st_ino)

// NodeTable::AddLookupOf over a table's two maps (id -> entry with `lookups` and `generation`;
// (st_dev, st_ino) -> id), under the table's lock: both tables count a held node the same way.
template <typename ById, typename ByInode>
std::optional<EntryIds> CountHeldLookup(const Node& node, ById& by_id, const ByInode& by_inode) {
  // Still the node of its file: not forgotten, and the number not given to a newer node.
  auto key = by_inode.find(InodeKey{node.dev, node.ino});
  if (key == by_inode.end() || key->second != node.id) return std::nullopt;
  auto it = by_id.find(node.id);
  if (it == by_id.end()) return std::nullopt;
  if (node.id != fuse::kRootNodeId) ++it->second.lookups;
  // Used again, as by Get: the fd cache's clock hand passes it over once more (a listing's
  // fast path, ops_dir.cc, otherwise let the nodes it lists age out first).
  node.used_recently.store(true, std::memory_order_relaxed);
  return EntryIds{node.id, it->second.generation};
}

class NodeTable {
 public:
  virtual ~NodeTable() = default;

  // The node with this id. ESTALE for an id this table does not know (never handed out here,
  // e.g. one from an older server instance, or forgotten), and, in a table that reopens nodes,
  // when the file no longer exists (deleted while the client still knew it).
  virtual absl::StatusOr<NodeRef> Get(uint64_t nodeid) const = 0;

  // Whether `nodeid` names a node of this table (until its FORGET).
  virtual bool Contains(uint64_t nodeid) const = 0;

  // Adds one lookup to the node for (st.st_dev, st.st_ino), creating it from `fd` (an O_PATH fd
  // of that file) if it is new; an already known node keeps its own fd, or adopts `fd` if it has
  // none open; otherwise `fd` is closed. Returns the node id and the file's generation. The root
  // is returned as 1 and is not counted. `new_handle`, when given, receives a copy of the
  // node's kernel handle if this call created a node that is kept by handle (else it is left
  // alone): what the node-handle notification seals (common/node_handle.h).
  virtual absl::StatusOr<EntryIds> AddLookup(UniqueFd fd, const struct stat& st,
                                             InodeHandle* new_handle = nullptr) = 0;

  // The node this table has for `key` if it holds an fd of that file right now, else null (also
  // for a node kept by handle on a filesystem other hosts change: InodeNumbersHeldLocally). While
  // the returned ref lives, the file's inode stays allocated and no other file can take its
  // number, so a stat by name that finds (st_dev, st_ino) == key found this very file: a
  // READDIRPLUS entry the client already knows then costs one fstatat instead of an openat2, a
  // name_to_handle_at and an fstat (ops_dir.cc).
  virtual NodeRef HeldNode(const InodeKey& key) const = 0;

  // One more lookup of `node` (from HeldNode); nullopt if it was forgotten meanwhile or its
  // (st_dev, st_ino) now maps to another node. The root is returned as 1 and is not counted, as
  // in AddLookup.
  virtual std::optional<EntryIds> AddLookupOf(const Node& node) = 0;

  // Subtracts `nlookup` lookups; the node is dropped (fd closed once unused) at zero. Unknown ids
  // and the root are ignored.
  virtual void Forget(uint64_t nodeid, uint64_t nlookup) = 0;

  // Which file a node id stands for, as (st_dev, st_ino), and the reverse: the id this table
  // gives the file, if it knows it. Cheap (a map look-up, no syscall): the server asks every
  // other client's table this for each change it pushes invalidations for (coherence.h).
  virtual std::optional<InodeKey> KeyOf(uint64_t nodeid) const = 0;
  virtual std::optional<uint64_t> FindByInode(const InodeKey& key) const = 0;

  // The table as a HandleNodeTable (nodes by kernel handle, reclaimable), or null.
  virtual HandleNodeTable* AsHandleNodeTable() { return nullptr; }

  // For tests and logs.
  virtual uint64_t LookupCount(uint64_t nodeid) const = 0;
  virtual size_t size() const = 0;
};

// Entry generations here are GenerationOf (file_generation.h): the hash of the file's kernel
// handle whenever name_to_handle_at works, which needs no capability; this table is mostly the
// fallback because open_by_handle_at needs CAP_DAC_READ_SEARCH, so the generations usually
// match what a HandleNodeTable server of the same export gives. Only a filesystem without
// handles gets the inode number + birth time hash (computed once, when a node is created).
class PathNodeTable final : public NodeTable {
 public:
  // `root_fd` is an O_PATH fd of the export directory; it becomes node 1.
  PathNodeTable(UniqueFd root_fd, const struct stat& root_st);

  absl::StatusOr<NodeRef> Get(uint64_t nodeid) const override;
  bool Contains(uint64_t nodeid) const override;
  absl::StatusOr<EntryIds> AddLookup(UniqueFd fd, const struct stat& st,
                                     InodeHandle* new_handle = nullptr) override;
  NodeRef HeldNode(const InodeKey& key) const override;
  std::optional<EntryIds> AddLookupOf(const Node& node) override;
  void Forget(uint64_t nodeid, uint64_t nlookup) override;
  std::optional<InodeKey> KeyOf(uint64_t nodeid) const override;
  std::optional<uint64_t> FindByInode(const InodeKey& key) const override;
  uint64_t LookupCount(uint64_t nodeid) const override;
  size_t size() const override;

 private:
  struct Entry {
    NodeRef node;
    uint64_t lookups = 0;
    uint64_t generation = 0;
  };

  // One more lookup of the node for `key`, if there is one.
  std::optional<EntryIds> CountKnownLocked(const InodeKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> by_id_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<InodeKey, uint64_t> by_inode_ ABSL_GUARDED_BY(mu_);
  // Never reused, and unrelated to any other table's ids, so a stale id from the kernel can
  // never name a different file. Skips ids already in by_id_.
  IdSpace ids_ ABSL_GUARDED_BY(mu_) = IdSpace(/*first_id=*/2);
};

}  // namespace ringfs::server
