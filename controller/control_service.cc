#include "controller/control_service.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "absl/strings/str_format.h"
#include "common/rpc/endpoint.h"
#include "common/rpc/grpc_serving.h"
#include "common/rpc/rpc_status.h"
#include "common/status.h"
#include "controller/fuse_flag_names.h"
#include "frontend/fusectl.h"
#include "frontend/queue/ownership.h"
#include "frontend/stats_snapshot.h"

namespace ringfs::controller {
namespace {

namespace queue = frontend::queue;
using frontend::QueueEngine;
using frontend::WorkerState;

constexpr uint32_t kDefaultWatchIntervalMs = 1000;
constexpr uint32_t kMinWatchIntervalMs = 100;
// A watch notices a cancelled client or a shutdown within this long.
constexpr auto kWatchPollSlice = std::chrono::milliseconds(50);

// The wire says 0 for unlimited; the engine says BackgroundLimiter::kUnlimited.
uint64_t LimitToWire(uint64_t limit) {
  return limit >= queue::BackgroundLimiter::kUnlimited ? 0 : limit;
}

const char* WorkerStateName(uint32_t state) {
  switch (static_cast<WorkerState>(state)) {
    case WorkerState::kActive:
      return "active";
    case WorkerState::kRetiring:
      return "retiring";
    case WorkerState::kStopped:
      return "stopped";
  }
  return "unknown";
}

// A CPU number from the wire; the engine's validation names unknown CPUs, this only keeps
// values that do not fit an int from wrapping into some other CPU.
absl::StatusOr<int> CpuFromWire(uint32_t cpu, const queue::Topology& topology) {
  if (cpu > INT_MAX || !topology.Contains(static_cast<int>(cpu))) {
    return absl::InvalidArgumentError(absl::StrFormat("CPU %u is not a possible CPU (possible: %s)",
                                                      cpu, queue::FormatCpuList(topology.cpus())));
  }
  return static_cast<int>(cpu);
}

// The state the queue RPCs answer with: settings from `config`, one QueueInfo per kernel queue
// from `snapshot`, the workers' counters read just before.
control::QueueState ReadQueueState(const queue::Topology& topology,
                                   const frontend::StatsSnapshot& snapshot,
                                   const queue::QueueConfig& config) {
  control::QueueState state;
  state.set_timestamp_unix_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());

  control::QueueSettings* settings = state.mutable_settings();
  for (int cpu : config.active_cpus) settings->add_active_cpus(cpu);
  settings->set_foreground_policy(queue::PolicyName(config.foreground));
  settings->set_background_policy(queue::PolicyName(config.background));
  settings->mutable_thresholds()->set_local(config.thresholds.local);
  settings->mutable_thresholds()->set_numa(config.thresholds.numa);
  settings->mutable_thresholds()->set_global(config.thresholds.global);
  settings->mutable_thresholds()->set_next_core_retries(config.thresholds.next_core_retries);
  settings->set_commit_locality(queue::CommitLocalityName(config.commit));
  settings->set_default_background_limit(LimitToWire(config.background_limit));
  for (const auto& [cpu, limit] : config.background_limit_by_cpu) {
    (*settings->mutable_background_limit_by_cpu())[cpu] = LimitToWire(limit);
  }

  // The config was validated when it was applied, so the owners exist.
  std::vector<int> owners =
      queue::ComputeOwners(topology, config.active_cpus).value_or(std::vector<int>());
  // The snapshot's queues are the topology's CPUs, in its order.
  for (size_t i = 0; i < snapshot.queues.size(); ++i) {
    const frontend::QueueSnapshot& qs = snapshot.queues[i];
    const frontend::WorkerCounters& s = qs.worker;
    const int cpu = qs.cpu;
    control::QueueInfo* q = state.add_queues();
    q->set_qid(cpu);
    q->set_owner_cpu(i < owners.size() ? owners[i] : cpu);
    q->set_numa_node(topology.NodeOf(cpu));
    bool active = false;
    for (int a : config.active_cpus) active |= a == cpu;
    q->set_active(active);
    q->set_worker_state(WorkerStateName(static_cast<uint32_t>(s.state)));
    q->set_entries_held(s.entries_held);
    q->set_inflight(s.inflight);
    q->set_background_inflight(s.background_inflight);
    q->set_background_queued(s.background_queued);
    q->set_background_limit(LimitToWire(s.background_limit));
    q->set_background_inflight_max(s.background_inflight_max);
    q->set_received_total(qs.received);
    q->set_forwarded_total(s.forwarded);
    q->set_forwarded_foreground(s.forwarded_foreground);
    q->set_forwarded_background(s.forwarded_background);
    q->set_handoffs_in(s.handoffs_in);
    q->set_handoffs_out(s.handoffs_out);
    q->set_errors(s.Errors());
    q->set_failures(s.TotalFailures());
    q->set_interrupted(s.interrupted);
    q->set_reconnects(s.reconnects);
    q->set_ring_entries(qs.ring_entries);
    q->set_ring_memory_bytes(qs.ring_memory_bytes);
  }
  return state;
}

}  // namespace

