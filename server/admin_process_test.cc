// The real ringfs-server process (tests/harness: temp tree, watchdog, forced cleanup) with
// --admin and --metrics: raw wire clients (test_client) make sessions and traffic; the admin
// service is called over gRPC and /metrics is read with a plain HTTP GET. Loopback only.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "proto/admin.grpc.pb.h"
#include "server/test_client.h"
#include "tests/harness/fs_util.h"
#include "tests/harness/process.h"
#include "tests/harness/ringfs_test.h"
#include "tests/harness/system.h"

namespace ringfs::server {
namespace {

using ringfs::testing::HttpGet;
using testing::Bytes;
using testing::CName;
using testing::DefaultHello;
using testing::Frame;
using testing::Reply;
using testing::TestClient;

// One sample of the Prometheus text format: metric name and labels as written.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Sample> ParseMetrics(const std::string& text) {
  std::vector<Sample> out;
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  for (const std::string& line : lines) {
    if (line.empty() || line.front() == '#') continue;
    size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    Sample sample;
    const std::string key = line.substr(0, space);
    const std::string value = line.substr(space + 1);
    if (value == "+Inf") {
      sample.value = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(value, &sample.value)) {
      continue;
    }
    size_t brace = key.find('{');
    sample.name = key.substr(0, brace);
    // name{a="x",b="y"}: label values here never contain quotes or commas.
    for (size_t pos = brace; pos != std::string::npos && pos + 1 < key.size();) {
      size_t eq = key.find("=\"", pos + 1);
      size_t close = eq == std::string::npos ? eq : key.find('"', eq + 2);
      if (close == std::string::npos) break;
      sample.labels[key.substr(pos + 1, eq - pos - 1)] = key.substr(eq + 2, close - eq - 2);
      pos = close + 1;  // at ',' or '}'
    }
    out.push_back(std::move(sample));
  }
  return out;
}

// Sum of the samples named `name` whose labels include `labels`; -1 when there is none.
double Value(const std::vector<Sample>& samples, const std::string& name,
             const std::map<std::string, std::string>& labels = {}) {
  double sum = 0;
  bool found = false;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      match = match && it != s.labels.end() && it->second == v;
    }
    if (!match) continue;
    sum += s.value;
    found = true;
  }
  return found ? sum : -1;
}

