#include "frontend/queue_engine.h"

#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "common/cpu_contention.h"
#include "common/log.h"
#include "common/status.h"
#include "frontend/queue/ownership.h"

namespace ringfs::frontend {
namespace {

// Workers apply a change between two batches of completions; this only bounds a wedged one.
constexpr auto kApplyTimeout = std::chrono::seconds(10);

// Every entry the mount can ever have: queues start with fewer and grow up to depth entries each
// (RingWorker::MaybeGrow); the registry's slots are fixed, the entries' memory is not.
size_t EntryCapacity(const queue::Topology& topology, uint32_t depth) {
  return topology.size() * depth;
}

}  // namespace

QueueEngine::QueueEngine(queue::Topology topology, int fuse_fd, Entries entries,
                         BackendFactory backend_factory)
    : shared_(topology, EntryCapacity(topology, entries.depth), entries.payload_bytes),
      entries_(entries),
      backend_factory_(std::move(backend_factory)) {
  shared_.fuse_fd = fuse_fd;
  for (size_t i = 0; i < shared_.topology.size(); ++i) {
    int cpu = shared_.topology.cpus()[i];
    stats_.push_back(std::make_unique<WorkerStats>(shared_.topology.size()));
    workers_.push_back(std::make_unique<RingWorker>(static_cast<int>(i), &shared_,
                                                    stats_.back().get(),
                                                    backend_factory_(cpu), entries_));
  }
}

QueueEngine::~QueueEngine() { Stop(); }

absl::Status QueueEngine::Start(const queue::QueueConfig& config) {
  absl::MutexLock lock(&apply_mu_);
  return ApplyLocked(config, /*initial=*/true);
}

absl::Status QueueEngine::Apply(const queue::QueueConfig& config) {
  absl::MutexLock lock(&apply_mu_);
  return ApplyLocked(config, /*initial=*/false);
}

std::vector<uint64_t> QueueEngine::ResidentBytesByQueue() const {
  std::vector<uint64_t> bytes(shared_.topology.size(), 0);
  shared_.registry.ForEach([&](const RingEntry& entry) {
    int index = shared_.topology.IndexOf(entry.qid);
    if (index >= 0) bytes[index] += entry.resident_bytes.load(std::memory_order_relaxed);
  });
  return bytes;
}

queue::QueueConfig QueueEngine::config() const {
  absl::MutexLock lock(&apply_mu_);
  return config_;
}

absl::Status QueueEngine::ApplyLocked(const queue::QueueConfig& config, bool initial) {
  if (stopped_) {
    // The mount is gone; starting workers now would register on a dead connection.
    return absl::FailedPreconditionError("the mount has ended; the queue engine is stopped");
  }
  const queue::Topology& topology = shared_.topology;
  RETURN_IF_ERROR(queue::Validate(config, topology));
  if (config.worker_priority == queue::WorkerPriority::kIdle && !idle_probed_) {
    idle_probed_ = true;
    // A probe thread that goes SCHED_IDLE and back: a millisecond or so, more on a CPU a
    // compute job keeps busy.
    const bool can_leave_idle = CanLeaveSchedIdle();
    shared_.can_leave_idle.store(can_leave_idle, std::memory_order_release);
    if (!can_leave_idle) {
      RINGFS_LOG_WARN(
          "worker_sched=idle is off: this process could make a ring worker SCHED_IDLE but not "
          "switch it back when other work starves it (it needs CAP_SYS_NICE or an RLIMIT_NICE "
          "of 20); the ring workers run SCHED_OTHER");
    }
  }
  ASSIGN_OR_RETURN(std::vector<int> owners, queue::ComputeOwners(topology, config.active_cpus));

  auto state = std::make_shared<EngineState>();
  state->epoch = state_ ? state_->epoch + 1 : 1;
  state->config = config;
  state->owner_cpu = owners;
  state->active.assign(topology.size(), false);
  for (int cpu : config.active_cpus) state->active[topology.IndexOf(cpu)] = true;
  for (size_t i = 0; i < topology.size(); ++i) {
    state->background_limit.push_back(queue::BackgroundLimitOf(config, topology.cpus()[i]));
  }
  std::shared_ptr<const EngineState> published = state;

  std::vector<bool> was_active(topology.size(), false);
  if (state_) was_active = state_->active;

  // Workers joining the active set: start a thread where none runs. At the first start each
  // owner also registers the entries of the queues it owns (the kernel needs every queue); with
  // reduced queues a worker registers its own queue, the first time it joins.
  for (size_t i = 0; i < topology.size(); ++i) {
    if (!state->active[i] || workers_[i]->running()) continue;
    std::vector<uint16_t> qids;
    if (entries_.reduced_queues) {
      if (shared_.entries[i].registered.load() == 0) {
        qids.push_back(static_cast<uint16_t>(topology.cpus()[i]));
      }
    } else if (initial) {
      for (size_t q = 0; q < topology.size(); ++q) {
        if (owners[q] == topology.cpus()[i]) qids.push_back(static_cast<uint16_t>(topology.cpus()[q]));
      }
    }
    absl::Status started = workers_[i]->Start(published, std::move(qids));
    if (!started.ok()) {
      return absl::UnavailableError(absl::StrFormat("cannot start the worker on CPU %d: %s",
                                                    topology.cpus()[i], started.message()));
    }
  }

  // Every running worker switches to the new state; wait until each has.
  std::vector<std::shared_ptr<std::promise<void>>> acks(topology.size());
  for (size_t i = 0; i < topology.size(); ++i) {
    if (!workers_[i]->running()) continue;
    acks[i] = std::make_shared<std::promise<void>>();
    workers_[i]->Post({RingWorker::Command::Kind::kApplyState, published, acks[i]});
  }
  auto deadline = std::chrono::steady_clock::now() + kApplyTimeout;
  for (size_t i = 0; i < topology.size(); ++i) {
    if (!acks[i]) continue;
    std::future<void> done = acks[i]->get_future();
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (!workers_[i]->running()) break;  // a retired worker that exited: nothing to switch
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrFormat("the worker on CPU %d did not apply the change within %d s",
                            topology.cpus()[i], static_cast<int>(kApplyTimeout.count())));
      }
    }
    if (state->active[i] && !workers_[i]->running()) {
      // It exited after retiring before it saw this change: start it again.
      RETURN_IF_ERROR(workers_[i]->Start(published, {}));
    }
  }
  // Only now, when no worker can still route by the old state, may leavers finish and exit.
  for (size_t i = 0; i < topology.size(); ++i) {
    if (!state->active[i] && workers_[i]->running()) {
      workers_[i]->Post({RingWorker::Command::Kind::kAllowExit, nullptr, nullptr});
    }
  }
  for (size_t i = 0; i < topology.size(); ++i) {
    if (was_active[i] != state->active[i]) {
      RINGFS_LOG_INFO("queue engine: worker on CPU %d %s the active set", topology.cpus()[i],
                      state->active[i] ? "joins" : "leaves");
    }
  }
  state_ = published;
  config_ = config;
  return absl::OkStatus();
}

