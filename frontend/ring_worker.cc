#include "frontend/ring_worker.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <ctime>

#include "absl/strings/str_format.h"
#include "common/fuse_ops.h"
#include "common/log.h"
#include "common/status.h"
#include "frontend/completion_tags.h"
#include "frontend/worker_thread.h"

namespace ringfs::frontend {
namespace {

// The FUSE command lives in the 80-byte area that starts here in a 128-byte SQE.
static_assert(offsetof(io_uring_sqe, cmd) == 48);

// A sent handoff's completion carries its kind (bit 0) and its target worker (bits 1..23), so
// the sender can close the send it opened in the HandoffDirectory.
uint32_t SentArgument(HandoffKind kind, int target_index) {
  return static_cast<uint32_t>(kind) | (static_cast<uint32_t>(target_index) << 1);
}
HandoffKind SentKind(uint32_t argument) { return static_cast<HandoffKind>(argument & 1); }
int SentTarget(uint32_t argument) { return static_cast<int>(argument >> 1); }

// How long a busy worker waits before it looks for a quiet moment to sweep again.
constexpr int64_t kSweepRetryNs = 50'000'000;

int64_t MonotonicNanos() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

unsigned RoundUpToPowerOfTwo(size_t value) {
  unsigned result = 1;
  while (result < value) result <<= 1;
  return result;
}

}  // namespace

RingWorker::RingWorker(int cpu_index, EngineShared* shared, WorkerStats* stats,
                       BackendConfig backend, const EntriesConfig& entries)
    : index_(cpu_index),
      cpu_(shared->topology.cpus()[cpu_index]),
      shared_(shared),
      stats_(stats),
      backend_config_(std::move(backend)),
      depth_(entries.depth),
      initial_depth_(std::min(entries.initial_depth, entries.depth)),
      return_idle_pages_(entries.return_idle_pages),
      rng_(0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(cpu_index)) {}

RingWorker::~RingWorker() {
  Join();
  backend_.reset();
  if (ring_initialized_) io_uring_queue_exit(&ring_);
}

absl::Status RingWorker::Start(std::shared_ptr<const EngineState> state,
                               std::vector<uint16_t> register_qids) {
  Join();  // a worker that retired earlier is started again on a fresh thread and ring
  if (ring_initialized_) {
    io_uring_queue_exit(&ring_);
    ring_initialized_ = false;
  }
  state_ = std::move(state);
  return StartWorkerThread(
      &thread_,
      [this, qids = std::move(register_qids)] {
        absl::Status status = Setup(qids);
        // The thread ends without running Loop: its id must not be acted on any more.
        if (!status.ok()) tid_.store(0, std::memory_order_release);
        return status;
      },
      [this] { Loop(); });
}

void RingWorker::Join() {
  if (thread_.joinable()) thread_.join();
}

void RingWorker::Post(Command command) {
  {
    absl::MutexLock lock(&mailbox_mu_);
    mailbox_.push_back(std::move(command));
  }
  uint64_t one = 1;
  (void)!write(wake_fd_.get(), &one, sizeof(one));
}

absl::Status RingWorker::Setup(std::vector<uint16_t> register_qids) {
  pinned_.store(PinCurrentThread(cpu_), std::memory_order_release);
  io_uring_params params{};
  // SQE128 carries the FUSE command. The completion queue must hold a completion for every
  // entry that could be registered on this ring at once (entries migrate between workers).
  // DEFER_TASKRUN (with SINGLE_ISSUER, which this thread-owned ring obeys anyway): completions
  // and the kernel's copies of requests into our entries happen only inside our own
  // io_uring_enter, which is what lets SweepIdleEntries return pages of entries waiting in the
  // kernel. Kernels before 6.1 refuse it; then idle entries are only trimmed at commit. It costs a
  // few percent on 1 MiB writes (the kernel's copy waits for our next enter instead of
  // interrupting us), which idle_pages=keep buys back (README, "Ring memory").
  const unsigned base_flags = IORING_SETUP_SQE128 | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CQSIZE;
  const unsigned cq_entries = RoundUpToPowerOfTwo(2 * (shared_->topology.size() * depth_ + 64));
  params.flags = base_flags;
  if (return_idle_pages_) params.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  params.cq_entries = cq_entries;
  int rc = io_uring_queue_init_params(2 * depth_ + 16, &ring_, &params);
  defer_taskrun_ = rc == 0 && return_idle_pages_;
  if (rc == -EINVAL && return_idle_pages_) {
    params = io_uring_params{};
    params.flags = base_flags;
    params.cq_entries = cq_entries;
    rc = io_uring_queue_init_params(2 * depth_ + 16, &ring_, &params);
  }
  if (rc < 0) return ErrnoError(-rc, "io_uring_queue_init (SQE128)");
  sweep_due_ns_ = 0;
  ring_initialized_ = true;
  ring_fd_published_ = false;
  handoffs_unconfirmed_ = 0;
  wake_fd_.Reset(eventfd(0, EFD_CLOEXEC));
  if (!wake_fd_.valid()) return ErrnoError(errno, "eventfd");

  // Entries migrate, so this worker may come to hold every entry of the mount at once.
  BackendConfig backend = backend_config_;
  backend.max_inflight = static_cast<uint32_t>(shared_->registry.capacity());
  backend_ = std::make_unique<BackendChannel>(
      std::move(backend), &ring_, static_cast<uint8_t>(CompletionKind::kBackend), this);
  backend_->Start();
  channel_.emplace(backend_.get());
  forwarder_.emplace(ForwarderConfigOf(backend_config_), stats_, &*channel_);

  for (uint16_t qid : register_qids) {
    for (uint32_t i = 0; i < initial_depth_; ++i) {
      shared_->entries[shared_->topology.IndexOf(qid)].registered.fetch_add(1);
      RETURN_IF_ERROR(RegisterNewEntry(qid));
    }
  }
  ArmWake();
  int submitted = io_uring_submit(&ring_);
  if (submitted < 0) return ErrnoError(-submitted, "submit REGISTER");
  load_scratch_.resize(shared_->topology.size());
  active_ = false;
  // From here the mount's stats loop may set our policy: not during the set-up above, which
  // would then risk a SCHED_IDLE start on a busy CPU while the engine waits for it.
  tid_.store(static_cast<pid_t>(gettid()), std::memory_order_release);
  ApplyState(state_);
  PublishRingFd();
  stopping_ = false;
  allow_exit_ = false;
  running_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

io_uring_sqe* RingWorker::NextSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  while (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

void RingWorker::ArmWake() {
  io_uring_sqe* sqe = NextSqe();
  io_uring_prep_read(sqe, wake_fd_.get(), &wake_value_, sizeof(wake_value_), 0);
  io_uring_sqe_set_data64(sqe, MakeTag(CompletionKind::kWake, 0));
}

absl::Status RingWorker::RegisterNewEntry(uint16_t qid) {
  // Created here so the buffers' pages are first touched on this worker's CPU.
  ASSIGN_OR_RETURN(RingEntry * entry, shared_->registry.Create(qid));
  SubmitCmd(entry, fuse::kUringCmdRegister);
  ++held_;
  return absl::OkStatus();
}

// Only with initial_depth < queue_depth (by default every entry is registered at the start and
// this returns at once): when a request took the queue's last entry waiting in the kernel, one
// more is registered (the kernel accepts REGISTER at any time), up to the depth, so a queue
// settles at its callers' concurrency plus one. Only active workers add: a retiring worker's ring
// must empty. The new entry does not take requests already waiting in the kernel: those wait for
// the queue's next commit, which a stopped server never gives (README, "Ring memory").
void RingWorker::MaybeGrow(uint16_t qid) {
  if (!active_ || stopping_) return;
  QueueEntries& queue = shared_->entries[shared_->topology.IndexOf(qid)];
  if (!queue.exhausted.load(std::memory_order_relaxed) ||
      !queue.exhausted.exchange(false, std::memory_order_relaxed)) {
    return;
  }
  // Reserved before it exists, so that workers growing the same queue at once stay within depth.
  uint32_t registered = queue.registered.load(std::memory_order_relaxed);
  do {
    if (registered >= depth_) return;
  } while (!queue.registered.compare_exchange_weak(registered, registered + 1,
                                                   std::memory_order_relaxed));
  if (absl::Status added = RegisterNewEntry(qid); !added.ok()) {
    queue.registered.fetch_sub(1, std::memory_order_relaxed);
    RINGFS_LOG_WARN("worker %d: cannot add an entry to queue %u: %s", cpu_, qid,
                    added.message());
    return;
  }
  WorkerStats::Add(stats_->entries_added);
}

void RingWorker::SubmitCmd(RingEntry* entry, fuse::UringCmd cmd) {
  entry->waiting_on.store(index_, std::memory_order_relaxed);
  shared_->entries[shared_->topology.IndexOf(entry->qid)].in_kernel.fetch_add(
      1, std::memory_order_relaxed);
  io_uring_sqe* sqe = NextSqe();
  io_uring_prep_rw(IORING_OP_URING_CMD, sqe, shared_->fuse_fd, entry->iov, 2, 0);
  sqe->cmd_op = cmd;
  fuse::UringCmdReq request{};
  request.qid = entry->qid;  // always the entry's own queue, whichever ring commits it
  request.commit_id = cmd == fuse::kUringCmdCommitAndFetch ? entry->request.unique() : 0;
  char* command_area = reinterpret_cast<char*>(sqe) + offsetof(io_uring_sqe, cmd);
  std::memset(command_area, 0, 80);
  std::memcpy(command_area, &request, sizeof(request));
  io_uring_sqe_set_data64(sqe, MakeTag(CompletionKind::kRingEntry, entry->id));
}

void RingWorker::Loop() {
  std::vector<RingEntry*> ready;
  std::vector<std::pair<RingEntry*, HandoffKind>> retries;
  uint64_t stop_deadline_ns = 0;
  while (!ReadyToExit()) {
    // Unlinks answered early go to the server before the mount's end lets the worker go.
    if (stopping_ && !backend_->KeepForDetached(&stop_deadline_ns)) break;
    int rc;
    // With the fd withdrawn we wait for peers' sends toward us to close (ReadyToExit); that
    // does not wake us, so we look again shortly.
    if (retry_handoffs_.empty() && ring_fd_published_ && sweep_due_ns_ == 0) {
      rc = io_uring_submit_and_wait(&ring_, 1);
    } else {
      __kernel_timespec pause{0, 1'000'000};
      if (retry_handoffs_.empty() && ring_fd_published_) {
        // Only a sweep is due: wake for it even if nothing else happens (an idle mount is when
        // it matters), at most a second late.
        int64_t wait = std::clamp<int64_t>(sweep_due_ns_ - MonotonicNanos(), 1'000'000,
                                           1'000'000'000);
        pause = {wait / 1'000'000'000, wait % 1'000'000'000};
      }
      io_uring_cqe* unused;
      rc = io_uring_submit_and_wait_timeout(&ring_, &unused, 1, &pause, nullptr);
      if (rc == -ETIME) rc = 0;
    }
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      RINGFS_LOG_ERROR("worker %d: io_uring_submit_and_wait: %s", cpu_, std::strerror(-rc));
      break;
    }
    io_uring_cqe* cqe;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t tag = cqe->user_data;
      int res = cqe->res;
      switch (TagKind(tag)) {
        case CompletionKind::kRingEntry:
          if (RingEntry* entry = shared_->registry.Get(TagIndex(tag))) {
            OnEntryCompletion(entry, res);
          }
          break;
        case CompletionKind::kBackend:
          backend_->OnCompletion(tag, res);
          break;
        case CompletionKind::kHandoff:
          if (RingEntry* entry = shared_->registry.Get(TagIndex(tag))) {
            OnHandoff(entry, static_cast<HandoffKind>(res));
          }
          break;
        case CompletionKind::kHandoffSent: {
          uint32_t argument = TagArgument(tag);
          --handoffs_unconfirmed_;
          shared_->handoffs.EndSend(SentTarget(argument));
          if (res >= 0) break;  // the entry's completion is in the target's queue
          // Failed: the entry is still ours.
          if (RingEntry* entry = shared_->registry.Get(TagIndex(tag))) {
            RINGFS_LOG_WARN("worker %d: handoff of entry %u failed: %s; retrying", cpu_,
                            entry->id, std::strerror(-res));
            ++held_;
            retry_handoffs_.emplace_back(entry, SentKind(argument));
          }
          break;
        }
        case CompletionKind::kWake:
          DrainMailbox();
          ArmWake();
          break;
        default:
          break;
      }
    }
    io_uring_cq_advance(&ring_, seen);
    backend_->Deliver();

    ready.swap(ready_);
    for (RingEntry* entry : ready) Forward(entry);
    ready.clear();
    retries.swap(retry_handoffs_);
    for (auto [entry, kind] : retries) {
      if (kind == HandoffKind::kCommitBack) {
        Commit(entry);  // the origin is gone or full: commit here (the entry moves to us)
      } else if (active_) {
        Dispatch(entry);
      } else {
        Route(entry);
      }
    }
    retries.clear();
    SweepIdleEntries();
    PublishGauges();
  }
  shared_->handoffs.Withdraw(index_);
  ring_fd_published_ = false;
  shared_->inflight[index_].store(0, std::memory_order_relaxed);
  stats_->state.store(static_cast<uint32_t>(WorkerState::kStopped), std::memory_order_relaxed);
  forwarder_.reset();
  channel_.reset();
  backend_.reset();  // its last request has been answered (or the mount is gone)
  RINGFS_LOG_DEBUG("worker %d: exits (%s)", cpu_, stopping_ ? "mount ended" : "retired");
  tid_.store(0, std::memory_order_release);
  running_.store(false, std::memory_order_release);
}

void RingWorker::EnforcePolicy() {
  // A tid read just before the thread ends could name another thread once the id is reused;
  // ids are reused only after the kernel went through pid_max of them, so this is not guarded.
  // One caller at a time: the read of the policy and its change must not interleave with the
  // other thread's (the worker in ApplyState, the stats loop), or a stale decision could land
  // last.
  absl::MutexLock lock(&policy_mu_);
  const pid_t tid = tid_.load(std::memory_order_acquire);
  const bool idle = wants_idle_.load(std::memory_order_acquire) &&
                    !contended_.load(std::memory_order_acquire) &&
                    shared_->can_leave_idle.load(std::memory_order_acquire);
  int policy = tid != 0 ? sched_getscheduler(tid) : -1;  // -1: no thread, or it has just ended
  if (policy >= 0 && (policy == SCHED_IDLE) != idle && SetThreadIdle(tid, idle)) {
    policy = idle ? SCHED_IDLE : SCHED_OTHER;
  }
  // What the thread runs, not what was asked for (a switch can be refused: EPERM).
  stats_->sched_idle.store(policy == SCHED_IDLE ? 1 : 0, std::memory_order_relaxed);
}

void RingWorker::DrainMailbox() {
  std::deque<Command> commands;
  {
    absl::MutexLock lock(&mailbox_mu_);
    commands.swap(mailbox_);
  }
  for (Command& command : commands) {
    switch (command.kind) {
      case Command::Kind::kApplyState:
        ApplyState(command.state);
        break;
      case Command::Kind::kAllowExit:
        allow_exit_ = !active_;
        break;
      case Command::Kind::kStop:
        stopping_ = true;
        break;
    }
    // Handoffs decided under the old state must reach their targets before the engine hears
    // that this worker switched over (it allows retired workers to exit only after that).
    io_uring_submit(&ring_);
    if (command.done) command.done->set_value();
  }
}

void RingWorker::ApplyState(std::shared_ptr<const EngineState> state) {
  // A command left in the mailbox of an earlier thread of this worker may be older.
  if (state_ && state->epoch < state_->epoch) return;
  state_ = std::move(state);
  wants_idle_.store(state_->config.worker_priority == queue::WorkerPriority::kIdle,
                    std::memory_order_release);
  EnforcePolicy();
  uint32_t limit = state_->background_limit[index_];
  if (limit != limiter_.limit()) {
    (void)limiter_.SetLimit(limit);  // validated by the engine
    // The high-water mark then tells what happened under the new limit.
    limiter_.ResetHighWater();
  }
  for (uint64_t token : limiter_.DrainAdmissible()) ready_.push_back(shared_->registry.Get(token));
  bool now_active = state_->active[index_];
  if (active_ && !now_active) {
    active_ = false;
    // Waiting background requests go to the new owners instead of being sent from here.
    for (uint64_t token : limiter_.TakeQueued()) Route(shared_->registry.Get(token));
  }
  if (now_active) {
    allow_exit_ = false;
    PublishRingFd();  // it may have been withdrawn on the way out (ReadyToExit)
  }
  active_ = now_active;
  stats_->state.store(static_cast<uint32_t>(active_ ? WorkerState::kActive : WorkerState::kRetiring),
                      std::memory_order_relaxed);
  WorkerStats::Set(stats_->background_limit, limiter_.limit());
  PublishGauges();
}

void RingWorker::OnEntryCompletion(RingEntry* entry, int res) {
  const uint16_t qid = entry->qid;
  QueueEntries& queue = shared_->entries[shared_->topology.IndexOf(qid)];
  const int32_t left_in_kernel = queue.in_kernel.fetch_sub(1, std::memory_order_relaxed) - 1;
  entry->waiting_on.store(-1, std::memory_order_relaxed);
  if (res == 0) {
    if (left_in_kernel <= 0) queue.exhausted.store(true, std::memory_order_relaxed);
    MarkServed(entry, shared_->registry.payload_bytes());
    entry->request_payload = entry->header->ring_ent_in_out.payload_sz;
    WorkerStats::Add(stats_->ring_requests);
    WorkerStats::Add(stats_->received_by_qid[shared_->topology.IndexOf(entry->qid)]);
    entry->origin_cpu = index_;
    DecodeRingRequest(*entry->header, entry->payload, shared_->registry.payload_bytes(),
                      &entry->request);
    Verdict verdict = forwarder_->Accept(entry->request, &entry->state, entry->payload);
    switch (verdict.kind) {
      case Verdict::Kind::kForward:
        Route(entry);
        break;
      case Verdict::Kind::kAnswer:
        CommitAnswer(entry, verdict.header, verdict.body_size);
        break;
      case Verdict::Kind::kNone:
        // DecodeRingRequest refuses the requests that expect no answer, so this is not reached;
        // were it, committing an empty success gives the entry back to the kernel.
        CommitAnswer(entry, fuse_out_header{sizeof(fuse_out_header), 0, entry->request.unique()},
                     0);
        break;
    }
    MaybeGrow(qid);  // after the request is on its way: the new entry is for the next caller
    return;
  }
  if (res == -EAGAIN || res == -EINTR) {
    SubmitCmd(entry, fuse::kUringCmdRegister);  // INIT not yet visible to the kernel: again
    return;
  }
  // -ENOTCONN/-ECONNABORTED at unmount or abort; anything else is a kernel refusal, after
  // which the kernel serves this connection through /dev/fuse.
  if (res != -ENOTCONN && res != -ECONNABORTED && res != -ENODEV) {
    RINGFS_LOG_ERROR("worker %d entry %u (queue %u): ring command failed: %s", cpu_, entry->id,
                     entry->qid, std::strerror(-res));
  }
  if (held_ > 0) --held_;
}

void RingWorker::Route(RingEntry* entry) {
  const EngineState& state = *state_;
  int qid_index = shared_->topology.IndexOf(entry->qid);
  int owner_cpu = state.owner_cpu[qid_index];
  queue::Policy policy = entry->state.request_class == queue::RequestClass::kBackground
                             ? state.config.background
                             : state.config.foreground;
  int target_cpu = owner_cpu;
  if (policy != queue::Policy::kLocal) {
    for (size_t i = 0; i < load_scratch_.size(); ++i) {
      load_scratch_[i].active = state.active[i];
      load_scratch_[i].inflight = shared_->inflight[i].load(std::memory_order_relaxed);
    }
    target_cpu = queue::ChooseWorker(policy, owner_cpu, shared_->topology,
                                     queue::LoadView{load_scratch_}, state.config.thresholds,
                                     rng_);
  }
  int target = shared_->topology.IndexOf(target_cpu);
  if (target == index_ && active_) {
    Dispatch(entry);
  } else {
    HandOff(entry, target == index_ ? shared_->topology.IndexOf(owner_cpu) : target,
            HandoffKind::kForward);
  }
}

void RingWorker::HandOff(RingEntry* entry, int target_index, HandoffKind kind) {
  int target_fd = target_index == index_ ? -1 : shared_->handoffs.BeginSend(target_index);
  if (target_fd < 0) {
    // No thread there (yet): keep the work rather than lose it.
    if (kind == HandoffKind::kCommitBack) {
      Commit(entry);
    } else if (active_) {
      Dispatch(entry);
    } else {
      retry_handoffs_.emplace_back(entry, kind);
    }
    return;
  }
  io_uring_sqe* sqe = NextSqe();
  io_uring_prep_msg_ring(sqe, target_fd, static_cast<unsigned>(kind),
                         MakeTag(CompletionKind::kHandoff, entry->id), 0);
  // Every send completes (no IOSQE_CQE_SKIP_SUCCESS): until it has, the SQE may still sit
  // unsubmitted in our SQ or run in io-wq, and a thread ending then would drop it with the
  // entry (MayExit waits for handoffs_unconfirmed_ to reach 0).
  io_uring_sqe_set_data64(
      sqe, MakeTag(CompletionKind::kHandoffSent, entry->id, SentArgument(kind, target_index)));
  ++handoffs_unconfirmed_;
  if (held_ > 0) --held_;
  if (kind == HandoffKind::kForward) WorkerStats::Add(stats_->handoffs_out);
}

void RingWorker::OnHandoff(RingEntry* entry, HandoffKind kind) {
  ++held_;
  if (kind == HandoffKind::kCommitBack) {
    Commit(entry);
    return;
  }
  WorkerStats::Add(stats_->handoffs_in);
  if (active_) {
    Dispatch(entry);
  } else {
    Route(entry);  // sent before the sender learned we left the active set: pass it on
  }
}

void RingWorker::Dispatch(RingEntry* entry) {
  if (entry->state.request_class == queue::RequestClass::kBackground &&
      !limiter_.TryAdmit(entry->id)) {
    return;  // waits in this worker's FIFO; foreground requests never pass through here
  }
  Forward(entry);
}

void RingWorker::Forward(RingEntry* entry) {
  // The reply body lands in the entry's payload; the channel keeps it until the request's own
  // bytes have been sent.
  forwarder_->Forward(entry->request, &entry->state, entry->id,
                      ReplyBuffer{entry->payload, shared_->registry.payload_bytes()});
}

void RingWorker::OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
                         ReplyOrigin origin) {
  RingEntry* entry = shared_->registry.Get(slot);
  forwarder_->OnReply(&entry->state, header, entry->payload, body_size, origin);
  std::memcpy(entry->header->in_out, &header, sizeof(header));
  entry->header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(body_size);
  if (entry->state.request_class == queue::RequestClass::kBackground) {
    // Forwarded from the loop, not from inside the channel's receive path.
    if (auto next = limiter_.OnComplete()) ready_.push_back(shared_->registry.Get(*next));
  }
  Complete(entry);
}

void RingWorker::Complete(RingEntry* entry) {
  const EngineState& state = *state_;
  int origin = entry->origin_cpu;
  if (state.config.commit == queue::CommitLocality::kOrigin && origin != index_ &&
      origin >= 0 && state.active[origin]) {
    HandOff(entry, origin, HandoffKind::kCommitBack);
    return;
  }
  Commit(entry);
}

void RingWorker::Commit(RingEntry* entry) {
  fuse_out_header out;
  std::memcpy(&out, entry->header->in_out, sizeof(out));
  // The forwarder of whichever worker commits counts the answer.
  forwarder_->OnAnswered(entry->state, out.error);
  TrimPayload(entry);
  const uint16_t qid = entry->qid;
  SubmitCmd(entry, fuse::kUringCmdCommitAndFetch);  // the entry now lives on this ring
  MaybeGrow(qid);  // the receiver may have been a retiring worker, which does not add
}

void RingWorker::TrimPayload(RingEntry* entry) {
  // Between the kernel's request and our commit the entry is ours alone (ring_memory.h), and the
  // reply the kernel is about to read lies below the head whenever something is trimmed.
  size_t used = std::max<size_t>(entry->request_payload,
                                 entry->header->ring_ent_in_out.payload_sz);
  if (used <= kRingResidentHead && entry->payload_use.touched <= kRingResidentHead) return;
  const int64_t now = MonotonicNanos();
  std::optional<PayloadRange> trim = PlanPayloadTrim(&entry->payload_use, used, now);
  if (trim) {
    if (madvise(entry->payload + trim->offset, trim->length, MADV_DONTNEED) == 0) {
      WorkerStats::Add(stats_->payload_trims);
    } else {
      entry->payload_use.touched += trim->length;  // still resident
    }
  }
  entry->resident_bytes.store(EntryResidentBytes(entry->payload_use), std::memory_order_relaxed);
  if (defer_taskrun_ && entry->payload_use.touched > kRingResidentHead) {
    // It goes back into the kernel holding large pages: the sweep returns them if it stays idle.
    int64_t due = entry->payload_use.last_large_ns + kRingTrimAfterNs;
    if (sweep_due_ns_ == 0 || due < sweep_due_ns_) sweep_due_ns_ = due;
  }
}

// Entries waiting in the kernel on our ring after a burst keep their large pages: the kernel
// gives new requests to the most recently committed entry, so the cold ones may not serve again
// for a long time. With DEFER_TASKRUN the kernel copies a request into an entry of this ring only
// inside our io_uring_enter (the task work of the dispatch, or the issue of that entry's
// COMMIT_AND_FETCH), and posts the entry's completion in the same step. So here, between two
// enters, with every SQE submitted, no completion left to reap and none overflowed, an entry
// whose command is still in the kernel has no request in its buffers, and none can arrive until
// our next enter: its pages beyond the head can be returned. Its last reply, which the kernel
// has read already, was below the head (kRingTrimAfterNs without a large payload).
// A busy worker (something to submit or reap) looks again later rather than on every pass: the
// check must cost no system call on the request path, and an idle one finds its ring quiet.
void RingWorker::SweepIdleEntries() {
  if (sweep_due_ns_ == 0 || !defer_taskrun_) return;
  const int64_t now = MonotonicNanos();
  if (now < sweep_due_ns_) return;
  if (io_uring_sq_ready(&ring_) != 0 || io_uring_cq_ready(&ring_) != 0 ||
      io_uring_cq_has_overflow(&ring_)) {
    sweep_due_ns_ = now + kSweepRetryNs;
    return;
  }
  sweep_due_ns_ = 0;
  const size_t count = shared_->registry.size();
  for (size_t id = 0; id < count; ++id) {
    RingEntry* entry = shared_->registry.Get(static_cast<uint32_t>(id));
    if (entry == nullptr || entry->waiting_on.load(std::memory_order_relaxed) != index_ ||
        entry->payload_use.touched <= kRingResidentHead) {
      continue;
    }
    int64_t due = entry->payload_use.last_large_ns + kRingTrimAfterNs;
    if (now >= due && ReturnPayloadPages(entry, now)) continue;
    if (now >= due) due = now + kRingTrimAfterNs;  // madvise failed: try again later
    if (sweep_due_ns_ == 0 || due < sweep_due_ns_) sweep_due_ns_ = due;
  }
}

bool RingWorker::ReturnPayloadPages(RingEntry* entry, int64_t now_ns) {
  std::optional<PayloadRange> trim = PlanPayloadTrim(&entry->payload_use, 0, now_ns);
  if (!trim) return true;
  if (madvise(entry->payload + trim->offset, trim->length, MADV_DONTNEED) != 0) {
    entry->payload_use.touched += trim->length;
    return false;
  }
  WorkerStats::Add(stats_->payload_trims);
  entry->resident_bytes.store(EntryResidentBytes(entry->payload_use), std::memory_order_relaxed);
  return true;
}

void RingWorker::CommitAnswer(RingEntry* entry, const fuse_out_header& header,
                              size_t body_size) {
  std::memcpy(entry->header->in_out, &header, sizeof(header));
  entry->header->ring_ent_in_out.payload_sz = static_cast<uint32_t>(body_size);
  Commit(entry);
}

bool RingWorker::MayExit() const {
  return held_ == 0 && forwarder_->inflight() == 0 && limiter_.queued() == 0 && ready_.empty() &&
         retry_handoffs_.empty() && handoffs_unconfirmed_ == 0 && backend_->send_idle() &&
         backend_->detached() == 0;
}

// A retired worker's thread may end only when nothing can land on its ring any more: a MSG_RING
// a peer aimed at it (under a state that still named it, say one applied a moment before ours)
// would otherwise sit in the completion queue of a ring nobody reads, and Start() closes that
// ring, losing the entry and hanging its request for good. So it withdraws its fd (peers then
// keep their work or route it elsewhere), waits until every send already counted toward it has
// landed, and leaves only with nothing left to reap (HandoffDirectory).
bool RingWorker::ReadyToExit() {
  if (active_ || !allow_exit_ || !MayExit()) return false;
  if (ring_fd_published_) {
    shared_->handoffs.Withdraw(index_);
    ring_fd_published_ = false;
  }
  if (!shared_->handoffs.Quiet(index_)) return false;
  // With DEFER_TASKRUN a peer's MSG_RING toward us is posted by task work that runs only in our
  // own io_uring_enter: run it before deciding nothing has landed.
  if (defer_taskrun_) (void)io_uring_get_events(&ring_);
  return io_uring_cq_ready(&ring_) == 0 && !io_uring_cq_has_overflow(&ring_);
}

void RingWorker::PublishRingFd() {
  if (ring_fd_published_ || !ring_initialized_) return;
  shared_->handoffs.Publish(index_, ring_.ring_fd);
  ring_fd_published_ = true;
}

void RingWorker::PublishGauges() {
  uint32_t inflight = forwarder_ ? forwarder_->inflight() : 0;
  shared_->inflight[index_].store(inflight, std::memory_order_relaxed);
  WorkerStats::Set(stats_->inflight, inflight);
  WorkerStats::Set(stats_->background_inflight, limiter_.inflight());
  WorkerStats::Set(stats_->background_queued, limiter_.queued());
  WorkerStats::Set(stats_->background_inflight_max, limiter_.max_inflight_seen());
  WorkerStats::Set(stats_->entries_held, held_);
  if (backend_) WorkerStats::Set(stats_->reconnects, backend_->reconnects());
}

}  // namespace ringfs::frontend