class ServerAdminProcessTest : public ringfs::testing::RingfsTestBase {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_TRUE(NewEnv());
  }

  // Starts ringfs-server with the admin service on a Unix socket in the temp tree and metrics
  // on a free loopback port.
  void StartUnixAdmin() {
    socket_path_ = env_->base() + "/admin.sock";
    metrics_port_ = ringfs::testing::UnusedLoopbackPort();
    ringfs::testing::ServerOptions options;
    options.workers = 2;
    options.extra_args = {"--admin", "unix:" + socket_path_, "--metrics",
                          "127.0.0.1:" + std::to_string(metrics_port_)};
    ASSERT_TRUE(env_->StartServer(options));
    stub_ = admin::ServerAdmin::NewStub(
        grpc::CreateChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials()));
  }

  std::unique_ptr<TestClient> Connect(const std::string& client_id, uint32_t queue,
                                      const std::string& token = "") {
    wire::ClientHello hello = DefaultHello(client_id);
    hello.set_queue(queue);
    wire::ServerHello reply;
    auto client = TestClient::Connect(env_->server_address(), hello, &reply, token);
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(reply.result(), wire::ServerHello::OK) << reply.message();
    return client.ok() ? *std::move(client) : nullptr;
  }

  Reply Call(TestClient& client, const std::string& frame) {
    auto reply = client.Call(frame);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : Reply{};
  }
  Reply Getattr(TestClient& client) {
    return Call(client, Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{})));
  }

  admin::ListSessionsResponse Sessions() {
    grpc::ClientContext context;
    admin::ListSessionsResponse reply;
    grpc::Status status = stub_->ListSessions(&context, {}, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply;
  }
  admin::ExportInfo Export() {
    grpc::ClientContext context;
    admin::ExportInfo reply;
    grpc::Status status = stub_->GetExport(&context, {}, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply;
  }
  grpc::Status SetLimit(uint64_t session, uint32_t limit, admin::SessionInfo* reply) {
    grpc::ClientContext context;
    admin::SetSessionLimitRequest request;
    request.set_session_id(session);
    request.set_max_inflight(limit);
    return stub_->SetSessionLimit(&context, request, reply);
  }
  std::vector<Sample> Scrape() {
    std::string body = HttpGet(metrics_port_, "/metrics");
    EXPECT_FALSE(body.empty()) << "no /metrics on port " << metrics_port_;
    return ParseMetrics(body);
  }

  std::string socket_path_;
  int metrics_port_ = 0;
  std::unique_ptr<admin::ServerAdmin::Stub> stub_;
  uint64_t unique_ = 100;
};

TEST_F(ServerAdminProcessTest, SessionsExportAndLimits) {
  ASSERT_NO_FATAL_FAILURE(StartUnixAdmin());
  struct stat st {};
  ASSERT_EQ(stat(socket_path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the socket's mode is the access control";

  const int64_t before = absl::ToUnixNanos(absl::Now());
  std::unique_ptr<TestClient> a = Connect("node1:/mnt", 0);
  std::unique_ptr<TestClient> b = Connect("node1:/mnt", 3);
  ASSERT_TRUE(a && b);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Getattr(*a).header.error, 0);
  EXPECT_EQ(Getattr(*b).header.error, 0);

  admin::ListSessionsResponse sessions = Sessions();
  ASSERT_EQ(sessions.sessions_size(), 2) << sessions.DebugString();
  const admin::SessionInfo& sa = sessions.sessions(0);
  const admin::SessionInfo& sb = sessions.sessions(1);
  EXPECT_LT(sa.session_id(), sb.session_id());
  EXPECT_EQ(sa.client_id(), "node1:/mnt");
  EXPECT_EQ(sa.queue(), 0u);
  EXPECT_EQ(sb.queue(), 3u);
  EXPECT_EQ(sa.peer().rfind("127.0.0.1:", 0), 0u) << sa.peer();
  EXPECT_EQ(sa.max_inflight(), 64u) << "negotiated in the handshake";
  EXPECT_EQ(sa.inflight(), 0u);
  EXPECT_EQ(sa.requests_total(), 3u);
  EXPECT_EQ(sb.requests_total(), 1u);
  EXPECT_EQ(sa.bytes_received(), 3 * (sizeof(fuse_in_header) + sizeof(fuse_getattr_in)));
  EXPECT_EQ(sa.bytes_sent(), 3 * (sizeof(fuse_out_header) + sizeof(fuse_attr_out)));
  EXPECT_GE(sa.connected_unix_ns(), before - 1'000'000'000);
  EXPECT_LE(sa.connected_unix_ns(), absl::ToUnixNanos(absl::Now()));

  admin::ExportInfo info = Export();
  EXPECT_EQ(info.path(), env_->export_dir());
  EXPECT_EQ(info.sessions(), 2u);
  EXPECT_EQ(info.clients(), 1u) << "both sessions belong to one client id";
  EXPECT_FALSE(info.draining());
  EXPECT_FALSE(info.floor_mode());
  EXPECT_FALSE(info.server_id().empty());

  // Validation, then a change applied by the owning worker and read back.
  admin::SessionInfo reply;
  EXPECT_EQ(SetLimit(sa.session_id(), 0, &reply).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(SetLimit(999999, 4, &reply).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status set = SetLimit(sa.session_id(), 1, &reply);
  ASSERT_TRUE(set.ok()) << set.error_message();
  EXPECT_EQ(reply.session_id(), sa.session_id());
  EXPECT_EQ(reply.max_inflight(), 1u);
  EXPECT_EQ(Sessions().sessions(0).max_inflight(), 1u);
  EXPECT_EQ(Sessions().sessions(1).max_inflight(), 64u) << "only that session changed";

  // At limit 1 a batch is still served, one request at a time.
  std::string batch;
  for (int i = 0; i < 8; ++i) batch += Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{}));
  ASSERT_TRUE(a->Send(batch).ok());
  for (int i = 0; i < 8; ++i) {
    auto r = a->Receive();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->header.error, 0);
  }
  ASSERT_TRUE(SetLimit(sa.session_id(), 32, &reply).ok());
  EXPECT_EQ(reply.max_inflight(), 32u);
  EXPECT_EQ(Getattr(*a).header.error, 0);

  // A closed session leaves the list.
  b.reset();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Sessions().sessions_size() != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Sessions().sessions_size(), 1);
  EXPECT_EQ(SetLimit(sb.session_id(), 4, &reply).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerAdminProcessTest, MetricsShowRequestsErrorsRejectionsAndSessions) {
  ASSERT_NO_FATAL_FAILURE(StartUnixAdmin());
  std::unique_ptr<TestClient> a = Connect("metrics-client", 0);
  std::unique_ptr<TestClient> b = Connect("metrics-client", 1);
  ASSERT_TRUE(a && b);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Getattr(*a).header.error, 0);
  EXPECT_EQ(Call(*a, Frame(FUSE_LOOKUP, ++unique_, 1, CName("missing"))).header.error, -ENOENT);
  EXPECT_EQ(Call(*a, Frame(FUSE_LOOKUP, ++unique_, 1, CName("a/b"))).header.error, -EINVAL);
  EXPECT_EQ(Call(*b, Frame(9999, ++unique_, 1, "")).header.error, -ENOSYS);

  std::vector<Sample> m = Scrape();
  EXPECT_EQ(Value(m, "ringfs_server_requests_total", {{"op", "GETATTR"}}), 5);
  EXPECT_EQ(Value(m, "ringfs_server_requests_total", {{"op", "LOOKUP"}}), 1)
      << "the refused LOOKUP is a rejected frame, not a request";
  EXPECT_EQ(Value(m, "ringfs_server_request_duration_seconds_count", {{"op", "GETATTR"}}), 5);
  EXPECT_EQ(Value(m, "ringfs_server_request_duration_seconds_bucket",
                  {{"op", "GETATTR"}, {"le", "+Inf"}}),
            5);
  EXPECT_GE(
      Value(m, "ringfs_server_request_duration_seconds_bucket", {{"op", "GETATTR"}, {"le", "10"}}),
      5)
      << "a loopback GETATTR takes less than 10 s";
  double sum = Value(m, "ringfs_server_request_duration_seconds_sum", {{"op", "GETATTR"}});
  EXPECT_GT(sum, 0);
  EXPECT_LT(sum, 5);
  EXPECT_GT(Value(m, "ringfs_server_bytes_total", {{"direction", "received"}}),
            5 * (sizeof(fuse_in_header) + sizeof(fuse_getattr_in)) - 1);
  EXPECT_GT(Value(m, "ringfs_server_bytes_total", {{"direction", "sent"}}),
            5 * (sizeof(fuse_out_header) + sizeof(fuse_attr_out)) - 1);
  // Requests sent one at a time, each waiting for its reply: one send each at least.
  EXPECT_GE(Value(m, "ringfs_server_sends_total", {}), 5);
  EXPECT_EQ(Value(m, "ringfs_server_errors_total", {{"errno", "ENOENT"}}), 1);
  EXPECT_EQ(Value(m, "ringfs_server_errors_total", {{"errno", "EINVAL"}}), 1);
  EXPECT_EQ(Value(m, "ringfs_server_errors_total", {{"errno", "ENOSYS"}}), 1);
  EXPECT_EQ(Value(m, "ringfs_server_frames_rejected_total", {{"reason", "bad_name"}}), 1);
  EXPECT_EQ(Value(m, "ringfs_server_frames_rejected_total", {{"reason", "unknown_opcode"}}), 1);
  EXPECT_EQ(Value(m, "ringfs_server_frames_rejected_total", {{"reason", "bad_length"}}), 0);
  EXPECT_EQ(Value(m, "ringfs_server_sessions"), 2);
  admin::ListSessionsResponse sessions = Sessions();
  ASSERT_EQ(sessions.sessions_size(), 2);
  // A request counts as in flight until its reply's SENDMSG has completed at the server, which
  // may be just after the client has read the reply: wait (bounded) for the gauges to settle.
  auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto busy = [&](const std::vector<Sample>& samples) {
    for (const admin::SessionInfo& s : sessions.sessions()) {
      if (Value(samples, "ringfs_server_inflight",
                {{"session", std::to_string(s.session_id())}}) != 0) {
        return true;
      }
    }
    return false;
  };
  while (busy(m) && std::chrono::steady_clock::now() < settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    m = Scrape();
  }
  for (const admin::SessionInfo& s : sessions.sessions()) {
    EXPECT_EQ(Value(m, "ringfs_server_inflight", {{"session", std::to_string(s.session_id())}}), 0)
        << "session " << s.session_id();
  }

  // A frame length outside the limits closes the connection and is counted.
  uint32_t bad_length = 3;
  ASSERT_TRUE(b->Send(Bytes(bad_length)).ok());
  EXPECT_TRUE(b->WaitClosed());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Value(m = Scrape(), "ringfs_server_sessions") != 1 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Value(m, "ringfs_server_sessions"), 1);
  EXPECT_EQ(Value(m, "ringfs_server_frames_rejected_total", {{"reason", "bad_length"}}), 1);
}

