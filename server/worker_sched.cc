#include "server/worker_sched.h"

#include <dirent.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/log.h"

namespace ringfs::server {
namespace {

// The io-wq threads of this process (the kernel names them "iou-wrk-<submitter's tid>", in the
// init PID namespace, so the name cannot be matched to a worker inside a container). They are
// made with the policy of the worker that punts work to them and keep it, and (seen on Linux
// 6.18) the affinity it had then: one made while its worker was SCHED_IDLE would stay idle
// beside a CPU hog. So they are all kept SCHED_OTHER.
void KeepIoWorkersNormal() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/self/task/%s/comm", entry->d_name);
    FILE* file = std::fopen(path, "re");
    if (file == nullptr) continue;
    char comm[32] = {};
    const bool read = std::fgets(comm, sizeof(comm), file) != nullptr;
    std::fclose(file);
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (read && std::strncmp(comm, "iou-wrk-", 8) == 0 && sched_getscheduler(tid) == SCHED_IDLE) {
      SetThreadIdle(tid, false);
    }
  }
  closedir(dir);
}

}  // namespace

void WorkerSchedWatch::Start() {
  idle_.assign(workers_.size(), -1);
  thread_ = std::thread([this] {
    do {
      Update();
    } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  });
}

void WorkerSchedWatch::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  // The workers close their connections next: not as idle threads beside a busy CPU.
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (idle_[i] == 1 && workers_[i]->tid() != 0) SetThreadIdle(workers_[i]->tid(), false);
  }
}

void WorkerSchedWatch::Update() {
  if (idle_.size() != workers_.size()) idle_.assign(workers_.size(), -1);
  if (judged_cpu_.size() != workers_.size()) judged_cpu_.assign(workers_.size(), -1);
  bool any = false;
  for (Worker* worker : workers_) any = any || worker->colocated_cpu() >= 0;
  absl::StatusOr<std::vector<CpuTimes>> cpus =
      any ? ReadCpuTimes() : absl::StatusOr<std::vector<CpuTimes>>(std::vector<CpuTimes>());
  absl::flat_hash_map<int, const CpuTimes*> by_cpu;
  if (cpus.ok()) {
    for (const CpuTimes& times : *cpus) by_cpu[times.cpu] = &times;
  }
  bool idle_now = false;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& worker = *workers_[i];
    const pid_t tid = worker.tid();
    if (tid == 0) {
      idle_[i] = -1;  // not running (yet, or any more): nothing to change
      continue;
    }
    const int cpu = worker.colocated_cpu();
    if (cpu != judged_cpu_[i]) {
      // Another CPU, or none: what was sampled before says nothing about the next interval.
      if (judged_cpu_[i] >= 0) contention_.Forget(judged_cpu_[i]);
      judged_cpu_[i] = cpu;
    }
    bool idle = cpu >= 0 && !gave_up_;
    auto times = by_cpu.find(cpu);
    if (idle && times != by_cpu.end()) {
      idle = !contention_.Update(*times->second, ReadThreadSched(tid));
    } else if (idle) {
      idle = idle_[i] == 1;  // /proc/stat unreadable: the last judgement holds
    }
    if (idle_[i] == -1 && !idle) {
      idle_[i] = 0;  // never made idle by us: whatever policy it was given stays
    } else if (idle_[i] != static_cast<int>(idle)) {
      if (SetThreadIdle(tid, idle)) {
        RINGFS_LOG_DEBUG("worker %u: %s", i, idle ? "SCHED_IDLE" : "SCHED_OTHER");
        idle_[i] = idle;
        worker.set_sched_idle(idle);
      } else if (!idle && !gave_up_) {
        // It cannot come back (a right lost since the start-up check): make no other idle.
        RINGFS_LOG_ERROR("worker %u cannot leave SCHED_IDLE; no worker is made idle any more", i);
        gave_up_ = true;
      }
    }
    idle_now = idle_now || idle_[i] == 1;
  }
  // While a worker is idle, and one round after, so that threads made just before it left
  // idle are seen too.
  if (idle_now || io_workers_to_check_) KeepIoWorkersNormal();
  io_workers_to_check_ = idle_now;
}

}  // namespace ringfs::server