void QueueEngine::WatchContention() {
  bool any_idle = false;
  if (shared_.can_leave_idle.load(std::memory_order_acquire)) {
    for (auto& worker : workers_)
      any_idle = any_idle || (worker->wants_idle() && worker->tid() != 0);
  }
  absl::StatusOr<std::vector<CpuTimes>> cpus =
      any_idle ? ReadCpuTimes() : absl::StatusOr<std::vector<CpuTimes>>(std::vector<CpuTimes>());
  absl::flat_hash_map<int, const CpuTimes*> by_cpu;
  if (cpus.ok()) {
    for (const CpuTimes& times : *cpus) by_cpu[times.cpu] = &times;
  }
  for (size_t index = 0; index < workers_.size(); ++index) {
    RingWorker& worker = *workers_[index];
    const pid_t tid = worker.tid();
    auto times = by_cpu.find(shared_.topology.cpus()[index]);
    if (tid == 0 || !worker.wants_idle()) {
      worker.SetContended(false);  // nothing to judge: the configuration decides
    } else if (!worker.pinned()) {
      // Not on its CPU (a cpuset without it): neither the same-CPU wake-up nor that CPU's
      // numbers apply, and a starved idle thread is the risk.
      worker.SetContended(true);
    } else if (times != by_cpu.end()) {  // else (unreadable /proc/stat) the last judgement holds
      worker.SetContended(contention_.Update(*times->second, ReadThreadSched(tid)));
    }
    worker.EnforcePolicy();
  }
}

void QueueEngine::Stop() {
  {
    absl::MutexLock lock(&apply_mu_);
    stopped_ = true;
  }
  for (auto& worker : workers_) {
    if (worker->running()) worker->Post({RingWorker::Command::Kind::kStop, nullptr, nullptr});
  }
  for (auto& worker : workers_) worker->Join();
}

}  // namespace ringfs::frontend
