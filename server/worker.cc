#include "server/worker.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "common/cpu_contention.h"
#include "common/fuse_ops.h"
#include "common/log.h"
#include "common/status.h"
#include "proto/fuse_abi.h"
#include "server/dir_attrs.h"
#include "server/request.h"

namespace ringfs::server {
namespace {

// The clock file change times are taken from (open attrs compare against it).
int64_t RealtimeNs() {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

enum class TagKind : uint8_t {
  kMailbox,
  kRecv,
  kSend,
  kFileIo,
  kIdleTimer,
  kBulkTimer,
  kTlsRecv,
  kTlsSend,
  kTlsWake
};

// Replies gathered into one SENDMSG.
constexpr size_t kMaxSendIov = 32;

// Requests that may remove, replace or truncate a file they do not name by node id
// (OpContext::changed_files).
bool ChangesUnnamedFiles(uint32_t opcode) {
  return opcode == FUSE_UNLINK || opcode == FUSE_RMDIR || opcode == FUSE_RENAME ||
         opcode == FUSE_RENAME2 || opcode == FUSE_CREATE;
}

// Bulk transfers (Worker::JudgeWindow): a window of 200 ms that moved at least
// Options::bulk_window_bytes (32 MiB: 160 MB/s) in requests of 64 KiB or more on average,
// replies included.
constexpr uint64_t kBulkWindowNs = 200'000'000;
constexpr uint64_t kBulkRequestBytes = 64ull << 10;
constexpr size_t kOutHeader = sizeof(fuse_out_header);

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// The user_data of every SQE: what completed, and whose it is.
struct Worker::Tag {
  TagKind kind;
  void* owner;
};

struct Worker::Connection {
  explicit Connection(ConnectionSetup s, size_t staging_bytes)
      : setup(std::move(s)),
        staging(std::make_unique_for_overwrite<char[]>(staging_bytes)),
        staging_cap(staging_bytes) {
    recv_tag = Tag{TagKind::kRecv, this};
    send_tag = Tag{TagKind::kSend, this};
    tls_recv_tag = Tag{TagKind::kTlsRecv, this};
    tls_send_tag = Tag{TagKind::kTlsSend, this};
    tls_wake_tag = Tag{TagKind::kTlsWake, this};
  }

  ConnectionSetup setup;
  std::shared_ptr<SessionStats> stats;  // also listed in the SessionTable while live
  Tag recv_tag{};
  Tag send_tag{};
  // With TLS, RECV and SENDMSG above go through `tls`, which runs the ciphertext operations
  // under these tags; null: plaintext, and none of this costs anything.
  std::unique_ptr<tls::RingTransport> tls;
  Tag tls_recv_tag{};
  Tag tls_send_tag{};
  Tag tls_wake_tag{};
  // Received bytes not yet consumed are staging[begin, end). A RECV, when posted, writes only
  // after `end`, and frames are parsed only while no RECV is posted.
  std::unique_ptr<char[]> staging;
  size_t staging_cap;
  size_t begin = 0;
  size_t end = 0;
  // A frame received directly into its own buffer (large frames and WRITEs).
  Buffer* big = nullptr;
  size_t big_len = 0;
  size_t big_filled = 0;

  bool recv_posted = false;
  bool send_posted = false;
  bool send_deferred = false;  // listed in Worker::deferred_sends_ (kept alive until posted)
  bool closing = false;
  // Waits, without reading, for the connections of its client that it replaced to end
  // (session_fence.h): their resent requests are in its socket.
  bool fenced = false;
  // The last invalidation frame queued and not sent yet (null: none). While one waits, a flush
  // takes nothing (`flush_wanted` remembers it): a client that stops reading leaves the records
  // in its bounded outbox instead of an unbounded send queue here.
  Buffer* unsent_invalidations = nullptr;
  bool flush_wanted = false;
  uint64_t last_recv_ns = 0;  // when it last sent us bytes (or was adopted), for the idle check
  // Requests whose reply has not been fully sent yet; RECV pauses at max_inflight.
  uint32_t inflight = 0;
  uint32_t pending_io = 0;  // file I/O SQEs on the ring for this connection

  // Replies waiting to be sent, oldest first; out_offset bytes of the head are already sent.
  Buffer* out_head = nullptr;
  Buffer* out_tail = nullptr;
  size_t out_offset = 0;
  iovec iov[kMaxSendIov]{};
  msghdr msg{};
};

struct Worker::IoRequest {
  Tag tag{TagKind::kFileIo, this};
  Connection* conn = nullptr;
  uint64_t unique = 0;
  uint32_t opcode = 0;
  uint64_t nodeid = 0;
  uint64_t start_ns = 0;
  AsyncIo io;
  Buffer* reply = nullptr;
  Buffer* frame = nullptr;  // keeps WRITE data alive
  ReplyCache* record = nullptr;  // FinishReply's
  // What the request changes, published to the other clients once the I/O succeeded.
  std::vector<wire::Invalidation> changes;
  IoRequest* next_free = nullptr;
};

Worker::Worker(Options options)
    : options_(options),
      executor_(Executor::Options{.floor = options.floor,
                                  .act_as_callers = options.act_as_callers,
                                  .groups = options.groups}) {}

Worker::~Worker() { Stop(); }

absl::Status Worker::Start() {
  mailbox_event_.Reset(eventfd(0, EFD_CLOEXEC));
  if (!mailbox_event_.valid()) return ErrnoError(errno, "eventfd");
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN;
  params.cq_entries = options_.ring_entries * 8;
  int rc = io_uring_queue_init_params(options_.ring_entries, &ring_, &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = options_.ring_entries * 8;
    rc = io_uring_queue_init_params(options_.ring_entries, &ring_, &params);
  }
  if (rc < 0) return ErrnoError(-rc, "io_uring_queue_init");
  ring_ready_ = true;
  if (options_.act_as_callers) {
    // File I/O runs with the credentials of this (starting, root) thread, whatever caller the
    // worker acts as when it submits: permission was checked at OPEN, and which set-id bits a
    // write clears is decided by the kernel's KILL_SUIDGID flags, not by io-wq's credentials.
    rc = io_uring_register_personality(&ring_);
    if (rc < 0) return ErrnoError(-rc, "io_uring_register_personality");
    io_personality_ = static_cast<uint16_t>(rc);
  }
  mailbox_tag_ = std::make_unique<Tag>(Tag{TagKind::kMailbox, this});
  idle_tag_ = std::make_unique<Tag>(Tag{TagKind::kIdleTimer, this});
  bulk_tag_ = std::make_unique<Tag>(Tag{TagKind::kBulkTimer, this});
  started_ = true;
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void Worker::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (started_) {
    {
      absl::MutexLock lock(&mailbox_mu_);
      stop_requested_ = true;
    }
    uint64_t one = 1;
    if (write(mailbox_event_.get(), &one, sizeof(one)) < 0) {
      RINGFS_LOG_ERROR("worker %u: cannot wake for stop: %s", options_.index, std::strerror(errno));
    }
    thread_.join();
  }
  if (ring_ready_) io_uring_queue_exit(&ring_);
  ring_ready_ = false;
  std::vector<ConnectionSetup> late;
  {
    absl::MutexLock lock(&mailbox_mu_);
    late.swap(mailbox_);
    for (Command& command : commands_) {
      if (command.done == nullptr) continue;
      command.done->status = absl::UnavailableError("the worker stopped");
      command.done->notification.Notify();
    }
    commands_.clear();
  }
  // Connections handed over after the stop are closed here, unlocked: their tickets end, and
  // that may wake a session through a mailbox, this one's included.
  late.clear();
}

absl::Status Worker::Post(Command command, absl::Duration timeout) {
  std::shared_ptr<Command::Done> done = std::make_shared<Command::Done>();
  command.done = done;
  {
    absl::MutexLock lock(&mailbox_mu_);
    if (stop_requested_ || !started_) return absl::UnavailableError("the server is stopping");
    commands_.push_back(std::move(command));
  }
  uint64_t one = 1;
  if (write(mailbox_event_.get(), &one, sizeof(one)) < 0) {
    RINGFS_LOG_ERROR("worker %u: mailbox eventfd write: %s", options_.index, std::strerror(errno));
  }
  if (!done->notification.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("worker %u did not apply the change within %s", options_.index,
                        absl::FormatDuration(timeout)));
  }
  return done->status;
}

absl::Status Worker::SetSessionLimit(uint64_t session_id, uint32_t max_inflight,
                                     absl::Duration timeout) {
  Command command{.kind = Command::Kind::kSetSessionLimit};
  command.session_id = session_id;
  command.max_inflight = max_inflight;
  return Post(std::move(command), timeout);
}

absl::Status Worker::Drain(absl::Duration timeout) {
  return Post(Command{.kind = Command::Kind::kDrain}, timeout);
}

void Worker::PostToSession(Command::Kind kind, uint64_t session_id) {
  {
    absl::MutexLock lock(&mailbox_mu_);
    if (stop_requested_) return;  // the session is closed with the worker
    commands_.push_back(Command{.kind = kind, .session_id = session_id});
  }
  uint64_t one = 1;
  if (write(mailbox_event_.get(), &one, sizeof(one)) < 0) {
    RINGFS_LOG_ERROR("worker %u: mailbox eventfd write: %s", options_.index, std::strerror(errno));
  }
}

void Worker::RunCommand(Command& command) {
  switch (command.kind) {
    case Command::Kind::kFlushInvalidations:
      FlushInvalidations(command.session_id);
      return;  // nobody waits for it
    case Command::Kind::kSupersede:
    case Command::Kind::kEndFence: {
      Connection* c = LiveSession(command.session_id);
      if (c == nullptr) return;  // closed meanwhile
      if (command.kind == Command::Kind::kSupersede) {
        CloseReplaced(c);
      } else {
        RINGFS_LOG_INFO("worker %u: session %u starts: the connections it replaced have ended",
                        options_.index, c->setup.session_id);
        c->fenced = false;
        c->last_recv_ns = MonotonicNs();  // the idle clock starts now, not at adoption
        MaybePostRecv(c);
      }
      MaybeDestroy(c);
      return;
    }
    case Command::Kind::kDrain:
      if (!draining_) RINGFS_LOG_INFO("worker %u: draining", options_.index);
      draining_ = true;
      break;
    case Command::Kind::kSetSessionLimit: {
      Connection* c = LiveSession(command.session_id);
      if (c == nullptr) {
        command.done->status =
            absl::NotFoundError(absl::StrFormat("session %u has ended", command.session_id));
        break;
      }
      RINGFS_LOG_INFO("worker %u: session %u in-flight limit %u -> %u", options_.index,
                      command.session_id, c->setup.max_inflight, command.max_inflight);
      c->setup.max_inflight = command.max_inflight;
      c->stats->max_inflight.store(command.max_inflight, std::memory_order_relaxed);
      if (!c->recv_posted) ProcessInput(c);  // resumes reading if a higher limit allows it
      MaybeDestroy(c);
      break;
    }
  }
  command.done->notification.Notify();
}

void Worker::Adopt(ConnectionSetup setup) {
  {
    absl::MutexLock lock(&mailbox_mu_);
    if (stop_requested_) return;  // `setup` closes its socket
    mailbox_.push_back(std::move(setup));
  }
  uint64_t one = 1;
  if (write(mailbox_event_.get(), &one, sizeof(one)) < 0) {
    RINGFS_LOG_ERROR("worker %u: mailbox eventfd write: %s", options_.index, std::strerror(errno));
  }
}

void Worker::CountColocated(int delta) {
  colocated_ += delta;
  if (colocated_ == 0 && bulk_) {
    // Nothing left to leave: the next mount of this host starts placed.
    bulk_ = false;
    stats_->bulk.store(0, std::memory_order_relaxed);
  }
  ApplyPin();
}

void Worker::ApplyPin() {
  const bool pin = options_.cpu >= 0 && colocated_ > 0 && !bulk_ && !pin_failed_;
  if (pin == (colocated_cpu_.load(std::memory_order_relaxed) >= 0)) return;
  if (pin) {
    if (PinCurrentThread(options_.cpu)) {
      colocated_cpu_.store(options_.cpu, std::memory_order_release);
      LimitIoThreads(true);
    } else {
      pin_failed_ = true;  // logged once; it runs unpinned from now on
    }
    return;
  }
  colocated_cpu_.store(-1, std::memory_order_release);
  pthread_setaffinity_np(pthread_self(), sizeof(unpinned_affinity_), &unpinned_affinity_);
  LimitIoThreads(false);
}

// An io-wq thread started while placed would keep the mount's CPU until it exits, and io-wq
// starts one whenever its threads are all busy or blocked (a write waiting for the journal):
// seen in the benchmark, where such a thread outlived the one started unpinned and took the
// writes of later jobs (1 MiB writes at QD8 0.86x classic). So while placed io-wq may not start
// any (a limit of one bounded thread: the one from StartIoThreadUnpinned); punted work (large
// writes, fsyncs) then waits for it, one at a time: placed means small requests. Unplaced, the
// limit io_uring chose comes back and new threads start unpinned.
void Worker::LimitIoThreads(bool placed) {
  unsigned limits[2] = {placed ? 1u : io_threads_unplaced_, 0};  // 0: unchanged
  if (limits[0] == 0) return;
  const int rc = io_uring_register_iowq_max_workers(&ring_, limits);
  if (rc < 0) {
    RINGFS_LOG_WARN("worker %u: io-wq thread limit: %s", options_.index, std::strerror(-rc));
    return;
  }
  if (placed && io_threads_unplaced_ == 0) io_threads_unplaced_ = limits[0];  // the old limit
}

void Worker::JudgeWindow(uint64_t now_ns) {
  const uint64_t elapsed_ns = now_ns - window_start_ns_;
  if (elapsed_ns < kBulkWindowNs) return;
  // Large requests at a high rate (sequential I/O of 128 KiB and more, at QD8: 1.3 GB/s on
  // one CPU against 2.4 GB/s spread, session 32): copying the bytes, not waking, is then the
  // cost, and the mount's CPU cannot do both ends of it. Small requests keep the CPU (tar, 4k
  // random I/O: a cross-CPU wake-up per request is what they would pay). Judged per window,
  // leaving at full size and rate and coming back once a window falls below half of either,
  // so a job does not flap.
  // Only a worker that is placed, or left its CPU for bulk data, has anything to judge: one
  // serving only other hosts runs where the scheduler puts it anyway.
  const bool placed = options_.cpu >= 0 && colocated_ > 0 && !pin_failed_;
  const uint64_t per_request = window_requests_ > 0 ? window_bytes_ / window_requests_ : 0;
  // Bytes per 200 ms of the time the window really lasted (the next request after a pause ends
  // a long window).
  const uint64_t rate = window_bytes_ / std::max<uint64_t>(1, elapsed_ns / kBulkWindowNs);
  const uint64_t need = options_.bulk_window_bytes;
  const bool bulk = placed && (bulk_ ? rate >= need / 2 && per_request >= kBulkRequestBytes / 2
                                     : rate >= need && per_request >= kBulkRequestBytes);
  window_start_ns_ = now_ns;
  window_bytes_ = 0;
  window_requests_ = 0;
  if (bulk) ArmBulkTimer();
  if (bulk == bulk_) return;
  bulk_ = bulk;
  stats_->bulk.store(bulk ? 1 : 0, std::memory_order_relaxed);
  RINGFS_LOG_DEBUG("worker %u: %s", options_.index,
                   bulk ? "bulk transfers: leaves its CPU" : "bulk transfers ended");
  ApplyPin();
}

void Worker::ArmBulkTimer() {
  if (bulk_timer_armed_ || stopping_) return;
  bulk_timer_armed_ = true;
  bulk_period_ = __kernel_timespec{.tv_sec = 0, .tv_nsec = static_cast<long long>(kBulkWindowNs)};
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_timeout(sqe, &bulk_period_, 0, 0);
  io_uring_sqe_set_data(sqe, bulk_tag_.get());
}

io_uring_sqe* Worker::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

// Large writes, fsyncs and whatever else ext4 cannot do without blocking go to io-wq threads,
// which the kernel starts from this thread and which keep the affinity this thread asked for
// then (since Linux 6.2 a thread's sched_setaffinity mask is inherited and limits every later
// kernel-side change: IORING_REGISTER_IOWQ_AFF cannot widen it). Started while this worker was
// placed on its mount's CPU, the io-wq thread writing a 1 MiB WRITE shared that CPU with the
// caller, the mount and the worker: 1,852-1,944 MB/s at QD8 against 2,423-2,475 with this.
// So the first one starts here, before any placement: io-wq keeps its last thread for good and
// gives work to a free thread before it starts another, and writes to one file run one at a
// time there anyway (hashed by inode).
void Worker::StartIoThreadUnpinned() {
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_nop(sqe);
  sqe->flags |= IOSQE_ASYNC;  // through io-wq, which starts its first thread for it
  io_uring_sqe_set_data(sqe, nullptr);
  io_uring_cqe* cqe = nullptr;
  if (io_uring_submit_and_wait(&ring_, 1) >= 0 && io_uring_peek_cqe(&ring_, &cqe) == 0) {
    io_uring_cqe_seen(&ring_, cqe);
  }
}

void Worker::Run() {
  pthread_getaffinity_np(pthread_self(), sizeof(unpinned_affinity_), &unpinned_affinity_);
  StartIoThreadUnpinned();
  tid_.store(gettid(), std::memory_order_release);
  PostMailboxRead();
  PostIdleTimer();
  constexpr unsigned kBatch = 64;
  while (!(stopping_ && connections_.empty())) {
    int rc = io_uring_submit_and_wait(&ring_, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      RINGFS_LOG_ERROR("worker %u: io_uring_submit_and_wait: %s", options_.index,
                       std::strerror(-rc));
      break;
    }
    io_uring_cqe* cqes[kBatch];
    unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, kBatch);
    struct Done {
      Tag* tag;
      int res;
    } done[kBatch];
    for (unsigned i = 0; i < n; ++i) {
      done[i] = Done{static_cast<Tag*>(io_uring_cqe_get_data(cqes[i])), cqes[i]->res};
    }
    io_uring_cq_advance(&ring_, n);
    for (unsigned i = 0; i < n; ++i) {
      Tag* tag = done[i].tag;
      if (tag == nullptr) continue;
      switch (tag->kind) {
        case TagKind::kMailbox:
          OnMailbox(done[i].res);
          break;
        case TagKind::kIdleTimer:
          OnIdleTimer();
          break;
        case TagKind::kBulkTimer:
          bulk_timer_armed_ = false;
          JudgeWindow(MonotonicNs());
          if (bulk_) ArmBulkTimer();
          break;
        case TagKind::kRecv: {
          auto* c = static_cast<Connection*>(tag->owner);
          OnRecv(c, done[i].res);
          MaybeDestroy(c);
          break;
        }
        case TagKind::kSend: {
          auto* c = static_cast<Connection*>(tag->owner);
          OnSend(c, done[i].res);
          MaybeDestroy(c);
          break;
        }
        case TagKind::kTlsRecv:
        case TagKind::kTlsSend:
        case TagKind::kTlsWake: {
          auto* c = static_cast<Connection*>(tag->owner);
          OnTlsStep(c, tag, done[i].res);
          MaybeDestroy(c);
          break;
        }
        case TagKind::kFileIo: {
          auto* r = static_cast<IoRequest*>(tag->owner);
          Connection* c = r->conn;
          OnIo(r, done[i].res);
          MaybeDestroy(c);
          break;
        }
      }
    }
    PostDeferredSends();
  }
  // A tid can be reused by another thread once this one ends: nobody may change its policy.
  tid_.store(0, std::memory_order_release);
  RINGFS_LOG_DEBUG("worker %u: stopped", options_.index);
}

void Worker::PostMailboxRead() {
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_read(sqe, mailbox_event_.get(), &mailbox_value_, sizeof(mailbox_value_), 0);
  io_uring_sqe_set_data(sqe, mailbox_tag_.get());
}

void Worker::PostIdleTimer() {
  if (options_.idle_timeout <= absl::ZeroDuration() || stopping_) return;
  // A connection is closed between idle_timeout and idle_timeout + period after its last byte.
  const absl::Duration period = std::clamp(options_.idle_timeout / 4, absl::Milliseconds(50),
                                           absl::Seconds(30));
  const timespec ts = absl::ToTimespec(period);
  idle_period_ = __kernel_timespec{.tv_sec = ts.tv_sec, .tv_nsec = ts.tv_nsec};
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_timeout(sqe, &idle_period_, 0, 0);
  io_uring_sqe_set_data(sqe, idle_tag_.get());
}

void Worker::OnIdleTimer() {
  if (stopping_) return;
  const uint64_t now = MonotonicNs();
  const auto limit = static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.idle_timeout));
  std::vector<Connection*> idle;
  for (auto& [c, owned] : connections_) {
    // Waiting for our reply or our file I/O is not idleness (a long FSYNC, a full socket).
    if (c->closing || c->fenced || c->inflight > 0 || c->pending_io > 0 || c->out_head != nullptr) {
      continue;
    }
    if (now - c->last_recv_ns >= limit) idle.push_back(c);
  }
  for (Connection* c : idle) {
    Bump(stats_->idle_closed);
    Close(c, "idle (--idle-timeout)");
    MaybeDestroy(c);
  }
  PostIdleTimer();
}

