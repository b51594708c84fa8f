// One worker thread with its own io_uring, serving many data connections: it receives frames,
// decodes them, runs them through the Executor (file I/O on the ring), and sends the replies.
// Only the worker thread touches its ring, connections and buffer pool. Other threads hand it
// connections (and the stop request) through a mailbox: a mutex-protected queue plus an eventfd
// the ring reads. Control-plane changes (a session's in-flight limit, drain) arrive through the
// same mailbox and are applied by the worker thread (STYLE.md 9). The worker is the only writer
// of its WorkerStats and of its sessions' SessionStats; it lists its live sessions in the shared
// SessionTable. Lifetime: Start() once, Stop() once (also from the destructor).
#pragma once

#include <liburing.h>
#include <sched.h>

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
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/tls_ring.h"
#include "common/tls_stream.h"
#include "common/unique_fd.h"
#include "server/attr.h"
#include "server/buffer_pool.h"
#include "server/client_registry.h"
#include "server/coherence.h"
#include "server/executor.h"
#include "server/export_options.h"
#include "server/server_stats.h"

namespace ringfs::server {

// A connection that finished its handshake, with the limits agreed there.
struct ConnectionSetup {
  UniqueFd fd;
  std::string peer;  // for logs and the admin service
  uint64_t session_id = 0;
  uint32_t queue = 0;  // the client's kernel queue
  bool same_host = false;  // the client runs on this host (cpu_placement.h ClientIsLocal)
  // Set by the server when it gave the connection to the worker of its queue's CPU.
  bool colocated = false;
  int64_t connected_unix_ns = 0;
  ClientRegistry::Lease client;  // the session's hold on its client's state
  // Its place among the client's connections that replaced others (session_fence.h); ends when
  // the connection is destroyed, that is when nothing of it runs any more.
  SessionTicket ticket;
  uint32_t max_inflight = 1;
  uint32_t max_frame_bytes = 0;
  CacheTimes times;
  bool dir_attrs = false;  // append post-op directory attributes (common/dir_attrs.h)
  // Node-handle notifications and reclaim (common/node_handle.h). REQUIRES: client->seal set.
  bool node_handles = false;
  // The server pushes cache invalidations to the client on this session (common/invalidation.h).
  bool invalidations = false;
  bool cache_resets = false;  // with invalidations: reset records may be pushed
  // Negative LOOKUP replies carry the empty-directory trailer when it applies (common/dir_attrs.h).
  bool empty_dir_hints = false;
  // READDIR/READDIRPLUS replies end with the listed directory's record (common/dir_attrs.h).
  bool listing_attrs = false;
  // WRITE replies end with the written file's record (common/dir_attrs.h).
  bool write_attrs = false;
  // OPEN replies end with the opened file's record (common/dir_attrs.h).
  bool open_attrs = false;
  // The client's name (authenticated when the server requires a secret; server/authenticator.h).
  std::string client_name;
  // What this session's client may do (squash, ro): the client's entry in the clients file, or
  // the server's --export-options.
  ExportOptions export_options;
  // The session's TLS state after the handshake (null: plaintext), and the client certificate's
  // subject (empty without one), for logs.
  std::unique_ptr<tls::Stream> tls;
  std::string peer_subject;
};

class Worker {
 public:
  struct Options {
    uint32_t index = 0;
    // While it serves a connection co-located with it (cpu_placement.h), the worker is pinned
    // to this CPU; otherwise (and with -1) it runs wherever the scheduler puts it.
    int cpu = -1;
    size_t staging_bytes = 256 * 1024;  // per-connection receive buffer
    unsigned ring_entries = 256;
    bool floor = false;  // Executor::Options::floor
    // Executor::Options::act_as_callers and ::groups (GroupCache outlives the worker).
    bool act_as_callers = false;
    GroupCache* groups = nullptr;
    SessionTable* sessions = nullptr;  // REQUIRES: set; outlives the worker
    // Pushes the changes of this worker's requests to the other clients; null: nobody is told
    // (outlives the worker).
    const Coherence* coherence = nullptr;
    // A connection that has sent nothing for this long while nothing of it is in flight is
    // closed (the client reconnects when it has work again). Zero: never.
    absl::Duration idle_timeout = absl::ZeroDuration();
    // A placed worker that moves this many bytes (requests and replies) in a window of
    // kBulkWindowNs, at kBulkRequestBytes or more per request, leaves its CPU (JudgeWindow).
    uint64_t bulk_window_bytes = 32ull << 20;
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

