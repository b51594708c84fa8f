// The frontend's Prometheus endpoint (-o metrics=HOST:PORT): /metrics served by prometheus-cpp,
// with a collector that takes a StatsSnapshot of the workers (frontend/stats_snapshot.h) at each
// scrape. The workers stay the only writers of their WorkerStats (STYLE.md 10); nothing here keeps
// a copy between scrapes.
// Exported series (label queue = the worker's CPU = kernel qid):
//   ringfs_frontend_requests_received_total{queue}          counter, by the qid it arrived on
//   ringfs_frontend_requests_total{queue,class,op}           counter, by the forwarding worker;
//                                                            only series that are non-zero
//   ringfs_frontend_inflight{queue}                          gauge
//   ringfs_frontend_background_inflight{queue}               gauge
//   ringfs_frontend_background_queued{queue}                 gauge
//   ringfs_frontend_background_limit{queue}                  gauge, +Inf when unlimited
//   ringfs_frontend_queue_active{queue}                      gauge 0/1 (in the active set)
//   ringfs_frontend_handoffs_total{queue,direction=in|out}   counter
//   ringfs_frontend_request_duration_seconds{queue,class}    histogram, kernel -> our commit
//   ringfs_frontend_backend_rtt_seconds{queue}               histogram, server round trip
//   ringfs_frontend_bytes_total{queue,direction=to_server|from_server}  counter
//   ringfs_frontend_replies_total{queue,errno}               counter, every answer to the kernel;
//                                                            errno = 0, ENOENT, ...; non-zero
//   ringfs_frontend_failures_total{queue,reason}             counter, failures of ringfs or the
//                                                            server: timeout, connection_lost,
//                                                            invalid_reply, server_eio, bad_request
//   ringfs_frontend_interrupted_total{queue}                 counter, answered EINTR on INTERRUPT
//   ringfs_frontend_backend_reconnects_total{queue}          counter
//   ringfs_frontend_reclaims_total                           counter, state re-established on a
//                                                            new server instance
//   ringfs_frontend_reclaim_refused_total                    counter, objects it did not take
//   ringfs_frontend_held_nodes, ringfs_frontend_held_open_files  gauges, what the kernel holds
//   ringfs_frontend_local_open_dirs                          gauge, directories open without a
//                                                            server handle
//   ringfs_frontend_kernel_max_background                    gauge (fusectl)
//   ringfs_frontend_kernel_congestion_threshold              gauge (fusectl)
//   ringfs_frontend_kernel_waiting                           gauge (fusectl)
//   ringfs_frontend_info{transport,fuse_minor,server}        gauge = 1
// With the classic transport (one /dev/fuse worker per CPU, no queue engine) the background,
// active-set and hand-off series do not exist; the other per-queue series do, one per worker.
// Used by the main thread: Start() after the mount is up, Stop() after it ended. The session
// must outlive this object; scrapes run on prometheus-cpp's threads.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/rpc/metrics_endpoint.h"
#include "frontend/mount_session.h"

namespace prometheus {
class Exposer;
}

namespace ringfs::controller {

class FrontendMetrics {
 public:
  // `address`: HOST:PORT ([ADDR]:PORT for IPv6); port 0 picks a free port.
  FrontendMetrics(frontend::MountSession* session, std::string address);

  // The option metrics=: empty (no endpoint) or HOST:PORT; checked before mounting.
  [[nodiscard]] static absl::Status CheckAddress(const std::string& address);
  ~FrontendMetrics();  // Stop()

  [[nodiscard]] absl::Status Start();
  void Stop();  // idempotent

  // HOST:PORT actually bound (after Start()).
  std::string address() const { return endpoint_.address(); }

 private:
  class Collector;

  frontend::MountSession* const session_;
  std::string address_;
  rpc::MetricsEndpoint endpoint_;
};

}  // namespace ringfs::controller
