// A real Prometheus beside a real ringfs-server (--metrics) and ringfs-mount (-o metrics=):
// PrometheusFixture starts both daemons (ControlTest, transport=uring), then /usr/bin/prometheus
// (Debian's `prometheus` package) in the test's temp tree on a free loopback port, scraping both
// every second, and waits until it is ready. Query() runs instant queries through its HTTP API.
// TearDown stops Prometheus (SIGTERM, then SIGKILL after 10 s), then the mount and the server.
// REQUIRES: root. One test thread.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controller/integration/control_test_base.h"
#include "tests/harness/process.h"

namespace ringfs::controller::testing {

struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Percent-encodes everything but RFC 3986's unreserved characters.
std::string UrlEncode(const std::string& text);

class PrometheusFixture : public ControlTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.metrics = true;
    return spec;
  }
  void SetUp() override;
  void TearDown() override;

  // prometheus.yml for the two endpoints. The default scrapes the mount as job
  // "ringfs-frontend" and the server as job "ringfs-server", every second.
  virtual std::string PrometheusConfig(int mount_port, int server_port) const;

  // An instant query; the samples of a vector result (a failed query is a test failure).
  std::vector<Sample> Query(const std::string& promql);
  // The value per `queue` label.
  std::map<std::string, double> ByQueue(const std::string& promql);
  // Polls until `promql` has at least one sample (e.g. a comparison that holds); queries at
  // least once, also with a timeout of 0.
  bool WaitFor(const std::string& promql,
               std::chrono::milliseconds timeout = std::chrono::seconds(40));

  std::string prom_dir_;
  int prom_port_ = 0;
  int server_metrics_port_ = 0;
  std::unique_ptr<ringfs::testing::ChildProcess> prometheus_;

 private:
  // ControlTest::SetUp() with one difference: ringfs-server also serves --metrics. (ControlTest
  // starts the server with the harness defaults and has no hook for more server arguments.)
  void StartServerAndMount();
};

}  // namespace ringfs::controller::testing
