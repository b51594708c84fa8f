#include "server/server_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <string.h>

#include <algorithm>
#include <exception>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fuse_ops.h"
#include "common/log.h"
#include "common/rpc/endpoint.h"

namespace ringfs::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  return MetricFamily{name, help, type, {}};
}

void AddSample(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric& metric = family.metric.emplace_back();
  metric.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
}

std::string ErrnoName(int err) {
  const char* name = strerrorname_np(err);
  return name != nullptr ? std::string(name) : absl::StrCat("errno", err);
}

}  // namespace

class ServerMetrics::Collector : public prometheus::Collectable {
 public:
  Collector(std::vector<const WorkerStats*> workers, const SessionTable* sessions,
            const Authenticator* auth)
      : workers_(std::move(workers)), sessions_(sessions), auth_(auth) {}

  std::vector<MetricFamily> Collect() const override {
    MetricFamily requests =
        Family("ringfs_server_requests_total", "Requests decoded, by FUSE op", MetricType::Counter);
    MetricFamily duration = Family(
        "ringfs_server_request_duration_seconds",
        "From decoding a request to queueing its reply (file I/O included)", MetricType::Histogram);
    for (size_t op = 0; op < WorkerStats::kOpcodes; ++op) {
      double count = 0;
      for (const WorkerStats* w : workers_) count += Read(w->requests_by_op[op]);
      if (count == 0) continue;
      const std::string name(fuse::OpName(static_cast<uint32_t>(op)));
      AddSample(requests, {{"op", name}}, count);
      AddHistogram(duration, {{"op", name}}, op);
    }

    MetricFamily bytes =
        Family("ringfs_server_bytes_total", "Data-wire bytes received from and sent to clients",
               MetricType::Counter);
    double received = 0, sent = 0;
    for (const WorkerStats* w : workers_) {
      received += Read(w->bytes_received);
      sent += Read(w->bytes_sent);
    }
    AddSample(bytes, {{"direction", "received"}}, received);
    AddSample(bytes, {{"direction", "sent"}}, sent);

    MetricFamily sends = Family(
        "ringfs_server_sends_total",
        "Data-wire SENDMSGs completed; replies and notifications made in one batch share one",
        MetricType::Counter);
    double send_count = 0;
    for (const WorkerStats* w : workers_) send_count += Read(w->sends);
    AddSample(sends, {}, send_count);

    MetricFamily errors = Family("ringfs_server_errors_total", "Replies with an error, by errno",
                                 MetricType::Counter);
    for (size_t err = 1; err < WorkerStats::kErrnos; ++err) {
      double count = 0;
      for (const WorkerStats* w : workers_) count += Read(w->errors_by_errno[err]);
      if (count > 0) AddSample(errors, {{"errno", ErrnoName(static_cast<int>(err))}}, count);
    }

    MetricFamily rejected =
        Family("ringfs_server_frames_rejected_total",
               "Frames refused by the decoder or the framing, by reason", MetricType::Counter);
    for (size_t r = 0; r < static_cast<size_t>(RejectReason::kCount); ++r) {
      double count = 0;
      for (const WorkerStats* w : workers_) count += Read(w->rejected[r]);
      AddSample(rejected, {{"reason", std::string(RejectReasonName(static_cast<RejectReason>(r)))}},
                count);
    }

    MetricFamily replays =
        Family("ringfs_server_replays_total",
               "Resent requests answered from the reply cache instead of running again",
               MetricType::Counter);
    MetricFamily idle_closed = Family("ringfs_server_idle_closed_total",
                                      "Connections closed after --idle-timeout without traffic",
                                      MetricType::Counter);
    MetricFamily invalidations = Family(
        "ringfs_server_invalidations_total",
        "Cache invalidations queued for clients holding a node another client changed",
        MetricType::Counter);
    MetricFamily replaced =
        Family("ringfs_server_sessions_replaced_total",
               "Connections closed because the client replaced them with a new one (what they had "
               "received and not started is dropped: the client resent it)",
               MetricType::Counter);
    MetricFamily unstarted =
        Family("ringfs_server_sessions_replaced_with_unstarted_total",
               "Replaced connections that still held received requests not started (dropped)",
               MetricType::Counter);
    MetricFamily fenced =
        Family("ringfs_server_sessions_fenced_total",
               "New connections that ran nothing until the connections they replaced had ended",
               MetricType::Counter);
    MetricFamily resets = Family(
        "ringfs_server_cache_resets_total",
        "Reset records sent to clients: changes were missed (the export watch's event queue "
        "overflowed, or a client's queued invalidations passed their bound) and the client drops "
        "all it cached",
        MetricType::Counter);
    double replayed = 0, idled = 0, invalidated = 0, replaced_count = 0, unstarted_count = 0,
           fenced_count = 0, reset_count = 0;
    for (const WorkerStats* w : workers_) {
      replayed += Read(w->replays);
      idled += Read(w->idle_closed);
      invalidated += Read(w->invalidations_pushed);
      reset_count += Read(w->cache_resets_sent);
      replaced_count += Read(w->sessions_replaced);
      unstarted_count += Read(w->replaced_with_unstarted);
      fenced_count += Read(w->sessions_fenced);
    }
    AddSample(replays, {}, replayed);
    AddSample(idle_closed, {}, idled);
    AddSample(invalidations, {}, invalidated);
    AddSample(resets, {}, reset_count);
    MetricFamily sched_idle = Family(
        "ringfs_server_worker_sched_idle",
        "1 while the worker runs SCHED_IDLE (it serves a mount on its own CPU, which is quiet)",
        MetricType::Gauge);
    for (size_t i = 0; i < workers_.size(); ++i) {
      AddSample(sched_idle, {{"worker", absl::StrCat(i)}}, Read(workers_[i]->sched_idle));
    }
    MetricFamily bulk = Family(
        "ringfs_server_worker_bulk",
        "1 while the worker moves bulk data (large requests at a high rate) and so is not pinned "
        "to the CPU of the mount on this host it serves",
        MetricType::Gauge);
    for (size_t i = 0; i < workers_.size(); ++i) {
      AddSample(bulk, {{"worker", absl::StrCat(i)}}, Read(workers_[i]->bulk));
    }
    AddSample(replaced, {}, replaced_count);
    AddSample(unstarted, {}, unstarted_count);
    AddSample(fenced, {}, fenced_count);

    std::vector<std::shared_ptr<const SessionStats>> live = sessions_->List();
    MetricFamily sessions =
        Family("ringfs_server_sessions", "Live data connections", MetricType::Gauge);
    AddSample(sessions, {}, static_cast<double>(live.size()));
    MetricFamily this_host =
        Family("ringfs_server_sessions_this_host",
               "Live data connections from a mount on this host (by its host id, else its address)",
               MetricType::Gauge);
    AddSample(this_host, {},
              static_cast<double>(std::count_if(live.begin(), live.end(),
                                                [](const auto& s) { return s->same_host; })));
    MetricFamily inflight =
        Family("ringfs_server_inflight", "Requests of a session whose reply is not sent yet",
               MetricType::Gauge);
    for (const auto& s : live) {
      AddSample(inflight, {{"session", absl::StrCat(s->session_id)}}, Read(s->inflight));
    }

    MetricFamily auth_failures =
        Family("ringfs_server_auth_failures_total",
               "Refused authentication attempts, by reason", MetricType::Counter);
    if (auth_ != nullptr) {
      for (size_t r = 1; r < Authenticator::kFailureKinds; ++r) {
        auto reason = static_cast<Authenticator::Failure>(r);
        AddSample(auth_failures, {{"reason", std::string(Authenticator::FailureName(reason))}},
                  static_cast<double>(auth_->failures(reason)));
      }
    }

    std::vector<MetricFamily> families;
    for (MetricFamily* family :
         {&requests, &duration, &bytes, &sends, &errors, &rejected, &replays, &idle_closed,
          &invalidations, &replaced, &unstarted, &fenced, &sched_idle, &bulk, &sessions, &this_host,
          &inflight, &auth_failures}) {
      families.push_back(std::move(*family));
    }
    return families;
  }

