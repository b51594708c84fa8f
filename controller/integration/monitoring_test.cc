// deploy/monitoring against the real thing: a ringfs-server (--metrics) and a ringfs-mount
// (-o metrics=) after a small workload; `promtool check metrics` on both /metrics pages; a real
// Prometheus (prometheus_fixture.h) scraping them as jobs ringfs-mount and ringfs-server with
// deploy/monitoring/ringfs-rules.yml loaded. Every rule must evaluate without error, no alert may
// fire on this healthy pair, every recording rule (its expression and its recorded series) and
// every query of deploy/monitoring/grafana-ringfs.json (panel targets and template variables)
// must return at least one series. Then the server is stopped (SIGSTOP): RingfsServerDown must
// become pending and a request through the mount must show as waiting in the kernel.
#include <dirent.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "controller/integration/prometheus_fixture.h"
#include "tests/harness/fs_util.h"
#include "tests/harness/process.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using ::ringfs::testing::HttpGet;
using ::ringfs::testing::ReadFileOrEmpty;

constexpr char kPromtool[] = "/usr/bin/promtool";
const std::string kMonitoringDir = RINGFS_MONITORING_DIR;
// Long enough for a few 1 s scrapes and rule evaluations after the workload.
constexpr auto kSeriesWait = std::chrono::seconds(20);

// Grafana's variables as the test evaluates them: every template variable ($queue, ${server},
// ${instance:regex}) selects everything, the interval variables are 5 s (five 1 s scrapes).
std::string SubstituteVariables(const std::string& expr) {
  static const std::regex kInterval(R"(\$\{?__(rate_interval|interval|range)\}?)");
  static const std::regex kVariable(R"(\$\{(\w+)(:\w+)?\}|\$(\w+))");
  return std::regex_replace(std::regex_replace(expr, kInterval, "5s"), kVariable, ".*");
}

// Every panel target's expression, rows' nested panels included.
void CollectPanelExprs(const Value& panels, std::vector<std::string>* out) {
  for (const Value& panel : panels.list_value().values()) {
    const auto& fields = panel.struct_value().fields();
    if (auto nested = fields.find("panels"); nested != fields.end()) {
      CollectPanelExprs(nested->second, out);
    }
    auto targets = fields.find("targets");
    if (targets == fields.end()) continue;
    for (const Value& target : targets->second.list_value().values()) {
      auto expr = target.struct_value().fields().find("expr");
      if (expr != target.struct_value().fields().end()) out->push_back(expr->second.string_value());
    }
  }
}

class MonitoringTest : public PrometheusFixture {
 protected:
  std::chrono::seconds Budget() const override { return std::chrono::seconds(75); }

  std::string PrometheusConfig(int mount_port, int server_port) const override {
    // The job names of deploy/monitoring/prometheus.yml, which the rules match on.
    return absl::StrFormat(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - '%s/ringfs-rules.yml'\n"
        "scrape_configs:\n"
        "  - job_name: ringfs-mount\n"
        "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
        "  - job_name: ringfs-server\n"
        "    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
        kMonitoringDir, mount_port, server_port);
  }

  // Writes and reads files, makes a directory and lists it, and asks for missing extended
  // attributes (errno answers on both sides), so that the histograms, op and errno series exist.
  void Workload() {
    ASSERT_EQ(mkdir(env_->Mnt("dir").c_str(), 0755), 0);
    for (int i = 0; i < 8; ++i) {
      std::vector<char> bytes = ringfs::testing::RandomBytes(256 * 1024, i);
      std::string data(bytes.begin(), bytes.end());
      std::string path = env_->Mnt("dir/f" + std::to_string(i));
      ASSERT_EQ(ringfs::testing::WriteFile(path, data), 0) << path;
      ASSERT_EQ(ringfs::testing::ReadFile(path), data) << path;
      char value[8];
      ASSERT_LT(::getxattr(path.c_str(), "user.missing", value, sizeof(value)), 0);
    }
    DIR* dir = opendir(env_->Mnt("dir").c_str());
    ASSERT_NE(dir, nullptr);
    int entries = 0;
    while (readdir(dir) != nullptr) ++entries;
    closedir(dir);
    EXPECT_EQ(entries, 8 + 2);
  }