void Worker::OnMailbox(int result) {
  if (result < 0 && result != -EINTR && result != -EAGAIN) {
    RINGFS_LOG_ERROR("worker %u: mailbox read: %s", options_.index, std::strerror(-result));
  }
  std::vector<ConnectionSetup> adopted;
  std::vector<Command> commands;
  bool stop = false;
  {
    absl::MutexLock lock(&mailbox_mu_);
    adopted.swap(mailbox_);
    commands.swap(commands_);
    stop = stop_requested_;
  }
  if (!stop) {
    for (ConnectionSetup& setup : adopted) AddConnection(std::move(setup));
    for (Command& command : commands) RunCommand(command);
    PostMailboxRead();
    return;
  }
  for (Command& command : commands) {
    if (command.done == nullptr) continue;
    command.done->status = absl::UnavailableError("the worker is stopping");
    command.done->notification.Notify();
  }
  stopping_ = true;
  std::vector<Connection*> all;
  for (auto& [c, owned] : connections_) all.push_back(c);
  for (Connection* c : all) {
    Close(c, "server stopping");
    MaybeDestroy(c);
  }
}

void Worker::AddConnection(ConnectionSetup setup) {
  auto owned = std::make_unique<Connection>(std::move(setup), options_.staging_bytes);
  Connection* c = owned.get();
  connections_[c] = std::move(owned);
  connection_count_.fetch_add(1, std::memory_order_relaxed);
  if (c->setup.colocated) CountColocated(+1);
  c->stats = std::make_shared<SessionStats>();
  c->stats->session_id = c->setup.session_id;
  c->stats->client_id = c->setup.client->client_id;
  c->stats->client_name = c->setup.client_name;
  c->stats->export_options = FormatExportOptions(c->setup.export_options);
  c->stats->peer = c->setup.peer;
  c->stats->queue = c->setup.queue;
  c->stats->worker = options_.index;
  c->stats->same_host = c->setup.same_host;
  c->stats->connected_unix_ns = c->setup.connected_unix_ns;
  c->stats->max_inflight.store(c->setup.max_inflight, std::memory_order_relaxed);
  options_.sessions->Add(c->stats);
  c->msg.msg_iov = c->iov;
  c->last_recv_ns = MonotonicNs();
  if (c->setup.tls != nullptr) {
    auto data = [](Tag* tag) { return reinterpret_cast<uint64_t>(tag); };
    c->tls = std::make_unique<tls::RingTransport>(&ring_);
    c->tls->Attach(c->setup.fd.get(), std::move(c->setup.tls),
                   {data(&c->tls_recv_tag), data(&c->tls_send_tag), data(&c->tls_wake_tag)});
  }
  RINGFS_LOG_INFO("worker %u: serving session %u of client '%s' from %s%s", options_.index,
                  c->setup.session_id, c->setup.client->client_id, c->setup.peer,
                  c->tls != nullptr ? " (TLS)" : "");
  const uint64_t id = c->setup.session_id;
  if (!c->setup.ticket.Attach([this, id] { PostToSession(Command::Kind::kSupersede, id); })) {
    CloseReplaced(c);
    MaybeDestroy(c);
    return;
  }
  if (c->setup.ticket.Await([this, id] { PostToSession(Command::Kind::kEndFence, id); })) {
    Bump(stats_->sessions_fenced);
    c->fenced = true;
    RINGFS_LOG_INFO("worker %u: session %u waits for the connections it replaced to end",
                    options_.index, id);
  }
  MaybePostRecv(c);
  if (c->setup.invalidations) {
    c->setup.client->invalidations.AddSink(
        id,
        [this](uint64_t session) { PostToSession(Command::Kind::kFlushInvalidations, session); },
        c->setup.cache_resets);
  }
}

