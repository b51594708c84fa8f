// What every ring worker needs to know about the queue engine: an immutable snapshot of the
// settings (published by the engine, applied by each worker on its own thread) and the few
// values workers share with each other (ring fds for handoffs, published load).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "frontend/queue/placement.h"
#include "frontend/queue/queue_config.h"
#include "frontend/queue/topology.h"
#include "frontend/ring_entry.h"

namespace ringfs::frontend {

// Indexed like Topology::cpus() (index = position of the CPU / kernel qid in that list).
struct EngineState {
  uint64_t epoch = 0;
  queue::QueueConfig config;
  std::vector<int> owner_cpu;            // owner of each qid
  std::vector<bool> active;              // which workers do backend work
  std::vector<uint32_t> background_limit;
};

struct EngineShared {
  EngineShared(const queue::Topology& topology, size_t entry_capacity, size_t payload_bytes)
      : topology(topology),
        registry(entry_capacity, payload_bytes),
        ring_fd(new std::atomic<int>[topology.size()]),
        inflight(new std::atomic<uint32_t>[topology.size()]) {
    for (size_t i = 0; i < topology.size(); ++i) {
      ring_fd[i].store(-1);
      inflight[i].store(0);
    }
  }

  int fuse_fd = -1;
  const queue::Topology topology;
  EntryRegistry registry;
  // The io_uring fd of each running worker (-1 when none), target of MSG_RING handoffs.
  std::unique_ptr<std::atomic<int>[]> ring_fd;
  // Requests each worker has at the server (the seed patches' nr_reqs), read by placement.
  std::unique_ptr<std::atomic<uint32_t>[]> inflight;
};

}  // namespace ringfs::frontend
