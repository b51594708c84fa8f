// `ringfsctl server ...` against an in-process fake of proto/admin.proto's ServerAdmin (the real
// ringfsctl binary, the real gRPC transport, canned answers), and against the real ringfs-server
// (--admin unix:...) with a real mount as its client. The admin service's own details are tested
// with the server (server/admin_*_test.cc).
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "controller/integration/control_test_base.h"
#include "proto/admin.grpc.pb.h"
#include "tests/harness/fs_util.h"

namespace ringfs::controller::testing {
namespace {

using ::testing::HasSubstr;

class FakeAdmin final : public admin::ServerAdmin::Service {
 public:
  grpc::Status ListSessions(grpc::ServerContext* context, const admin::ListSessionsRequest*,
                            admin::ListSessionsResponse* reply) override {
    if (grpc::Status auth = Check(context); !auth.ok()) return auth;
    admin::SessionInfo* s = reply->add_sessions();
    s->set_session_id(7);
    s->set_client_id("node1:/mnt/data");
    s->set_peer("127.0.0.1:40000");
    s->set_queue(1);
    s->set_max_inflight(64);
    s->set_requests_total(1234);
    return grpc::Status::OK;
  }
  grpc::Status GetExport(grpc::ServerContext* context, const admin::GetExportRequest*,
                         admin::ExportInfo* reply) override {
    if (grpc::Status auth = Check(context); !auth.ok()) return auth;
    reply->set_path("/srv/export");
    reply->set_sessions(2);
    return grpc::Status::OK;
  }
  grpc::Status SetSessionLimit(grpc::ServerContext* context,
                               const admin::SetSessionLimitRequest* request,
                               admin::SessionInfo* reply) override {
    if (grpc::Status auth = Check(context); !auth.ok()) return auth;
    if (request->max_inflight() == 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "max_inflight must be at least 1");
    }
    reply->set_session_id(request->session_id());
    reply->set_max_inflight(request->max_inflight());
    return grpc::Status::OK;
  }
  grpc::Status Drain(grpc::ServerContext* context, const admin::DrainRequest* request,
                     admin::DrainResponse* reply) override {
    if (grpc::Status auth = Check(context); !auth.ok()) return auth;
    last_drain_timeout_ms = request->timeout_ms();
    reply->set_complete(true);
    return grpc::Status::OK;
  }

  std::atomic<uint32_t> last_drain_timeout_ms{0};

 private:
  grpc::Status Check(grpc::ServerContext* context) {
    auto it = context->client_metadata().find("authorization");
    if (it == context->client_metadata().end() ||
        std::string(it->second.data(), it->second.size()) != "Bearer admintoken") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "token required");
    }
    return grpc::Status::OK;
  }
};

class RingfsctlServerTest : public ringfs::testing::RingfsTestBase {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_TRUE(NewEnv());  // only for its temp tree
    token_file_ = env_->base() + "/admin.token";
    ASSERT_EQ(ringfs::testing::WriteFile(token_file_, "admintoken\n", 0600), 0);
    address_ = "unix:" + env_->base() + "/admin.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    RingfsTestBase::TearDown();
  }

  CommandResult Ctl(std::vector<std::string> args, bool json = false) {
    std::vector<std::string> argv;
    if (json) argv.push_back("--json");
    argv.insert(argv.end(), {"server", "--admin", address_, "--token-file", token_file_});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCtl(argv);
  }

  FakeAdmin service_;
  std::unique_ptr<grpc::Server> server_;
  std::string token_file_, address_;
};

