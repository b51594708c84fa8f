// Client states over a real socket: many short sessions of fresh client ids leave no fds behind
// once the reclaim grace has passed, and the client cap refuses clearly before the fd limit.
// Regression: every client state was kept for the life of the server (4 fds per short
// session; ~4,740 sessions reached a 20,000-fd limit and then every mount was refused).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/server.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::DefaultHello;
using testing::Frame;
using testing::TestClient;

size_t OpenFds() {
  size_t n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the DIR's own fd
}

// Waits up to `timeout` for `done`.
template <typename F>
bool WaitFor(F done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

class LifecycleTest : public ::testing::Test {
 protected:
  void StartServer(uint32_t grace_s, uint32_t max_clients, uint32_t idle_timeout_s = 900,
                   uint32_t max_open_files = 0) {
    ServerConfig config;
    config.export_dir = export_.path();
    // Root acts as root here: these tests are about the wire, not squashing (security_wire_test).
    config.export_options.squash = ExportOptions::Squash::kNone;
    config.listen = "127.0.0.1:0";
    config.workers = 2;
    config.reclaim_grace_s = grace_s;
    config.max_clients = max_clients;
    config.idle_timeout_s = idle_timeout_s;
    config.max_open_files_per_client = max_open_files;
    server_ = std::make_unique<Server>(config);
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  // One short session of a new mount: handshake, a CREATE that leaves its file open (as a
  // mount that dies with open files does), then the connection drops.
  wire::ServerHello ShortSession(const std::string& client_id, bool create) {
    wire::ServerHello reply;
    auto client = TestClient::Connect(server_->bound_address(), DefaultHello(client_id), &reply);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok() || reply.result() != wire::ServerHello::OK || !create) return reply;
    fuse_create_in in{};
    in.flags = O_RDWR | O_CREAT;
    in.mode = S_IFREG | 0644;
    auto r = (*client)->Call(Frame(FUSE_CREATE, 2, 1, Bytes(in) + CName(client_id)));
    EXPECT_TRUE(r.ok() && r->header.error == 0);
    return reply;
  }

  testing::TempDir export_;
  std::unique_ptr<Server> server_;
};

TEST_F(LifecycleTest, ThousandsOfShortSessionsLeaveNoFdsAfterTheGrace) {
  StartServer(/*grace_s=*/1, /*max_clients=*/8192);
  const size_t before = OpenFds();
  constexpr int kSessions = 2500;
  for (int i = 0; i < kSessions; ++i) {
    ASSERT_EQ(ShortSession(absl::StrCat("short-", i), /*create=*/i % 2 == 0).result(),
              wire::ServerHello::OK);
  }
  const size_t during = OpenFds();
  EXPECT_TRUE(WaitFor([&] { return server_->registry()->size() == 0; }, std::chrono::seconds(30)))
      << server_->registry()->size() << " client states left";
  // The workers drop a connection (and its fds) a moment after the peer closed it.
  EXPECT_TRUE(WaitFor([&] { return OpenFds() <= before; }, std::chrono::seconds(10)));
  const size_t after = OpenFds();
  std::printf("open fds: %zu before, %zu right after %d sessions, %zu after the grace\n", before,
              during, kSessions, after);
  EXPECT_LE(after, before);
}

TEST_F(LifecycleTest, ClientCapRefusesWithAReasonBeforeTheFdLimit) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  StartServer(/*grace_s=*/90, /*max_clients=*/0);  // default: 1024 / 16 = 64
  int accepted = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    wire::ServerHello reply = ShortSession(absl::StrCat("capped-", i), /*create=*/true);
    if (reply.result() == wire::ServerHello::OK) {
      ++accepted;
    } else {
      ++refused;
      EXPECT_EQ(reply.result(), wire::ServerHello::BAD_REQUEST);
      EXPECT_NE(reply.message().find("too many clients"), std::string::npos) << reply.message();
    }
  }
  EXPECT_EQ(accepted, 64);
  EXPECT_EQ(refused, 300 - 64);
  // A client that has a state is still served, and the process is far from its fd limit.
  EXPECT_EQ(ShortSession("capped-0", /*create=*/false).result(), wire::ServerHello::OK);
  EXPECT_LT(OpenFds(), 1024u / 2);
  server_->Stop();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
}

TEST_F(LifecycleTest, OpenFilesCapIsEnfileAndCreatesNothing) {
  StartServer(/*grace_s=*/90, /*max_clients=*/16, /*idle_timeout_s=*/900, /*max_open_files=*/3);
  wire::ServerHello reply;
  auto client = TestClient::Connect(server_->bound_address(), DefaultHello("opener"), &reply);
  ASSERT_TRUE(client.ok());
  fuse_create_in in{};
  in.flags = O_RDWR | O_CREAT;
  in.mode = S_IFREG | 0644;
  for (int i = 0; i < 3; ++i) {
    auto r = (*client)->Call(Frame(FUSE_CREATE, 10 + i, 1, Bytes(in) + CName(absl::StrCat(i))));
    ASSERT_TRUE(r.ok() && r->header.error == 0);
  }
  auto r = (*client)->Call(Frame(FUSE_CREATE, 20, 1, Bytes(in) + CName("one-too-many")));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header.error, -ENFILE);
  struct stat st {};
  EXPECT_NE(stat(export_.Join("one-too-many").c_str(), &st), 0);
  fuse_open_in open_in{};
  open_in.flags = O_RDONLY;
  r = (*client)->Call(Frame(FUSE_OPENDIR, 21, 1, Bytes(open_in)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->header.error, -ENFILE);
}

TEST_F(LifecycleTest, IdleConnectionsAreClosedBusyOnesStay) {
  StartServer(/*grace_s=*/90, /*max_clients=*/16, /*idle_timeout_s=*/1);
  wire::ServerHello reply;
  auto idle = TestClient::Connect(server_->bound_address(), DefaultHello("idler"), &reply);
  ASSERT_TRUE(idle.ok());
  auto busy = TestClient::Connect(server_->bound_address(), DefaultHello("busy"), &reply);
  ASSERT_TRUE(busy.ok());
  const auto start = std::chrono::steady_clock::now();
  uint64_t unique = 10;
  bool busy_ok = true;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(2500)) {
    auto r = (*busy)->Call(Frame(FUSE_GETATTR, ++unique, 1, Bytes(fuse_getattr_in{})));
    busy_ok = busy_ok && r.ok() && r->header.error == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(busy_ok) << "a connection with traffic was closed";
  EXPECT_TRUE((*idle)->WaitClosed(std::chrono::milliseconds(100)));
  // The client's state outlives the connection: its mount reconnects and carries on.
  EXPECT_EQ(server_->registry()->size(), 2u);
  EXPECT_EQ(ShortSession("idler", /*create=*/true).result(), wire::ServerHello::OK);
}

}  // namespace
}  // namespace ringfs::server