void Worker::MaybePostRecv(Connection* c) {
  if (c->closing || c->fenced || c->recv_posted || c->inflight >= c->setup.max_inflight) return;
  char* target;
  size_t size;
  if (c->big != nullptr) {
    target = c->big->data.get() + c->big_filled;
    size = c->big_len - c->big_filled;
  } else {
    if (c->begin > 0) {
      std::memmove(c->staging.get(), c->staging.get() + c->begin, c->end - c->begin);
      c->end -= c->begin;
      c->begin = 0;
    }
    target = c->staging.get() + c->end;
    size = c->staging_cap - c->end;
  }
  c->recv_posted = true;
  if (c->tls != nullptr) {
    c->tls->Recv(target, size, reinterpret_cast<uint64_t>(&c->recv_tag));
    return;
  }
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_recv(sqe, c->setup.fd.get(), target, size, 0);
  io_uring_sqe_set_data(sqe, &c->recv_tag);
}

void Worker::OnRecv(Connection* c, int result) {
  c->recv_posted = false;
  if (c->closing) return;
  if (result == -EINTR || result == -EAGAIN) {
    MaybePostRecv(c);
    return;
  }
  if (result <= 0) {
    Close(c, result == 0 ? "peer closed the connection" : std::strerror(-result));
    return;
  }
  c->last_recv_ns = MonotonicNs();
  window_bytes_ += static_cast<uint64_t>(result);
  JudgeWindow(c->last_recv_ns);
  Bump(stats_->bytes_received, static_cast<uint64_t>(result));
  Bump(c->stats->bytes_received, static_cast<uint64_t>(result));
  if (c->big != nullptr) {
    c->big_filled += static_cast<size_t>(result);
    if (c->big_filled < c->big_len) {
      MaybePostRecv(c);
      return;
    }
    Buffer* frame = std::exchange(c->big, nullptr);
    HandleFrame(c, std::span<const char>(frame->data.get(), c->big_len), frame);
  } else {
    c->end += static_cast<size_t>(result);
  }
  ProcessInput(c);
}

