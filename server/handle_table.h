// Open files and directories of one client, by the fh ids the server hands out in OPEN, CREATE
// and OPENDIR. An fh comes from the table's own IdSpace: never 0, never reused, and never one
// another table or server instance handed out, so an fh from an older instance is unknown here
// (ESTALE), never another open file. Nor one with bit 63 set: those are the client's own
// (handle-less listings, wire_format.md), which it never sends. Thread-safe: any worker may add,
// get or remove. A Handle is shared: an executor or an in-flight io_uring operation keeps its fd
// open after a concurrent RELEASE.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "server/id_space.h"

namespace ringfs::server {

struct DirEntry {
  std::string name;
  uint64_t ino = 0;
  uint8_t type = 0;  // DT_* as getdents64 reports it
};

// A snapshot of a directory's entries taken when a READDIR starts at offset 0. Entry i has the
// cookie i + 1, so a READDIR at any offset the server handed out continues exactly there, even
// while the directory changes.
struct DirSnapshot {
  bool loaded = false;
  std::vector<DirEntry> entries;
};

struct Handle {
  Handle(UniqueFd f, uint64_t node, bool dir) : fd(std::move(f)), nodeid(node), is_dir(dir) {}
  const UniqueFd fd;  // opened for I/O (files) or O_RDONLY|O_DIRECTORY (directories)
  const uint64_t nodeid;
  const bool is_dir;
  absl::Mutex mu;  // serialises READDIRs of one directory handle
  DirSnapshot dir ABSL_GUARDED_BY(mu);
};
using HandleRef = std::shared_ptr<Handle>;

class HandleTable {
 public:
  // `max_handles`: how many open handles CheckRoom() allows (a per-client cap on open fds).
  explicit HandleTable(size_t max_handles = SIZE_MAX) : max_handles_(max_handles) {}

  // ENFILE when the table holds max_handles handles. Checked before an open; concurrent opens
  // on other workers may pass it together, so the cap can be exceeded by at most one handle per
  // worker (never unboundedly).
  [[nodiscard]] absl::Status CheckRoom() const;
  uint64_t Add(HandleRef handle);
  // Reclaim (common/node_handle.h): registers `handle` under `fh`, an id from another instance.
  // ESTALE when this table could have handed `fh` out itself (IdSpace::Passed) or `fh` names
  // another open node; when `fh` already names an open handle of the same node and kind it is
  // kept (a replayed batch is harmless) and `handle` is dropped. ENFILE as CheckRoom().
  [[nodiscard]] absl::Status Adopt(uint64_t fh, HandleRef handle);
  // ESTALE for ids this table does not know (never handed out here, or released).
  absl::StatusOr<HandleRef> Get(uint64_t fh) const;
  absl::Status Remove(uint64_t fh);
  // Any open handle of node `nodeid`, or null. A scan: for the rare case of a node whose file
  // can only be reached through an open handle any more (ops_util.cc).
  HandleRef FindByNode(uint64_t nodeid) const;
  size_t size() const;

 private:
  const size_t max_handles_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, HandleRef> handles_ ABSL_GUARDED_BY(mu_);
  IdSpace ids_ ABSL_GUARDED_BY(mu_) = IdSpace(/*first_id=*/1);  // skips ids in handles_
};

}  // namespace ringfs::server
