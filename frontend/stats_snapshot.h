// A plain copy of the frontend workers' counters, read once per worker: what the stats file, the
// control plane's ListQueues/WatchQueues and the Prometheus collector all report from, so that
// they read WorkerStats the same way. Taking one reads the atomics (relaxed, no lock, STYLE.md
// 10); the workers may go on counting meanwhile, so counters of different workers are read
// moments apart, never torn. The result is a value: any thread may keep and read it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "frontend/queue/topology.h"
#include "frontend/worker_stats.h"

namespace ringfs::frontend {

struct HistogramSnapshot {
  std::array<uint64_t, LatencyHistogram::kBuckets> counts = {};  // per bucket, not cumulative
  int64_t sum_ns = 0;

  uint64_t Count() const;
};

// Every counter of one worker (WorkerStats without the atomics and the per-qid arrivals).
struct WorkerCounters {
  WorkerState state = WorkerState::kStopped;
  uint64_t ring_requests = 0;
  uint64_t devfuse_requests = 0;
  uint64_t forgets = 0;
  uint64_t replies = 0;
  uint64_t answered_locally = 0;
  uint64_t interrupted = 0;
  uint64_t reconnects = 0;

  uint64_t forwarded = 0;
  uint64_t forwarded_foreground = 0;
  uint64_t forwarded_background = 0;
  uint64_t handoffs_in = 0;
  uint64_t handoffs_out = 0;
  uint64_t inflight = 0;
  uint64_t background_inflight = 0;
  uint64_t background_queued = 0;
  uint64_t background_inflight_max = 0;
  uint64_t background_limit = 0;  // BackgroundLimiter::kUnlimited or more: unlimited
  uint64_t entries_held = 0;
  uint64_t sched_idle = 0;  // 1 while the worker runs SCHED_IDLE
  uint64_t entries_added = 0;
  uint64_t payload_trims = 0;

  HistogramSnapshot request_duration[2];  // 0 foreground, 1 background
  HistogramSnapshot backend_rtt;
  std::array<std::array<uint64_t, WorkerStats::kOpcodes>, 2> forwarded_by_op = {};
  uint64_t bytes_to_server = 0;
  uint64_t bytes_from_server = 0;
  std::array<uint64_t, WorkerStats::kErrnos> replies_by_errno = {};
  std::array<uint64_t, kFailureReasons> failures = {};

  // Answers with an errno other than 0, expected ones included.
  uint64_t Errors() const;
  // Answers that are failures of ringfs or the server (every reason).
  uint64_t TotalFailures() const;
};

WorkerCounters ReadWorkerCounters(const WorkerStats& stats);

// One kernel queue and the worker of its CPU.
struct QueueSnapshot {
  int cpu = 0;  // the queue's CPU = kernel qid, the `queue` label
  // Requests the kernel put on this queue: with the ring transport, summed over every worker
  // whose ring they arrived on; with the classic transport, read from /dev/fuse by its worker.
  uint64_t received = 0;
  // Ring transport: the entries registered for this queue and their resident memory by the
  // entries' accounting (ring_memory.h), wherever those entries are held now.
  uint32_t ring_entries = 0;
  uint64_t ring_memory_bytes = 0;
  WorkerCounters worker;
};

struct StatsSnapshot {
  bool queue_engine = false;  // ring transport: the engine's counters (limits, hand-offs) apply
  std::vector<QueueSnapshot> queues;  // ascending CPU with the ring transport
  // Workers that serve no queue: the ring transport's /dev/fuse side channel.
  std::vector<WorkerCounters> other_workers;
  // Mount-wide: state re-established on new server instances (frontend/server_binding.h) and
  // what the kernel holds now (frontend/node_ledger.h).
  uint64_t reclaims = 0;
  uint64_t reclaim_refused = 0;  // nodes and open files a new instance refused (ESTALE)
  uint64_t held_nodes = 0;
  uint64_t held_open_files = 0;  // with a server handle: what a reclaim re-opens
  // Directories open with the mount's own handles (frontend/local_dir_handles.h).
  uint64_t local_open_dirs = 0;
  // Cache invalidations the server pushed (frontend/kernel_notifier.h): written into the
  // kernel, or for nothing the kernel still cached; written again because an answer was on its
  // way into the kernel; lost (queue full).
  uint64_t invalidations_written = 0;
  uint64_t invalidations_not_cached = 0;
  uint64_t invalidations_repeated = 0;
  uint64_t invalidations_lost = 0;
  uint64_t cache_resets = 0;             // KernelNotifier::ResetKernelCaches done
  uint64_t cache_resets_names_kept = 0;  // of those, without marking names stale
  uint64_t async_unlinks = 0;            // AsyncRemovals: unlinks answered early
  uint64_t async_unlink_failures = 0;    // ... that failed at the server, or ended unanswered
  uint64_t async_setattrs = 0;           // AsyncRemovals: SETATTRs answered early
  uint64_t async_setattr_failures = 0;   // ... that failed at the server, or ended unanswered
  uint64_t async_setattrs_folded = 0;    // ... folded into the one before (one server request)
  uint64_t async_writes = 0;             // AsyncRemovals: WRITEs answered early
  uint64_t async_write_failures = 0;     // ... that failed at the server, or ended unanswered
  uint64_t noop_setattrs = 0;  // AsyncRemovals::Unchanged: SETATTRs changing nothing, not sent
  uint64_t pages_kept = 0;     // KeptPages: OPENs that let the kernel keep the file's pages
  uint64_t page_drops = 0;     // PageDrops: drops the kernel did (confirmations)
  uint64_t page_drops_put_off = 0;  // PageDrops: tried again later (a READ or WRITE in flight)
  // Directories known complete (frontend/complete_dirs.h), and changes sent and not yet answered
  // by the server (while any is, no reply's word is trusted: CompleteDirs::BeginChange).
  uint64_t complete_dirs = 0;
  uint64_t changes_unsettled = 0;
  // Names of nodes recorded, and lookups of forgotten nodes kept (frontend/kept_entries.h).
  uint64_t kept_entries = 0;
  uint64_t kept_lookups = 0;

  // Every worker's counters added up, queues and others: counters, histograms and the in-flight
  // gauges; `state`, `background_limit` and `background_inflight_max` stay at their defaults.
  WorkerCounters Total() const;
};

// The queue engine's workers: `workers[i]` counts for `topology.cpus()[i]` and indexes its
// received_by_qid by position in topology.cpus() (never by CPU number, which need not be
// contiguous). REQUIRES: workers.size() == topology.size().
StatsSnapshot SnapshotQueueEngine(const queue::Topology& topology,
                                  std::span<const WorkerStats* const> workers,
                                  std::span<const WorkerStats* const> side_channel);

// The classic transport's workers as (cpu, counters), one queue each.
StatsSnapshot SnapshotClassic(std::span<const std::pair<int, const WorkerStats*>> workers);

}  // namespace ringfs::frontend
