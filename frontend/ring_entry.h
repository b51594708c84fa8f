// FUSE ring entries and the registry that owns their memory for the whole mount.
// An entry belongs to one kernel queue (qid) for life but moves between workers: whichever
// worker holds it (receives it, takes it in a handoff, or commits it) is its only user at that
// moment, so the mutable fields need no lock — handoffs over io_uring MSG_RING order the
// accesses. The registry itself is append-only and safe to read from any thread.
// Memory: each entry maps a header page and a payload of max_write; none of it is resident until
// the entry serves its first request, then only the header and a small head until a request
// needs more (frontend/ring_memory.h).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "frontend/kernel_request.h"
#include "frontend/ring_memory.h"
#include "proto/fuse_abi.h"

namespace ringfs::frontend {

struct RingEntry {
  uint32_t id = 0;
  uint16_t qid = 0;
  fuse::UringReqHeader* header = nullptr;
  char* payload = nullptr;
  iovec iov[2]{};

  // Per-request state, written by the worker holding the entry. `request` is decoded once
  // when the entry arrives and points into this entry's own buffers, so whichever worker
  // forwards it after a handoff reads the same view.
  KernelRequest request;
  RequestState state;
  int origin_cpu = -1;  // the worker whose ring delivered the request
  uint32_t request_payload = 0;  // payload bytes the kernel copied in with the request

  // What the payload has touched (holder only), and its resident bytes by that accounting,
  // published for the stats readers.
  PayloadUse payload_use;
  std::atomic<uint64_t> resident_bytes{0};
  // The worker whose ring has this entry's command in the kernel (REGISTER or COMMIT_AND_FETCH
  // submitted, no completion reaped yet), or -1 while a worker holds it. Written by that worker;
  // other workers only compare it with their own index (RingWorker::SweepIdleEntries).
  std::atomic<int> waiting_on{-1};
};

// Called by the worker that reaps an entry's first request. The kernel's copy has faulted in
// what that request used; the header page and the payload head are made resident now, so that
// small requests never fault afterwards and the accounting matches the pages (ring_memory.h).
void MarkServed(RingEntry* entry, size_t payload_bytes);

class EntryRegistry {
 public:
  // REQUIRES: capacity ≥ every entry the mount will ever create.
  EntryRegistry(size_t capacity, size_t payload_bytes);
  ~EntryRegistry();
  EntryRegistry(const EntryRegistry&) = delete;
  EntryRegistry& operator=(const EntryRegistry&) = delete;

  // Allocates an entry for `qid` with its header and payload buffers, none of them resident yet.
  // Thread-safe.
  // REQUIRES: the caller is the thread that will register it (first touch places the pages on
  // that thread's NUMA node).
  absl::StatusOr<RingEntry*> Create(uint16_t qid);

  // Calls `fn(const RingEntry&)` for every entry created so far. Any thread.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    const size_t count = size();
    for (size_t id = 0; id < count; ++id) {
      if (const RingEntry* entry = Get(static_cast<uint32_t>(id))) fn(*entry);
    }
  }

  // Any thread; nullptr for ids never created.
  RingEntry* Get(uint32_t id) const {
    return id < capacity_ ? slots_[id].load(std::memory_order_acquire) : nullptr;
  }
  size_t payload_bytes() const { return payload_bytes_; }
  size_t capacity() const { return capacity_; }
  size_t size() const { return next_id_.load(std::memory_order_acquire); }
  // Heap memory of one entry's bookkeeping, resident whether it ever serves or not.
  // (The entry, its slot and allocation record, and malloc's header.)
  static constexpr size_t kBookkeepingBytes = sizeof(RingEntry) + 4 * sizeof(void*) + 16;

 private:
  struct Allocation {
    std::unique_ptr<RingEntry> entry;
    void* memory = nullptr;
    size_t bytes = 0;
  };

  const size_t capacity_;
  const size_t payload_bytes_;
  std::unique_ptr<std::atomic<RingEntry*>[]> slots_;
  std::atomic<size_t> next_id_{0};
  absl::Mutex mu_;
  std::vector<Allocation> allocations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringfs::frontend