  // Any thread. Applies `max_inflight` to the worker's session `session_id` on the worker thread
  // and returns once it is in effect (lowering it holds back new requests; requests already in
  // flight finish). NotFound when the worker has no such live session, Unavailable after Stop(),
  // DeadlineExceeded when the worker did not get to it within `timeout`.
  // REQUIRES: max_inflight >= 1.
  [[nodiscard]] absl::Status SetSessionLimit(uint64_t session_id, uint32_t max_inflight,
                                             absl::Duration timeout);
  // Any thread. Returns once the worker answers every later request that expects a reply with
  // ESHUTDOWN (FORGETs still run: they only release state). There is no way back. Errors as
  // SetSessionLimit's.
  [[nodiscard]] absl::Status Drain(absl::Duration timeout);

  size_t connection_count() const { return connection_count_.load(std::memory_order_relaxed); }
  // Its thread id while it runs (0 otherwise), and the CPU it is pinned to while it serves a
  // co-located connection (-1: none now, or the pin failed). Any thread.
  pid_t tid() const { return tid_.load(std::memory_order_acquire); }
  int colocated_cpu() const { return colocated_cpu_.load(std::memory_order_acquire); }
  // The policy WorkerSchedWatch, its only writer, gave the thread (for the metrics).
  void set_sched_idle(bool idle) { stats_->sched_idle.store(idle, std::memory_order_relaxed); }
  // Read by any thread at any time (relaxed loads); written only by this worker.
  const WorkerStats& stats() const { return *stats_; }

 private:
  struct Tag;
  struct Connection;
  struct IoRequest;
  // A control-plane change waiting in the mailbox; `done` is shared with the caller, who may
  // have stopped waiting.
  struct Command {
    struct Done {
      absl::Notification notification;
      absl::Status status;
    };
    // Without `done`: kFlushInvalidations sends the session's client its queued invalidations;
    // kSupersede closes a session a newer connection of its client replaced; kEndFence starts
    // a session whose replaced connections have ended (session_fence.h).
    enum class Kind { kSetSessionLimit, kDrain, kFlushInvalidations, kSupersede, kEndFence } kind;
    uint64_t session_id = 0;
    uint32_t max_inflight = 0;
    std::shared_ptr<Done> done;
  };

