// Serves one prometheus::Collectable as Prometheus text at http://ADDRESS/metrics, for both
// ringfs-mount and ringfs-server. Start/Stop from one thread; scrapes run on prometheus-cpp's
// HTTP threads and only call the collectable.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace prometheus {
class Collectable;
class Exposer;
}  // namespace prometheus

namespace ringfs::rpc {

class MetricsEndpoint {
 public:
  MetricsEndpoint();
  ~MetricsEndpoint();

  // `address` is HOST:PORT (port 0 picks a free one; address() then tells which).
  absl::Status Start(const std::string& address,
                     std::shared_ptr<prometheus::Collectable> collectable, size_t threads);
  // Joins the HTTP threads: no scrape runs after this.
  void Stop();
  const std::string& address() const { return address_; }

 private:
  std::string address_;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace ringfs::rpc
