#include "controller/frontend_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <string.h>

#include <exception>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fuse_ops.h"
#include "common/log.h"
#include "common/rpc/endpoint.h"
#include "frontend/fusectl.h"
#include "frontend/stats_snapshot.h"

namespace ringfs::controller {
namespace {

using frontend::HistogramSnapshot;
using frontend::LatencyHistogram;
using frontend::QueueSnapshot;
using frontend::WorkerCounters;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

constexpr const char* kClassNames[2] = {"foreground", "background"};

double Value(uint64_t value) { return static_cast<double>(value); }

MetricFamily Family(const char* name, const char* help, MetricType type) {
  return MetricFamily{name, help, type, {}};
}

ClientMetric& AddSample(MetricFamily& family, std::vector<ClientMetric::Label> labels,
                        double value) {
  ClientMetric& metric = family.metric.emplace_back();
  metric.label = std::move(labels);
  switch (family.type) {
    case MetricType::Counter:
      metric.counter.value = value;
      break;
    case MetricType::Gauge:
      metric.gauge.value = value;
      break;
    default:
      metric.untyped.value = value;
      break;
  }
  return metric;
}

// The worker's per-bucket counts become Prometheus' cumulative buckets, +Inf last.
void AddHistogram(MetricFamily& family, std::vector<ClientMetric::Label> labels,
                  const HistogramSnapshot& histogram) {
  ClientMetric& metric = family.metric.emplace_back();
  metric.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < LatencyHistogram::kBuckets; ++b) {
    cumulative += histogram.counts[b];
    double bound = b + 1 < LatencyHistogram::kBuckets ? LatencyHistogram::kBoundsSeconds[b]
                                                      : std::numeric_limits<double>::infinity();
    metric.histogram.bucket.push_back({cumulative, bound});
  }
  metric.histogram.sample_count = cumulative;
  metric.histogram.sample_sum = static_cast<double>(histogram.sum_ns) * 1e-9;
}

std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? std::string(name) : absl::StrCat("errno", err);
}

}  // namespace

