// A classic-transport worker: one thread owning one io_uring that keeps `slots` reads posted on
// its /dev/fuse file (a clone of the connection's fd), forwards each request to the server and
// writes the reply back to the same file. In ring mode one such worker stays alive for the
// whole mount for what never uses the ring (FORGET, BATCH_FORGET, INTERRUPT, and requests sent
// before the ring is ready); it reads one request at a time and gathers forgets
// (DevFuseWorkerConfig::forget_gather_ns).
// Lifetime: Start() on the main thread after the INIT reply; the thread ends by itself when
// the connection is gone (a read sees ENODEV, or /dev/fuse polls POLLERR) and every slot's
// request is done; a read failing otherwise is tried again after 10 ms. Join() from the main
// thread.
#pragma once

#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <liburing.h>

#include "absl/status/status.h"
#include "common/unique_fd.h"
#include "frontend/backend_channel.h"
#include "frontend/forwarder.h"
#include "frontend/kernel_request.h"
#include "frontend/worker_stats.h"

namespace ringfs::frontend {

struct DevFuseWorkerConfig {
  UniqueFd fuse_fd;
  int cpu = -1;  // -1: not pinned
  uint32_t slots = 16;
  size_t buffer_bytes = 0;  // ≥ max_write + 8 KiB (the kernel's minimum read size)
  BackendConfig backend;
  const char* role = "classic";  // for logs
  // > 0: one read of /dev/fuse at a time, and after a FORGET or BATCH_FORGET the next read only
  // after this long. The kernel wakes a reader for each forget it queues, so a burst of them
  // (rm -rf, unlinks: one per removed file) would cost a wake-up here, a frame and a wake-up at
  // the server each; meanwhile the kernel queues them and hands them over as one BATCH_FORGET.
  // For the ring's side channel, whose reads carry little else: an INTERRUPT read during the
  // wait is late by at most this long. 0: every slot keeps a read posted (classic transport).
  uint64_t forget_gather_ns = 0;
};

class DevFuseWorker : public ReplySink {
 public:
  DevFuseWorker(DevFuseWorkerConfig config, WorkerStats* stats);
  ~DevFuseWorker() override;

  absl::Status Start();
  void Join();
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  int cpu() const { return config_.cpu; }

  void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
               ReplyOrigin origin) override;
  void OnTick() override {
    if (forwarder_) forwarder_->OnTick();
  }

 private:
  absl::Status Setup();
  void Loop();
  bool gathering() const { return config_.forget_gather_ns > 0; }
  void PostRead(uint32_t slot);
  // The slot is done with its request: it reads again, or (gathering) waits as a free slot.
  void DoneWith(uint32_t slot);
  // Gathering: posts one read in a free slot unless one is posted or the wait runs.
  void MaybeRead();
  // No read is posted in a free slot for `ns` (gathering forgets, or after a read error); one
  // pause at a time.
  void StartReadPause(uint64_t ns);
  void ResumeReads();  // the pause ended
  void EndConnection();
  void OnRead(uint32_t slot, int res);
  void WriteReply(uint32_t slot, const fuse_out_header& header, size_t body_size);

  DevFuseWorkerConfig config_;
  WorkerStats* stats_;
  io_uring ring_{};
  bool ring_initialized_ = false;
  std::unique_ptr<BackendChannel> backend_;
  std::optional<BackendRequestChannel> channel_;  // backend_ as the forwarder sees it
  std::optional<Forwarder> forwarder_;            // made with the channel in Setup
  char* buffers_ = nullptr;
  size_t buffers_bytes_ = 0;
  // kFree: no read posted and no request (gathering, or pausing after a read error).
  enum class SlotUse : uint8_t { kReading, kBusy, kFree, kDead };
  std::vector<SlotUse> use_;
  // What one read slot holds: the request decoded from its buffer, the forwarder's state of
  // it, and where in the buffer the reply body is: after the request for forwarded requests (so
  // a request cut off by a lost connection can be sent again), after the header otherwise.
  struct Slot {
    KernelRequest request;
    RequestState state;
    size_t reply_offset = sizeof(fuse_out_header);
  };
  std::vector<Slot> slots_;
  uint32_t alive_slots_ = 0;  // not kDead
  uint32_t reading_ = 0;      // kReading
  bool read_pause_runs_ = false;
  __kernel_timespec read_pause_{};  // the timeout's argument, read by the kernel at submit
  static constexpr uint64_t kErrorPauseNs = 10'000'000;
  static constexpr uint64_t kErrorLogNs = 10'000'000'000;  // one log line per 10 s at most
  uint64_t last_error_log_ns_ = 0;
  bool connection_ended_ = false;  // a read of /dev/fuse failed for good (ENODEV: unmounted)
  static constexpr uint64_t kLookNs = 100'000'000;  // how often Loop polls for the end
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

}  // namespace ringfs::frontend
