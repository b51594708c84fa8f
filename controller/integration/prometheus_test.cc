// End to end with a real Prometheus: ringfs-server (--metrics) + ringfs-mount (-o metrics=...)
// and /usr/bin/prometheus (Debian's `prometheus` package) scraping both every second on loopback
// (prometheus_fixture.h). A workload runs through the mount, ringfsctl changes the active
// set and background limits, and Prometheus' HTTP API must then show the per-queue series with the
// values that were set, and the server's series.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "controller/integration/prometheus_fixture.h"
#include "tests/harness/fs_util.h"
#include "tests/harness/process.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

class PrometheusTest : public PrometheusFixture {
 protected:
  void Workload(int cpu, const std::string& tag) {
    std::thread worker([&] {
      ASSERT_TRUE(PinToCpu(cpu));
      for (int i = 0; i < 8; ++i) {
        std::vector<char> bytes = ringfs::testing::RandomBytes(512 * 1024, cpu * 100 + i);
        std::string data(bytes.begin(), bytes.end());
        std::string path = env_->Mnt(tag + std::to_string(i));
        ASSERT_EQ(ringfs::testing::WriteFile(path, data), 0) << path;
        ASSERT_EQ(ringfs::testing::ReadFile(path), data) << path;
      }
    });
    worker.join();
  }

  void CtlOk(const std::vector<std::string>& args) {
    CommandResult result = Ctl(args);
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  }
};

