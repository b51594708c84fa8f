// NodeLedger: what the kernel holds of the server's state, kept so it can be re-established on
// another server instance (reclaim, common/node_handle.h): every node id the kernel knows, with
// its lookup count and the sealed handle the server sent for it, and every open file handle,
// with its node and open flags.
//
// The counts follow what the kernel itself counts: one lookup per successful entry reply that
// reached it (LOOKUP, CREATE, MKNOD, MKDIR, SYMLINK, LINK, each READDIRPLUS entry except "." and
// ".."), minus what its FORGETs give back; an fh lives from its OPEN/OPENDIR/CREATE reply until
// its RELEASE/RELEASEDIR is submitted. A reply the kernel never got (interrupted, timed out) is
// not counted, so the server may hold more than the ledger, never less.
//
// FORGETs are numbered by epoch: a snapshot taken for a reclaim starts a new epoch, and a FORGET
// from an older epoch is already reflected in the snapshot's counts, so it must not reach the new
// instance (it would be subtracted twice).
//
// Mount-wide, shared by every channel; thread-safe (one mutex: every operation is a few hash-map
// steps, far below the cost of the round trip it accompanies).
#pragma once

#include <linux/fuse.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/node_handle.h"

namespace ringfs::frontend {

class NodeLedger {
 public:
  struct Snapshot {
    uint64_t epoch = 0;  // FORGETs of older epochs are in these counts
    std::vector<wire::ReclaimNodeRecord> nodes;
    std::vector<wire::ReopenRecord> files;
    size_t nodes_without_handle = 0;  // held by the kernel, but cannot be reclaimed
  };

  // Handles from a kNotifyNodeHandles frame.
  void SetHandles(const wire::NodeHandleRecord* records, size_t count);
  // A success reply from the server that the kernel is about to get. `op_in` is the request's
  // argument struct (`op_in_size` bytes), `body` the reply body without trailers.
  void OnReply(const fuse_in_header& request, const void* op_in, size_t op_in_size,
               const char* body, size_t body_size);
  // A request on its way to the server: RELEASE/RELEASEDIR end their fh here.
  void OnRequest(const fuse_in_header& request, const void* op_in, size_t op_in_size);
  // A FORGET or BATCH_FORGET frame (header included). Returns the epoch it was counted in.
  uint64_t OnForget(const void* frame, size_t size);

  // Everything the kernel holds now, and a new epoch.
  Snapshot Take();
  uint64_t epoch() const;

  size_t nodes() const;
  // The node ids the kernel holds now (KernelNotifier::ResetKernelCaches).
  std::vector<uint64_t> NodeIds() const;
  size_t open_files() const;

 private:
  struct Node {
    uint64_t nlookup = 0;
    wire::NodeHandleRecord handle;  // handle_bytes 0: none known
  };
  struct OpenFile {
    uint64_t nodeid = 0;
    uint32_t flags = 0;
    bool directory = false;
  };

  void AddLookupLocked(uint64_t nodeid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetLocked(uint64_t nodeid, uint64_t nlookup) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, OpenFile> files_ ABSL_GUARDED_BY(mu_);
  // Handles of nodes whose last lookup was forgotten, the newest kForgottenHandles, for a LOOKUP
  // of the node that crossed its FORGET (the server then sends no handle again). Without it
  // such a node could not be reclaimed (ESTALE after a restart), e.g. when the kernel drops and
  // looks up again many dentries at once (reset_names, drop_caches).
  // At most about 3 MB (16,384 handles of ~170 bytes with the map's overhead).
  static constexpr size_t kForgottenHandles = 1 << 14;
  struct Forgotten {
    wire::NodeHandleRecord handle;
    uint64_t seq = 0;  // which entry of forgotten_order_ it is
  };
  absl::flat_hash_map<uint64_t, Forgotten> forgotten_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, uint64_t>> forgotten_order_ ABSL_GUARDED_BY(mu_);  // (id, seq)
  uint64_t forgotten_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringfs::frontend