TEST_F(RingfsctlServerTest, EveryCommandReachesTheAdminService) {
  CommandResult sessions = Ctl({"sessions"}, /*json=*/true);
  ASSERT_EQ(sessions.exit_code, 0) << sessions.err;
  admin::ListSessionsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(sessions.out, &parsed).ok())
      << sessions.out;
  ASSERT_EQ(parsed.sessions_size(), 1);
  EXPECT_EQ(parsed.sessions(0).session_id(), 7u);

  CommandResult table = Ctl({"sessions"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("node1:/mnt/data"));

  CommandResult exported = Ctl({"export"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("/srv/export"));

  CommandResult limit = Ctl({"set-limit", "7", "32"}, /*json=*/true);
  ASSERT_EQ(limit.exit_code, 0) << limit.err;
  admin::SessionInfo info;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(limit.out, &info).ok());
  EXPECT_EQ(info.max_inflight(), 32u);

  CommandResult refused = Ctl({"set-limit", "7", "0"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("max_inflight must be at least 1"));

  CommandResult drain = Ctl({"drain", "--timeout", "2s"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_THAT(drain.out, HasSubstr("complete"));
  EXPECT_EQ(service_.last_drain_timeout_ms.load(), 2000u);
}

TEST_F(RingfsctlServerTest, WithoutTheTokenTheServiceRefuses) {
  CommandResult result = RunCtl({"server", "--admin", address_, "sessions"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("UNAUTHENTICATED"));
}

// The real server: a uring mount makes one session per queue under one client id.
class RingfsctlRealServerTest : public ringfs::testing::RingfsTestBase {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_TRUE(NewEnv());
    address_ = "unix:" + env_->base() + "/admin.sock";
    ringfs::testing::ServerOptions server;
    server.extra_args = {"--admin", address_};
    ASSERT_TRUE(env_->StartServer(server));
    ASSERT_TRUE(env_->Mount(ringfs::testing::MountOptions{}));
  }

  CommandResult Ctl(std::vector<std::string> args, bool json = false) {
    std::vector<std::string> argv;
    if (json) argv.push_back("--json");
    argv.insert(argv.end(), {"server", "--admin", address_});
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCtl(argv);
  }

  std::string address_;
};

TEST_F(RingfsctlRealServerTest, SessionsExportAndSetLimitAgainstTheRealServer) {
  ASSERT_EQ(ringfs::testing::WriteFile(env_->Mnt("f"), "hello"), 0);
  ASSERT_EQ(ringfs::testing::ReadFile(env_->Mnt("f")), "hello");

  CommandResult sessions = Ctl({"sessions"}, /*json=*/true);
  ASSERT_EQ(sessions.exit_code, 0) << sessions.err;
  admin::ListSessionsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(sessions.out, &parsed).ok())
      << sessions.out;
  ASSERT_GE(parsed.sessions_size(), 1) << sessions.out;
  uint64_t requests = 0;
  for (const admin::SessionInfo& s : parsed.sessions()) {
    EXPECT_FALSE(s.client_id().empty());
    EXPECT_EQ(s.client_id(), parsed.sessions(0).client_id()) << "one mount, one client id";
    EXPECT_GE(s.max_inflight(), 1u);
    requests += s.requests_total();
  }
  EXPECT_GT(requests, 0u) << "the mount's requests are counted";

  CommandResult exported = Ctl({"export"}, /*json=*/true);
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  admin::ExportInfo info;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(exported.out, &info).ok())
      << exported.out;
  EXPECT_EQ(info.path(), env_->export_dir());
  EXPECT_EQ(info.clients(), 1u);
  EXPECT_EQ(info.sessions(), static_cast<uint64_t>(parsed.sessions_size()));

  const std::string id = std::to_string(parsed.sessions(0).session_id());
  CommandResult limit = Ctl({"set-limit", id, "8"}, /*json=*/true);
  ASSERT_EQ(limit.exit_code, 0) << limit.err;
  admin::SessionInfo changed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(limit.out, &changed).ok()) << limit.out;
  EXPECT_EQ(changed.max_inflight(), 8u);
  EXPECT_EQ(ringfs::testing::ReadFile(env_->Mnt("f")), "hello") << "the mount still works";

  CommandResult unknown = Ctl({"set-limit", "999999", "8"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  CommandResult zero = Ctl({"set-limit", id, "0"});
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_THAT(zero.err, HasSubstr("INVALID_ARGUMENT"));
}

}  // namespace
}  // namespace ringfs::controller::testing
