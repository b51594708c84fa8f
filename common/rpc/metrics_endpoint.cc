#include "common/rpc/metrics_endpoint.h"

#include <prometheus/exposer.h>

#include <exception>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/log.h"

namespace ringfs::rpc {

MetricsEndpoint::MetricsEndpoint() = default;
MetricsEndpoint::~MetricsEndpoint() { Stop(); }

absl::Status MetricsEndpoint::Start(const std::string& address,
                                    std::shared_ptr<prometheus::Collectable> collectable,
                                    size_t threads) {
  address_ = address;
  try {
    // prometheus-cpp reports a failed bind by throwing; it stops at this edge.
    exposer_ = std::make_unique<prometheus::Exposer>(address_, threads);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrFormat("cannot serve metrics on %s: %s", address_, e.what()));
  }
  collectable_ = std::move(collectable);
  exposer_->RegisterCollectable(collectable_);
  std::vector<int> ports = exposer_->GetListeningPorts();
  if (!ports.empty()) {
    address_ = absl::StrFormat("%s:%d", address_.substr(0, address_.rfind(':')), ports.front());
  }
  RINGFS_LOG_INFO("metrics on http://%s/metrics", address_);
  return absl::OkStatus();
}

void MetricsEndpoint::Stop() {
  exposer_.reset();
  collectable_.reset();
}

}  // namespace ringfs::rpc