TEST_F(ServerAdminProcessTest, DrainRefusesNewConnectionsAndRequests) {
  ASSERT_NO_FATAL_FAILURE(StartUnixAdmin());
  std::unique_ptr<TestClient> a = Connect("drain-client", 0);
  ASSERT_TRUE(a);
  EXPECT_EQ(Getattr(*a).header.error, 0);

  grpc::ClientContext context;
  admin::DrainRequest request;
  request.set_timeout_ms(2000);
  admin::DrainResponse reply;
  grpc::Status drained = stub_->Drain(&context, request, &reply);
  ASSERT_TRUE(drained.ok()) << drained.error_message();
  EXPECT_TRUE(reply.complete());
  EXPECT_EQ(reply.remaining_inflight(), 0u);
  EXPECT_TRUE(Export().draining());

  // Existing sessions get ESHUTDOWN; new connections are refused.
  EXPECT_EQ(Getattr(*a).header.error, -ESHUTDOWN);
  EXPECT_EQ(Sessions().sessions_size(), 1) << "the session stays, its requests are refused";
  wire::ServerHello hello_reply;
  auto late = TestClient::Connect(env_->server_address(), DefaultHello("late"), &hello_reply);
  EXPECT_FALSE(late.ok() && hello_reply.result() == wire::ServerHello::OK)
      << "a new connection was accepted while draining";
  std::vector<Sample> m = Scrape();
  EXPECT_EQ(Value(m, "ringfs_server_errors_total", {{"errno", "ESHUTDOWN"}}), 1);

  // Draining twice is fine; the server still stops cleanly.
  grpc::ClientContext again;
  ASSERT_TRUE(stub_->Drain(&again, request, &reply).ok());
  EXPECT_TRUE(reply.complete());
  a.reset();
  EXPECT_TRUE(env_->StopServer());
  EXPECT_NE(access(socket_path_.c_str(), F_OK), 0) << "the admin socket is removed on exit";
}

