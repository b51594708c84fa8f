// AdminService's handlers over gRPC's in-process channel, against a fake backend: request
// validation, the status mapping at the edge, the token rule, and that handlers only pass on.
#include "server/admin_service.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

namespace ringfs::server {
namespace {

class FakeBackend final : public AdminBackend {
 public:
  admin::ListSessionsResponse ListSessions() const override {
    admin::ListSessionsResponse reply;
    reply.add_sessions()->set_session_id(7);
    return reply;
  }
  admin::ExportInfo GetExport() const override {
    admin::ExportInfo info;
    info.set_path("/srv/export");
    return info;
  }
  admin::ListClientsResponse ListClients() const override {
    admin::ListClientsResponse reply;
    reply.add_clients()->set_name("alpha");
    return reply;
  }
  absl::StatusOr<admin::SessionInfo> SetSessionLimit(uint64_t session_id,
                                                     uint32_t max_inflight) override {
    ++set_limit_calls;
    if (session_id != 7) return absl::NotFoundError("no live session");
    admin::SessionInfo info;
    info.set_session_id(session_id);
    info.set_max_inflight(max_inflight);
    return info;
  }
  admin::DrainResponse Drain(absl::Duration timeout, std::function<bool()> cancelled) override {
    drain_timeout = timeout;
    admin::DrainResponse reply;
    reply.set_complete(true);
    return reply;
  }

  std::atomic<int> set_limit_calls{0};
  absl::Duration drain_timeout;
};

class AdminServiceTest : public ::testing::Test {
 protected:
  void Serve(std::string token) {
    service_ = std::make_unique<AdminService>(&backend_, std::move(token));
    grpc::ServerBuilder builder;
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = admin::ServerAdmin::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void SetUp() override { Serve(""); }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  grpc::Status SetLimit(uint64_t session, uint32_t limit, admin::SessionInfo* reply) {
    grpc::ClientContext context;
    admin::SetSessionLimitRequest request;
    request.set_session_id(session);
    request.set_max_inflight(limit);
    return stub_->SetSessionLimit(&context, request, reply);
  }

  FakeBackend backend_;
  std::unique_ptr<AdminService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<admin::ServerAdmin::Stub> stub_;
};

TEST(ValidateSessionLimitTest, Table) {
  struct Case {
    uint32_t max_inflight;
    bool ok;
  } cases[] = {{0, false},
               {1, true},
               {64, true},
               {kMaxSessionLimit, true},
               {kMaxSessionLimit + 1, false},
               {UINT32_MAX, false}};
  for (const Case& c : cases) {
    admin::SetSessionLimitRequest request;
    request.set_session_id(1);
    request.set_max_inflight(c.max_inflight);
    absl::Status status = ValidateSessionLimit(request);
    EXPECT_EQ(status.ok(), c.ok) << c.max_inflight << ": " << status;
    if (!c.ok) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST_F(AdminServiceTest, SetSessionLimitValidatesBeforeTheBackend) {
  admin::SessionInfo reply;
  grpc::Status zero = SetLimit(7, 0, &reply);
  EXPECT_EQ(zero.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(zero.error_message().find("max_inflight"), std::string::npos) << zero.error_message();
  EXPECT_EQ(SetLimit(7, kMaxSessionLimit + 1, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(backend_.set_limit_calls.load(), 0) << "invalid requests never reach the backend";

  EXPECT_EQ(SetLimit(99, 4, &reply).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(SetLimit(0, 4, &reply).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::Status ok = SetLimit(7, 4, &reply);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(reply.session_id(), 7u);
  EXPECT_EQ(reply.max_inflight(), 4u);
}

TEST_F(AdminServiceTest, ReadsAndDrainPassThrough) {
  {
    grpc::ClientContext context;
    admin::ListSessionsResponse reply;
    ASSERT_TRUE(stub_->ListSessions(&context, {}, &reply).ok());
    ASSERT_EQ(reply.sessions_size(), 1);
  }
  {
    grpc::ClientContext context;
    admin::ExportInfo reply;
    ASSERT_TRUE(stub_->GetExport(&context, {}, &reply).ok());
    EXPECT_EQ(reply.path(), "/srv/export");
  }
  grpc::ClientContext context;
  admin::DrainRequest request;
  request.set_timeout_ms(1500);
  admin::DrainResponse reply;
  ASSERT_TRUE(stub_->Drain(&context, request, &reply).ok());
  EXPECT_TRUE(reply.complete());
  EXPECT_EQ(backend_.drain_timeout, absl::Milliseconds(1500));
}

TEST_F(AdminServiceTest, WithATokenEveryCallNeedsTheBearerToken) {
  server_->Shutdown();
  Serve("s3cret");
  auto list = [&](const char* authorization) {
    grpc::ClientContext context;
    if (authorization != nullptr) context.AddMetadata("authorization", authorization);
    admin::ListSessionsResponse reply;
    return stub_->ListSessions(&context, {}, &reply).error_code();
  };
  EXPECT_EQ(list(nullptr), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(list("Bearer wrong"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(list("s3cret"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(list("Bearer s3cret"), grpc::StatusCode::OK);

  // Refused before validation and before the backend.
  admin::SessionInfo reply;
  EXPECT_EQ(SetLimit(7, 0, &reply).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(backend_.set_limit_calls.load(), 0);
}

}  // namespace
}  // namespace ringfs::server