ControlService::ControlService(frontend::MountSession* session, std::string token)
    : session_(session), expected_authorization_(token.empty() ? "" : rpc::BearerValue(token)) {}

void ControlService::Shutdown() { shut_down_.store(true); }

absl::Status ControlService::Authorize(const grpc::ServerContext& context) const {
  return rpc::CheckBearer(context, expected_authorization_);
}

template <typename Body>
grpc::Status ControlService::Serve(grpc::ServerContext* context, Body&& body) {
  absl::Status status = shut_down_.load() ? absl::UnavailableError("the mount is shutting down")
                                          : Authorize(*context);
  if (status.ok()) status = body();
  return rpc::ToGrpcStatus(status);
}

absl::StatusOr<QueueEngine*> ControlService::Engine() {
  QueueEngine* engine = session_->engine();
  if (engine == nullptr) {
    return absl::FailedPreconditionError(
        "queue engine needs transport=uring (this mount uses the classic /dev/fuse transport)");
  }
  return engine;
}

template <typename Change>
absl::Status ControlService::ChangeConfig(Change&& change, control::QueueState* reply) {
  ASSIGN_OR_RETURN(QueueEngine * engine, Engine());
  absl::MutexLock lock(&change_mu_);
  queue::QueueConfig config = engine->config();
  RETURN_IF_ERROR(change(engine->topology(), config));
  RETURN_IF_ERROR(engine->Apply(config));
  *reply = ReadQueueState(engine->topology(), session_->Snapshot(), engine->config());
  return absl::OkStatus();
}

grpc::Status ControlService::ListQueues(grpc::ServerContext* context,
                                        const control::ListQueuesRequest*,
                                        control::QueueState* reply) {
  return Serve(context, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(QueueEngine * engine, Engine());
    *reply = ReadQueueState(engine->topology(), session_->Snapshot(), engine->config());
    return absl::OkStatus();
  });
}

grpc::Status ControlService::SetActiveSet(grpc::ServerContext* context,
                                          const control::SetActiveSetRequest* request,
                                          control::QueueState* reply) {
  return Serve(context, [&] {
    return ChangeConfig(
        [&](const queue::Topology& topology, queue::QueueConfig& config) -> absl::Status {
          if (request->cpus().empty()) {
            return absl::InvalidArgumentError("the active set is empty; name at least one CPU");
          }
          std::vector<int> cpus;
          for (uint32_t cpu : request->cpus()) {
            ASSIGN_OR_RETURN(int checked, CpuFromWire(cpu, topology));
            cpus.push_back(checked);
          }
          config.active_cpus = std::move(cpus);  // duplicates are refused by the engine
          return absl::OkStatus();
        },
        reply);
  });
}

grpc::Status ControlService::SetBackgroundLimit(grpc::ServerContext* context,
                                                const control::SetBackgroundLimitRequest* request,
                                                control::QueueState* reply) {
  return Serve(context, [&] {
    return ChangeConfig(
        [&](const queue::Topology& topology, queue::QueueConfig& config) -> absl::Status {
          uint32_t limit = queue::BackgroundLimiter::kUnlimited;
          if (!request->unlimited()) {
            if (request->limit() == 0) {
              return absl::InvalidArgumentError(
                  "background limit 0 is invalid: it must be at least 1 (or unlimited)");
            }
            // Anything at or above kUnlimited is more than a worker can ever have in flight.
            limit = static_cast<uint32_t>(
                std::min<uint64_t>(request->limit(), queue::BackgroundLimiter::kUnlimited));
          }
          if (request->has_cpu()) {
            ASSIGN_OR_RETURN(int cpu, CpuFromWire(request->cpu(), topology));
            config.background_limit_by_cpu[cpu] = limit;
          } else {
            config.background_limit = limit;
            config.background_limit_by_cpu.clear();
          }
          return absl::OkStatus();
        },
        reply);
  });
}

