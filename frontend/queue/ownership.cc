#include "frontend/queue/ownership.h"

#include <cstdlib>

#include "absl/strings/str_format.h"

namespace ringfs::frontend::queue {
namespace {

// True when `candidate` is strictly nearer to `target` than `best` (-1 = nothing yet).
bool IsNearer(int candidate, int best, int target) {
  if (best < 0) return true;
  const int candidate_distance = std::abs(candidate - target);
  const int best_distance = std::abs(best - target);
  return candidate_distance < best_distance ||
         (candidate_distance == best_distance && candidate < best);
}

}  // namespace

absl::Status ValidateActiveSet(const Topology& topology, const std::vector<int>& active_cpus) {
  if (active_cpus.empty()) return absl::InvalidArgumentError("active CPU set is empty");
  std::vector<bool> seen(topology.size(), false);
  for (int cpu : active_cpus) {
    const int index = topology.IndexOf(cpu);
    if (index < 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("active CPU %d is not a possible CPU (possible: %s)", cpu,
                          FormatCpuList(topology.cpus())));
    }
    if (seen[index]) {
      return absl::InvalidArgumentError(absl::StrFormat("active CPU %d is listed twice", cpu));
    }
    seen[index] = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ComputeOwners(const Topology& topology,
                                               const std::vector<int>& active_cpus) {
  if (absl::Status valid = ValidateActiveSet(topology, active_cpus); !valid.ok()) return valid;
  std::vector<int> owners(topology.size(), -1);
  for (size_t i = 0; i < topology.size(); ++i) {
    const int queue_cpu = topology.cpus()[i];
    const int queue_node = topology.node_of_cpu_index()[i];
    int nearest_in_node = -1;
    int nearest_anywhere = -1;
    for (int active : active_cpus) {
      if (IsNearer(active, nearest_anywhere, queue_cpu)) nearest_anywhere = active;
      if (topology.NodeOf(active) == queue_node && IsNearer(active, nearest_in_node, queue_cpu)) {
        nearest_in_node = active;
      }
    }
    // An active queue CPU is at distance 0, so it owns itself through the same rule.
    owners[i] = nearest_in_node >= 0 ? nearest_in_node : nearest_anywhere;
  }
  return owners;
}

}  // namespace ringfs::frontend::queue
