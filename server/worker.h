// One worker thread with its own io_uring, serving many data connections: it receives frames,
// decodes them, runs them through the Executor (file I/O on the ring), and sends the replies.
// Only the worker thread touches its ring, connections and buffer pool. Other threads hand it
// connections (and the stop request) through a mailbox: a mutex-protected queue plus an eventfd
// the ring reads. Lifetime: Start() once, Stop() once (also from the destructor).
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "server/attr.h"
#include "server/buffer_pool.h"
#include "server/client_registry.h"
#include "server/executor.h"

namespace ringfs::server {

// A connection that finished its handshake, with the limits agreed there.
struct ConnectionSetup {
  UniqueFd fd;
  std::string peer;  // for logs
  uint64_t session_id = 0;
  std::shared_ptr<ClientState> client;
  uint32_t max_inflight = 1;
  uint32_t max_frame_bytes = 0;
  CacheTimes times;
};

class Worker {
 public:
  struct Options {
    uint32_t index = 0;
    size_t staging_bytes = 256 * 1024;  // per-connection receive buffer
    unsigned ring_entries = 256;
    bool floor = false;  // Executor::Options::floor
  };

  explicit Worker(Options options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  absl::Status Start();
  // Closes every connection (their in-flight file I/O is waited for) and joins the thread.
  void Stop();

  // Hands a connection to this worker. Any thread. After Stop() the connection is just closed.
  void Adopt(ConnectionSetup setup);

  size_t connection_count() const { return connection_count_.load(std::memory_order_relaxed); }

 private:
  struct Tag;
  struct Connection;
  struct IoRequest;

  void Run();
  io_uring_sqe* GetSqe();
  void PostMailboxRead();
  void OnMailbox(int result);
  void AddConnection(ConnectionSetup setup);
  void OnRecv(Connection* c, int result);
  void OnSend(Connection* c, int result);
  void OnIo(IoRequest* r, int result);
  void ProcessInput(Connection* c);
  void MaybePostRecv(Connection* c);
  void HandleFrame(Connection* c, std::span<const char> frame, Buffer* owned);
  void StartIo(Connection* c, uint64_t unique, AsyncIo io, Buffer* reply,
               std::span<const char> frame, Buffer* owned);
  void FinishReply(Connection* c, Buffer* reply, uint64_t unique, const absl::Status& status,
                   size_t body_size);
  void QueueReply(Connection* c, Buffer* reply);
  void MaybePostSend(Connection* c);
  void Close(Connection* c, const char* why);
  void MaybeDestroy(Connection* c);
  IoRequest* AllocIoRequest();
  void FreeIoRequest(IoRequest* r);

  const Options options_;
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;

  // Mailbox: written by any thread, drained by the worker.
  absl::Mutex mailbox_mu_;
  std::vector<ConnectionSetup> mailbox_ ABSL_GUARDED_BY(mailbox_mu_);
  bool stop_requested_ ABSL_GUARDED_BY(mailbox_mu_) = false;
  UniqueFd mailbox_event_;
  std::atomic<size_t> connection_count_{0};

  // Worker-thread state.
  io_uring ring_{};
  bool ring_ready_ = false;
  std::unique_ptr<Tag> mailbox_tag_;
  uint64_t mailbox_value_ = 0;
  bool stopping_ = false;
  BufferPool pool_;
  Executor executor_;
  absl::flat_hash_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::vector<std::unique_ptr<IoRequest>> io_requests_;
  IoRequest* free_io_ = nullptr;
};

}  // namespace ringfs::server