void Worker::ProcessInput(Connection* c) {
  while (!c->closing && c->inflight < c->setup.max_inflight) {
    size_t avail = c->end - c->begin;
    if (avail < sizeof(uint32_t)) break;
    const char* p = c->staging.get() + c->begin;
    uint32_t len;
    std::memcpy(&len, p, sizeof(len));
    if (len < sizeof(fuse_in_header) || len > c->setup.max_frame_bytes) {
      RINGFS_LOG_WARN("session %u: frame length %u outside [%u, %u]; closing", c->setup.session_id,
                      len, sizeof(fuse_in_header), c->setup.max_frame_bytes);
      Bump(stats_->rejected[static_cast<size_t>(RejectReason::kBadLength)]);
      Close(c, "bad frame length");
      return;
    }
    if (avail >= len) {
      HandleFrame(c, std::span<const char>(p, len), nullptr);
      c->begin += len;
      continue;
    }
    uint32_t opcode = 0;
    if (avail >= 8) std::memcpy(&opcode, p + 4, sizeof(opcode));
    if (len > c->staging_cap || opcode == FUSE_WRITE) {
      // Receive the rest of this frame straight into its own buffer: no staging copy for big
      // frames, and a WRITE's data then stays put while the file write is in flight.
      Buffer* frame = pool_.Get(len);
      std::memcpy(frame->data.get(), p, avail);
      c->big = frame;
      c->big_len = len;
      c->big_filled = avail;
      c->begin = c->end = 0;
    }
    break;
  }
  if (c->begin == c->end) c->begin = c->end = 0;
  // The replies of these frames go before the next RECV: io_uring runs SQEs in order, and the
  // caller waits for the reply, not for the RECV to be armed. (Still listed: PostDeferredSends
  // adds what completes later in this batch.)
  if (c->send_deferred) MaybePostSend(c);
  MaybePostRecv(c);
}

