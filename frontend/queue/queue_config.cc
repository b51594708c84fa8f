#include "frontend/queue/queue_config.h"

#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "frontend/queue/ownership.h"

namespace ringfs::frontend::queue {
namespace {

constexpr std::string_view kQueueOptionKeys[] = {"active", "bg_limit",   "fg_policy",   "bg_policy",
                                                 "commit", "thresholds", "worker_sched"};

absl::string_view AbslView(std::string_view text) { return {text.data(), text.size()}; }

absl::StatusOr<uint32_t> ParseBackgroundLimit(std::string_view text) {
  if (text == "unlimited") return BackgroundLimiter::kUnlimited;
  uint64_t limit = 0;
  if (!absl::SimpleAtoi(AbslView(text), &limit) || limit == 0) {
    return absl::InvalidArgumentError("a background limit is a whole number >= 1, or 'unlimited'");
  }
  // Any count beyond what a worker could ever have in flight means the same as unlimited.
  return static_cast<uint32_t>(std::min<uint64_t>(limit, BackgroundLimiter::kUnlimited));
}

absl::StatusOr<Thresholds> ParseThresholds(std::string_view text, Thresholds thresholds) {
  std::vector<absl::string_view> parts = absl::StrSplit(AbslView(text), '/');
  uint32_t values[3] = {};
  bool ok = parts.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) ok = absl::SimpleAtoi(parts[i], &values[i]);
  if (!ok) return absl::InvalidArgumentError("expected LOCAL/NUMA/GLOBAL, e.g. 2/3/4");
  thresholds.local = values[0];
  thresholds.numa = values[1];
  thresholds.global = values[2];
  if (absl::Status valid = ValidateThresholds(thresholds); !valid.ok()) return valid;
  return thresholds;
}

// Applies the option to `config`, or returns why the value is bad (without the option name).
absl::Status ApplyQueueOption(std::string_view key, std::string_view value, QueueConfig* config) {
  if (key == "active") {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuSet(value);
    if (!cpus.ok()) return cpus.status();
    config->active_cpus = std::move(*cpus);
  } else if (key == "bg_limit") {
    absl::StatusOr<uint32_t> limit = ParseBackgroundLimit(value);
    if (!limit.ok()) return limit.status();
    config->background_limit = *limit;
    config->background_limit_by_cpu.clear();
  } else if (key == "fg_policy" || key == "bg_policy") {
    absl::StatusOr<Policy> policy = ParsePolicy(value);
    if (!policy.ok()) return policy.status();
    (key == "fg_policy" ? config->foreground : config->background) = *policy;
  } else if (key == "commit") {
    absl::StatusOr<CommitLocality> commit = ParseCommitLocality(value);
    if (!commit.ok()) return commit.status();
    config->commit = *commit;
  } else if (key == "thresholds") {
    absl::StatusOr<Thresholds> thresholds = ParseThresholds(value, config->thresholds);
    if (!thresholds.ok()) return thresholds.status();
    config->thresholds = *thresholds;
  } else if (key == "worker_sched") {
    if (value == "idle") {
      config->worker_priority = WorkerPriority::kIdle;
    } else if (value == "normal") {
      config->worker_priority = WorkerPriority::kNormal;
    } else {
      return absl::InvalidArgumentError("worker_sched is idle or normal");
    }
  } else {
    return absl::InvalidArgumentError(
        "not a queue option (valid: active, bg_limit, fg_policy, bg_policy, commit, thresholds, "
        "worker_sched)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CommitLocality> ParseCommitLocality(std::string_view name) {
  if (name == "forwarder") return CommitLocality::kForwarder;
  if (name == "origin") return CommitLocality::kOrigin;
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown commit locality '%s' (valid: forwarder, origin)", std::string(name)));
}

const char* CommitLocalityName(CommitLocality commit) {
  return commit == CommitLocality::kOrigin ? "origin" : "forwarder";
}

QueueConfig DefaultQueueConfig(const Topology& topology) {
  QueueConfig config;
  config.active_cpus = topology.cpus();
  return config;
}

uint32_t BackgroundLimitOf(const QueueConfig& config, int cpu) {
  auto it = config.background_limit_by_cpu.find(cpu);
  return it == config.background_limit_by_cpu.end() ? config.background_limit : it->second;
}

absl::Status Validate(const QueueConfig& config, const Topology& topology) {
  if (absl::Status active = ValidateActiveSet(topology, config.active_cpus); !active.ok()) {
    return active;
  }
  if (config.background_limit == 0) {
    return absl::InvalidArgumentError(
        "background limit is 0; it must be at least 1 (use 'unlimited' for no limit)");
  }
  for (const auto& [cpu, limit] : config.background_limit_by_cpu) {
    if (!topology.Contains(cpu)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("background limit for CPU %d, which is not a possible CPU "
                          "(possible: %s)",
                          cpu, FormatCpuList(topology.cpus())));
    }
    if (limit == 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "background limit of CPU %d is 0; it must be at least 1 (use 'unlimited' for no "
          "limit)",
          cpu));
    }
  }
  return ValidateThresholds(config.thresholds);
}

absl::StatusOr<std::vector<int>> ParseCpuSet(std::string_view text) {
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(text);
  if (!cpus.ok()) return cpus.status();
  std::sort(cpus->begin(), cpus->end());
  cpus->erase(std::unique(cpus->begin(), cpus->end()), cpus->end());
  return cpus;
}

bool IsQueueOptionKey(std::string_view key) {
  return std::find(std::begin(kQueueOptionKeys), std::end(kQueueOptionKeys), key) !=
         std::end(kQueueOptionKeys);
}

absl::Status ParseQueueOption(std::string_view key, std::string_view value, QueueConfig* config) {
  QueueConfig updated = *config;  // so that a bad value leaves `config` untouched
  if (absl::Status applied = ApplyQueueOption(key, value, &updated); !applied.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("queue option %s=%s: %s", std::string(key),
                                                      std::string(value), applied.message()));
  }
  *config = std::move(updated);
  return absl::OkStatus();
}

}  // namespace ringfs::frontend::queue
