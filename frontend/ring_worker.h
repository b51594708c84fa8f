// A FUSE-over-io_uring worker: one thread pinned to one CPU, owning one io_uring that carries
// both its ring entries for kernel queue `qid` and its backend connection. The kernel hands a
// request to an entry; the worker forwards it to the server straight from the entry's buffers
// and commits the server's reply with COMMIT_AND_FETCH, which also re-arms the entry.
// Lifetime: Start() on the main thread after the INIT reply is written; the thread ends by
// itself once the kernel has ended every entry (unmount or abort). Join() from the main thread.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include <liburing.h>

#include "absl/status/status.h"
#include "frontend/backend_channel.h"
#include "frontend/worker_stats.h"
#include "proto/fuse_abi.h"

namespace ringfs::frontend {

struct RingWorkerConfig {
  int fuse_fd = -1;
  uint16_t qid = 0;
  int cpu = 0;
  uint32_t depth = 16;
  size_t payload_bytes = 0;  // ≥ the kernel's minimum (max_write / max_pages × 4 KiB)
  BackendConfig backend;
};

class RingWorker : public ReplySink {
 public:
  RingWorker(RingWorkerConfig config, WorkerStats* stats);
  ~RingWorker() override;

  // REQUIRES: the INIT reply has been written (REGISTER fails before it and turns the ring off).
  absl::Status Start();
  void Join();
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size) override;

 private:
  struct Entry {
    fuse::UringReqHeader* header = nullptr;
    char* payload = nullptr;
    iovec iov[2]{};
    bool alive = false;
  };

  absl::Status Setup();
  void Loop();
  void SubmitCmd(uint32_t index, fuse::UringCmd cmd, uint64_t commit_id);
  void OnEntryCompletion(uint32_t index, int res);
  void HandleRequest(uint32_t index);
  void AnswerError(uint32_t index, uint64_t unique, int err);
  io_uring_sqe* NextSqe();

  RingWorkerConfig config_;
  WorkerStats* stats_;
  io_uring ring_{};
  bool ring_initialized_ = false;
  std::vector<Entry> entries_;
  std::unique_ptr<BackendChannel> backend_;
  char* buffers_ = nullptr;
  size_t buffers_bytes_ = 0;
  uint32_t alive_entries_ = 0;
  std::thread thread_;
  std::atomic<bool> finished_{false};
};

}  // namespace ringfs::frontend