TEST_F(PrometheusTest, PerQueueSeriesAndChangedSettingsReachPrometheus) {
  {
    grpc::ClientContext context;
    control::QueueState state;
    ASSERT_TRUE(NewStub()->ListQueues(&context, {}, &state).ok());
    if (state.queues_size() < 2) GTEST_SKIP() << "needs 2 possible CPUs";
  }

  Workload(0, "a-");
  Workload(1, "b-");
  ASSERT_TRUE(WaitFor("up{job=\"ringfs-frontend\"} == 1"))
      << ringfs::testing::ReadFileOrEmpty(prom_dir_ + "/prometheus.log");
  ASSERT_TRUE(WaitFor("ringfs_frontend_requests_received_total{queue=\"1\"} > 0"));

  // Both queues active: both received and forwarded work.
  std::map<std::string, double> received = ByQueue("ringfs_frontend_requests_received_total");
  EXPECT_GT(received["0"], 0);
  EXPECT_GT(received["1"], 0);
  std::map<std::string, double> forwarded =
      ByQueue("sum by (queue) (ringfs_frontend_requests_total)");
  EXPECT_GT(forwarded["0"], 0);
  EXPECT_GT(forwarded["1"], 0);
  EXPECT_FALSE(Query("ringfs_frontend_requests_total{class=\"foreground\",op=\"WRITE\"}").empty());
  EXPECT_EQ(ByQueue("ringfs_frontend_background_limit")["0"],
            std::numeric_limits<double>::infinity())
      << "unlimited is exported as +Inf";

  // Change the settings with ringfsctl, then run more work on CPU 1.
  CtlOk({"set-active", "0"});
  CtlOk({"bg-limit", "3"});
  CtlOk({"bg-limit", "--queue", "0", "5"});
  ASSERT_TRUE(WaitFor("ringfs_frontend_queue_active{queue=\"1\"} == 0"))
      << "Prometheus never saw the active-set change";
  ASSERT_TRUE(WaitFor("ringfs_frontend_background_limit{queue=\"0\"} == 5"));
  double forwarded1_after_switch = ByQueue("sum by (queue) (ringfs_frontend_requests_total)")["1"];
  double received1_before = ByQueue("ringfs_frontend_requests_received_total")["1"];
  Workload(1, "c-");
  ASSERT_TRUE(WaitFor(absl::StrFormat("ringfs_frontend_requests_received_total{queue=\"1\"} > %f",
                                      received1_before)));

  std::map<std::string, double> active = ByQueue("ringfs_frontend_queue_active");
  EXPECT_EQ(active["0"], 1);
  EXPECT_EQ(active["1"], 0);
  std::map<std::string, double> limits = ByQueue("ringfs_frontend_background_limit");
  EXPECT_EQ(limits["0"], 5);
  EXPECT_EQ(limits["1"], 3);
  // The requests that arrived on qid 1 were forwarded by the active worker on CPU 0.
  EXPECT_EQ(ByQueue("sum by (queue) (ringfs_frontend_requests_total)")["1"],
            forwarded1_after_switch);
  EXPECT_GT(ByQueue("sum by (queue) (ringfs_frontend_handoffs_total{direction=\"in\"})")["0"], 0);

  // Histograms, bytes, connection-wide series and info.
  std::map<std::string, double> durations =
      ByQueue("sum by (queue) (ringfs_frontend_request_duration_seconds_count)");
  EXPECT_GT(durations["0"], 0);
  EXPECT_FALSE(Query("ringfs_frontend_backend_rtt_seconds_bucket{le=\"+Inf\"} > 0").empty());
  std::vector<Sample> p99 =
      Query("histogram_quantile(0.99, sum by (le) (ringfs_frontend_backend_rtt_seconds_bucket))");
  ASSERT_EQ(p99.size(), 1u);
  EXPECT_GT(p99[0].value, 0);
  EXPECT_LT(p99[0].value, 10) << "a loopback round trip";
  EXPECT_GE(Query("sum(ringfs_frontend_bytes_total{direction=\"to_server\"})")[0].value,
            3 * 8 * 512 * 1024)
      << "at least the data written";
  std::vector<Sample> info = Query("ringfs_frontend_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_EQ(info[0].labels["transport"], "uring");
  EXPECT_EQ(info[0].labels["server"], env_->server_address());
  EXPECT_EQ(info[0].value, 1);
  ASSERT_EQ(Query("ringfs_frontend_kernel_max_background").size(), 1u);
  EXPECT_GT(Query("ringfs_frontend_kernel_max_background")[0].value, 0);
  EXPECT_EQ(Query("ringfs_frontend_kernel_waiting").size(), 1u);
  EXPECT_EQ(Query("ringfs_frontend_kernel_congestion_threshold").size(), 1u);
  EXPECT_EQ(Query("ringfs_frontend_inflight").size(), 2u);
  EXPECT_EQ(Query("ringfs_frontend_background_inflight").size(), 2u);
  EXPECT_EQ(Query("ringfs_frontend_background_queued").size(), 2u);
  EXPECT_EQ(Query("ringfs_frontend_backend_reconnects_total").size(), 2u);
  // The workload's creates were followed by directory GETATTRs answered from post-op attributes.
  EXPECT_EQ(Query("ringfs_frontend_local_answers_total").size(), 2u);
  EXPECT_TRUE(WaitFor("sum(ringfs_frontend_local_answers_total) > 0"));

  // Expected errors are replies with an errno, not failures (regression: 50 stats of missing
  // names used to count as 50 errors). Missing names are negative entries now (success replies),
  // so the expected error is a missing extended attribute.
  const std::string probe = env_->Mnt("xattr-probe");
  { std::ofstream(probe) << "x"; }
  for (int i = 0; i < 50; ++i) {
    char value[8];
    ASSERT_LT(::getxattr(probe.c_str(), "user.missing", value, sizeof(value)), 0);
    ASSERT_EQ(errno, ENODATA);
  }
  ASSERT_TRUE(WaitFor("sum(ringfs_frontend_replies_total{errno=\"ENODATA\"}) >= 50"));
  EXPECT_FALSE(Query("ringfs_frontend_replies_total{errno=\"0\"}").empty());
  EXPECT_EQ(Query("ringfs_frontend_failures_total").size(), 2u * 5) << "every queue and reason";
  EXPECT_TRUE(Query("sum(ringfs_frontend_failures_total) > 0").empty())
      << "a missing attribute is not a failure";
  EXPECT_EQ(Query("ringfs_frontend_interrupted_total").size(), 2u);

  // The server's endpoint, scraped as job ringfs-server: it served the workload's writes.
  ASSERT_TRUE(WaitFor("up{job=\"ringfs-server\"} == 1"))
      << ringfs::testing::ReadFileOrEmpty(prom_dir_ + "/prometheus.log");
  ASSERT_TRUE(WaitFor("ringfs_server_requests_total{job=\"ringfs-server\",op=\"WRITE\"} > 0"));
  EXPECT_TRUE(WaitFor(absl::StrFormat(
      "sum(ringfs_server_bytes_total{direction=\"received\"}) >= %d", 3 * 8 * 512 * 1024)))
      << "at least the data written";
  std::vector<Sample> sessions = Query("ringfs_server_sessions");
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_GE(sessions[0].value, 1) << "the mount's connections";
  EXPECT_EQ(Query("ringfs_server_inflight").size(), static_cast<size_t>(sessions[0].value));
}

}  // namespace
}  // namespace ringfs::controller::testing