class FrontendMetrics::Collector : public prometheus::Collectable {
 public:
  explicit Collector(frontend::MountSession* session)
      : session_(session), description_(session->description()) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    CollectConnection(families);
    const frontend::StatsSnapshot snapshot = session_->Snapshot();
    if (!snapshot.queues.empty()) CollectWorkers(snapshot, families);
    CollectMount(snapshot, families);
    return families;
  }

 private:
  void CollectConnection(std::vector<MetricFamily>& families) const {
    MetricFamily info = Family("ringfs_frontend_info", "The mount: transport, FUSE minor, server",
                               MetricType::Gauge);
    AddSample(info,
              {{"transport", description_.transport},
               {"fuse_minor", absl::StrCat(description_.fuse_minor)},
               {"server", description_.server}},
              1);
    families.push_back(std::move(info));

    absl::StatusOr<frontend::KernelLimits> limits =
        frontend::ReadKernelLimits(session_->device(), session_->fuse_fd());
    if (!limits.ok()) return;  // fusectl unreadable: leave the series out rather than lie
    struct {
      const char* name;
      const char* help;
      uint32_t value;
    } knobs[] = {
        {"ringfs_frontend_kernel_max_background",
         "The kernel's max_background for this FUSE connection (fusectl)", limits->max_background},
        {"ringfs_frontend_kernel_congestion_threshold",
         "The kernel's congestion_threshold for this FUSE connection (fusectl)",
         limits->congestion_threshold},
        {"ringfs_frontend_kernel_waiting",
         "Requests the kernel is waiting on for this FUSE connection (fusectl)", limits->waiting},
    };
    for (const auto& knob : knobs) {
      MetricFamily family = Family(knob.name, knob.help, MetricType::Gauge);
      AddSample(family, {}, knob.value);
      families.push_back(std::move(family));
    }
  }

  // Mount-wide series: reclaim on new server instances and what the kernel holds.
  void CollectMount(const frontend::StatsSnapshot& snapshot,
                    std::vector<MetricFamily>& families) const {
    struct {
      const char* name;
      const char* help;
      MetricType type;
      uint64_t value;
    } series[] = {
        {"ringfs_frontend_reclaims_total",
         "Times the mount re-established its nodes and open files on a new server instance",
         MetricType::Counter, snapshot.reclaims},
        {"ringfs_frontend_reclaim_refused_total",
         "Nodes and open files a new server instance did not take back (they answer ESTALE)",
         MetricType::Counter, snapshot.reclaim_refused},
        {"ringfs_frontend_held_nodes",
         "Node ids the kernel holds or the mount keeps for it (lookups not yet forgotten)",
         MetricType::Gauge, snapshot.held_nodes},
        {"ringfs_frontend_held_open_files",
         "Files and directories the kernel holds open with a handle at the server",
         MetricType::Gauge, snapshot.held_open_files},
        {"ringfs_frontend_local_open_dirs",
         "Directories the kernel holds open with a handle of the mount's own (handle-less "
         "listings: nothing at the server)",
         MetricType::Gauge, snapshot.local_open_dirs},
        {"ringfs_frontend_invalidations_total",
         "Cache invalidations from the server written into the kernel (another mount or the "
         "server's filesystem changed a node this mount caches)",
         MetricType::Counter, snapshot.invalidations_written},
        {"ringfs_frontend_invalidations_not_cached_total",
         "Invalidations from the server for nodes or names the kernel no longer cached",
         MetricType::Counter, snapshot.invalidations_not_cached},
        {"ringfs_frontend_invalidations_repeated_total",
         "Invalidations written into the kernel again because it may have been building an inode "
         "from an answer older than the change (up to four times each)",
         MetricType::Counter, snapshot.invalidations_repeated},
        {"ringfs_frontend_invalidations_lost_total",
         "Invalidations the mount could not deliver (its queue was full) or repeat (too many "
         "waiting); each loss resets the kernel's caches (ringfs_frontend_cache_resets_total)",
         MetricType::Counter, snapshot.invalidations_lost},
        {"ringfs_frontend_cache_resets_total",
         "Times the kernel's caches were reset because invalidations may have been lost (a "
         "connection to the server ended, or the mount dropped some itself)",
         MetricType::Counter, snapshot.cache_resets},
        {"ringfs_frontend_cache_resets_names_kept_total",
         "Cache resets that left cached names to their lifetime: reset_names is off (the "
         "default), something was mounted inside this mount, or the kernel lacks or refused "
         "FUSE_NOTIFY_INC_EPOCH",
         MetricType::Counter, snapshot.cache_resets_names_kept},
        {"ringfs_frontend_async_unlinks_total",
         "Unlinks answered before the server ran them (mount option async_unlink)",
         MetricType::Counter, snapshot.async_unlinks},
        {"ringfs_frontend_async_unlink_failures_total",
         "Unlinks answered early that then failed at the server, or ended without its answer "
         "(timeout): the name may still exist; each is logged",
         MetricType::Counter, snapshot.async_unlink_failures},
        {"ringfs_frontend_async_setattrs_total",
         "SETATTRs (chmod, chown, utimes of regular files) answered before the server ran them "
         "(mount option async_setattr)",
         MetricType::Counter, snapshot.async_setattrs},
        {"ringfs_frontend_async_setattr_failures_total",
         "SETATTRs answered early that then failed at the server, or ended without its answer: "
         "the kernel is told to ask for the file's attributes again; each is logged",
         MetricType::Counter, snapshot.async_setattr_failures},
        {"ringfs_frontend_async_setattrs_folded_total",
         "SETATTRs answered early that were folded into the same file's change before them, "
         "still unsent (one request to the server for both)",
         MetricType::Counter, snapshot.async_setattrs_folded},
        {"ringfs_frontend_async_writes_total",
         "WRITEs through write-only descriptors answered before the server ran them (mount "
         "option async_write)",
         MetricType::Counter, snapshot.async_writes},
        {"ringfs_frontend_async_write_failures_total",
         "WRITEs answered early that then failed at the server, or ended without its answer: the "
         "file's next close or fsync reports the error; each is logged",
         MetricType::Counter, snapshot.async_write_failures},
        {"ringfs_frontend_noop_setattrs_total",
         "chown and chmod requests that set the owner, group and mode a file already had, "
         "answered by the mount without the server (mount option sync_noop_setattr sends them)",
         MetricType::Counter, snapshot.noop_setattrs},
        {"ringfs_frontend_pages_kept_total",
         "OPENs that let the kernel keep the file's cached pages: the server's record of the file "
         "at the open showed it as it was when they were read (mount option kept_pages)",
         MetricType::Counter, snapshot.pages_kept},
        {"ringfs_frontend_page_drops_total",
         "Cached pages of a file the mount made the kernel drop after an open did (mount option "
         "kept_pages): until then no open of the file keeps its pages",
         MetricType::Counter, snapshot.page_drops},
        {"ringfs_frontend_page_drops_put_off_total",
         "Page drops tried again later because a READ or WRITE of the file was in flight",
         MetricType::Counter, snapshot.page_drops_put_off},
        {"ringfs_frontend_complete_dirs",
         "Directories whose every name the mount knows, so it answers lookups of absent names "
         "itself (expired ones included until pruned)",
         MetricType::Gauge, snapshot.complete_dirs},
        {"ringfs_frontend_changes_unsettled",
         "Requests that change something (writes, attributes, names) sent to the server and not "
         "answered yet; stuck above zero after a lost connection until a new server instance "
         "is reached",
         MetricType::Gauge, snapshot.changes_unsettled},
        {"ringfs_frontend_kept_entries",
         "Names whose node the mount knows, to answer a lookup after the kernel forgot the node",
         MetricType::Gauge, snapshot.kept_entries},
        {"ringfs_frontend_kept_lookups",
         "Lookups of nodes the kernel forgot that the mount keeps (their FORGET withheld, so the "
         "server goes on pushing their changes)",
         MetricType::Gauge, snapshot.kept_lookups},
    };
    for (const auto& one : series) {
      MetricFamily family = Family(one.name, one.help, one.type);
      AddSample(family, {}, static_cast<double>(one.value));
      families.push_back(std::move(family));
    }
  }

  // The per-queue series. Without the queue engine (classic transport) the background, active-set
  // and hand-off ones do not exist.
  void CollectWorkers(const frontend::StatsSnapshot& snapshot,
                      std::vector<MetricFamily>& families) const {
    const bool queue_engine = snapshot.queue_engine;
    MetricFamily received = Family("ringfs_frontend_requests_received_total",
                                   "Requests the kernel put on this queue", MetricType::Counter);
    MetricFamily requests =
        Family("ringfs_frontend_requests_total",
               "Requests this queue's worker forwarded to the server", MetricType::Counter);
    MetricFamily inflight =
        Family("ringfs_frontend_inflight", "Requests this queue's worker has at the server",
               MetricType::Gauge);
    MetricFamily bg_inflight =
        Family("ringfs_frontend_background_inflight",
               "Background requests this queue's worker has at the server", MetricType::Gauge);
    MetricFamily bg_queued =
        Family("ringfs_frontend_background_queued",
               "Background requests waiting for the worker's limit", MetricType::Gauge);
    MetricFamily bg_limit = Family("ringfs_frontend_background_limit",
                                   "Background requests the worker may have at the server "
                                   "(+Inf: unlimited)",
                                   MetricType::Gauge);
    MetricFamily active =
        Family("ringfs_frontend_queue_active", "1 when this CPU's worker is in the active set",
               MetricType::Gauge);
    MetricFamily sched_idle =
        Family("ringfs_frontend_worker_sched_idle",
               "1 while this queue's worker runs SCHED_IDLE; 0 with worker_sched=normal, "
               "while it is starved on its CPU, or without a worker thread",
               MetricType::Gauge);
    MetricFamily ring_entries =
        Family("ringfs_frontend_ring_entries",
               "Ring entries registered for this kernel queue (it grows toward queue_depth while "
               "its callers keep every entry busy)",
               MetricType::Gauge);
    MetricFamily ring_memory =
        Family("ringfs_frontend_ring_memory_bytes",
               "Resident memory of this queue's ring entries (header pages and the payload "
               "pages they have touched)",
               MetricType::Gauge);
    MetricFamily ring_growth =
        Family("ringfs_frontend_ring_entries_added_total",
               "Entries this worker registered after the start because a queue ran out",
               MetricType::Counter);
    MetricFamily payload_trims =
        Family("ringfs_frontend_ring_payload_trims_total",
               "Large payloads whose pages this worker returned to the kernel",
               MetricType::Counter);
    MetricFamily handoffs =
        Family("ringfs_frontend_handoffs_total",
               "Requests handed between workers (in: to this worker)", MetricType::Counter);
    MetricFamily duration =
        Family("ringfs_frontend_request_duration_seconds",
               "From the kernel handing us the request to our commit", MetricType::Histogram);
    MetricFamily rtt = Family("ringfs_frontend_backend_rtt_seconds",
                              "Round trip of a request to the server", MetricType::Histogram);
    MetricFamily bytes =
        Family("ringfs_frontend_bytes_total", "Payload bytes sent to and received from the server",
               MetricType::Counter);
    MetricFamily replies =
        Family("ringfs_frontend_replies_total",
               "Answers to the kernel by errno (0 = success); most errors are expected ones",
               MetricType::Counter);
    MetricFamily failures =
        Family("ringfs_frontend_failures_total",
               "Answers that are failures of ringfs or the server, by reason", MetricType::Counter);
    MetricFamily interrupted =
        Family("ringfs_frontend_interrupted_total",
               "Requests answered EINTR because the kernel interrupted the caller",
               MetricType::Counter);
    MetricFamily local = Family("ringfs_frontend_local_answers_total",
                                "Requests answered without the server (frontend/local_answer.h)",
                                MetricType::Counter);
    MetricFamily reconnects =
        Family("ringfs_frontend_backend_reconnects_total",
               "Reconnections of this worker to the server", MetricType::Counter);

    for (const QueueSnapshot& q : snapshot.queues) {
      const std::string queue = absl::StrCat(q.cpu);
      const WorkerCounters& s = q.worker;
      AddSample(received, {{"queue", queue}}, Value(q.received));

      for (int c = 0; c < 2; ++c) {
        for (size_t op = 0; op < s.forwarded_by_op[c].size(); ++op) {
          double count = Value(s.forwarded_by_op[c][op]);
          if (count == 0) continue;
          AddSample(requests,
                    {{"queue", queue},
                     {"class", kClassNames[c]},
                     {"op", std::string(fuse::OpName(static_cast<uint32_t>(op)))}},
                    count);
        }
        AddHistogram(duration, {{"queue", queue}, {"class", kClassNames[c]}},
                     s.request_duration[c]);
      }
      AddSample(inflight, {{"queue", queue}}, Value(s.inflight));
      if (queue_engine) {
        AddSample(bg_inflight, {{"queue", queue}}, Value(s.background_inflight));
        AddSample(bg_queued, {{"queue", queue}}, Value(s.background_queued));
        uint64_t limit = s.background_limit;
        AddSample(bg_limit, {{"queue", queue}},
                  limit >= frontend::queue::BackgroundLimiter::kUnlimited
                      ? std::numeric_limits<double>::infinity()
                      : static_cast<double>(limit));
        // The worker's own state: after a change it reads back what the engine applied.
        bool is_active = s.state == frontend::WorkerState::kActive;
        AddSample(active, {{"queue", queue}}, is_active ? 1 : 0);
        AddSample(handoffs, {{"queue", queue}, {"direction", "in"}}, Value(s.handoffs_in));
        AddSample(handoffs, {{"queue", queue}, {"direction", "out"}}, Value(s.handoffs_out));
        AddSample(sched_idle, {{"queue", queue}}, Value(s.sched_idle));
        AddSample(ring_entries, {{"queue", queue}}, q.ring_entries);
        AddSample(ring_memory, {{"queue", queue}}, static_cast<double>(q.ring_memory_bytes));
        AddSample(ring_growth, {{"queue", queue}}, Value(s.entries_added));
        AddSample(payload_trims, {{"queue", queue}}, Value(s.payload_trims));
      }
      AddHistogram(rtt, {{"queue", queue}}, s.backend_rtt);
      AddSample(bytes, {{"queue", queue}, {"direction", "to_server"}}, Value(s.bytes_to_server));
      AddSample(bytes, {{"queue", queue}, {"direction", "from_server"}},
                Value(s.bytes_from_server));
      for (size_t err = 0; err < s.replies_by_errno.size(); ++err) {
        double count = Value(s.replies_by_errno[err]);
        if (count == 0) continue;
        AddSample(replies,
                  {{"queue", queue}, {"errno", err == 0 ? "0" : ErrnoName(static_cast<int>(err))}},
                  count);
      }
      // Every reason, zeros included, so rate() and alerts have a series from the start.
      for (size_t reason = 0; reason < frontend::kFailureReasons; ++reason) {
        AddSample(failures, {{"queue", queue}, {"reason", frontend::FailureReasonName(reason)}},
                  Value(s.failures[reason]));
      }
      AddSample(interrupted, {{"queue", queue}}, Value(s.interrupted));
      AddSample(reconnects, {{"queue", queue}}, Value(s.reconnects));
      AddSample(local, {{"queue", queue}}, Value(s.answered_locally));
    }
    for (MetricFamily* family : {&received, &requests, &inflight, &duration, &rtt, &bytes,
                                 &replies, &failures, &interrupted, &reconnects, &local}) {
      families.push_back(std::move(*family));
    }
    if (queue_engine) {
      for (MetricFamily* family : {&bg_inflight, &bg_queued, &bg_limit, &active, &handoffs,
                                   &sched_idle, &ring_entries, &ring_memory, &ring_growth,
                                   &payload_trims}) {
        families.push_back(std::move(*family));
      }
    }
  }

  frontend::MountSession* const session_;
  const frontend::MountDescription description_;  // fixed once the mount is up
};

FrontendMetrics::FrontendMetrics(frontend::MountSession* session, std::string address)
    : session_(session), address_(std::move(address)) {}

FrontendMetrics::~FrontendMetrics() { Stop(); }

absl::Status FrontendMetrics::CheckAddress(const std::string& address) {
  if (address.empty()) return absl::OkStatus();
  absl::StatusOr<rpc::Endpoint> endpoint = rpc::ParseAddress(address);
  if (!endpoint.ok() || endpoint->kind != rpc::Endpoint::Kind::kTcp) {
    return absl::InvalidArgumentError(absl::StrFormat("metrics=%s: expected HOST:PORT", address));
  }
  return absl::OkStatus();
}

absl::Status FrontendMetrics::Start() {
  return endpoint_.Start(address_, std::make_shared<Collector>(session_), /*threads=*/2);
}

void FrontendMetrics::Stop() { endpoint_.Stop(); }

}  // namespace ringfs::controller