  // `promtool check metrics` on what the endpoint on `port` serves now.
  void CheckMetrics(int port, const std::string& what) {
    std::string page = HttpGet(port, "/metrics");
    ASSERT_FALSE(page.empty()) << what << ": no /metrics";
    std::string path = env_->base() + "/" + what + ".metrics";
    ASSERT_EQ(ringfs::testing::WriteFile(path, page), 0);
    CommandResult result = RunCapture(
        {"/bin/sh", "-c", absl::StrCat("exec ", kPromtool, " check metrics < '", path, "'")});
    EXPECT_EQ(result.exit_code, 0) << "promtool check metrics on " << what << "'s /metrics:\n"
                                   << result.out << result.err;
  }

  // GET /api/v1/rules: the rules Prometheus loaded, with their health and state.
  std::vector<Struct> Rules() {
    std::vector<Struct> rules;
    std::string body = HttpGet(prom_port_, "/api/v1/rules");
    Struct response;
    if (body.empty() || !google::protobuf::util::JsonStringToMessage(body, &response).ok()) {
      ADD_FAILURE() << "/api/v1/rules failed: " << body;
      return rules;
    }
    const auto& groups =
        response.fields().at("data").struct_value().fields().at("groups").list_value();
    for (const Value& group : groups.values()) {
      for (const Value& rule : group.struct_value().fields().at("rules").list_value().values()) {
        rules.push_back(rule.struct_value());
      }
    }
    return rules;
  }

  // The state of alerting rule `name` ("inactive", "pending", "firing"; "" when missing).
  std::string AlertState(const std::string& name) {
    for (const Struct& rule : Rules()) {
      if (Field(rule, "type") == "alerting" && Field(rule, "name") == name) {
        return Field(rule, "state");
      }
    }
    return "";
  }

  static std::string Field(const Struct& rule, const std::string& name) {
    auto it = rule.fields().find(name);
    return it == rule.fields().end() ? "" : it->second.string_value();
  }
};

