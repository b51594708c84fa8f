#include "frontend/stats_snapshot.h"

#include <atomic>

namespace ringfs::frontend {
namespace {

uint64_t Load(const std::atomic<uint64_t>& counter) {
  return counter.load(std::memory_order_relaxed);
}

HistogramSnapshot ReadHistogram(const LatencyHistogram& histogram) {
  HistogramSnapshot out;
  for (size_t b = 0; b < LatencyHistogram::kBuckets; ++b) out.counts[b] = Load(histogram.counts[b]);
  out.sum_ns = histogram.sum_ns.load(std::memory_order_relaxed);
  return out;
}

void AddHistogram(HistogramSnapshot& total, const HistogramSnapshot& h) {
  for (size_t b = 0; b < LatencyHistogram::kBuckets; ++b) total.counts[b] += h.counts[b];
  total.sum_ns += h.sum_ns;
}

template <size_t N>
void AddArray(std::array<uint64_t, N>& total, const std::array<uint64_t, N>& values) {
  for (size_t i = 0; i < N; ++i) total[i] += values[i];
}

void AddCounters(WorkerCounters& t, const WorkerCounters& w) {
  t.ring_requests += w.ring_requests;
  t.devfuse_requests += w.devfuse_requests;
  t.forgets += w.forgets;
  t.replies += w.replies;
  t.answered_locally += w.answered_locally;
  t.interrupted += w.interrupted;
  t.reconnects += w.reconnects;
  t.forwarded += w.forwarded;
  t.forwarded_foreground += w.forwarded_foreground;
  t.forwarded_background += w.forwarded_background;
  t.handoffs_in += w.handoffs_in;
  t.handoffs_out += w.handoffs_out;
  t.inflight += w.inflight;
  t.background_inflight += w.background_inflight;
  t.background_queued += w.background_queued;
  t.entries_held += w.entries_held;
  t.sched_idle += w.sched_idle;
  t.entries_added += w.entries_added;
  t.payload_trims += w.payload_trims;
  for (int c = 0; c < 2; ++c) {
    AddHistogram(t.request_duration[c], w.request_duration[c]);
    AddArray(t.forwarded_by_op[c], w.forwarded_by_op[c]);
  }
  AddHistogram(t.backend_rtt, w.backend_rtt);
  t.bytes_to_server += w.bytes_to_server;
  t.bytes_from_server += w.bytes_from_server;
  AddArray(t.replies_by_errno, w.replies_by_errno);
  AddArray(t.failures, w.failures);
}

}  // namespace

uint64_t HistogramSnapshot::Count() const {
  uint64_t total = 0;
  for (uint64_t count : counts) total += count;
  return total;
}

uint64_t WorkerCounters::Errors() const {
  uint64_t total = 0;
  for (size_t err = 1; err < replies_by_errno.size(); ++err) total += replies_by_errno[err];
  return total;
}

uint64_t WorkerCounters::TotalFailures() const {
  uint64_t total = 0;
  for (uint64_t count : failures) total += count;
  return total;
}

WorkerCounters ReadWorkerCounters(const WorkerStats& s) {
  WorkerCounters w;
  w.state = static_cast<WorkerState>(s.state.load(std::memory_order_relaxed));
  w.ring_requests = Load(s.ring_requests);
  w.devfuse_requests = Load(s.devfuse_requests);
  w.forgets = Load(s.forgets);
  w.replies = Load(s.replies);
  w.answered_locally = Load(s.answered_locally);
  w.interrupted = Load(s.interrupted);
  w.reconnects = Load(s.reconnects);
  w.forwarded = Load(s.forwarded);
  w.forwarded_foreground = Load(s.forwarded_foreground);
  w.forwarded_background = Load(s.forwarded_background);
  w.handoffs_in = Load(s.handoffs_in);
  w.handoffs_out = Load(s.handoffs_out);
  w.inflight = Load(s.inflight);
  w.background_inflight = Load(s.background_inflight);
  w.background_queued = Load(s.background_queued);
  w.background_inflight_max = Load(s.background_inflight_max);
  w.background_limit = Load(s.background_limit);
  w.entries_held = Load(s.entries_held);
  w.sched_idle = Load(s.sched_idle);
  w.entries_added = Load(s.entries_added);
  w.payload_trims = Load(s.payload_trims);
  for (int c = 0; c < 2; ++c) {
    w.request_duration[c] = ReadHistogram(s.request_duration[c]);
    for (size_t op = 0; op < WorkerStats::kOpcodes; ++op) {
      w.forwarded_by_op[c][op] = Load(s.forwarded_by_op[c][op]);
    }
  }
  w.backend_rtt = ReadHistogram(s.backend_rtt);
  w.bytes_to_server = Load(s.bytes_to_server);
  w.bytes_from_server = Load(s.bytes_from_server);
  for (size_t err = 0; err < WorkerStats::kErrnos; ++err) {
    w.replies_by_errno[err] = Load(s.replies_by_errno[err]);
  }
  for (size_t reason = 0; reason < kFailureReasons; ++reason) {
    w.failures[reason] = Load(s.failures[reason]);
  }
  return w;
}

WorkerCounters StatsSnapshot::Total() const {
  WorkerCounters total;
  for (const QueueSnapshot& q : queues) AddCounters(total, q.worker);
  for (const WorkerCounters& w : other_workers) AddCounters(total, w);
  return total;
}

StatsSnapshot SnapshotQueueEngine(const queue::Topology& topology,
                                  std::span<const WorkerStats* const> workers,
                                  std::span<const WorkerStats* const> side_channel) {
  StatsSnapshot snapshot;
  snapshot.queue_engine = true;
  const size_t queues = topology.size();
  snapshot.queues.resize(queues);
  for (size_t i = 0; i < queues; ++i) {
    snapshot.queues[i].cpu = topology.cpus()[i];
    snapshot.queues[i].worker = ReadWorkerCounters(*workers[i]);
  }
  // A request is counted by the worker whose ring it arrived on, at the position of its qid.
  for (size_t w = 0; w < queues; ++w) {
    const WorkerStats& other = *workers[w];
    for (size_t i = 0; i < queues && i < other.queues; ++i) {
      snapshot.queues[i].received += Load(other.received_by_qid[i]);
    }
  }
  for (const WorkerStats* s : side_channel) {
    snapshot.other_workers.push_back(ReadWorkerCounters(*s));
  }
  return snapshot;
}

StatsSnapshot SnapshotClassic(std::span<const std::pair<int, const WorkerStats*>> workers) {
  StatsSnapshot snapshot;
  for (const auto& [cpu, stats] : workers) {
    QueueSnapshot& q = snapshot.queues.emplace_back();
    q.cpu = cpu;
    q.worker = ReadWorkerCounters(*stats);
    q.received = q.worker.devfuse_requests;
  }
  return snapshot;
}

}  // namespace ringfs::frontend