 private:
  // The workers' per-bucket counts, summed, become Prometheus' cumulative buckets, +Inf last.
  void AddHistogram(MetricFamily& family, std::vector<ClientMetric::Label> labels,
                    size_t op) const {
    ClientMetric& metric = family.metric.emplace_back();
    metric.label = std::move(labels);
    uint64_t cumulative = 0;
    uint64_t sum_ns = 0;
    for (size_t b = 0; b < DurationHistogram::kBuckets; ++b) {
      for (const WorkerStats* w : workers_) cumulative += Read(w->duration_by_op[op].counts[b]);
      double bound = b < DurationHistogram::kBoundsSeconds.size()
                         ? DurationHistogram::kBoundsSeconds[b]
                         : std::numeric_limits<double>::infinity();
      metric.histogram.bucket.push_back({cumulative, bound});
    }
    for (const WorkerStats* w : workers_) sum_ns += Read(w->duration_by_op[op].sum_ns);
    metric.histogram.sample_count = cumulative;
    metric.histogram.sample_sum = static_cast<double>(sum_ns) * 1e-9;
  }

  const std::vector<const WorkerStats*> workers_;
  const SessionTable* const sessions_;
  const Authenticator* const auth_;
};

ServerMetrics::ServerMetrics(std::vector<const WorkerStats*> workers, const SessionTable* sessions,
                             std::string address, const Authenticator* auth)
    : workers_(std::move(workers)),
      sessions_(sessions),
      auth_(auth),
      address_(std::move(address)) {}

ServerMetrics::~ServerMetrics() { Stop(); }

absl::Status ServerMetrics::CheckAddress(const std::string& address) {
  absl::StatusOr<rpc::Endpoint> endpoint = rpc::ParseAddress(address);
  if (!endpoint.ok() || endpoint->kind != rpc::Endpoint::Kind::kTcp) {
    return absl::InvalidArgumentError(absl::StrFormat("--metrics %s: expected HOST:PORT", address));
  }
  return absl::OkStatus();
}

absl::Status ServerMetrics::Start() {
  if (absl::Status valid = CheckAddress(address_); !valid.ok()) return valid;
  return endpoint_.Start(address_, std::make_shared<Collector>(workers_, sessions_, auth_),
                         /*threads=*/1);
}

void ServerMetrics::Stop() { endpoint_.Stop(); }

}  // namespace ringfs::server
