#include "frontend/queue/placement.h"

#include "absl/strings/str_format.h"

namespace ringfs::frontend::queue {
namespace {

constexpr struct {
  Policy policy;
  const char* name;
} kPolicyNames[] = {
    {Policy::kLocal, "local"},
    {Policy::kNextCore, "next-core"},
    {Policy::kP2c, "p2c"},
};

const WorkerLoad& LoadOf(const Topology& topology, const LoadView& load, int cpu) {
  return load.workers[topology.IndexOf(cpu)];
}

size_t CountActive(std::span<const int> cpus, const Topology& topology, const LoadView& load) {
  size_t count = 0;
  for (int cpu : cpus) count += LoadOf(topology, load, cpu).active ? 1 : 0;
  return count;
}

// REQUIRES: rank < CountActive(cpus, ...).
int NthActive(std::span<const int> cpus, size_t rank, const Topology& topology,
              const LoadView& load) {
  for (int cpu : cpus) {
    if (LoadOf(topology, load, cpu).active && rank-- == 0) return cpu;
  }
  return -1;
}

// The less loaded of two distinct random active CPUs among `cpus` (ties: the first drawn); the
// only one when there is one; -1 when there is none. Modulo bias is < n / 2^64: irrelevant.
int BestOfTwoRandom(std::span<const int> cpus, const Topology& topology, const LoadView& load,
                    absl::FunctionRef<uint64_t()> random_bits) {
  const size_t active = CountActive(cpus, topology, load);
  if (active == 0) return -1;
  if (active == 1) return NthActive(cpus, 0, topology, load);
  const size_t first_rank = random_bits() % active;
  size_t second_rank = random_bits() % (active - 1);
  if (second_rank >= first_rank) ++second_rank;  // distinct from the first, still uniform
  const int first = NthActive(cpus, first_rank, topology, load);
  const int second = NthActive(cpus, second_rank, topology, load);
  const bool second_is_less_loaded =
      LoadOf(topology, load, second).inflight < LoadOf(topology, load, first).inflight;
  return second_is_less_loaded ? second : first;
}

int ChooseNextCore(int owner_cpu, const Topology& topology, const LoadView& load,
                   const Thresholds& thresholds) {
  const std::span<const int> node_cpus = topology.CpusOfNode(topology.NodeOf(owner_cpu));
  size_t owner_position = 0;
  while (node_cpus[owner_position] != owner_cpu) ++owner_position;

  const uint64_t max_tries = uint64_t{thresholds.next_core_retries} + 1;
  uint64_t tried = 0;
  int least_loaded = owner_cpu;
  uint32_t least_inflight = UINT32_MAX;
  for (size_t step = 1; step <= node_cpus.size() && tried < max_tries; ++step) {
    const int cpu = node_cpus[(owner_position + step) % node_cpus.size()];
    const WorkerLoad& worker = LoadOf(topology, load, cpu);
    if (!worker.active) continue;
    ++tried;
    if (worker.inflight < thresholds.local) return cpu;
    if (worker.inflight < least_inflight) {
      least_loaded = cpu;
      least_inflight = worker.inflight;
    }
  }
  return least_loaded;
}

int ChooseP2c(int owner_cpu, const Topology& topology, const LoadView& load,
              const Thresholds& thresholds, absl::FunctionRef<uint64_t()> random_bits) {
  if (LoadOf(topology, load, owner_cpu).inflight < thresholds.local) return owner_cpu;
  int least_loaded = owner_cpu;
  const struct {
    std::span<const int> cpus;
    uint32_t threshold;
  } scopes[] = {
      {topology.CpusOfNode(topology.NodeOf(owner_cpu)), thresholds.numa},
      {topology.cpus(), thresholds.global},
  };
  for (const auto& scope : scopes) {
    const int pick = BestOfTwoRandom(scope.cpus, topology, load, random_bits);
    if (pick < 0) continue;
    const uint32_t inflight = LoadOf(topology, load, pick).inflight;
    if (inflight < scope.threshold) return pick;
    if (inflight < LoadOf(topology, load, least_loaded).inflight) least_loaded = pick;
  }
  return least_loaded;
}

}  // namespace

absl::StatusOr<Policy> ParsePolicy(std::string_view name) {
  for (const auto& entry : kPolicyNames) {
    if (name == entry.name) return entry.policy;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown placement policy '%s' (valid: local, next-core, p2c)", std::string(name)));
}

const char* PolicyName(Policy policy) {
  for (const auto& entry : kPolicyNames) {
    if (policy == entry.policy) return entry.name;
  }
  return "unknown";
}

absl::Status ValidateThresholds(const Thresholds& thresholds) {
  if (thresholds.local == 0 || thresholds.numa == 0 || thresholds.global == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("thresholds must be at least 1 (got %d/%d/%d)", thresholds.local,
                        thresholds.numa, thresholds.global));
  }
  if (thresholds.local > thresholds.numa || thresholds.numa > thresholds.global) {
    return absl::InvalidArgumentError(
        absl::StrFormat("thresholds must satisfy local <= numa <= global (got %d/%d/%d)",
                        thresholds.local, thresholds.numa, thresholds.global));
  }
  return absl::OkStatus();
}

int ChooseWorkerWithRandomBits(Policy policy, int owner_cpu, const Topology& topology,
                               const LoadView& load, const Thresholds& thresholds,
                               absl::FunctionRef<uint64_t()> random_bits) {
  if (!topology.Contains(owner_cpu)) return owner_cpu;
  switch (policy) {
    case Policy::kLocal:
      return owner_cpu;
    case Policy::kNextCore:
      return ChooseNextCore(owner_cpu, topology, load, thresholds);
    case Policy::kP2c:
      return ChooseP2c(owner_cpu, topology, load, thresholds, random_bits);
  }
  return owner_cpu;
}

}  // namespace ringfs::frontend::queue