void Worker::HandleFrame(Connection* c, std::span<const char> frame, Buffer* owned) {
  if (c->setup.ticket.superseded() && !RunsOnceReplaced(PeekHeader(frame).opcode)) {
    // The client resent it on the connection that replaced this one. That one waits until
    // this one has ended, so running it here would only be running it twice.
    pool_.Put(owned);
    CloseReplaced(c, /*dropping=*/true);
    return;
  }
  const uint64_t start_ns = MonotonicNs();
  ++window_requests_;
  FrameHeader header = PeekHeader(frame);
  RejectReason reason = RejectReason::kBadHeader;
  absl::StatusOr<Request> request = DecodeRequest(frame, &reason);
  if (!request.ok()) {
    Bump(stats_->rejected[static_cast<size_t>(reason)]);
    if (ShouldCloseConnection(request.status())) {
      RINGFS_LOG_WARN("session %u: %s; closing", c->setup.session_id, request.status().message());
      pool_.Put(owned);
      Close(c, "untrusted frame");
      return;
    }
    RINGFS_LOG_DEBUG("session %u: %s unique %u refused: %s", c->setup.session_id,
                     fuse::OpName(header.opcode), header.unique, request.status().message());
    pool_.Put(owned);
    if (!IsNoReplyOpcode(header.opcode)) {
      SetInflight(c, c->inflight + 1);
      FinishReply(c, pool_.Get(kOutHeader), header.unique, request.status(), 0, header.opcode, 0);
    }
    return;
  }
  if (request->opcode < WorkerStats::kOpcodes) Bump(stats_->requests_by_op[request->opcode]);
  Bump(c->stats->requests);
  if (draining_ && request->expects_reply) {
    pool_.Put(owned);
    SetInflight(c, c->inflight + 1);
    FinishReply(c, pool_.Get(kOutHeader), request->unique,
                ErrnoError(ESHUTDOWN, "the server is draining"), 0, request->opcode, start_ns);
    return;
  }
  OpContext ctx;
  ctx.client = c->setup.client.get();
  ctx.export_options = &c->setup.export_options;
  ctx.nodeid = request->nodeid;
  ctx.uid = request->uid;
  ctx.gid = request->gid;
  ctx.pid = request->pid;
  ctx.times = c->setup.times;
  // Only requests that may remove, replace or truncate a file they do not name by node id look
  // for it, and only when someone would be told.
  ctx.others_listen = options_.coherence != nullptr && ChangesUnnamedFiles(request->opcode) &&
                      options_.coherence->HasOtherListeners(*ctx.client);
  if (c->setup.node_handles) {
    node_notes_.seal = c->setup.client->seal.get();
    node_notes_.records.clear();
    ctx.node_handles = &node_notes_;
  }
  ReplyCache* record = nullptr;
  if (request->expects_reply && ReplayFromCache(c, *request, frame, &record)) {
    pool_.Put(owned);
    return;
  }
  if (!request->expects_reply) {
    ReplyBody none(nullptr, 0);
    executor_.Execute(ctx, *request, none);
    pool_.Put(owned);
    return;
  }
  SetInflight(c, c->inflight + 1);
  const bool dir_attrs =
      c->setup.dir_attrs && wire::CarriesDirAttrs(request->opcode, c->setup.empty_dir_hints);
  // Listings, writes and opens end with one record of their node when negotiated.
  const bool open_record = c->setup.open_attrs && wire::IsOpen(request->opcode);
  const bool one_record = (c->setup.listing_attrs && wire::IsListing(request->opcode)) ||
                          (c->setup.write_attrs && wire::IsWrite(request->opcode)) || open_record;
  const size_t capacity = request->reply_capacity + (dir_attrs ? DirAttrsCapacity() : 0);
  Buffer* reply = pool_.Get(kOutHeader + capacity + (one_record ? OneRecordCapacity() : 0));
  // The listing fills at most `capacity` (read_in.size): its record comes on top.
  ReplyBody body(reply->data.get() + kOutHeader, capacity);
  Outcome outcome = executor_.Execute(ctx, *request, body);
  if (dir_attrs && outcome.status.ok()) AppendDirAttrs(ctx, *request, body);
  // A write on the ring gets its record when it completes (OnIo).
  if (one_record && outcome.status.ok() && !outcome.io.has_value()) {
    body.Grow(OneRecordCapacity());
    if (open_record) {
      AppendOpenRecord(ctx, request->nodeid, std::get<OpenArgs>(request->args).flags, RealtimeNs(),
                       body);
    } else {
      AppendOneRecord(ctx, request->nodeid, body);
    }
  }
  // A failed request hands out no id: its new nodes are not announced.
  if (ctx.node_handles != nullptr && !node_notes_.records.empty() && outcome.status.ok()) {
    QueueNodeHandles(c);
  }
  std::vector<wire::Invalidation> changes;
  if (outcome.status.ok() && options_.coherence != nullptr) changes = ChangesOf(*request);
  if (outcome.status.ok() && outcome.io.has_value()) {
    // Published when the write reached the file: a client told earlier could read the old
    // data again and keep it.
    StartIo(c, *request, start_ns, *std::move(outcome.io), reply, frame, owned, record,
            std::move(changes));
    return;
  }
  // Before the reply: once the caller sees its change done, the others have been told.
  if (!outcome.status.ok()) ctx.changed_files.clear();  // a failed CREATE undid its file
  Publish(c, changes, ctx.changed_files);
  pool_.Put(owned);
  if (!outcome.status.ok()) {
    RINGFS_LOG_DEBUG("session %u: %s unique %u: %s", c->setup.session_id,
                     fuse::OpName(request->opcode), request->unique, outcome.status.message());
  }
  FinishReply(c, reply, request->unique, outcome.status, body.size(), request->opcode, start_ns,
              record);
}

