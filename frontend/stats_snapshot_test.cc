#include "frontend/stats_snapshot.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <vector>

namespace ringfs::frontend {
namespace {

using queue::Topology;

// Workers of `topology` as the queue engine builds them: one per CPU, arrivals by qid position.
struct EngineWorkers {
  explicit EngineWorkers(const Topology& topology) {
    for (size_t i = 0; i < topology.size(); ++i) {
      owned.push_back(std::make_unique<WorkerStats>(topology.size()));
      pointers.push_back(owned.back().get());
    }
  }
  // What ring_worker.cc does when a completion for kernel queue `qid` (a CPU) reaches `worker`.
  void Arrive(const Topology& topology, size_t worker, int qid, uint64_t n = 1) {
    WorkerStats::Add(owned[worker]->received_by_qid[topology.IndexOf(qid)], n);
  }
  std::vector<std::unique_ptr<WorkerStats>> owned;
  std::vector<const WorkerStats*> pointers;
};

// Regression: readers indexed received_by_qid by CPU number, the writer by position; on CPUs
// 0,2,8,9 queue 8 read another queue's slot (or nothing, past the end).
TEST(StatsSnapshotTest, ReceivedSumsArrivalsByPositionOnNonContiguousCpus) {
  Topology topology = Topology::ForTest({{0, 2}, {8, 9}});
  EngineWorkers workers(topology);
  workers.Arrive(topology, 0, 8, 3);  // qid 8's requests committed on other workers' rings
  workers.Arrive(topology, 3, 8, 4);
  workers.Arrive(topology, 2, 8, 1);
  workers.Arrive(topology, 1, 2, 5);
  workers.Arrive(topology, 3, 9, 7);

  StatsSnapshot snapshot = SnapshotQueueEngine(topology, workers.pointers, {});
  ASSERT_TRUE(snapshot.queue_engine);
  ASSERT_EQ(snapshot.queues.size(), 4u);
  EXPECT_EQ(snapshot.queues[0].cpu, 0);
  EXPECT_EQ(snapshot.queues[1].cpu, 2);
  EXPECT_EQ(snapshot.queues[2].cpu, 8);
  EXPECT_EQ(snapshot.queues[3].cpu, 9);
  EXPECT_EQ(snapshot.queues[0].received, 0u);
  EXPECT_EQ(snapshot.queues[1].received, 5u);
  EXPECT_EQ(snapshot.queues[2].received, 8u);
  EXPECT_EQ(snapshot.queues[3].received, 7u);
}

TEST(StatsSnapshotTest, CopiesEveryCounterOfTheWorkerOfEachQueue) {
  Topology topology = Topology::ForTest({{1}, {4}});
  EngineWorkers workers(topology);
  WorkerStats& s = *workers.owned[1];
  s.state.store(static_cast<uint32_t>(WorkerState::kRetiring));
  WorkerStats::Add(s.ring_requests, 10);
  WorkerStats::Add(s.forwarded, 9);
  WorkerStats::Add(s.forwarded_foreground, 6);
  WorkerStats::Add(s.forwarded_background, 3);
  WorkerStats::Add(s.handoffs_in, 2);
  WorkerStats::Add(s.handoffs_out, 1);
  WorkerStats::Set(s.inflight, 4);
  WorkerStats::Set(s.background_inflight, 2);
  WorkerStats::Set(s.background_queued, 5);
  WorkerStats::Set(s.background_inflight_max, 7);
  WorkerStats::Set(s.background_limit, 8);
  WorkerStats::Set(s.entries_held, 32);
  WorkerStats::Add(s.reconnects, 1);
  WorkerStats::Add(s.bytes_to_server, 4096);
  WorkerStats::Add(s.bytes_from_server, 512);
  WorkerStats::Add(s.forwarded_by_op[1][16], 3);
  s.request_duration[0].Observe(30'000);  // 30 µs: the 50 µs bucket
  s.backend_rtt.Observe(2'000'000'000);   // 2 s
  s.CountReply(0, ReplyOrigin::kServer);
  s.CountReply(-ENOENT, ReplyOrigin::kServer);
  s.CountReply(-EIO, ReplyOrigin::kServer);
  s.CountReply(-ETIMEDOUT, ReplyOrigin::kTimeout);
  s.CountReply(-EINTR, ReplyOrigin::kInterrupted);

  StatsSnapshot snapshot = SnapshotQueueEngine(topology, workers.pointers, {});
  ASSERT_EQ(snapshot.queues.size(), 2u);
  EXPECT_EQ(snapshot.queues[0].worker.state, WorkerState::kStopped);
  EXPECT_EQ(snapshot.queues[0].worker.forwarded, 0u);
  const WorkerCounters& w = snapshot.queues[1].worker;
  EXPECT_EQ(snapshot.queues[1].cpu, 4);
  EXPECT_EQ(w.state, WorkerState::kRetiring);
  EXPECT_EQ(w.ring_requests, 10u);
  EXPECT_EQ(w.forwarded, 9u);
  EXPECT_EQ(w.forwarded_foreground, 6u);
  EXPECT_EQ(w.forwarded_background, 3u);
  EXPECT_EQ(w.handoffs_in, 2u);
  EXPECT_EQ(w.handoffs_out, 1u);
  EXPECT_EQ(w.inflight, 4u);
  EXPECT_EQ(w.background_inflight, 2u);
  EXPECT_EQ(w.background_queued, 5u);
  EXPECT_EQ(w.background_inflight_max, 7u);
  EXPECT_EQ(w.background_limit, 8u);
  EXPECT_EQ(w.entries_held, 32u);
  EXPECT_EQ(w.reconnects, 1u);
  EXPECT_EQ(w.bytes_to_server, 4096u);
  EXPECT_EQ(w.bytes_from_server, 512u);
  EXPECT_EQ(w.forwarded_by_op[1][16], 3u);
  EXPECT_EQ(w.request_duration[0].counts[2], 1u);
  EXPECT_EQ(w.request_duration[0].sum_ns, 30'000);
  EXPECT_EQ(w.request_duration[1].Count(), 0u);
  EXPECT_EQ(w.backend_rtt.Count(), 1u);
  EXPECT_EQ(w.replies_by_errno[0], 1u);
  EXPECT_EQ(w.replies_by_errno[ENOENT], 1u);
  EXPECT_EQ(w.Errors(), 4u);  // ENOENT, EIO, ETIMEDOUT, EINTR
  EXPECT_EQ(w.failures[static_cast<size_t>(FailureReason::kServerIo)], 1u);
  EXPECT_EQ(w.failures[static_cast<size_t>(FailureReason::kTimeout)], 1u);
  EXPECT_EQ(w.TotalFailures(), 2u);
  EXPECT_EQ(w.interrupted, 1u);
}

TEST(StatsSnapshotTest, TotalAddsTheSideChannelToTheQueues) {
  Topology topology = Topology::ForTest({{0, 1}});
  EngineWorkers workers(topology);
  WorkerStats::Add(workers.owned[0]->ring_requests, 5);
  WorkerStats::Add(workers.owned[1]->ring_requests, 6);
  WorkerStats::Add(workers.owned[1]->replies, 6);
  workers.owned[0]->CountReply(-EIO, ReplyOrigin::kConnectionLost);
  WorkerStats side_channel(0);
  WorkerStats::Add(side_channel.devfuse_requests, 3);
  WorkerStats::Add(side_channel.forgets, 2);
  WorkerStats::Add(side_channel.answered_locally, 1);
  const WorkerStats* side[] = {&side_channel};

  StatsSnapshot snapshot = SnapshotQueueEngine(topology, workers.pointers, side);
  ASSERT_EQ(snapshot.other_workers.size(), 1u);
  EXPECT_EQ(snapshot.other_workers[0].devfuse_requests, 3u);
  WorkerCounters total = snapshot.Total();
  EXPECT_EQ(total.ring_requests, 11u);
  EXPECT_EQ(total.devfuse_requests, 3u);
  EXPECT_EQ(total.forgets, 2u);
  EXPECT_EQ(total.replies, 6u);
  EXPECT_EQ(total.answered_locally, 1u);
  EXPECT_EQ(total.TotalFailures(), 1u);
  EXPECT_EQ(total.replies_by_errno[EIO], 1u);
}

TEST(StatsSnapshotTest, ClassicQueuesReceiveWhatTheirWorkerRead) {
  WorkerStats cpu3(0), cpu7(0);
  WorkerStats::Add(cpu3.devfuse_requests, 12);
  WorkerStats::Add(cpu7.devfuse_requests, 4);
  WorkerStats::Add(cpu7.forwarded, 4);
  const std::pair<int, const WorkerStats*> workers[] = {{3, &cpu3}, {7, &cpu7}};

  StatsSnapshot snapshot = SnapshotClassic(workers);
  EXPECT_FALSE(snapshot.queue_engine);
  ASSERT_EQ(snapshot.queues.size(), 2u);
  EXPECT_EQ(snapshot.queues[0].cpu, 3);
  EXPECT_EQ(snapshot.queues[0].received, 12u);
  EXPECT_EQ(snapshot.queues[1].cpu, 7);
  EXPECT_EQ(snapshot.queues[1].received, 4u);
  EXPECT_EQ(snapshot.queues[1].worker.forwarded, 4u);
  EXPECT_EQ(snapshot.Total().devfuse_requests, 16u);
}

}  // namespace
}  // namespace ringfs::frontend
