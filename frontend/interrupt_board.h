// FUSE INTERRUPTs on their way to the worker that holds the request. The kernel sends INTERRUPT
// on /dev/fuse (also in ring mode), so it reaches whichever /dev/fuse reader took it, not the
// worker whose backend channel has the request; that reader posts the unique here and every
// channel picks up the ones it holds at its next tick (or when the request arrives late).
// Thread-safe. Entries nobody claims (the request was answered first) expire after kKeep.
// Times are the callers' own MONOTONIC readings, taken before the lock: across threads they
// arrive out of order (a reader posts with a `now` older than another reader's entry), so an
// entry stamped after a caller's `now` is simply not old, never "expired".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringfs::frontend {

class InterruptBoard {
 public:
  static constexpr std::chrono::seconds kKeep{30};

  void Post(uint64_t unique, uint64_t now_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // True, and the entry is gone, if `unique` was posted.
  bool Take(uint64_t unique) ABSL_LOCKS_EXCLUDED(mu_);
  // The posted uniques (a copy; they stay posted until taken or expired).
  std::vector<uint64_t> Pending(uint64_t now_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // Cheap check for the hot path: no lock.
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }

 private:
  struct Posted {
    uint64_t unique;
    uint64_t at_ns;
  };
  void ExpireLocked(uint64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<Posted> posted_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> count_{0};
};

}  // namespace ringfs::frontend
