// Counters of ringfs-server, each with exactly one writer (STYLE.md 10): WorkerStats belong to one
// worker, SessionStats to the worker that serves the session. Writers use Bump() (a relaxed
// load + store: no locked instruction, correct because nobody else writes); readers (the admin
// RPC threads, metrics scrapes) load them relaxed at any time. SessionTable lists the live
// sessions for those readers; it is locked only when a session starts, ends or is listed.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/request.h"

namespace ringfs::server {

// REQUIRES: the calling thread is the counter's only writer.
inline void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
inline uint64_t Read(const std::atomic<uint64_t>& counter) {
  return counter.load(std::memory_order_relaxed);
}

// Request durations from decode to the reply being queued: 10 µs … 10 s, then +Inf.
struct DurationHistogram {
  static constexpr std::array<double, 19> kBoundsSeconds = {
      10e-6, 25e-6, 50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
      25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,    2.5,  5.0,    10.0};
  static constexpr size_t kBuckets = kBoundsSeconds.size() + 1;  // the last one is +Inf

  void Observe(uint64_t nanoseconds);

  std::array<std::atomic<uint64_t>, kBuckets> counts{};  // per bucket, not cumulative
  std::atomic<uint64_t> sum_ns{0};
};

struct WorkerStats {
  static constexpr size_t kOpcodes = 64;  // FUSE opcodes below this are counted per op
  static constexpr size_t kErrnos = 512;  // replies carry errnos 1..511

  std::array<std::atomic<uint64_t>, kOpcodes> requests_by_op{};
  std::array<DurationHistogram, kOpcodes> duration_by_op{};
  std::array<std::atomic<uint64_t>, kErrnos> errors_by_errno{};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(RejectReason::kCount)> rejected{};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> sends{0};     // SENDMSGs completed (replies and notifications share them)
  std::atomic<uint64_t> sessions{0};  // live connections of this worker
  std::atomic<uint64_t> replays{0};      // requests answered from a client's reply cache
  std::atomic<uint64_t> idle_closed{0};  // connections closed by --idle-timeout
  // Connections closed because a new one of their client replaced them; those of them that
  // had received requests not started yet (dropped: the client resent them); new connections
  // that waited for replaced ones to end (session_fence.h).
  std::atomic<uint64_t> sessions_replaced{0};
  std::atomic<uint64_t> replaced_with_unstarted{0};
  std::atomic<uint64_t> sessions_fenced{0};
  // 1 while the worker thread runs SCHED_IDLE. The one counter written by another thread: the
  // server's WorkerSchedWatch, its only writer.
  std::atomic<uint64_t> sched_idle{0};
  // 1 while the worker moves bulk data and so left the CPU of the mount it serves
  // (cpu_placement.h).
  std::atomic<uint64_t> bulk{0};
  // Invalidation records queued for other clients by this worker's requests (coherence.h).
  std::atomic<uint64_t> invalidations_pushed{0};
  // Reset records this worker sent (the server lost track of changes: invalidation_outbox.h).
  std::atomic<uint64_t> cache_resets_sent{0};
};

// One live session (= one data connection). The identity fields are fixed at creation.
struct SessionStats {
  uint64_t session_id = 0;
  std::string client_id;  // the key of its client's state: ClientStateKey(client_name, id)
  std::string client_name;
  std::string export_options;  // FormatExportOptions of the session's options
  std::string peer;
  uint32_t queue = 0;   // the client's kernel queue (ClientHello.queue)
  uint32_t worker = 0;  // index of the owning worker
  bool same_host = false;  // the client runs on this host (cpu_placement.h ClientIsLocal)
  int64_t connected_unix_ns = 0;

  std::atomic<uint64_t> inflight{0};  // requests whose reply is not fully sent yet
  std::atomic<uint32_t> max_inflight{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> sends{0};
};

class SessionTable {
 public:
  // By the owning worker when the session starts and after it ended.
  void Add(std::shared_ptr<const SessionStats> session);
  void Remove(uint64_t session_id);

  // Any thread. nullptr when no such session is live.
  std::shared_ptr<const SessionStats> Find(uint64_t session_id) const;
  // The live sessions by ascending id.
  std::vector<std::shared_ptr<const SessionStats>> List() const;
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const SessionStats>> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::server
