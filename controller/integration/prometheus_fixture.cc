#include "controller/integration/prometheus_fixture.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <limits>
#include <thread>

#include "absl/strings/str_format.h"
#include "tests/harness/fs_util.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

using ::ringfs::testing::HttpGet;

constexpr char kPrometheus[] = "/usr/bin/prometheus";

}  // namespace

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

std::string PrometheusFixture::PrometheusConfig(int mount_port, int server_port) const {
  return absl::StrFormat(
      "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
      "scrape_configs:\n"
      "  - job_name: ringfs-frontend\n"
      "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
      "  - job_name: ringfs-server\n"
      "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
      mount_port, server_port);
}

void PrometheusFixture::SetUp() {
  ASSERT_EQ(access(kPrometheus, X_OK), 0)
      << kPrometheus << " is missing: install Debian's `prometheus` package "
      << "(scripts/install-deps.sh does)";
  StartServerAndMount();
  if (HasFatalFailure() || IsSkipped()) return;
  prom_dir_ = env_->base() + "/prometheus";
  ASSERT_EQ(mkdir(prom_dir_.c_str(), 0755), 0);
  ASSERT_EQ(ringfs::testing::WriteFile(prom_dir_ + "/prometheus.yml",
                                       PrometheusConfig(metrics_port(), server_metrics_port_)),
            0);
  prom_port_ = ringfs::testing::UnusedLoopbackPort();
  std::string error;
  prometheus_ = ringfs::testing::ChildProcess::Spawn(
      {kPrometheus, "--config.file=" + prom_dir_ + "/prometheus.yml",
       "--storage.tsdb.path=" + prom_dir_ + "/tsdb",
       "--web.listen-address=127.0.0.1:" + std::to_string(prom_port_), "--log.level=warn"},
      prom_dir_ + "/prometheus.log", &error);
  ASSERT_NE(prometheus_, nullptr) << error;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (HttpGet(prom_port_, "/-/ready").empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "prometheus did not become ready:\n"
        << ringfs::testing::ReadFileOrEmpty(prom_dir_ + "/prometheus.log");
    ASSERT_TRUE(prometheus_->Running())
        << "prometheus exited:\n"
        << ringfs::testing::ReadFileOrEmpty(prom_dir_ + "/prometheus.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void PrometheusFixture::StartServerAndMount() {
  RingfsTestBase::SetUp();
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(NewEnv());
  server_metrics_port_ = ringfs::testing::UnusedLoopbackPort();
  ringfs::testing::ServerOptions server;
  server.extra_args = {"--metrics", "127.0.0.1:" + std::to_string(server_metrics_port_)};
  ASSERT_TRUE(env_->StartServer(server));
  socket_path_ = env_->base() + "/control.sock";
  control_address_ = "unix:" + socket_path_;
  metrics_port_ = ringfs::testing::UnusedLoopbackPort();
  ringfs::testing::MountOptions options;
  options.transport = Spec().transport;
  options.extra = {"control=" + control_address_,
                   "metrics=127.0.0.1:" + std::to_string(metrics_port_)};
  ASSERT_TRUE(env_->Mount(options));
  // The control service and metrics start right after the mount answers.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (access(socket_path_.c_str(), F_OK) != 0 || HttpGet(metrics_port_, "/metrics").empty() ||
         HttpGet(server_metrics_port_, "/metrics").empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "control/metrics endpoints never answered:\n"
        << env_->DescribeLogs();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void PrometheusFixture::TearDown() {
  if (prometheus_) {
    prometheus_->Signal(SIGTERM);
    if (!prometheus_->WaitExit(std::chrono::seconds(10))) prometheus_->Kill();
    prometheus_.reset();
  }
  ControlTest::TearDown();  // the mount, the server, the temp tree (with Prometheus' data)
}

std::vector<Sample> PrometheusFixture::Query(const std::string& promql) {
  std::string body = HttpGet(prom_port_, "/api/v1/query?query=" + UrlEncode(promql));
  std::vector<Sample> samples;
  google::protobuf::Struct response;
  if (body.empty() || !google::protobuf::util::JsonStringToMessage(body, &response).ok()) {
    ADD_FAILURE() << "query " << promql << " failed: " << body;
    return samples;
  }
  const auto& data = response.fields().at("data").struct_value();
  for (const auto& item : data.fields().at("result").list_value().values()) {
    const auto& fields = item.struct_value().fields();
    Sample sample;
    for (const auto& [name, value] : fields.at("metric").struct_value().fields()) {
      sample.labels[name] = value.string_value();
    }
    // "value": [timestamp, "number"]
    const std::string& text = fields.at("value").list_value().values(1).string_value();
    sample.value = text == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(text);
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::map<std::string, double> PrometheusFixture::ByQueue(const std::string& promql) {
  std::map<std::string, double> out;
  for (const Sample& s : Query(promql)) {
    auto queue = s.labels.find("queue");
    if (queue != s.labels.end()) out[queue->second] = s.value;
  }
  return out;
}

bool PrometheusFixture::WaitFor(const std::string& promql, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (Query(promql).empty()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return true;
}

}  // namespace ringfs::controller::testing
