// ringfs-server's Prometheus endpoint (--metrics HOST:PORT): /metrics served by prometheus-cpp,
// with a collector that sums the workers' WorkerStats and reads the live sessions at scrape time.
// The workers stay the only writers (STYLE.md 10); nothing here keeps a copy.
// Exported series:
//   ringfs_server_requests_total{op}                   counter; only ops seen
//   ringfs_server_request_duration_seconds{op}         histogram, decode -> reply queued (10µs…10s)
//   ringfs_server_bytes_total{direction=received|sent} counter, data-wire bytes
//   ringfs_server_errors_total{errno}                  counter, errno = ENOENT...; only non-zero
//   ringfs_server_sessions                             gauge, live data connections
//   ringfs_server_frames_rejected_total{reason}        counter, every reason (RejectReasonName)
//   ringfs_server_inflight{session}                    gauge, per live session
//   ringfs_server_auth_failures_total{reason}          counter, every reason (authenticator.h)
// Used by the Server's controlling thread: Start() once, Stop() once. The workers and the
// session table must outlive it; scrapes run on prometheus-cpp's threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/rpc/metrics_endpoint.h"
#include "server/authenticator.h"
#include "server/server_stats.h"

namespace prometheus {
class Exposer;
}

namespace ringfs::server {

class ServerMetrics {
 public:
  // `address`: HOST:PORT ([ADDR]:PORT for IPv6); port 0 picks a free port.
  // `auth` (may be null) must outlive the metrics too; its counters are its own (atomics).
  ServerMetrics(std::vector<const WorkerStats*> workers, const SessionTable* sessions,
                std::string address, const Authenticator* auth = nullptr);
  ~ServerMetrics();  // Stop()

  // InvalidArgument unless `address` is HOST:PORT.
  [[nodiscard]] static absl::Status CheckAddress(const std::string& address);

  [[nodiscard]] absl::Status Start();
  void Stop();  // idempotent

  // HOST:PORT actually bound (after Start()).
  const std::string& address() const { return endpoint_.address(); }

 private:
  class Collector;

  const std::vector<const WorkerStats*> workers_;
  const SessionTable* const sessions_;
  const Authenticator* const auth_;
  std::string address_;
  rpc::MetricsEndpoint endpoint_;
};

}  // namespace ringfs::server
