// A FUSE-over-io_uring worker of the queue engine: one thread pinned to one CPU, owning one
// io_uring that carries the ring entries it holds and its backend connection.
// An entry's request is routed by the placement policy: forwarded here, or handed to another
// worker's ring with IORING_OP_MSG_RING (that worker forwards and commits it, so the entry moves
// to its ring). Background requests pass this worker's BackgroundLimiter; foreground ones never
// wait behind them. A worker leaving the active set takes no new backend work, finishes what it
// has, and its thread ends only once it holds no entry and the engine allows it.
// Threads: Start/Post/Join from the engine (control) thread; everything else on the worker's own.
#pragma once

#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <liburing.h>

#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "frontend/backend_channel.h"
#include "frontend/completion_tags.h"
#include "frontend/engine_state.h"
#include "frontend/forwarder.h"
#include "frontend/queue/background_limiter.h"
#include "frontend/worker_stats.h"

namespace ringfs::frontend {

class RingWorker : public ReplySink {
 public:
  struct Command {
    enum class Kind { kApplyState, kAllowExit, kStop } kind;
    std::shared_ptr<const EngineState> state;
    std::shared_ptr<std::promise<void>> done;
  };

  // A queue this worker registers starts with `entries.initial_depth` entries and grows while
  // its callers keep all of them busy (MaybeGrow), up to `entries.depth`.
  RingWorker(int cpu_index, EngineShared* shared, WorkerStats* stats, BackendConfig backend,
             const EntriesConfig& entries);
  ~RingWorker() override;

  // Starts the thread; it registers `initial_depth` new entries for each qid in `register_qids`.
  absl::Status Start(std::shared_ptr<const EngineState> state,
                     std::vector<uint16_t> register_qids);
  void Post(Command command);
  // True while the thread runs.
  bool running() const { return running_.load(std::memory_order_acquire); }
  // The thread's id while it runs, else 0. Any thread.
  pid_t tid() const { return tid_.load(std::memory_order_acquire); }
  // The configuration asks for SCHED_IDLE. Any thread.
  bool wants_idle() const { return wants_idle_.load(std::memory_order_acquire); }
  // The thread could be pinned to its CPU. Any thread.
  bool pinned() const { return pinned_.load(std::memory_order_acquire); }
  // The worker is starved on its CPU (CpuContention): it then runs SCHED_OTHER even when the
  // configuration asks for SCHED_IDLE. Any thread; applied by the next EnforcePolicy.
  void SetContended(bool contended) { contended_.store(contended, std::memory_order_release); }
  // Makes the thread's policy what the configuration and contention ask for, if it is not
  // already. Any thread (the mount's stats loop calls it, so a change missed in a race with
  // ApplyState is put right at the next call).
  void EnforcePolicy() ABSL_LOCKS_EXCLUDED(policy_mu_);
  void Join();

  void OnReply(uint32_t slot, const fuse_out_header& header, size_t body_size,
               ReplyOrigin origin) override;
  void OnTick() override {
    // Not while retiring: a worker on its way out may exit before its channel sent them.
    if (forwarder_ && active_ && !stopping_) forwarder_->OnTick();
  }

 private:
  absl::Status Setup(std::vector<uint16_t> register_qids);
  void Loop();
  void DrainMailbox();
  void ApplyState(std::shared_ptr<const EngineState> state);
  void ArmWake();

  void OnEntryCompletion(RingEntry* entry, int res);
  void OnHandoff(RingEntry* entry, HandoffKind kind);
  void Route(RingEntry* entry);
  void Dispatch(RingEntry* entry);
  void Forward(RingEntry* entry);
  void Complete(RingEntry* entry);
  void Commit(RingEntry* entry);
  void CommitAnswer(RingEntry* entry, const fuse_out_header& header, size_t body_size);
  void HandOff(RingEntry* entry, int target_index, HandoffKind kind);
  void SubmitCmd(RingEntry* entry, fuse::UringCmd cmd);
  // Creates an entry for `qid` and registers it on this ring. REQUIRES: counted in `registered`.
  absl::Status RegisterNewEntry(uint16_t qid);
  void MaybeGrow(uint16_t qid);
  void TrimPayload(RingEntry* entry);
  void SweepIdleEntries();
  bool ReturnPayloadPages(RingEntry* entry, int64_t now_ns);
  io_uring_sqe* NextSqe();
  bool MayExit() const;
  bool ReadyToExit();
  void PublishRingFd();
  void PublishGauges();

  const int index_;  // position in Topology::cpus()
  const int cpu_;
  EngineShared* shared_;
  WorkerStats* stats_;
  BackendConfig backend_config_;
  const uint32_t depth_;
  const uint32_t initial_depth_;
  const bool return_idle_pages_;

  io_uring ring_{};
  bool ring_initialized_ = false;
  UniqueFd wake_fd_;
  uint64_t wake_value_ = 0;
  std::unique_ptr<BackendChannel> backend_;
  std::optional<BackendRequestChannel> channel_;  // backend_ as the forwarder sees it
  std::optional<Forwarder> forwarder_;            // made with the channel in Setup
  queue::BackgroundLimiter limiter_;
  std::shared_ptr<const EngineState> state_;
  // The configuration asks for SCHED_IDLE (queue::WorkerPriority); other work keeps our CPU
  // busy (SetContended). The thread runs SCHED_IDLE only with the first and not the second.
  std::atomic<bool> wants_idle_{false};
  std::atomic<bool> contended_{false};
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> pinned_{false};  // the thread runs on its CPU only (PinCurrentThread)
  absl::Mutex policy_mu_;            // EnforcePolicy, from either thread
  // The ring runs its task work only inside our io_uring_enter (IORING_SETUP_DEFER_TASKRUN), so
  // between two enters nothing is copied into the entries waiting on it (SweepIdleEntries).
  bool defer_taskrun_ = false;
  // When an entry waiting on our ring may next have large-payload pages to return; 0: none.
  int64_t sweep_due_ns_ = 0;
  bool active_ = false;
  bool allow_exit_ = false;
  bool stopping_ = false;
  uint32_t held_ = 0;       // entries registered on this ring or being processed here
  uint32_t handoffs_unconfirmed_ = 0;  // our MSG_RINGs whose completion we have not reaped
  bool ring_fd_published_ = false;     // shared_->handoffs names our ring (ReadyToExit)
  std::vector<RingEntry*> ready_;  // background requests the limiter let go, to forward
  std::vector<std::pair<RingEntry*, HandoffKind>> retry_handoffs_;
  std::vector<queue::WorkerLoad> load_scratch_;
  std::mt19937_64 rng_;

  absl::Mutex mailbox_mu_;
  std::deque<Command> mailbox_ ABSL_GUARDED_BY(mailbox_mu_);

  std::thread thread_;
  std::atomic<bool> running_{false};
};

}  // namespace ringfs::frontend