grpc::Status ControlService::SetPolicy(grpc::ServerContext* context,
                                       const control::SetPolicyRequest* request,
                                       control::QueueState* reply) {
  return Serve(context, [&] {
    return ChangeConfig(
        [&](const queue::Topology&, queue::QueueConfig& config) -> absl::Status {
          if (request->has_foreground()) {
            ASSIGN_OR_RETURN(config.foreground, queue::ParsePolicy(request->foreground()));
          }
          if (request->has_background()) {
            ASSIGN_OR_RETURN(config.background, queue::ParsePolicy(request->background()));
          }
          if (request->has_thresholds()) {
            const control::Thresholds& t = request->thresholds();
            config.thresholds = {t.local(), t.numa(), t.global(), t.next_core_retries()};
          }
          if (request->has_commit_locality()) {
            ASSIGN_OR_RETURN(config.commit, queue::ParseCommitLocality(request->commit_locality()));
          }
          return absl::OkStatus();
        },
        reply);
  });
}

namespace {

void ToWire(const frontend::KernelLimits& limits, control::KernelLimits* reply) {
  reply->set_max_background(limits.max_background);
  reply->set_congestion_threshold(limits.congestion_threshold);
  reply->set_waiting(limits.waiting);
  reply->set_connection(limits.connection);
}

}  // namespace

grpc::Status ControlService::GetKernelLimits(grpc::ServerContext* context,
                                             const control::GetKernelLimitsRequest*,
                                             control::KernelLimits* reply) {
  return Serve(context, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(frontend::KernelLimits limits,
                     frontend::ReadKernelLimits(session_->device(), session_->fuse_fd()));
    ToWire(limits, reply);
    return absl::OkStatus();
  });
}

grpc::Status ControlService::SetKernelLimits(grpc::ServerContext* context,
                                             const control::SetKernelLimitsRequest* request,
                                             control::KernelLimits* reply) {
  return Serve(context, [&]() -> absl::Status {
    std::optional<uint32_t> max_background, congestion_threshold;
    if (request->has_max_background()) max_background = request->max_background();
    if (request->has_congestion_threshold()) {
      congestion_threshold = request->congestion_threshold();
    }
    ASSIGN_OR_RETURN(frontend::KernelLimits limits,
                     frontend::WriteKernelLimits(session_->device(), session_->fuse_fd(),
                                                 max_background, congestion_threshold));
    ToWire(limits, reply);
    return absl::OkStatus();
  });
}

grpc::Status ControlService::GetMountInfo(grpc::ServerContext* context,
                                          const control::GetMountInfoRequest*,
                                          control::MountInfo* reply) {
  return Serve(context, [&] {
    frontend::MountDescription d = session_->description();
    reply->set_source(d.source);
    reply->set_mountpoint(d.mountpoint);
    reply->set_server(d.server);
    reply->set_transport(d.transport);
    reply->set_fuse_major(d.fuse_major);
    reply->set_fuse_minor(d.fuse_minor);
    reply->set_fuse_flags(d.fuse_flags);
    for (const std::string& name : FuseFlagNames(d.fuse_flags)) reply->add_fuse_flag_names(name);
    reply->set_uptime_seconds(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - d.started).count());
    reply->set_queue_depth(d.queue_depth);
    reply->set_initial_depth(d.initial_depth);
    reply->set_ring_queues(d.ring_queues);
    reply->set_client_id(d.client_id);
    return absl::OkStatus();
  });
}

grpc::Status ControlService::WatchQueues(grpc::ServerContext* context,
                                         const control::WatchQueuesRequest* request,
                                         grpc::ServerWriter<control::QueueState>* writer) {
  return Serve(context, [&] { return Watch(context, *request, writer); });
}

absl::Status ControlService::Watch(grpc::ServerContext* context,
                                   const control::WatchQueuesRequest& request,
                                   grpc::ServerWriter<control::QueueState>* writer) {
  uint32_t interval_ms =
      request.interval_ms() == 0 ? kDefaultWatchIntervalMs : request.interval_ms();
  if (interval_ms < kMinWatchIntervalMs) {
    return absl::InvalidArgumentError(absl::StrFormat("interval_ms %u is below the minimum of %u",
                                                      interval_ms, kMinWatchIntervalMs));
  }
  ASSIGN_OR_RETURN(QueueEngine * engine, Engine());
  const auto interval = std::chrono::milliseconds(interval_ms);
  auto next = std::chrono::steady_clock::now();
  for (uint32_t sent = 0; request.count() == 0 || sent < request.count(); ++sent) {
    if (sent > 0) {
      next += interval;
      // Waits in slices: a cancelled client or a shutdown is noticed within one slice.
      while (std::chrono::steady_clock::now() < next) {
        if (context->IsCancelled() || shut_down_.load()) return absl::OkStatus();
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            kWatchPollSlice, next - std::chrono::steady_clock::now()));
      }
    }
    if (context->IsCancelled() || shut_down_.load()) return absl::OkStatus();
    if (!writer->Write(
            ReadQueueState(engine->topology(), session_->Snapshot(), engine->config()))) {
      return absl::OkStatus();  // the client went away
    }
  }
  return absl::OkStatus();
}

}  // namespace ringfs::controller
