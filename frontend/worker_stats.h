// Counters of one frontend worker. Written only by the worker's own thread (relaxed atomics),
// read by the main thread for the stats file; no lock.
#pragma once

#include <atomic>
#include <cstdint>

namespace ringfs::frontend {

struct WorkerStats {
  std::atomic<uint64_t> ring_requests{0};     // requests that arrived as ring completions
  std::atomic<uint64_t> devfuse_requests{0};  // requests read from /dev/fuse
  std::atomic<uint64_t> forgets{0};
  std::atomic<uint64_t> replies{0};      // answers committed/written back to the kernel
  std::atomic<uint64_t> errors{0};       // answers with error != 0 that ringfs itself produced
  std::atomic<uint64_t> reconnects{0};

  void Add(std::atomic<uint64_t>& counter, uint64_t n = 1) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

}  // namespace ringfs::frontend
