// The scheduling policy of the server's workers. A worker pinned to the CPU of a mount on this
// host that it serves (cpu_placement.h) runs SCHED_IDLE, as that mount's ring worker on the
// same CPU does, so that when the mount wakes its caller the kernel counts the CPU as free and
// keeps the caller there instead of moving it to another CPU on every request (tar: about one
// migration per file before; README, "A server on the same host"). It runs SCHED_OTHER while
// other work starves it on its CPU (common/cpu_contention.h, judged every 200 ms as the mount
// judges its own workers) and while it serves no such mount; a worker never made idle keeps
// whatever policy it was started with. The io-wq threads always run SCHED_OTHER. Not started
// with --worker-sched normal, or when the process could not switch a thread back
// (CanLeaveSchedIdle). Owns one thread; Start() once after the workers started, Stop() before
// they stop.
#pragma once

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/cpu_contention.h"
#include "server/worker.h"

namespace ringfs::server {

class WorkerSchedWatch {
 public:
  // `workers` outlive the watch; only pinned ones are looked at.
  explicit WorkerSchedWatch(std::vector<Worker*> workers) : workers_(std::move(workers)) {}
  ~WorkerSchedWatch() { Stop(); }

  void Start();
  void Stop();

 private:
  // One round: judge each co-located worker and apply its policy.
  void Update();

  std::vector<Worker*> workers_;
  std::vector<int> idle_;  // per worker: 1 SCHED_IDLE, 0 SCHED_OTHER, -1 not set by us yet
  std::vector<int> judged_cpu_;  // per worker: the CPU contention_ judged it on last (-1: none)
  bool io_workers_to_check_ = false;
  bool gave_up_ = false;  // a worker could not leave SCHED_IDLE: none is made idle again
  CpuContention contention_;
  std::thread thread_;
  absl::Notification stop_;
};

}  // namespace ringfs::server
