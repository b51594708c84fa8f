// Counters and gauges of one frontend worker. Written only by the worker's own thread (relaxed
// atomics), read at any time by the main thread, the stats file and the control plane; no lock.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <iterator>
#include <memory>

#include "frontend/reply_origin.h"

namespace ringfs::frontend {

enum class WorkerState : uint32_t { kStopped = 0, kActive = 1, kRetiring = 2 };

// Why ringfs could not give the caller the server's answer (or the server failed).
enum class FailureReason : uint32_t {
  kTimeout = 0,         // ETIMEDOUT: no reply within timeout=
  kConnectionLost = 1,  // EIO: the connection died while the reply was arriving
  kInvalidReply = 2,    // EIO: the server's reply broke the wire rules
  kServerIo = 3,        // EIO from the server itself
  kBadRequest = 4,      // EIO: a kernel request ringfs could not take (length, size)
};
inline constexpr size_t kFailureReasons = 5;
inline const char* FailureReasonName(size_t reason) {
  static constexpr const char* kNames[kFailureReasons] = {"timeout", "connection_lost",
                                                          "invalid_reply", "server_eio",
                                                          "bad_request"};
  return reason < kFailureReasons ? kNames[reason] : "unknown";
}

// A fixed-bucket latency histogram: one writer (the worker), readers at scrape time. Buckets
// span 10 µs … 10 s, which covers a loopback round trip up to a server stall.
struct LatencyHistogram {
  static constexpr double kBoundsSeconds[] = {10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
                                              1e-3,  2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
                                              100e-3, 250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0};
  static constexpr size_t kBuckets = std::size(kBoundsSeconds) + 1;  // last: +Inf

  void Observe(int64_t nanoseconds) {
    double seconds = static_cast<double>(nanoseconds) * 1e-9;
    size_t bucket = 0;
    while (bucket < kBuckets - 1 && seconds > kBoundsSeconds[bucket]) ++bucket;
    counts[bucket].store(counts[bucket].load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
    sum_ns.store(sum_ns.load(std::memory_order_relaxed) + nanoseconds, std::memory_order_relaxed);
  }

  std::atomic<uint64_t> counts[kBuckets] = {};  // per bucket, not cumulative
  std::atomic<int64_t> sum_ns{0};
};

struct WorkerStats {
  explicit WorkerStats(size_t queues = 0)
      : queues(queues), received_by_qid(new std::atomic<uint64_t>[queues]) {
    for (size_t i = 0; i < queues; ++i) received_by_qid[i].store(0);
  }

  // Transport counters.
  std::atomic<uint64_t> ring_requests{0};     // requests that arrived as ring completions
  std::atomic<uint64_t> devfuse_requests{0};  // requests read from /dev/fuse
  std::atomic<uint64_t> forgets{0};
  std::atomic<uint64_t> replies{0};     // answers committed/written back to the kernel
  std::atomic<uint64_t> answered_locally{0};  // of those, without the server (local_answer.h)
  std::atomic<uint64_t> interrupted{0};  // answered EINTR because the kernel interrupted them
  std::atomic<uint64_t> reconnects{0};

  // Queue-engine counters (ring transport).
  std::atomic<uint64_t> forwarded{0};             // requests sent to the server by this worker
  std::atomic<uint64_t> forwarded_foreground{0};
  std::atomic<uint64_t> forwarded_background{0};
  std::atomic<uint64_t> handoffs_in{0};
  std::atomic<uint64_t> handoffs_out{0};
  std::atomic<uint64_t> inflight{0};              // requests at the server right now
  std::atomic<uint64_t> background_inflight{0};
  std::atomic<uint64_t> background_queued{0};
  std::atomic<uint64_t> background_inflight_max{0};  // high-water mark since the last reset
  std::atomic<uint64_t> background_limit{UINT32_MAX};
  std::atomic<uint64_t> entries_held{0};          // ring entries this worker holds right now
  std::atomic<uint64_t> sched_idle{
      0};  // 1 while the thread runs SCHED_IDLE (common/cpu_contention.h)
  std::atomic<uint64_t> entries_added{0};    // entries registered after the start (MaybeGrow)
  std::atomic<uint64_t> payload_trims{0};    // large payloads' pages returned (ring_memory.h)
  std::atomic<uint32_t> state{static_cast<uint32_t>(WorkerState::kStopped)};

  // Latency from the kernel handing us a request to our commit, by class (0 foreground,
  // 1 background), and of the server round trip alone.
  LatencyHistogram request_duration[2];
  LatencyHistogram backend_rtt;
  // Requests forwarded by this worker, by class and opcode.
  static constexpr size_t kOpcodes = 64;
  std::atomic<uint64_t> forwarded_by_op[2][kOpcodes] = {};
  std::atomic<uint64_t> bytes_to_server{0};    // request payloads (WRITE data, names)
  std::atomic<uint64_t> bytes_from_server{0};  // reply bodies
  // Every answer to the kernel by errno (0: success; 1..511), whoever produced it: most errors
  // are ones the caller expects (ENOENT of a LOOKUP, ENODATA of a GETXATTR, EEXIST, ...).
  static constexpr size_t kErrnos = 512;
  std::atomic<uint64_t> replies_by_errno[kErrnos] = {};
  // Answers that are failures of ringfs or the server, by reason: what operators alert on.
  std::atomic<uint64_t> failures[kFailureReasons] = {};

  const size_t queues;
  // Requests whose ring completion arrived at this worker, by kernel qid.
  std::unique_ptr<std::atomic<uint64_t>[]> received_by_qid;

  uint64_t TotalFailures() const {
    uint64_t total = 0;
    for (const auto& count : failures) total += count.load(std::memory_order_relaxed);
    return total;
  }
  // Counts one answer to the kernel: by errno, and as a failure where it is one.
  void CountReply(int error, ReplyOrigin origin) {
    int err = error < 0 ? -error : error;
    if (static_cast<size_t>(err) < kErrnos) Add(replies_by_errno[err]);
    switch (origin) {
      case ReplyOrigin::kServer:
        if (err == EIO) Add(failures[static_cast<size_t>(FailureReason::kServerIo)]);
        break;
      case ReplyOrigin::kTimeout:
        Add(failures[static_cast<size_t>(FailureReason::kTimeout)]);
        break;
      case ReplyOrigin::kInterrupted:
        Add(interrupted);
        break;
      case ReplyOrigin::kInvalidReply:
        Add(failures[static_cast<size_t>(FailureReason::kInvalidReply)]);
        break;
      case ReplyOrigin::kConnectionLost:
        Add(failures[static_cast<size_t>(FailureReason::kConnectionLost)]);
        break;
      case ReplyOrigin::kBadRequest:
        Add(failures[static_cast<size_t>(FailureReason::kBadRequest)]);
        break;
      case ReplyOrigin::kLocal:
        break;
    }
  }

  static void Add(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  static void Set(std::atomic<uint64_t>& gauge, uint64_t value) {
    gauge.store(value, std::memory_order_relaxed);
  }
};

}  // namespace ringfs::frontend
