// The queue engine of the ring transport: one RingWorker per possible CPU (threads only where
// needed), the entries they share, and the runtime settings (active set, per-worker background
// limits, placement policies, commit locality). Apply() validates a new QueueConfig, hands it to
// every worker through its mailbox and returns once each worker has switched to it, so a caller
// can read the new state back at once.
// Threads: every public method may be called from any thread except workers; Apply() calls
// are serialised.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/cpu_contention.h"
#include "frontend/backend_channel.h"
#include "frontend/engine_state.h"
#include "frontend/queue/queue_config.h"
#include "frontend/ring_worker.h"
#include "frontend/worker_stats.h"

namespace ringfs::frontend {

class QueueEngine {
 public:
  using BackendFactory = std::function<BackendConfig(uint32_t queue)>;

  using Entries = EntriesConfig;

  QueueEngine(queue::Topology topology, int fuse_fd, Entries entries,
              BackendFactory backend_factory);
  ~QueueEngine();

  // Registers `initial_depth` entries for every qid (every active one with reduced queues) on
  // the worker that owns it under `config` and starts the active workers.
  // REQUIRES: the INIT reply has been written.
  absl::Status Start(const queue::QueueConfig& config);

  // Validates `config` (InvalidArgument says what is wrong) and applies it on every worker.
  absl::Status Apply(const queue::QueueConfig& config) ABSL_LOCKS_EXCLUDED(apply_mu_);

  queue::QueueConfig config() const ABSL_LOCKS_EXCLUDED(apply_mu_);
  const queue::Topology& topology() const { return shared_.topology; }
  // Counters of the worker for topology().cpus()[index]; valid for the engine's lifetime.
  const WorkerStats& stats(size_t index) const { return *stats_[index]; }
  bool worker_running(size_t index) const { return workers_[index]->running(); }
  // The entries registered for the queue of topology().cpus()[index], and their resident memory
  // (ring_memory.h accounting). Any thread.
  uint32_t EntriesOf(size_t index) const {
    return shared_.entries[index].registered.load(std::memory_order_relaxed);
  }
  std::vector<uint64_t> ResidentBytesByQueue() const;
  bool reduced_queues() const { return entries_.reduced_queues; }

  // Judges each worker's CPU from /proc/stat (CpuContention) and keeps every worker's scheduling
  // policy what its configuration and its CPU's contention ask for. Called periodically (the
  // mount's stats loop, every 200 ms); any thread but workers, one at a time.
  void WatchContention();

  // Ends every worker. REQUIRES: the FUSE connection has ended (a worker that still holds
  // registered entries must not exit while the mount is alive).
  void Stop();

 private:
  absl::Status ApplyLocked(const queue::QueueConfig& config, bool initial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);

  EngineShared shared_;
  const Entries entries_;
  BackendFactory backend_factory_;
  std::vector<std::unique_ptr<WorkerStats>> stats_;
  std::vector<std::unique_ptr<RingWorker>> workers_;
  CpuContention contention_;  // WatchContention's only

  mutable absl::Mutex apply_mu_;
  queue::QueueConfig config_ ABSL_GUARDED_BY(apply_mu_);
  std::shared_ptr<const EngineState> state_ ABSL_GUARDED_BY(apply_mu_);
  bool stopped_ ABSL_GUARDED_BY(apply_mu_) = false;
  // CanLeaveSchedIdle was tried (EngineShared::can_leave_idle holds the answer).
  bool idle_probed_ ABSL_GUARDED_BY(apply_mu_) = false;
};

}  // namespace ringfs::frontend
