// Chooses the worker that forwards a request, from the qid owner and a snapshot of per-worker
// load: `local`, `next-core` and `p2c`, after the seed kernel patches. Pure and deterministic
// given the random source; any thread may call it. Allocation-free: it runs per request.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontend/queue/topology.h"

namespace ringfs::frontend::queue {

enum class Policy { kLocal, kNextCore, kP2c };

// "local", "next-core", "p2c"; anything else is InvalidArgument listing the valid names.
absl::StatusOr<Policy> ParsePolicy(std::string_view name);
const char* PolicyName(Policy policy);

// In-flight counts at which a worker counts as busy, per scope. The defaults mirror the seeds'
// FURING_Q_LOCAL/NUMA/GLOBAL_THRESHOLD (2/3/4).
struct Thresholds {
  uint32_t local = 2;              // the owner (p2c) or a next-core candidate is busy at this many
  uint32_t numa = 3;               // p2c's pick within the owner's node is busy at this many
  uint32_t global = 4;             // p2c's pick among all nodes is busy at this many
  uint32_t next_core_retries = 2;  // next-core tries this many workers after the first
};

// Nonzero thresholds with local <= numa <= global; any retry count is valid.
[[nodiscard]] absl::Status ValidateThresholds(const Thresholds& thresholds);

struct WorkerLoad {
  bool active = false;
  uint32_t inflight = 0;  // requests the worker has in flight to the backend (seeds' nr_reqs)
};

// The caller's snapshot at decision time. REQUIRES: workers.size() == Topology::size(),
// indexed like Topology::cpus(). The counts may be slightly stale; that only skews balance.
struct LoadView {
  std::span<const WorkerLoad> workers;
};

// Returns the CPU of the worker that should forward a request whose qid is owned by
// `owner_cpu`:
//  - local: the owner.
//  - next-core: walks the owner's node's active CPUs in CPU order, starting after the owner and
//    wrapping (so the owner itself comes last); the first below thresholds.local wins; at most
//    1 + next_core_retries are tried, and if none is below, the least loaded tried (ties: the
//    first tried). A node whose only active CPU is the owner yields the owner.
//  - p2c: the owner if below thresholds.local; else the less loaded of two distinct random
//    active CPUs of the owner's node (ties: the first drawn) if below thresholds.numa; else the
//    same over all active CPUs with thresholds.global; else the least loaded of everything
//    considered (ties: the owner, then the earlier considered).
// REQUIRES: owner_cpu is active in `load`. An owner unknown to `topology` is returned as is.
// `random_bits` yields uniform 64-bit values; only p2c draws from it.
int ChooseWorkerWithRandomBits(Policy policy, int owner_cpu, const Topology& topology,
                               const LoadView& load, const Thresholds& thresholds,
                               absl::FunctionRef<uint64_t()> random_bits);

// Same, drawing from a 64-bit generator such as absl::BitGen or a seeded std::mt19937_64.
template <typename Rng>
int ChooseWorker(Policy policy, int owner_cpu, const Topology& topology, const LoadView& load,
                 const Thresholds& thresholds, Rng& rng) {
  static_assert(Rng::min() == 0 && Rng::max() == UINT64_MAX,
                "ChooseWorker needs a generator of full-range 64-bit values");
  return ChooseWorkerWithRandomBits(policy, owner_cpu, topology, load, thresholds,
                                    [&rng]() -> uint64_t { return rng(); });
}

}  // namespace ringfs::frontend::queue
