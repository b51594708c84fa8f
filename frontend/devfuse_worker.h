// A classic-transport worker: one thread owning one io_uring that keeps `slots` reads posted on
// its /dev/fuse file (a clone of the connection's fd), forwards each request to the server and
// writes the reply back to the same file. In ring mode one such worker stays alive for the
// whole mount for what never uses the ring (FORGET, BATCH_FORGET, INTERRUPT, and requests sent
// before the ring is ready).
// Lifetime: Start() on the main thread after the INIT reply; the thread ends by itself when
// /dev/fuse reports the connection gone (ENODEV). Join() from the main thread.
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
  void PostRead(uint32_t slot);
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
  std::vector<bool> slot_alive_;
  // What one read slot holds: the request decoded from its buffer, the forwarder's state of
  // it, and where in the buffer the reply body is: after the request for forwarded requests (so
  // a request cut off by a lost connection can be sent again), after the header otherwise.
  struct Slot {
    KernelRequest request;
    RequestState state;
    size_t reply_offset = sizeof(fuse_out_header);
  };
  std::vector<Slot> slots_;
  uint32_t alive_slots_ = 0;
  bool connection_ended_ = false;  // a read of /dev/fuse failed for good (ENODEV: unmounted)
  static constexpr uint64_t kLookNs = 100'000'000;  // how often Loop polls for the end
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

}  // namespace ringfs::frontend
