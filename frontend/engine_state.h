// What every ring worker needs to know about the queue engine: an immutable snapshot of the
// settings (published by the engine, applied by each worker on its own thread) and the few
// values workers share with each other (where handoffs go, published load).
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

// How the ring's entries are sized and kept (mount options queue_depth, initial_depth,
// ring_queues, idle_pages; see the README, "Ring memory").
struct EntriesConfig {
  uint32_t depth = 16;         // most entries a queue may have
  uint32_t initial_depth = 1;  // entries each registered queue starts with
  size_t payload_bytes = 0;    // each entry's payload (the kernel's minimum for this mount)
  // The kernel offered FUSE_URING_REDUCED_Q and we agreed: only the active set's queues get
  // entries (a queue joins when its CPU joins the active set). Otherwise every possible CPU's.
  bool reduced_queues = false;
  // Rings with IORING_SETUP_DEFER_TASKRUN, so that workers can return the large-payload pages of
  // entries idle in the kernel (RingWorker::SweepIdleEntries); idle_pages=keep: plain rings.
  bool return_idle_pages = false;
};

// Indexed like Topology::cpus() (index = position of the CPU / kernel qid in that list).
struct EngineState {
  uint64_t epoch = 0;
  queue::QueueConfig config;
  std::vector<int> owner_cpu;            // owner of each qid
  std::vector<bool> active;              // which workers do backend work
  std::vector<uint32_t> background_limit;
};

// Where MSG_RING handoffs go, and the guarantee that none lands on a ring after its thread has
// ended: such a completion would sit in a queue nobody reads, and the ring is closed when the
// worker starts again, so the entry and its request would be lost for good (issue 9).
// A worker publishes its ring fd while it runs. A sender gets the fd from BeginSend(), which
// counts the send toward the target, and calls EndSend() once it has reaped that send's own
// completion (by then the target's completion is posted). A worker ending its thread first
// withdraws its fd, then waits until Quiet() and reaps what arrived meanwhile: every sender has
// either seen -1 (and kept its work) or been counted, and counted sends have all landed.
// Any thread; lock-free. Indexed like Topology::cpus().
class HandoffDirectory {
 public:
  explicit HandoffDirectory(size_t workers) : slots_(new Slot[workers]) {}

  void Publish(int worker, int ring_fd) { slots_[worker].ring_fd.store(ring_fd); }
  void Withdraw(int worker) { slots_[worker].ring_fd.store(-1); }
  // The target's ring fd, with the send counted (call EndSend() after its completion), or -1
  // with nothing counted: no thread reads that ring now or soon.
  int BeginSend(int target) {
    Slot& slot = slots_[target];
    // A withdrawn fd is refused without touching the count, so senders that keep trying
    // cannot keep a leaving worker from ever seeing Quiet().
    if (slot.ring_fd.load() < 0) return -1;
    // Counted before the fd is read again, both sequentially consistent, paired with
    // Withdraw() then Quiet(): the target sees the count, or the sender sees the fd withdrawn.
    slot.sending.fetch_add(1);
    int fd = slot.ring_fd.load();
    if (fd < 0) slot.sending.fetch_sub(1);
    return fd;
  }
  void EndSend(int target) { slots_[target].sending.fetch_sub(1); }
  // No send counted toward `worker` is still open. REQUIRES: it has withdrawn its fd.
  bool Quiet(int worker) const { return slots_[worker].sending.load() == 0; }

 private:
  struct alignas(64) Slot {
    std::atomic<int> ring_fd{-1};
    std::atomic<uint32_t> sending{0};
  };
  std::unique_ptr<Slot[]> slots_;
};

// The ring entries of one kernel queue (qid). Entries move between workers, so these are shared:
// every worker that submits or reaps an entry of the queue updates them (relaxed is enough: they
// steer growth, they guard nothing).
struct QueueEntries {
  std::atomic<uint32_t> registered{0};  // entries created for the queue; never fewer (no UNREGISTER)
  std::atomic<int32_t> in_kernel{0};    // submitted (REGISTER, COMMIT_AND_FETCH), not yet back
  // A request took the queue's last entry waiting in the kernel: its callers may be waiting for
  // one. The next active worker to see it adds an entry, up to the queue depth.
  std::atomic<bool> exhausted{false};
};

struct EngineShared {
  EngineShared(const queue::Topology& topology, size_t entry_capacity, size_t payload_bytes)
      : topology(topology),
        registry(entry_capacity, payload_bytes),
        handoffs(topology.size()),
        inflight(new std::atomic<uint32_t>[topology.size()]),
        entries(new QueueEntries[topology.size()]) {
    for (size_t i = 0; i < topology.size(); ++i) inflight[i].store(0);
  }

  int fuse_fd = -1;
  // Whether a thread of this process can switch from SCHED_IDLE back to SCHED_OTHER
  // (CanLeaveSchedIdle, tried the first time worker_sched=idle is applied, before any worker gets
  // that state): without that right a worker made idle would stay idle beside a CPU-bound job,
  // so worker_sched=idle is not followed.
  std::atomic<bool> can_leave_idle{true};
  const queue::Topology topology;
  EntryRegistry registry;
  // The io_uring fd of each running worker, target of MSG_RING handoffs.
  HandoffDirectory handoffs;
  // Requests each worker has at the server (the seed patches' nr_reqs), read by placement.
  std::unique_ptr<std::atomic<uint32_t>[]> inflight;
  // Indexed like Topology::cpus().
  std::unique_ptr<QueueEntries[]> entries;
};

}  // namespace ringfs::frontend
