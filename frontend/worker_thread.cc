#include "frontend/worker_thread.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>

#include "common/log.h"

namespace ringfs::frontend {

absl::Status StartWorkerThread(std::thread* thread, std::function<absl::Status()> setup,
                               std::function<void()> loop) {
  std::promise<absl::Status> started;
  std::future<absl::Status> result = started.get_future();
  *thread = std::thread([&started, setup = std::move(setup), loop = std::move(loop)] {
    absl::Status status = setup();
    bool ok = status.ok();
    started.set_value(std::move(status));  // `started` must not be touched after this
    if (ok) loop();
  });
  absl::Status status = result.get();
  if (!status.ok()) thread->join();
  return status;
}

bool PinCurrentThread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
    RINGFS_LOG_WARN("cannot pin worker to CPU %d (error %d); it runs unpinned", cpu, err);
    return false;
  }
  return true;
}

bool SetThreadIdle(pid_t tid, bool idle) {
  sched_param param{};
  // Linux schedules threads, not processes: a thread id names one thread.
  if (sched_setscheduler(tid, idle ? SCHED_IDLE : SCHED_OTHER, &param) == 0) return true;
  // Once: the mount's stats loop retries every 200 ms (EPERM without CAP_SYS_NICE stays).
  static std::atomic<bool> warned{false};
  if (errno != ESRCH && !warned.exchange(true)) {
    RINGFS_LOG_WARN("cannot make a worker thread %s: %s (logged once)",
                    idle ? "SCHED_IDLE" : "SCHED_OTHER", std::strerror(errno));
  }
  return false;
}

}  // namespace ringfs::frontend