TEST_F(ServerAdminProcessTest, TcpAdminRequiresTheToken) {
  const std::string token = "adm1n-" + std::to_string(getpid());
  const std::string token_file = env_->base() + "/server.token";
  ASSERT_EQ(ringfs::testing::WriteFile(token_file, token + "\n", 0600), 0);
  const int admin_port = ringfs::testing::UnusedLoopbackPort();
  const std::string admin_address = "127.0.0.1:" + std::to_string(admin_port);

  // Without --token-file the server refuses to start a TCP admin service (usage error).
  std::optional<int> refused = ringfs::testing::RunCommand(
      {ringfs::testing::BinPath("ringfs-server"), "--export", env_->export_dir(), "--listen",
       "127.0.0.1:0", "--admin", admin_address, "--handle-key", env_->base() + "/handle.key"},
      env_->base() + "/refused.log", std::chrono::seconds(10));
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(WIFEXITED(*refused) && WEXITSTATUS(*refused) == 2)
      << ringfs::testing::DescribeWaitStatus(*refused) << "\n"
      << ringfs::testing::ReadFileOrEmpty(env_->base() + "/refused.log");

  ringfs::testing::ServerOptions options;
  options.token_file = token_file;
  options.extra_args = {"--admin", admin_address};
  ASSERT_TRUE(env_->StartServer(options));
  stub_ = admin::ServerAdmin::NewStub(
      grpc::CreateChannel(admin_address, grpc::InsecureChannelCredentials()));
  std::unique_ptr<TestClient> client = Connect("tcp-client", 0, token);
  ASSERT_TRUE(client);

  auto list = [&](const std::string& authorization, admin::ListSessionsResponse* reply) {
    grpc::ClientContext context;
    if (!authorization.empty()) context.AddMetadata("authorization", authorization);
    return stub_->ListSessions(&context, {}, reply).error_code();
  };
  admin::ListSessionsResponse reply;
  EXPECT_EQ(list("", &reply), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(list("Bearer not-" + token, &reply), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(list("Bearer " + token, &reply), grpc::StatusCode::OK);
  EXPECT_EQ(reply.sessions_size(), 1);

  grpc::ClientContext context;
  admin::DrainRequest drain;
  admin::DrainResponse drained;
  EXPECT_EQ(stub_->Drain(&context, drain, &drained).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext authorized;
  authorized.AddMetadata("authorization", "Bearer " + token);
  admin::ExportInfo info;
  ASSERT_TRUE(stub_->GetExport(&authorized, {}, &info).ok());
  EXPECT_FALSE(info.draining()) << "the refused Drain changed nothing";
}

// The real process with a clients file: a world-readable one refuses to start (exit 2, naming
// the file); a good one serves, and refusals show in /metrics by reason.
TEST_F(ServerAdminProcessTest, ClientsFileRulesAndAuthFailureMetrics) {
  const std::string clients = env_->base() + "/clients";
  const std::string line = "alpha secret=hex:00112233445566778899aabbccddeeff\n";
  ASSERT_EQ(ringfs::testing::WriteFile(clients, line, 0644), 0);
  const std::string log = env_->base() + "/refused.log";
  std::optional<int> refused = ringfs::testing::RunCommand(
      {ringfs::testing::BinPath("ringfs-server"), "--export", env_->export_dir(), "--listen",
       "127.0.0.1:0", "--clients", clients, "--handle-key", env_->base() + "/handle.key"},
      log, std::chrono::seconds(10));
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(WIFEXITED(*refused) && WEXITSTATUS(*refused) == 2)
      << ringfs::testing::DescribeWaitStatus(*refused);
  EXPECT_NE(ringfs::testing::ReadFileOrEmpty(log).find("chmod 600"), std::string::npos)
      << ringfs::testing::ReadFileOrEmpty(log);

  ASSERT_EQ(chmod(clients.c_str(), 0600), 0);
  metrics_port_ = ringfs::testing::UnusedLoopbackPort();
  ringfs::testing::ServerOptions options;
  options.extra_args = {"--clients", clients, "--metrics",
                        "127.0.0.1:" + std::to_string(metrics_port_)};
  ASSERT_TRUE(env_->StartServer(options));
  // No secret: AUTH_FAILED (after the delay), counted as no_secret.
  wire::ClientHello hello = DefaultHello("m1");
  hello.set_client_name("alpha");
  wire::ServerHello reply;
  auto client = TestClient::Connect(env_->server_address(), hello, &reply);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(reply.result(), wire::ServerHello::AUTH_FAILED);
  // The right secret gets in.
  auto right = TestClient::Connect(env_->server_address(), hello, &reply,
                                   std::string("\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99"
                                               "\xaa\xbb\xcc\xdd\xee\xff", 16));
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(reply.result(), wire::ServerHello::OK) << reply.message();
  std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Value(samples, "ringfs_server_auth_failures_total", {{"reason", "no_secret"}}), 1);
  EXPECT_EQ(Value(samples, "ringfs_server_auth_failures_total", {{"reason", "bad_proof"}}), 0);
  EXPECT_EQ(Value(samples, "ringfs_server_auth_failures_total"), 1) << "all reasons together";
}

}  // namespace
}  // namespace ringfs::server
