// Whether a worker pinned to a CPU and running SCHED_IDLE there is starved, so that it stops
// running SCHED_IDLE, and when the CPU is quiet enough for it to go back. Used for the mount's
// ring workers (queue::WorkerPriority) and the server's workers that serve a mount on their
// own CPU (server/cpu_placement.h). Also the two scheduling calls both make.
// Why: a SCHED_IDLE thread gets almost no CPU while a SCHED_OTHER thread is runnable on its CPU.
// With a CPU-bound job on every CPU (a compute node's normal state) each request then waited
// for the job's thread to give the CPU up: measured 7-9 ms per file created with one hog per
// CPU against 0.5-0.8 ms with SCHED_OTHER workers or classic /dev/fuse, and 100-300 ms per
// request in it_coherence.
// Entering: the worker's own schedstat says it waited, on average, at least kStarvedWaitNs to
// run each time it ran during the interval, or it did not run at all while it is runnable now. Its
// caller preempting it at the commit (what the idle policy is for) costs what the caller computes
// before its next request: microseconds for an I/O-bound caller, which keeps its worker SCHED_IDLE;
// a caller computing milliseconds between requests flips it, which costs little next to those
// milliseconds. A CPU-bound job beside them costs milliseconds and more. Leaving: the CPU's busy
// time (user, nice, system, irq, softirq, steal; /proc/stat) minus the worker's own share fell
// below kLeave of the interval. Judged per CPU, every sampling interval. CpuContention is not
// thread-safe: one caller per instance (the mount's stats loop, the server's WorkerSchedWatch).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace ringfs {

struct CpuTimes {
  int cpu = 0;
  uint64_t busy_ns = 0;   // user, nice, system, irq, softirq: work in this CPU's run queue
  uint64_t total_ns = 0;  // busy plus idle, iowait and steal
};

// The per-CPU lines ("cpuN ...") of /proc/stat. `ticks_per_second`: USER_HZ.
absl::StatusOr<std::vector<CpuTimes>> ParseProcStat(std::string_view text,
                                                    uint64_t ticks_per_second);

// A thread's /proc/.../schedstat: time run, time spent runnable waiting to run, times run (the
// kernel adds a wait to run_delay only once the thread gets to run); and from its stat file
// whether it is runnable right now.
struct ThreadSched {
  uint64_t cpu_ns = 0;
  uint64_t run_delay_ns = 0;
  uint64_t runs = 0;
  bool runnable = false;
};
absl::StatusOr<ThreadSched> ParseSchedstat(std::string_view text);
// The state letter of a /proc/.../stat line ('R', 'S', ...); 0 when malformed.
char ParseTaskState(std::string_view stat);

// The same read from /proc: every CPU's times; thread `tid` of this process (zeros for what
// cannot be read: a thread that just ended, or CONFIG_SCHED_INFO=n, where only `runnable` tells).
absl::StatusOr<std::vector<CpuTimes>> ReadCpuTimes();
ThreadSched ReadThreadSched(pid_t tid);

// Pins the calling thread; false on failure (CPU offline, outside the process's cpuset), which is
// logged.
bool PinCurrentThread(int cpu);

// Makes thread `tid` of this process (0: the calling thread) SCHED_IDLE (`idle`) or
// SCHED_OTHER; false on failure, the first of which is logged unless the thread has ended
// (ESRCH). Why workers run idle: README, "Why the ring workers run SCHED_IDLE".
bool SetThreadIdle(pid_t tid, bool idle);

// Whether a thread of this process can switch from SCHED_IDLE back to SCHED_OTHER (it needs
// CAP_SYS_NICE in the initial user namespace, or an RLIMIT_NICE that allows its nice value;
// going idle needs neither, so without this a thread made idle stays idle). Tried on a
// throwaway thread, after raising the soft RLIMIT_NICE to the hard one.
bool CanLeaveSchedIdle();

class CpuContention {
 public:
  static constexpr uint64_t kStarvedWaitNs = 1'000'000;
  static constexpr double kLeave = 0.25;
  // Intervals shorter than this keep the last judgement (/proc/stat counts 10 ms ticks).
  static constexpr uint64_t kMinIntervalNs = 100'000'000;

  // `times`: the CPU's counters now; `worker`: the schedstat of the worker pinned to it so far
  // (zeros if none). Returns whether the worker should leave SCHED_IDLE now; the first sample of a
  // CPU says no.
  bool Update(const CpuTimes& times, const ThreadSched& worker);
  // Forgets the CPU: its next Update is a first sample again (the worker there changed).
  void Forget(int cpu) { cpus_.erase(cpu); }

 private:
  struct State {
    CpuTimes last;
    ThreadSched last_worker;
    bool contended = false;
  };
  absl::flat_hash_map<int, State> cpus_;
};

}  // namespace ringfs