bool Worker::ReplayFromCache(Connection* c, const Request& request, std::span<const char> frame,
                             ReplyCache** record) {
  *record = nullptr;
  if (!ReplyCache::Caches(request.opcode)) return false;
  ReplyCache& cache = c->setup.client->replies;
  // A connection that negotiated directory attributes gets replies of another shape: a reply
  // cached for the other kind is not reused (the request then runs again).
  const uint64_t fingerprint =
      ReplyCache::Fingerprint(request.opcode, request.nodeid, frame.subspan(sizeof(fuse_in_header)))
      ^ (c->setup.dir_attrs ? 0x9e3779b97f4a7c15ull : 0);
  std::string cached;
  switch (cache.Begin(request.unique, fingerprint, &cached)) {
    case ReplyCache::Decision::kExecute:
      *record = &cache;
      return false;
    case ReplyCache::Decision::kExecuteUncached:
      RINGFS_LOG_WARN("session %u: %s unique %u reuses the unique of another request; not cached",
                      c->setup.session_id, fuse::OpName(request.opcode), request.unique);
      return false;
    case ReplyCache::Decision::kReplay:
      break;
  }
  // The first execution's reply, byte for byte: its lookup (for an entry reply) is already
  // counted and is the one the kernel counts when this reply reaches it.
  RINGFS_LOG_INFO("session %u: %s unique %u is a replay; answered from the reply cache",
                  c->setup.session_id, fuse::OpName(request.opcode), request.unique);
  Bump(stats_->replays);
  SetInflight(c, c->inflight + 1);
  Buffer* reply = pool_.Get(cached.size());
  std::memcpy(reply->data.get(), cached.data(), cached.size());
  reply->size = cached.size();
  QueueReply(c, reply);
  return true;
}

void Worker::StartIo(Connection* c, const Request& request, uint64_t start_ns, AsyncIo io,
                     Buffer* reply, std::span<const char> frame, Buffer* owned,
                     ReplyCache* record, std::vector<wire::Invalidation> changes) {
  IoRequest* r = AllocIoRequest();
  r->conn = c;
  r->changes = std::move(changes);
  r->record = record;
  r->unique = request.unique;
  r->opcode = request.opcode;
  r->nodeid = request.nodeid;
  r->start_ns = start_ns;
  r->reply = reply;
  r->frame = owned;
  r->io = std::move(io);
  if (r->io.kind == AsyncIo::Kind::kWrite && owned == nullptr) {
    // The frame sits in the staging buffer, which the next RECV reuses: keep a copy.
    Buffer* copy = pool_.Get(frame.size());
    std::memcpy(copy->data.get(), frame.data(), frame.size());
    r->io.write_data = copy->data.get() + (r->io.write_data - frame.data());
    r->frame = copy;
  }
  io_uring_sqe* sqe = GetSqe();
  const int fd = r->io.handle->fd.get();
  switch (r->io.kind) {
    case AsyncIo::Kind::kRead:
      io_uring_prep_read(sqe, fd, reply->data.get() + kOutHeader, r->io.length, r->io.offset);
      break;
    case AsyncIo::Kind::kWrite:
      io_uring_prep_write(sqe, fd, r->io.write_data, r->io.length, r->io.offset);
      sqe->rw_flags = r->io.write_rw_flags;
      break;
    case AsyncIo::Kind::kFsync:
      io_uring_prep_fsync(sqe, fd, r->io.datasync ? IORING_FSYNC_DATASYNC : 0);
      break;
  }
  sqe->personality = io_personality_;
  io_uring_sqe_set_data(sqe, &r->tag);
  ++c->pending_io;
}

