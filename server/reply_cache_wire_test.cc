// Replays over a real socket: the frontend resends, on a new connection of the same client_id,
// every request the old connection had not answered. A request that already ran must not run
// again: the replay gets the first reply, and an entry reply counts one lookup in all.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "server/server.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::DefaultHello;
using testing::Frame;
using testing::Reply;
using testing::TestClient;

constexpr char kClientId[] = "replaying-mount";

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  void StartServer() {
    ServerConfig config;
    config.export_dir = export_.path();
    // Root acts as root here: these tests are about the wire, not squashing (security_wire_test).
    config.export_options.squash = ExportOptions::Squash::kNone;
    config.listen = "127.0.0.1:0";
    config.workers = 2;  // a replay may land on another worker than the first execution
    server_ = std::make_unique<Server>(config);
    ASSERT_TRUE(server_->Start().ok());
  }

  std::unique_ptr<TestClient> Connect() {
    wire::ServerHello reply;
    auto client = TestClient::Connect(server_->bound_address(), DefaultHello(kClientId), &reply);
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(reply.result(), wire::ServerHello::OK) << reply.message();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Sends `frame` and drops the connection before reading the reply once `done` holds (the
  // request ran), as a connection lost in the middle of a request would.
  void SendAndDropWhen(const std::string& frame, const std::function<bool()>& done) {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    ASSERT_TRUE(client->Send(frame).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(done()) << "the first execution never happened";
  }

  Reply Resend(const std::string& frame) {
    auto client = Connect();
    EXPECT_NE(client, nullptr);
    if (client == nullptr) return Reply{};
    auto reply = client->Call(frame);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : Reply{};
  }

  ClientState& State() {
    auto state = server_->registry()->GetOrCreate(ClientStateKey("", kClientId));
    EXPECT_TRUE(state.ok());
    return **state;
  }

  bool Exists(const std::string& name) {
    struct stat st {};
    return lstat(export_.Join(name).c_str(), &st) == 0;
  }

  testing::TempDir export_;
  std::unique_ptr<Server> server_;
};

std::string CreateFrame(uint64_t unique, const std::string& name) {
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT | O_EXCL;  // a second execution would be EEXIST
  create.mode = S_IFREG | 0644;
  return Frame(FUSE_CREATE, unique, 1, Bytes(create) + CName(name));
}

std::string MkdirFrame(uint64_t unique, const std::string& name) {
  fuse_mkdir_in mkdir_in{S_IFDIR | 0755, 0};
  return Frame(FUSE_MKDIR, unique, 1, Bytes(mkdir_in) + CName(name));
}

TEST_F(ReplayTest, ResentCreateAfterReconnectRunsOnceAndCountsOneLookup) {
  const std::string frame = CreateFrame(1001, "f");
  SendAndDropWhen(frame, [&] { return Exists("f"); });
  Reply r = Resend(frame);
  ASSERT_EQ(r.header.error, 0) << "not EEXIST: the create did not run again";
  ASSERT_EQ(r.body.size(), sizeof(fuse_entry_out) + sizeof(fuse_open_out));
  const uint64_t nodeid = r.As<fuse_entry_out>().nodeid;
  // The kernel counts one lookup for the one reply it receives; the server counted one when the
  // create ran and none for the replay.
  EXPECT_EQ(State().nodes->LookupCount(nodeid), 1u);
  EXPECT_EQ(State().handles.size(), 1u);  // one open handle: the one in the reply
  EXPECT_EQ(State().replies.replays(), 1u);

  // The replayed fh and node work, and a later LOOKUP names the same node.
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto lookup = client->Call(Frame(FUSE_LOOKUP, 1002, 1, CName("f")));
  ASSERT_TRUE(lookup.ok());
  EXPECT_EQ(lookup->As<fuse_entry_out>().nodeid, nodeid);
  EXPECT_EQ(State().nodes->LookupCount(nodeid), 2u);
  ASSERT_TRUE(client->Send(Frame(FUSE_FORGET, 1003, nodeid, Bytes(fuse_forget_in{2}))).ok());
  fuse_release_in release{};
  std::memcpy(&release.fh, r.body.data() + sizeof(fuse_entry_out), sizeof(release.fh));
  auto released = client->Call(Frame(FUSE_RELEASE, 1004, nodeid, Bytes(release)));
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->header.error, 0);
  EXPECT_EQ(State().handles.size(), 0u);
  EXPECT_EQ(State().nodes->size(), 1u);  // forgotten: only the root is left
}

TEST_F(ReplayTest, ReplayGetsTheSameBytesOnAnyConnection) {
  const std::string frame = MkdirFrame(2001, "d");
  auto first = Connect();
  ASSERT_NE(first, nullptr);
  auto original = first->Call(frame);
  ASSERT_TRUE(original.ok());
  ASSERT_EQ(original->header.error, 0);
  auto again = first->Call(frame);  // same connection
  ASSERT_TRUE(again.ok());
  Reply other = Resend(frame);  // another connection of the same client
  EXPECT_EQ(again->body, original->body);
  EXPECT_EQ(other.body, original->body);
  EXPECT_EQ(other.header.len, original->header.len);
  EXPECT_EQ(State().nodes->LookupCount(original->As<fuse_entry_out>().nodeid), 1u);
}

TEST_F(ReplayTest, ResentMkdirAfterReconnectIsNotEexist) {
  const std::string frame = MkdirFrame(3001, "d");
  SendAndDropWhen(frame, [&] { return Exists("d"); });
  Reply r = Resend(frame);
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(State().nodes->LookupCount(r.As<fuse_entry_out>().nodeid), 1u);
}

TEST_F(ReplayTest, ResentUnlinkAfterReconnectIsNotEnoent) {
  std::ofstream(export_.Join("victim")) << "x";
  const std::string frame = Frame(FUSE_UNLINK, 4001, 1, CName("victim"));
  SendAndDropWhen(frame, [&] { return !Exists("victim"); });
  EXPECT_EQ(Resend(frame).header.error, 0);
}

TEST_F(ReplayTest, ResentRenameAfterReconnectIsNotEnoent) {
  std::ofstream(export_.Join("a")) << "x";
  fuse_rename_in rename{};
  rename.newdir = 1;
  const std::string frame = Frame(FUSE_RENAME, 5001, 1, Bytes(rename) + CName("a") + CName("b"));
  SendAndDropWhen(frame, [&] { return Exists("b"); });
  EXPECT_EQ(Resend(frame).header.error, 0);
  EXPECT_TRUE(Exists("b"));
  EXPECT_FALSE(Exists("a"));
}

TEST_F(ReplayTest, SameUniqueWithOtherContentRuns) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_EQ(client->Call(MkdirFrame(6001, "one"))->header.error, 0);
  ASSERT_EQ(client->Call(MkdirFrame(6001, "two"))->header.error, 0);
  EXPECT_TRUE(Exists("two"));
}

// A new instance has no cache: documented in proto/wire_format.md ("Replayed requests").
TEST_F(ReplayTest, AfterARestartTheReplayRunsAgain) {
  const std::string frame = CreateFrame(7001, "f");
  SendAndDropWhen(frame, [&] { return Exists("f"); });
  server_->Stop();
  StartServer();
  EXPECT_EQ(Resend(frame).header.error, -EEXIST);
}

}  // namespace
}  // namespace ringfs::server
