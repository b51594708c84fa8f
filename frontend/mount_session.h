// One ringfs mount from start to end: mounts the FUSE file system, answers INIT, starts the
// workers of the negotiated transport, proves the mount answers, then waits until the FUSE
// connection ends (SIGINT/SIGTERM/SIGHUP unmount it) and joins the workers.
// Used by the main thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/unique_fd.h"
#include "frontend/backend_channel.h"
#include "frontend/devfuse_worker.h"
#include "frontend/init_negotiation.h"
#include "frontend/kernel_notifier.h"
#include "frontend/options.h"
#include "frontend/queue_engine.h"
#include "frontend/stats_snapshot.h"
#include "frontend/worker_stats.h"

namespace ringfs::frontend {

struct MountDescription {
  std::string source;
  std::string mountpoint;
  std::string server;
  std::string transport;  // uring | classic
  std::string client_id;
  uint32_t fuse_major = 7;
  uint32_t fuse_minor = 0;
  uint64_t fuse_flags = 0;
  uint32_t queue_depth = 0;
  uint32_t initial_depth = 0;
  // Ring transport: "all-possible" (an entry on every possible CPU's queue, as the kernel needs)
  // or "reduced" (FUSE_URING_REDUCED_Q: the active set's queues only); "" with classic.
  std::string ring_queues;
  std::chrono::steady_clock::time_point started;
};

class MountSession {
 public:
  MountSession(MountOptions options, std::string token);
  ~MountSession();

  // Checks that the server answers, mounts, negotiates and starts the workers, and returns once
  // a request through the mount has been answered. On error nothing stays mounted.
  // REQUIRES: SIGINT/SIGTERM/SIGHUP are blocked in the calling thread (workers inherit it).
  absl::Status Start();

  // Returns when the FUSE connection has ended and every worker has exited.
  void Run();

  // One line for the user: what is mounted where, and over which transport.
  std::string Describe() const;

  // The ring transport's queue engine; nullptr with the classic transport.
  QueueEngine* engine() { return engine_.get(); }
  // Every worker's counters, read now: one queue per CPU (the engine's workers, or the classic
  // transport's /dev/fuse workers) plus the ring transport's /dev/fuse side channel. Any thread
  // may call it once Start() returned (the set of workers is fixed from then on).
  StatsSnapshot Snapshot() const;
  MountDescription description() const;
  // The mount's device number (fusectl connection id = its minor); 0 before Start() and once
  // the connection ended: the number may be another mount's by then (ConnectionAlive).
  dev_t device() const;
  // The mount's /dev/fuse descriptor, for fusectl's liveness check (ConnectionAlive).
  int fuse_fd() const { return fuse_fd_.get(); }

 private:
  absl::Status Negotiate();
  absl::Status StartNotifier();
  absl::Status StartPageDrops();
  absl::Status StartWorkers();
  absl::Status ProbeMount();
  void WriteStats() const;
  void AbortConnection();
  bool ConnectionEnded() const;
  BackendConfig MakeBackendConfig(uint32_t queue, uint32_t max_inflight) const;
  StatsSnapshot WithMountCounters(StatsSnapshot snapshot) const;

  MountOptions options_;
  std::string token_;
  std::shared_ptr<tls::Context> tls_;  // mount option tls; null: plaintext
  std::string client_id_;
  // Every server address (servers=, names resolved to all their addresses).
  std::vector<SocketAddress> server_addresses_;
  UniqueFd fuse_fd_;
  bool mounted_ = false;
  InitDecision init_;
  dev_t device_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::unique_ptr<WorkerStats>> stats_;
  // Shared by every worker's backend connection (see local_answer.h).
  std::unique_ptr<DirAttrCache> dir_attr_cache_ = std::make_unique<DirAttrCache>();
  // INTERRUPTs read from /dev/fuse, for the worker that holds the request.
  std::unique_ptr<InterruptBoard> interrupts_ = std::make_unique<InterruptBoard>();
  // What the kernel holds, re-established on a new server instance (null with no_reclaim), and
  // which server and instance the mount uses. Shared by every channel.
  std::unique_ptr<NodeLedger> ledger_;
  // Which nodes have no file capability (only with invalidations, which keep it coherent).
  std::unique_ptr<XattrAbsenceCache> xattrs_;
  // Where open directories' listings end (its answers are the server's own: always on).
  std::unique_ptr<DirEnds> dir_ends_ = std::make_unique<DirEnds>();
  std::unique_ptr<LocalDirHandles> local_dirs_ = std::make_unique<LocalDirHandles>();
  std::unique_ptr<CompleteDirs> complete_dirs_;  // null with no_complete_dirs
  // SETATTRs that change nothing are answered by the mount only while invalidations keep what
  // it knows of files coherent.
  bool noop_setattrs() const { return !options_.sync_noop_setattr && options_.invalidations; }
  // Null without async_unlink, async_setattr, async_write and noop SETATTRs, or without post-op
  // directory attributes (no_dir_attrs).
  std::unique_ptr<AsyncRemovals> async_removals_ =
      (options_.async_unlink || options_.async_setattr || options_.async_write ||
       noop_setattrs()) &&
              options_.dir_attrs
          ? std::make_unique<AsyncRemovals>(options_.async_unlink, options_.async_setattr,
                                            options_.async_write, noop_setattrs())
          : nullptr;
  std::unique_ptr<KeptEntries> kept_entries_;    // null with no_kept_entries or no complete_dirs_
  // Null without kept_pages, or with no_dir_attrs (the open's record comes with dir attrs).
  std::unique_ptr<KeptPages> kept_pages_ =
      options_.kept_pages && options_.dir_attrs ? std::make_unique<KeptPages>() : nullptr;
  std::unique_ptr<PageDrops> page_drops_;  // with kept_pages_; before the workers, as notifier_
  // Writes the server's invalidations into the kernel; before the workers, whose channels post
  // to it, so it is destroyed after them. Null with no_invalidations.
  std::unique_ptr<KernelNotifier> notifier_;
  std::unique_ptr<ServerBinding> binding_;
  std::unique_ptr<QueueEngine> engine_;
  std::vector<std::unique_ptr<DevFuseWorker>> devfuse_workers_;
};

}  // namespace ringfs::frontend