void Worker::OnIo(IoRequest* r, int result) {
  Connection* c = r->conn;
  --c->pending_io;
  pool_.Put(std::exchange(r->frame, nullptr));
  Buffer* reply = std::exchange(r->reply, nullptr);
  // Finished even when the connection is closing: a replay on the next connection needs it.
  size_t capacity = r->io.kind == AsyncIo::Kind::kRead ? r->io.length : reply->capacity - kOutHeader;
  ReplyBody body(reply->data.get() + kOutHeader, capacity);
  absl::Status status = Executor::CompleteIo(r->io, result, body);
  if (status.ok() && c->setup.write_attrs && r->io.kind == AsyncIo::Kind::kWrite) {
    // The file after this write (common/dir_attrs.h); the buffer has room (HandleFrame).
    AppendOneRecord(c->setup.times, r->nodeid, r->io.handle->fd.get(), body);
  }
  if (status.ok()) Publish(c, r->changes);
  r->changes.clear();
  FinishReply(c, reply, r->unique, status, body.size(), r->opcode, r->start_ns, r->record);
  FreeIoRequest(r);
}

void Worker::FinishReply(Connection* c, Buffer* reply, uint64_t unique, const absl::Status& status,
                         size_t body_size, uint32_t opcode, uint64_t start_ns,
                         ReplyCache* record) {
  fuse_out_header out{};
  out.unique = unique;
  if (status.ok()) {
    out.len = static_cast<uint32_t>(kOutHeader + body_size);
  } else {
    int err = ToErrno(status);
    if (err <= 0 || err > 511) err = EIO;
    out.error = -err;
    out.len = kOutHeader;
    Bump(stats_->errors_by_errno[err]);
  }
  if (start_ns != 0 && opcode < WorkerStats::kOpcodes) {
    stats_->duration_by_op[opcode].Observe(MonotonicNs() - start_ns);
  }
  std::memcpy(reply->data.get(), &out, sizeof(out));
  reply->size = out.len;
  // Recorded even when the connection is closing: that is when a replay will follow.
  if (record != nullptr) record->Finish(unique, std::span<const char>(reply->data.get(), reply->size));
  QueueReply(c, reply);
}

void Worker::QueueReply(Connection* c, Buffer* reply) {
  if (c->closing) {
    pool_.Put(reply);
    return;
  }
  reply->next = nullptr;
  if (c->out_tail != nullptr) {
    c->out_tail->next = reply;
  } else {
    c->out_head = reply;
  }
  c->out_tail = reply;
  DeferSend(c);
}

// A reply used to be posted the moment it was queued: a CREATE's node-handle frame went out
// in a SENDMSG of its own and its reply in a second one once the first completed, so the
// client woke twice for one request (6 TCP segments per create and close against 4). The
// SQEs are submitted only at the next io_uring_enter anyway, so waiting for the end of the
// batch delays nothing.
void Worker::DeferSend(Connection* c) {
  if (c->send_deferred) return;
  c->send_deferred = true;
  deferred_sends_.push_back(c);
}

void Worker::PostDeferredSends() {
  // MaybeDestroy below cannot add to the list: it only frees.
  for (Connection* c : deferred_sends_) {
    c->send_deferred = false;
    MaybePostSend(c);
    MaybeDestroy(c);
  }
  deferred_sends_.clear();
}

void Worker::MaybePostSend(Connection* c) {
  if (c->closing || c->send_posted || c->out_head == nullptr) return;
  size_t n = 0;
  size_t skip = c->out_offset;
  for (Buffer* b = c->out_head; b != nullptr && n < kMaxSendIov; b = b->next) {
    c->iov[n].iov_base = b->data.get() + skip;
    c->iov[n].iov_len = b->size - skip;
    skip = 0;
    ++n;
  }
  c->msg.msg_iov = c->iov;
  c->msg.msg_iovlen = n;
  if (c->tls != nullptr) {
    c->send_posted = true;
    c->tls->Send(c->iov, n, reinterpret_cast<uint64_t>(&c->send_tag));
    return;
  }
  io_uring_sqe* sqe = GetSqe();
  io_uring_prep_sendmsg(sqe, c->setup.fd.get(), &c->msg, MSG_NOSIGNAL);
  io_uring_sqe_set_data(sqe, &c->send_tag);
  c->send_posted = true;
}

void Worker::OnSend(Connection* c, int result) {
  c->send_posted = false;
  if (c->closing) return;
  if (result == -EINTR || result == -EAGAIN) {
    MaybePostSend(c);
    return;
  }
  if (result < 0) {
    Close(c, std::strerror(-result));
    return;
  }
  Bump(stats_->bytes_sent, static_cast<uint64_t>(result));
  Bump(c->stats->bytes_sent, static_cast<uint64_t>(result));
  Bump(stats_->sends);
  Bump(c->stats->sends);
  window_bytes_ += static_cast<uint64_t>(result);
  // Drop what was sent; a short send leaves the rest of the head for the next SENDMSG, which
  // keeps the byte stream in order.
  size_t sent = static_cast<size_t>(result);
  while (sent > 0 && c->out_head != nullptr) {
    size_t left = c->out_head->size - c->out_offset;
    if (sent < left) {
      c->out_offset += sent;
      break;
    }
    sent -= left;
    Buffer* done = c->out_head;
    c->out_head = done->next;
    if (c->out_head == nullptr) c->out_tail = nullptr;
    c->out_offset = 0;
    if (done == c->unsent_invalidations) c->unsent_invalidations = nullptr;
    pool_.Put(done);
    SetInflight(c, c->inflight - 1);
  }
  if (c->unsent_invalidations == nullptr && c->flush_wanted) {
    c->flush_wanted = false;
    FlushInvalidations(c->setup.session_id);
  }
  DeferSend(c);
  if (!c->recv_posted) ProcessInput(c);  // resumes reading if it paused at max_inflight
}

void Worker::OnTlsStep(Connection* c, Tag* tag, int result) {
  if (tag->kind == TagKind::kTlsRecv) {
    c->tls->OnCipherRecv(result);
  } else if (tag->kind == TagKind::kTlsSend) {
    c->tls->OnCipherSend(result);
  } else {
    c->tls->OnWake();
  }
  c->tls->Drain([this, c](tls::RingTransport::Completion done) {
    // The TLS reason says more than "Protocol error".
    if (done.res == -EPROTO && !c->tls->last_error().empty()) Close(c, c->tls->last_error().c_str());
    if (reinterpret_cast<Tag*>(done.user_data)->kind == TagKind::kRecv) {
      OnRecv(c, done.res);
    } else {
      OnSend(c, done.res);
    }
  });
}