TEST_F(MonitoringTest, RulesAndEveryDashboardQueryWorkOnRealMetrics) {
  ASSERT_EQ(access(kPromtool, X_OK), 0) << kPromtool << " is missing (Debian's `prometheus`)";
  Workload();
  if (HasFatalFailure()) return;
  // A finite limit, so that the "limit" line of the background panel has a series.
  CommandResult limit = Ctl({"bg-limit", "64"});
  ASSERT_EQ(limit.exit_code, 0) << limit.out << limit.err;

  CheckMetrics(metrics_port(), "mount");
  CheckMetrics(server_metrics_port_, "server");

  ASSERT_TRUE(WaitFor("up{job=\"ringfs-mount\"} == 1") && WaitFor("up{job=\"ringfs-server\"} == 1"))
      << ReadFileOrEmpty(prom_dir_ + "/prometheus.log");
  ASSERT_TRUE(WaitFor("ringfs_frontend_background_limit == 64"));

  // The rules: all loaded, evaluated without error; no alert pending or firing on this healthy
  // pair (RingfsServerTargetsMissing may be pending until the first scrape of the server).
  std::vector<Struct> rules;
  std::vector<std::string> problems;
  auto deadline = std::chrono::steady_clock::now() + kSeriesWait;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    rules = Rules();
    problems.clear();
    for (const Struct& rule : rules) {
      if (Field(rule, "health") != "ok") {
        problems.push_back(absl::StrCat(Field(rule, "name"), ": health ", Field(rule, "health"),
                                        " ", Field(rule, "lastError")));
      }
      if (Field(rule, "type") == "alerting" && Field(rule, "state") != "inactive") {
        problems.push_back(absl::StrCat(Field(rule, "name"), ": ", Field(rule, "state")));
      }
    }
  } while (!problems.empty() && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(rules.size(), 17u) << "ringfs-rules.yml has 9 recording and 8 alerting rules";
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");

  // From here on one deadline for all queries: a missing series costs its wait once, and a
  // broken dashboard fails with every query named, well before the watchdog.
  const auto series_deadline = std::chrono::steady_clock::now() + kSeriesWait;
  auto remaining = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        series_deadline - std::chrono::steady_clock::now()));
  };

  // Every recording rule: its expression and the series it records.
  int recording = 0;
  for (const Struct& rule : rules) {
    if (Field(rule, "type") != "recording") continue;
    ++recording;
    EXPECT_TRUE(WaitFor(Field(rule, "query"), remaining()))
        << "recording rule " << Field(rule, "name") << ": no series from " << Field(rule, "query");
    EXPECT_TRUE(WaitFor(Field(rule, "name"), remaining()))
        << "recording rule " << Field(rule, "name") << " recorded nothing";
  }
  EXPECT_EQ(recording, 9);

  // The dashboard.
  Struct dashboard;
  const std::string json = ReadFileOrEmpty(kMonitoringDir + "/grafana-ringfs.json");
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &dashboard).ok())
      << "grafana-ringfs.json does not parse";
  EXPECT_EQ(dashboard.fields().at("schemaVersion").number_value(), 39);
  std::vector<std::string> exprs;
  CollectPanelExprs(dashboard.fields().at("panels"), &exprs);
  EXPECT_GE(exprs.size(), 35u) << "the dashboard's panels lost their queries?";
  for (const std::string& expr : exprs) {
    std::string promql = SubstituteVariables(expr);
    EXPECT_TRUE(WaitFor(promql, remaining())) << "dashboard query returns no series: " << promql;
  }
  // Template variables: label_values(SELECTOR, LABEL) must find series carrying LABEL.
  static const std::regex kLabelValues(R"(^label_values\((.*),\s*(\w+)\)$)");
  int variables = 0;
  const Struct& templating = dashboard.fields().at("templating").struct_value();
  for (const Value& variable : templating.fields().at("list").list_value().values()) {
    const auto& fields = variable.struct_value().fields();
    if (fields.at("type").string_value() != "query") continue;
    ++variables;
    const std::string query = fields.at("definition").string_value();
    std::smatch match;
    ASSERT_TRUE(std::regex_match(query, match, kLabelValues)) << "unexpected variable " << query;
    std::string selector = SubstituteVariables(match[1].str());
    const std::string label = match[2].str();
    bool found = false;
    for (const Sample& s : Query(selector)) found |= s.labels.count(label) > 0;
    EXPECT_TRUE(found) << "variable " << fields.at("name").string_value() << ": no " << label
                       << " label on " << selector;
  }
  EXPECT_EQ(variables, 3);
  // Annotation queries (the firing ringfs alerts): they must evaluate; empty is right here.
  int annotations = 0;
  const Struct& annotation_list = dashboard.fields().at("annotations").struct_value();
  for (const Value& annotation : annotation_list.fields().at("list").list_value().values()) {
    auto expr = annotation.struct_value().fields().find("expr");
    if (expr == annotation.struct_value().fields().end()) continue;
    ++annotations;
    EXPECT_TRUE(Query(SubstituteVariables(expr->second.string_value())).empty())
        << "an alert fires: " << expr->second.string_value();
  }
  EXPECT_EQ(annotations, 1);

  // A server that stops answering, seen for real: its scrapes fail (RingfsServerDown becomes
  // pending with the real job label; firing takes its 1 minute), and a request through the
  // mount waits in the kernel (the first half of RingfsMountStalled).
  ringfs::testing::ChildProcess* server = env_->server_process();
  ASSERT_TRUE(ringfs::testing::StopAndWait(server));
  std::thread blocked([&] {
    // A create always goes to the server (a lookup of an absent name may be answered by the
    // mount: frontend/complete_dirs.h); answered once the server resumes.
    ::mkdir(env_->Mnt("made-while-stopped").c_str(), 0755);
  });
  bool down_pending = false;
  auto stopped_deadline = std::chrono::steady_clock::now() + kSeriesWait;
  while (!down_pending && std::chrono::steady_clock::now() < stopped_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    down_pending = AlertState("RingfsServerDown") == "pending";
  }
  bool waiting_seen =
      WaitFor("ringfs_frontend_kernel_waiting{job=\"ringfs-mount\"} > 0", std::chrono::seconds(5));
  server->Signal(SIGCONT);
  blocked.join();
  EXPECT_TRUE(down_pending) << "RingfsServerDown never became pending with the server stopped";
  EXPECT_TRUE(waiting_seen) << "no request seen waiting in the kernel with the server stopped";
  EXPECT_TRUE(WaitFor("up{job=\"ringfs-server\"} == 1")) << "the server's scrapes did not resume";

  std::cout << "evaluated " << rules.size() << " rules, " << exprs.size() << " dashboard queries, "
            << variables << " variables and " << annotations << " annotation queries\n";
}

}  // namespace
}  // namespace ringfs::controller::testing
