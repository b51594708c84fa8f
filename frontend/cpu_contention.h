// Whether other work keeps a CPU busy, judged from /proc/stat, so that a ring worker pinned to
// it stops running SCHED_IDLE there (queue::WorkerPriority).
// Why: a SCHED_IDLE thread gets almost no CPU while a SCHED_OTHER thread is runnable on its CPU.
// With a CPU-bound job on every CPU (a compute node's normal state) each request then waited
// for the job's thread to give the CPU up: measured 7-9 ms per file created with one hog per
// CPU against 0.5-0.8 ms with SCHED_OTHER workers or classic /dev/fuse, and 100-300 ms per
// request in it_coherence. The worker only needs SCHED_IDLE to have the kernel wake its caller
// on the same CPU instead of an idle one; with no idle CPU there is nothing to gain.
// Judged per CPU over each sampling interval: the CPU's busy time (user, nice, system, irq,
// softirq, steal) minus the worker's own CPU time, as a share of the interval. Contended from
// kEnter on, no longer below kLeave (the gap keeps a CPU near the line from flapping).
// Not thread-safe: one caller (the mount's stats loop).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace ringfs::frontend {

struct CpuTimes {
  int cpu = 0;
  uint64_t busy_ns = 0;   // user, nice, system, irq, softirq, steal
  uint64_t total_ns = 0;  // busy plus idle and iowait
};

// The per-CPU lines ("cpuN ...") of /proc/stat. `ticks_per_second`: USER_HZ.
absl::StatusOr<std::vector<CpuTimes>> ParseProcStat(std::string_view text,
                                                     uint64_t ticks_per_second);

class CpuContention {
 public:
  static constexpr double kEnter = 0.5;
  static constexpr double kLeave = 0.25;
  // Intervals shorter than this keep the last judgement (/proc/stat counts 10 ms ticks).
  static constexpr uint64_t kMinIntervalNs = 100'000'000;

  // `times`: the CPU's counters now; `worker_ns`: the CPU time of the worker pinned to it so far
  // (0 if none). Returns whether the CPU is contended now; the first sample of a CPU is not.
  bool Update(const CpuTimes& times, uint64_t worker_ns);

 private:
  struct State {
    CpuTimes last;
    uint64_t last_worker_ns = 0;
    bool contended = false;
  };
  absl::flat_hash_map<int, State> cpus_;
};

}  // namespace ringfs::frontend
