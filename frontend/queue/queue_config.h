// The runtime-tunable settings of the queue engine, their validation against the machine's
// Topology, and their mount-option syntax. Plain data and pure functions; any thread may call
// them. A changed config is applied by the workers through their mailboxes, not written here.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontend/queue/background_limiter.h"
#include "frontend/queue/placement.h"
#include "frontend/queue/topology.h"

namespace ringfs::frontend::queue {

// Which ring commits a forwarded request's reply.
enum class CommitLocality {
  kForwarder,  // the forwarding worker's ring; the entry migrates to it
  kOrigin,     // handed back to the ring that received it, so the kernel completes the request
               // on the CPU where the application waits (seed: "wake on the same cpu")
};

absl::StatusOr<CommitLocality> ParseCommitLocality(std::string_view name);  // forwarder|origin
const char* CommitLocalityName(CommitLocality commit);

// The scheduling policy of the ring workers (mount option worker_sched=).
// Why idle by default: the kernel wakes the application from the committing worker's syscall,
// while that worker still runs on the application's CPU. The scheduler then takes the CPU for
// busy and moves the application to another, idle CPU: a cross-CPU wake-up and a migration on
// every request (measured: one migration per request at QD1; on this VM a cross-CPU wake costs
// 20-100 us). A SCHED_IDLE worker's CPU counts as idle for wake-up placement
// (select_idle_sibling's sched_idle_cpu), so the application is woken where it was and
// preempts the worker at once; the worker runs again when the application blocks on its next
// request. This is the seed patches' "wake the waiter on the same core", done from user space.
// Measured with fio 4k randread QD1 (README, Benchmark): about 2x the IOPS; also under CPU
// hogs on every CPU (the worker still ran promptly: a worker woken for a request has nothing
// else to wait for on a CPU whose caller just blocked). kNormal keeps SCHED_OTHER.
enum class WorkerPriority { kIdle, kNormal };

struct QueueConfig {
  std::vector<int> active_cpus;  // CPUs that run workers; see ValidateActiveSet
  // Background limit of every worker without an entry in background_limit_by_cpu.
  uint32_t background_limit = BackgroundLimiter::kUnlimited;
  std::map<int, uint32_t> background_limit_by_cpu;  // per-worker overrides
  // Every policy is allowed for both classes. Foreground next-core/p2c move work off the
  // caller's CPU, which costs a handoff on an idle machine; measure before choosing them.
  Policy foreground = Policy::kLocal;
  // Local measured better than next-core on this 2-CPU VM (tests/bench/queue_policies.sh): a
  // handoff wakes the other CPU, which costs more than it saves when the owner is not saturated.
  Policy background = Policy::kLocal;
  Thresholds thresholds;
  CommitLocality commit = CommitLocality::kForwarder;
  WorkerPriority worker_priority = WorkerPriority::kIdle;
};

// Every possible CPU active, no background limit, default policies.
QueueConfig DefaultQueueConfig(const Topology& topology);

// The effective background limit of the worker on `cpu`.
uint32_t BackgroundLimitOf(const QueueConfig& config, int cpu);

// InvalidArgument with a message naming the problem: active set (empty, unknown CPU, duplicate),
// a background limit of 0 or for a CPU that is not possible, thresholds.
[[nodiscard]] absl::Status Validate(const QueueConfig& config, const Topology& topology);

// "0,2-3" -> {0, 2, 3}: sorted, duplicates merged (it is a set). Malformed is InvalidArgument.
absl::StatusOr<std::vector<int>> ParseCpuSet(std::string_view text);

// True for the keys ParseQueueOption handles: active, bg_limit, fg_policy, bg_policy, commit,
// thresholds. Lets the mount-option parser route options here.
bool IsQueueOptionKey(std::string_view key);

// Applies one mount option to `config`:
//   active=0-1  bg_limit=N|unlimited (all workers; clears per-worker overrides)
//   fg_policy=local|next-core|p2c  bg_policy=...  commit=forwarder|origin
//   thresholds=LOCAL/NUMA/GLOBAL (e.g. 2/3/4)
// Checks only the syntax (and what needs no Topology); call Validate() once all are applied.
// Errors name the option: "queue option bg_limit=0: ...". `config` is unchanged on error.
[[nodiscard]] absl::Status ParseQueueOption(std::string_view key, std::string_view value,
                                            QueueConfig* config);

}  // namespace ringfs::frontend::queue
