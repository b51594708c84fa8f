// Which worker owns each kernel queue: the active CPU nearest to the queue's CPU, same NUMA node
// first. Pure functions of (Topology, active set); any thread may call them. The result is
// recomputed whenever the active set changes and then read by every worker.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "frontend/queue/topology.h"

namespace ringfs::frontend::queue {

// InvalidArgument naming the problem when `active_cpus` is empty, lists a CPU that is not
// possible, or lists a CPU twice. Order does not matter.
[[nodiscard]] absl::Status ValidateActiveSet(const Topology& topology,
                                             const std::vector<int>& active_cpus);

// owners[i] is the CPU of the worker that owns kernel queue topology.cpus()[i]: the CPU itself
// when active; else the nearest active CPU of its node; else the nearest active CPU anywhere.
// Nearest = smallest |cpu - queue cpu|, ties to the lower CPU number (deterministic, so every
// worker computes the same map).
absl::StatusOr<std::vector<int>> ComputeOwners(const Topology& topology,
                                               const std::vector<int>& active_cpus);

}  // namespace ringfs::frontend::queue