void Worker::Close(Connection* c, const char* why) {
  if (c->closing) return;
  c->closing = true;
  // Invalidations queued from now on go out on another session of the client.
  if (c->setup.invalidations) c->setup.client->invalidations.RemoveSink(c->setup.session_id);
  RINGFS_LOG_INFO("worker %u: session %u of client '%s' closed: %s", options_.index,
                  c->setup.session_id, c->setup.client->client_id, why);
  // Completes the posted RECV/SENDMSG with an error; MaybeDestroy frees the connection once the
  // ring holds nothing of it.
  shutdown(c->setup.fd.get(), SHUT_RDWR);
}

bool Worker::RunsOnceReplaced(uint32_t opcode) {
  // What the client never resends once sent: FORGETs, and the RELEASEs it makes itself of
  // handles nobody asked for (a kernel's RELEASE that runs here and again there fails there,
  // which the kernel ignores). Dropped, they would hold lookups and fds until the state goes.
  return opcode == FUSE_FORGET || opcode == FUSE_BATCH_FORGET || opcode == FUSE_RELEASE ||
         opcode == FUSE_RELEASEDIR;
}

void Worker::CloseReplaced(Connection* c, bool dropping) {
  if (c->closing) return;
  Bump(stats_->sessions_replaced);
  if (dropping || c->end > c->begin || c->big != nullptr) Bump(stats_->replaced_with_unstarted);
  Close(c, "replaced by a new connection of its client");
}

void Worker::MaybeDestroy(Connection* c) {
  if (!c->closing || c->recv_posted || c->send_posted || c->pending_io > 0) return;
  if (c->send_deferred) return;  // PostDeferredSends holds it; it calls this again
  if (c->tls != nullptr && c->tls->busy()) return;  // its ciphertext buffers are in the kernel
  while (c->out_head != nullptr) pool_.Put(std::exchange(c->out_head, c->out_head->next));
  c->out_tail = nullptr;
  pool_.Put(std::exchange(c->big, nullptr));
  options_.sessions->Remove(c->setup.session_id);
  if (c->setup.colocated) CountColocated(-1);
  connections_.erase(c);
  connection_count_.fetch_sub(1, std::memory_order_relaxed);
}

void Worker::Publish(Connection* c, std::span<const wire::Invalidation> changes,
                     std::span<const Coherence::KeyedChange> files) {
  if (changes.empty() && files.empty()) return;
  const size_t pushed = options_.coherence->Publish(*c->setup.client.get(), changes, files);
  if (pushed > 0) stats_->invalidations_pushed.fetch_add(pushed, std::memory_order_relaxed);
}

Worker::Connection* Worker::LiveSession(uint64_t session_id) {
  for (auto& [c, owned] : connections_) {
    if (c->setup.session_id == session_id && !c->closing) return c;
  }
  return nullptr;
}

void Worker::FlushInvalidations(uint64_t session_id) {
  Connection* c = LiveSession(session_id);
  if (c == nullptr) {
    // Closed meanwhile: Close removed its sink, so this passes the wake to another session.
    // The state may be gone too; nothing of it is touched then.
    return;
  }
  if (c->unsent_invalidations != nullptr) {
    c->flush_wanted = true;  // OnSend flushes once the frames before have left
    return;
  }
  std::vector<wire::Invalidation> records = c->setup.client->invalidations.Take(session_id, true);
  if (!records.empty() && records.front().kind == wire::InvalidationKind::kReset) {
    stats_->cache_resets_sent.fetch_add(1, std::memory_order_relaxed);
  }
  // Frames of at most 64 KiB, so one never comes near the client's frame limit.
  constexpr size_t kMaxBody = 64 * 1024;
  size_t i = 0;
  while (i < records.size()) {
    std::string body;
    while (i < records.size() &&
           (body.empty() || body.size() + wire::InvalidationWireBytes(records[i]) <= kMaxBody)) {
      wire::AppendInvalidation(records[i++], body);
    }
    Buffer* frame = pool_.Get(kOutHeader + body.size());
    fuse_out_header out{};
    out.len = static_cast<uint32_t>(kOutHeader + body.size());
    out.error = wire::kNotifyInvalidate;
    out.unique = 0;
    std::memcpy(frame->data.get(), &out, sizeof(out));
    std::memcpy(frame->data.get() + kOutHeader, body.data(), body.size());
    frame->size = out.len;
    // Counted like a reply: OnSend takes one off `inflight` for every buffer it sends.
    SetInflight(c, c->inflight + 1);
    QueueReply(c, frame);
    c->unsent_invalidations = frame;
  }
}

void Worker::QueueNodeHandles(Connection* c) {
  const size_t bytes = node_notes_.records.size() * sizeof(wire::NodeHandleRecord);
  Buffer* frame = pool_.Get(kOutHeader + bytes);
  fuse_out_header out{};
  out.len = static_cast<uint32_t>(kOutHeader + bytes);
  out.error = wire::kNotifyNodeHandles;
  out.unique = 0;
  std::memcpy(frame->data.get(), &out, sizeof(out));
  std::memcpy(frame->data.get() + kOutHeader, node_notes_.records.data(), bytes);
  frame->size = out.len;
  node_notes_.records.clear();
  // Counted like a reply: OnSend takes one off `inflight` for every buffer it sends.
  SetInflight(c, c->inflight + 1);
  QueueReply(c, frame);
}

void Worker::SetInflight(Connection* c, uint32_t inflight) {
  c->inflight = inflight;
  c->stats->inflight.store(inflight, std::memory_order_relaxed);
}

Worker::IoRequest* Worker::AllocIoRequest() {
  if (free_io_ == nullptr) {
    io_requests_.push_back(std::make_unique<IoRequest>());
    return io_requests_.back().get();
  }
  return std::exchange(free_io_, free_io_->next_free);
}

void Worker::FreeIoRequest(IoRequest* r) {
  r->io = AsyncIo{};  // drops the handle reference
  r->conn = nullptr;
  r->record = nullptr;
  r->next_free = free_io_;
  free_io_ = r;
}

}  // namespace ringfs::server