  void Run();
  io_uring_sqe* GetSqe();
  void PostMailboxRead();
  // The idle check's periodic timeout SQE, and what it does when it fires.
  void PostIdleTimer();
  void OnIdleTimer();
  void OnMailbox(int result);
  [[nodiscard]] absl::Status Post(Command command, absl::Duration timeout);
  // Any thread, never blocks: queues a command for a session that nobody waits for (the
  // outbox's and the fence's wakes). Dropped once the worker stops: its sessions close with it.
  void PostToSession(Command::Kind kind, uint64_t session_id);
  // The worker's session `session_id` unless it is closing or gone.
  Connection* LiveSession(uint64_t session_id);
  // Sends the session's client everything its outbox holds (RunCommand's kFlushInvalidations).
  void FlushInvalidations(uint64_t session_id);
  // Tells the other clients what `changes` (of a request of `c` that succeeded) changed.
  // `files`: those it changed without naming them (OpContext::changed_files).
  void Publish(Connection* c, std::span<const wire::Invalidation> changes,
               std::span<const Coherence::KeyedChange> files = {});
  void RunCommand(Command& command);
  void AddConnection(ConnectionSetup setup);
  // Pins the thread to options_.cpu with its first co-located connection, unpins it after the
  // last (a server whose clients are all remote keeps the scheduler's balancing).
  void CountColocated(int delta);
  void OnRecv(Connection* c, int result);
  void OnSend(Connection* c, int result);
  // A ciphertext step (or wake) of a TLS connection; then the plaintext completions it made.
  void OnTlsStep(Connection* c, Tag* tag, int result);
  void OnIo(IoRequest* r, int result);
  void ProcessInput(Connection* c);
  void MaybePostRecv(Connection* c);
  void HandleFrame(Connection* c, std::span<const char> frame, Buffer* owned);
  // Whether `request` is answered from its client's reply cache (then it is answered here).
  // Otherwise *record is the cache to record its reply in, or null.
  bool ReplayFromCache(Connection* c, const Request& request, std::span<const char> frame,
                       ReplyCache** record);
  void StartIo(Connection* c, const Request& request, uint64_t start_ns, AsyncIo io, Buffer* reply,
               std::span<const char> frame, Buffer* owned, ReplyCache* record,
               std::vector<wire::Invalidation> changes);
  // `opcode` and `start_ns` (0: not timed) feed the per-op duration histogram. `record`, when
  // set, keeps a copy of the reply for replays of the same request (ReplyCache::Finish).
  void FinishReply(Connection* c, Buffer* reply, uint64_t unique, const absl::Status& status,
                   size_t body_size, uint32_t opcode, uint64_t start_ns,
                   ReplyCache* record = nullptr);
  // Queues a kNotifyNodeHandles frame with node_notes_'s records (must precede the reply).
  void QueueNodeHandles(Connection* c);
  void SetInflight(Connection* c, uint32_t inflight);
  // Appends `reply` to the connection's output; the SENDMSG is posted at the end of the
  // completion batch (PostDeferredSends), so frames made in one batch leave in one send.
  void QueueReply(Connection* c, Buffer* reply);
  void DeferSend(Connection* c);
  void PostDeferredSends();
  void MaybePostSend(Connection* c);
  // Pins the thread to options_.cpu while it serves a connection from this host and moves no
  // bulk data, unpins it otherwise; colocated_cpu_ says which.
  void ApplyPin();
  // Starts this thread's first io-wq thread while it is not pinned yet (see worker.cc).
  void StartIoThreadUnpinned();
  // While placed: no io-wq thread beyond those started unpinned (see worker.cc).
  void LimitIoThreads(bool placed);
  // Ends the traffic window once kBulkWindowNs are over and judges it: a placed worker that
  // moves large requests at a high rate leaves its mount's CPU (cpu_placement.h).
  void JudgeWindow(uint64_t now_ns);
  // While bulk_: a timer that judges the window although no request comes (the worker went
  // idle), so the worker is placed again and its gauge falls.
  void ArmBulkTimer();
  void Close(Connection* c, const char* why);
  // Close for a connection that a new one of its client replaced (session_fence.h);
  // `dropping`: a frame of it is not run for that reason.
  void CloseReplaced(Connection* c, bool dropping = false);
  // Whether a frame of a replaced connection still runs (the client does not resend it).
  static bool RunsOnceReplaced(uint32_t opcode);
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
  std::vector<Command> commands_ ABSL_GUARDED_BY(mailbox_mu_);
  bool stop_requested_ ABSL_GUARDED_BY(mailbox_mu_) = false;
  UniqueFd mailbox_event_;
  std::atomic<size_t> connection_count_{0};
  std::atomic<pid_t> tid_{0};
  std::atomic<int> colocated_cpu_{-1};
  // Worker-thread state: live connections with setup.colocated, and the affinity the thread
  // had before it pinned itself for them.
  uint32_t colocated_ = 0;
  cpu_set_t unpinned_affinity_{};
  // Bulk transfers leave the CPU (JudgeWindow): bytes and requests of the current window, the
  // timer that judges it while no request comes, and whether pinning failed (not retried).
  bool bulk_ = false;
  uint64_t window_start_ns_ = 0;
  uint64_t window_bytes_ = 0;
  uint64_t window_requests_ = 0;
  std::unique_ptr<Tag> bulk_tag_;
  __kernel_timespec bulk_period_{};  // read by the kernel when the timeout SQE is submitted
  bool bulk_timer_armed_ = false;
  bool pin_failed_ = false;
  unsigned io_threads_unplaced_ = 0;  // io-wq's bounded thread limit before the first placement

  // Worker-thread state.
  io_uring ring_{};
  bool ring_ready_ = false;
  uint16_t io_personality_ = 0;  // the starting thread's credentials for file I/O; 0: the submitter's
  std::unique_ptr<Tag> mailbox_tag_;
  uint64_t mailbox_value_ = 0;
  std::unique_ptr<Tag> idle_tag_;
  __kernel_timespec idle_period_{};  // read by the kernel when the timeout SQE is submitted
  bool stopping_ = false;
  bool draining_ = false;
  const std::unique_ptr<WorkerStats> stats_ = std::make_unique<WorkerStats>();
  BufferPool pool_;
  Executor executor_;
  NodeHandleNotes node_notes_;  // the running request's new nodes; reused for every request
  absl::flat_hash_map<Connection*, std::unique_ptr<Connection>> connections_;
  std::vector<std::unique_ptr<IoRequest>> io_requests_;
  IoRequest* free_io_ = nullptr;
  // Connections with output queued in this completion batch (Connection::send_deferred).
  std::vector<Connection*> deferred_sends_;
};

}  // namespace ringfs::server
