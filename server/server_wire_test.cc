// End to end over a real socket: the in-process Server on 127.0.0.1:0 with a temp export, and a
// raw client that sends hand-built FUSE frames.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/cpu_contention.h"
#include "common/dir_attrs.h"
#include "common/host_id.h"
#include "common/invalidation.h"
#include "common/wire.h"
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

class WireTest : public ::testing::Test {
 protected:
  void StartServer(const std::string& token = "", std::string listen = "127.0.0.1:0",
                   bool floor = false) {
    ServerConfig config;
    config.export_dir = export_.path();
    // Requests run as their callers: some tests create as other uids in the export's root.
    ::chmod(export_.path().c_str(), 0777);
    // Root acts as root here: these tests are about the wire, not squashing (security_wire_test).
    config.export_options.squash = ExportOptions::Squash::kNone;
    config.listen = std::move(listen);
    config.token = token;
    config.workers = 2;
    config.floor = floor;
    server_ = std::make_unique<Server>(config);
    ASSERT_TRUE(server_->Start().ok());
    address_ = server_->bound_address();
  }
  void SetUp() override { StartServer(); }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<TestClient> Connect(wire::ClientHello hello = DefaultHello()) {
    wire::ServerHello reply;
    auto client = TestClient::Connect(address_, hello, &reply);
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(reply.result(), wire::ServerHello::OK) << reply.message();
    return client.ok() ? *std::move(client) : nullptr;
  }

  wire::ServerHello::Result HandshakeResult(const wire::ClientHello& hello) {
    wire::ServerHello reply;
    auto client = TestClient::Connect(address_, hello, &reply);
    EXPECT_TRUE(client.ok()) << client.status();
    if (!client.ok()) return wire::ServerHello::RESULT_UNSPECIFIED;
    if (reply.result() != wire::ServerHello::OK) {
      EXPECT_TRUE((*client)->WaitClosed());
    }
    return reply.result();
  }

  Reply Call(TestClient& client, const std::string& frame) {
    auto reply = client.Call(frame);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : Reply{};
  }

  testing::TempDir export_;
  std::unique_ptr<Server> server_;
  std::string address_;
  uint64_t unique_ = 100;
};

// A server with one worker per CPU of `cpus`, placed (the daemon's defaults), on 127.0.0.1.
ServerConfig PlacedConfig(const std::string& export_dir, const std::vector<int>& cpus,
                          bool sched_idle) {
  ServerConfig config;
  config.export_dir = export_dir;
  config.listen = "127.0.0.1:0";
  config.workers = static_cast<uint32_t>(cpus.size());
  config.pin_workers = true;
  config.worker_sched_idle = sched_idle;
  return config;
}

// The hello of a mount's connection for kernel queue `queue` on the host with `host_id`.
wire::ClientHello MountHello(uint32_t queue, const std::string& host_id) {
  wire::ClientHello hello = DefaultHello("mount");
  hello.set_queue(queue);
  hello.set_host_id(host_id);
  return hello;
}

// Starts `server` and connects, as this host's mount, the connection of the kernel queue of the
// last of `cpus`, which it returns.
uint32_t StartAndConnectHere(Server* server, const std::vector<int>& cpus,
                             std::unique_ptr<TestClient>* client) {
  const auto queue = static_cast<uint32_t>(cpus.back());
  [&] {
    ASSERT_TRUE(server->Start().ok());
    wire::ServerHello reply;
    auto connected =
        TestClient::Connect(server->bound_address(), MountHello(queue, ThisHostId()), &reply);
    ASSERT_TRUE(connected.ok()) << connected.status();
    ASSERT_EQ(reply.result(), wire::ServerHello::OK);
    *client = std::move(*connected);
  }();
  return queue;
}

// Threads of this process whose affinity is exactly `cpu`: the kernel's io-wq threads aside
// (they keep the affinity their worker had when they started), or only those.
int ThreadsPinnedTo(uint32_t cpu, bool io_threads = false) {
  int pinned = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if ((name.rfind("iou-wrk-", 0) == 0) != io_threads) continue;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("Cpus_allowed_list:", 0) == 0) {
        pinned += line.substr(line.find_first_not_of(" \t", 18)) == std::to_string(cpu);
      }
    }
  }
  return pinned;
}

// A mount sends its host's id: the server serves it on the worker of its queue's CPU only when
// that is this host's, whatever the address says (a proxy on this host, a sidecar or `ssh -L`,
// gives a remote mount a loopback address).
TEST(PlacementWireTest, ServedOnItsQueuesCpuOnlyWhenItsHostIdIsThisHosts) {
  const std::vector<int> cpus = testing::AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  testing::TempDir exported;
  const ServerConfig config = PlacedConfig(exported.path(), cpus, /*sched_idle=*/false);
  Server server(config);
  ASSERT_TRUE(server.Start().ok());
  const auto queue = static_cast<uint32_t>(cpus.back());
  const std::optional<uint32_t> worker = CpuPlacement::Plan(config.workers, true).WorkerOn(queue);
  ASSERT_TRUE(worker.has_value());

  std::string remote = ThisHostId();
  ASSERT_FALSE(remote.empty());
  remote[0] = remote[0] == 'a' ? 'b' : 'a';
  std::vector<std::unique_ptr<TestClient>> clients;
  // One client's connections (a client state per connection would meet --max-clients on a
  // machine with many CPUs).
  auto connect = [&](const std::string& host_id, int n) {
    for (int i = 0; i < n; ++i) {
      wire::ServerHello reply;
      auto client = TestClient::Connect(server.bound_address(), MountHello(queue, host_id), &reply);
      ASSERT_TRUE(client.ok()) << client.status();
      ASSERT_EQ(reply.result(), wire::ServerHello::OK);
      clients.push_back(*std::move(client));
    }
  };
  // Round robin gives each worker one of the first `workers` remote connections.
  const int n = static_cast<int>(std::min<size_t>(cpus.size(), 100));
  connect(remote, n);
  connect(ThisHostId(), 2);
  connect("", 1);  // an older mount: its loopback address says this host
  admin::ListSessionsResponse sessions;
  // A worker lists a session once it took the connection, a moment after the handshake.
  for (int tries = 0; tries < 500; ++tries) {
    sessions = server.ListSessions();
    if (sessions.sessions_size() == n + 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(sessions.sessions_size(), n + 3);
  std::set<uint32_t> remote_workers;
  for (int i = 0; i < sessions.sessions_size(); ++i) {
    const admin::SessionInfo& s = sessions.sessions(i);
    if (i < n) {
      EXPECT_FALSE(s.this_host()) << s.DebugString();
      remote_workers.insert(s.worker());
    } else {
      EXPECT_TRUE(s.this_host()) << s.DebugString();
      EXPECT_EQ(s.worker(), *worker)
          << "served on CPU " << queue << "'s worker: " << s.DebugString();
    }
  }
  EXPECT_EQ(remote_workers.size(), static_cast<size_t>(n))
      << "a remote host's connections are spread";
  if (cpus.size() == 1) {
    server.Stop();
    return;  // every thread runs on the one CPU: nothing to see pinned
  }

  // The worker pins itself to the CPU while it serves a local connection, and lets go after the
  // last one: a server whose clients are remote runs where the scheduler puts it.
  EXPECT_EQ(ThreadsPinnedTo(queue), 1);
  clients.resize(n);  // the local ones hang up; the remote ones stay
  for (int tries = 0; tries < 500 && ThreadsPinnedTo(queue) != 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ThreadsPinnedTo(queue), 0) << "still pinned after its local connections ended";
  server.Stop();
}

// Threads of this process running SCHED_IDLE.
int IdleThreadsOfThisProcess() {
  int idle = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    idle += sched_getscheduler(std::stoi(task.path().filename().string())) == SCHED_IDLE;
  }
  return idle;
}

// A placed worker runs SCHED_IDLE while it serves a mount of this host on a quiet CPU (the
// caller then keeps the CPU: README, "A server on the same host"), and SCHED_OTHER again once it
// serves none: remote clients are not served by an idle thread (server/worker_sched.h).
TEST(PlacementWireTest, AWorkerRunsSchedIdleOnlyWhileItServesThisHost) {
  const std::vector<int> cpus = testing::AllowedCpus();
  ASSERT_FALSE(cpus.empty());
  if (!CanLeaveSchedIdle()) GTEST_SKIP() << "no right to leave SCHED_IDLE: the server idles none";
  testing::TempDir exported;
  Server server(PlacedConfig(exported.path(), cpus, /*sched_idle=*/true));
  ASSERT_TRUE(server.Start().ok());
  const auto queue = static_cast<uint32_t>(cpus.front());
  auto wait_for = [](auto done) {
    for (int tries = 0; tries < 500 && !done(); ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
  };
  ASSERT_EQ(IdleThreadsOfThisProcess(), 0);
  wire::ServerHello reply;
  auto local = TestClient::Connect(server.bound_address(), MountHello(queue, ThisHostId()), &reply);
  ASSERT_TRUE(local.ok()) << local.status();
  auto remote = TestClient::Connect(server.bound_address(),
                                    MountHello(queue, std::string(32, 'f')),  // another host's
                                    &reply);
  ASSERT_TRUE(remote.ok()) << remote.status();
  // The test's own threads sleep: the CPU is quiet unless the machine is busy elsewhere, when
  // the watch rightly keeps the worker SCHED_OTHER; so only what follows is asserted hard.
  const bool went_idle = wait_for([] { return IdleThreadsOfThisProcess() == 1; });
  if (!went_idle) {
    server.Stop();
    GTEST_SKIP() << "the CPU was never quiet for 5 s";
  }
  local->reset();  // the mount of this host goes; the remote one stays
  EXPECT_TRUE(wait_for([] { return IdleThreadsOfThisProcess() == 0; }))
      << "a worker left serving only another host's mount still runs SCHED_IDLE";
  server.Stop();
}

std::string ReadIn(uint64_t fh, uint64_t offset, uint32_t size) {
  fuse_read_in in{};
  in.fh = fh;
  in.offset = offset;
  in.size = size;
  return Bytes(in);
}

std::string WriteIn(uint64_t fh, uint64_t offset, const std::string& data) {
  fuse_write_in in{};
  in.fh = fh;
  in.offset = offset;
  in.size = static_cast<uint32_t>(data.size());
  return Bytes(in) + data;
}

// A placed worker that moves bulk data (large reads here) leaves its mount's CPU, where both
// ends of every copy would share one CPU, and comes back once the traffic stops, without a
// request to end the window (server/cpu_placement.h). The threshold is lowered to 2 MiB per
// window so that a slow (sanitizer) build reaches it.
TEST(PlacementWireTest, AWorkerMovingBulkDataLeavesTheCpuAndComesBack) {
  const std::vector<int> cpus = testing::AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: every thread runs on it";
  testing::TempDir exported;
  {
    std::ofstream file(exported.Join("big"), std::ios::binary);
    const std::string mib(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) file << mib;
  }
  // Readable by the squashed caller (the export's default root_squash).
  ::chmod(exported.path().c_str(), 0755);
  ::chmod(exported.Join("big").c_str(), 0644);
  ServerConfig config = PlacedConfig(exported.path(), cpus, /*sched_idle=*/false);
  config.bulk_window_bytes = 2 << 20;
  Server server(config);
  std::unique_ptr<TestClient> connected;
  const uint32_t queue = StartAndConnectHere(&server, cpus, &connected);
  if (HasFatalFailure()) return;
  TestClient& client = *connected;
  auto call = [&](const std::string& frame) {
    absl::StatusOr<Reply> r = client.Call(frame);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : Reply{};
  };
  uint64_t unique = 1;
  Reply r = call(Frame(FUSE_LOOKUP, ++unique, 1, CName("big")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t node = r.As<fuse_entry_out>().nodeid;
  fuse_open_in open_in{};
  open_in.flags = O_RDONLY;
  r = call(Frame(FUSE_OPEN, ++unique, node, Bytes(open_in)));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t fh = r.As<fuse_open_out>().fh;
  EXPECT_EQ(ThreadsPinnedTo(queue), 1) << "placed while it serves this host's mount";

  // 1 MiB reads, one at a time, until the worker lets go of the CPU (2 MiB in 200 ms).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  uint64_t offset = 0;
  for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
    if (i % 4 == 0 && ThreadsPinnedTo(queue) == 0) break;
    r = call(Frame(FUSE_READ, ++unique, node, ReadIn(fh, offset, 1 << 20)));
    ASSERT_EQ(r.header.error, 0);
    ASSERT_EQ(r.body.size(), size_t{1} << 20);
    offset = (offset + (1 << 20)) % (8 << 20);
  }
  EXPECT_EQ(ThreadsPinnedTo(queue), 0) << "still pinned while it moves 1 MiB reads";

  // Nothing more comes: the worker's own timer ends the window and it is placed again.
  for (int tries = 0; tries < 300 && ThreadsPinnedTo(queue) != 1; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ThreadsPinnedTo(queue), 1) << "not placed again once the traffic stopped";
  connected.reset();
  server.Stop();
}

// The io-wq threads that run a placed worker's large writes and fsyncs (ext4 cannot write
// buffered without blocking) are not pinned to the mount's CPU, where they would share it with
// the caller, the mount and the worker: the first one starts before the worker is placed
// (Worker::StartIoThreadUnpinned) and, while placed, io-wq may start no other
// (Worker::LimitIoThreads; without it, fsyncs waiting for the disk beside writes to other files
// made io-wq start more). The bulk rule is kept out of the way (a threshold no test reaches):
// the worker stays placed throughout.
TEST(PlacementWireTest, APlacedWorkersLargeWritesRunOnIoThreadsThatAreNotPinned) {
  const std::vector<int> cpus = testing::AllowedCpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: every thread runs on it";
  testing::TempDir exported;
  ::chmod(exported.path().c_str(), 0777);  // the squashed caller creates the files
  ServerConfig config = PlacedConfig(exported.path(), cpus, /*sched_idle=*/false);
  config.bulk_window_bytes = uint64_t{1} << 40;
  Server server(config);
  std::unique_ptr<TestClient> connected;
  const uint32_t queue = StartAndConnectHere(&server, cpus, &connected);
  if (HasFatalFailure()) return;
  TestClient& client = *connected;
  uint64_t unique = 1;
  constexpr int kFiles = 3;
  uint64_t nodes[kFiles], handles[kFiles];
  for (int f = 0; f < kFiles; ++f) {
    fuse_create_in create{};
    create.flags = O_WRONLY | O_CREAT;
    create.mode = S_IFREG | 0644;
    absl::StatusOr<Reply> r = client.Call(
        Frame(FUSE_CREATE, ++unique, 1, Bytes(create) + CName("big" + std::to_string(f))));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->header.error, 0) << std::strerror(-r->header.error);
    nodes[f] = r->As<fuse_entry_out>().nodeid;
    fuse_open_out open{};
    std::memcpy(&open, r->body.data() + sizeof(fuse_entry_out), sizeof(open));
    handles[f] = open.fh;
  }
  ASSERT_EQ(ThreadsPinnedTo(queue), 1) << "placed while it serves this host's mount";
  // Rounds of a 1 MiB write to every file and an fsync of each, all sent before any reply.
  const std::string mib(1 << 20, 'w');
  constexpr int kRounds = 6;
  for (uint64_t round = 0; round < kRounds; ++round) {
    std::string batch;
    for (int f = 0; f < kFiles; ++f) {
      batch += Frame(FUSE_WRITE, ++unique, nodes[f], WriteIn(handles[f], round << 20, mib));
      fuse_fsync_in fsync_in{};
      fsync_in.fh = handles[f];
      batch += Frame(FUSE_FSYNC, ++unique, nodes[f], Bytes(fsync_in));
    }
    ASSERT_TRUE(client.Send(batch).ok());
    for (int i = 0; i < 2 * kFiles; ++i) {
      absl::StatusOr<Reply> r = client.Receive();
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->header.error, 0) << std::strerror(-r->header.error);
    }
  }
  EXPECT_EQ(ThreadsPinnedTo(queue), 1) << "the worker left its CPU: the test proves nothing";
  EXPECT_EQ(ThreadsPinnedTo(queue, /*io_threads=*/true), 0)
      << "an io-wq thread pinned to the mount's CPU ran the large writes";
  for (int f = 0; f < kFiles; ++f) {
    struct stat st {};
    ASSERT_EQ(::stat(exported.Join("big" + std::to_string(f)).c_str(), &st), 0);
    EXPECT_EQ(st.st_size, kRounds << 20);
  }
  connected.reset();
  server.Stop();
}

struct PlusEntry {
  std::string name;
  fuse_entry_out entry;
  uint64_t off;
};

std::vector<PlusEntry> ParsePlus(const std::string& body) {
  std::vector<PlusEntry> out;
  size_t pos = 0;
  while (pos + FUSE_NAME_OFFSET_DIRENTPLUS <= body.size()) {
    fuse_direntplus d;
    std::memcpy(&d, body.data() + pos, FUSE_NAME_OFFSET_DIRENTPLUS);
    std::string name(body.data() + pos + FUSE_NAME_OFFSET_DIRENTPLUS, d.dirent.namelen);
    out.push_back({name, d.entry_out, d.dirent.off});
    pos += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET_DIRENTPLUS + d.dirent.namelen);
  }
  EXPECT_EQ(pos, body.size());
  return out;
}

TEST_F(WireTest, HandshakeLimits) {
  wire::ClientHello hello = DefaultHello();
  hello.set_max_inflight(100000);
  hello.set_max_frame_bytes(10u << 20);
  wire::ServerHello reply;
  auto client = TestClient::Connect(address_, hello, &reply);
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(reply.result(), wire::ServerHello::OK);
  EXPECT_EQ(reply.wire_version(), wire::kWireVersion);
  EXPECT_EQ(reply.max_inflight(), wire::kDefaultMaxInflight);
  EXPECT_EQ(reply.max_frame_bytes(), wire::kMaxFrameBytes);
  EXPECT_NE(reply.session_id(), 0u);
}

TEST_F(WireTest, HandshakeRefusals) {
  wire::ClientHello hello = DefaultHello();
  hello.set_wire_version(99);
  EXPECT_EQ(HandshakeResult(hello), wire::ServerHello::VERSION_MISMATCH);
  hello = DefaultHello();
  hello.set_export_name("/other");
  EXPECT_EQ(HandshakeResult(hello), wire::ServerHello::NO_SUCH_EXPORT);
  hello = DefaultHello();
  hello.set_max_inflight(0);
  EXPECT_EQ(HandshakeResult(hello), wire::ServerHello::BAD_REQUEST);
  hello = DefaultHello();
  hello.set_export_name("");
  EXPECT_EQ(HandshakeResult(hello), wire::ServerHello::OK);
}

TEST_F(WireTest, TokenChecked) {
  server_->Stop();
  StartServer("s3cret");
  wire::ClientHello hello = DefaultHello();
  wire::ServerHello reply;
  auto wrong = TestClient::Connect(address_, hello, &reply, "wrong");
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied)
      << "a client must not trust a server whose proof does not match its secret";
  // No secret at all: refused with a message that says what is missing.
  EXPECT_EQ(HandshakeResult(hello), wire::ServerHello::AUTH_FAILED);
  auto right = TestClient::Connect(address_, hello, &reply, "s3cret");
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(reply.result(), wire::ServerHello::OK) << reply.message();
}

TEST_F(WireTest, BadMagicClosed) {
  auto client = TestClient::ConnectRaw(address_);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Send("GET / HTTP/1.1\r\n\r\n").ok());
  EXPECT_TRUE((*client)->WaitClosed());
}

TEST_F(WireTest, CoreRoundTrips) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Reply r = Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("f")));
  EXPECT_EQ(r.header.error, -ENOENT);
  EXPECT_EQ(r.header.len, sizeof(fuse_out_header));

  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0640;
  r = Call(*client, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName("f"), 1234, 5678));
  ASSERT_EQ(r.header.error, 0);
  ASSERT_EQ(r.body.size(), sizeof(fuse_entry_out) + sizeof(fuse_open_out));
  auto entry = r.As<fuse_entry_out>();
  fuse_open_out open;
  std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
  EXPECT_GE(entry.nodeid, 2u);
  EXPECT_EQ(entry.attr.mode, static_cast<uint32_t>(S_IFREG | 0640));
  EXPECT_EQ(entry.attr.uid, 1234u);
  EXPECT_EQ(entry.attr.gid, 5678u);
  EXPECT_EQ(entry.entry_valid, 1u);  // the client asked for no timeout: 1 s default
  struct stat st {};
  ASSERT_EQ(stat(export_.Join("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);

  const std::string data = "hello, ringfs";
  r = Call(*client, Frame(FUSE_WRITE, ++unique_, entry.nodeid, WriteIn(open.fh, 0, data)));
  ASSERT_EQ(r.header.error, 0);
  ASSERT_EQ(r.body.size(), sizeof(fuse_write_out));
  EXPECT_EQ(r.As<fuse_write_out>().size, data.size());

  r = Call(*client, Frame(FUSE_READ, ++unique_, entry.nodeid, ReadIn(open.fh, 7, 100)));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body, "ringfs");

  fuse_getattr_in getattr{};
  r = Call(*client, Frame(FUSE_GETATTR, ++unique_, entry.nodeid, Bytes(getattr)));
  ASSERT_EQ(r.header.error, 0);
  ASSERT_EQ(r.body.size(), sizeof(fuse_attr_out));
  EXPECT_EQ(r.As<fuse_attr_out>().attr.size, data.size());
  EXPECT_EQ(r.As<fuse_attr_out>().attr.ino, st.st_ino);

  fuse_fsync_in fsync_in{};
  fsync_in.fh = open.fh;
  fsync_in.fsync_flags = 1;
  r = Call(*client, Frame(FUSE_FSYNC, ++unique_, entry.nodeid, Bytes(fsync_in)));
  EXPECT_EQ(r.header.error, 0);

  fuse_release_in release{};
  release.fh = open.fh;
  r = Call(*client, Frame(FUSE_RELEASE, ++unique_, entry.nodeid, Bytes(release)));
  EXPECT_EQ(r.header.error, 0);
  r = Call(*client, Frame(FUSE_READ, ++unique_, entry.nodeid, ReadIn(open.fh, 0, 10)));
  EXPECT_EQ(r.header.error, -ESTALE);

  fuse_mkdir_in mkdir_in{S_IFDIR | 0750, 0};
  r = Call(*client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName("d"), 1234, 5678));
  ASSERT_EQ(r.header.error, 0);
  auto dir_entry = r.As<fuse_entry_out>();
  EXPECT_TRUE(S_ISDIR(dir_entry.attr.mode));
  EXPECT_EQ(dir_entry.attr.uid, 1234u);

  fuse_open_in opendir{};
  opendir.flags = O_RDONLY;
  r = Call(*client, Frame(FUSE_OPENDIR, ++unique_, 1, Bytes(opendir)));
  ASSERT_EQ(r.header.error, 0);
  uint64_t dir_fh = r.As<fuse_open_out>().fh;
  r = Call(*client, Frame(FUSE_READDIRPLUS, ++unique_, 1, ReadIn(dir_fh, 0, 4096)));
  ASSERT_EQ(r.header.error, 0);
  std::map<std::string, PlusEntry> seen;
  for (const PlusEntry& e : ParsePlus(r.body)) seen[e.name] = e;
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen["."].entry.nodeid, 0u);
  EXPECT_EQ(seen[".."].entry.nodeid, 0u);
  EXPECT_EQ(seen["f"].entry.nodeid, entry.nodeid);  // same inode, same node
  EXPECT_EQ(seen["f"].entry.attr.size, data.size());
  EXPECT_EQ(seen["d"].entry.nodeid, dir_entry.nodeid);
  fuse_release_in releasedir{};
  releasedir.fh = dir_fh;
  EXPECT_EQ(Call(*client, Frame(FUSE_RELEASEDIR, ++unique_, 1, Bytes(releasedir))).header.error, 0);

  r = Call(*client, Frame(FUSE_UNLINK, ++unique_, 1, CName("f")));
  EXPECT_EQ(r.header.error, 0);
  EXPECT_EQ(r.header.len, sizeof(fuse_out_header));
  EXPECT_EQ(Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("f"))).header.error, -ENOENT);
  EXPECT_EQ(Call(*client, Frame(FUSE_RMDIR, ++unique_, 1, CName("d"))).header.error, 0);
}

TEST_F(WireTest, PipelinedRequests) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  std::ofstream(export_.Join("p")) << "pipelined";
  std::string batch;
  std::set<uint64_t> expected;
  for (int i = 0; i < 40; ++i) {
    uint64_t unique = ++unique_;
    expected.insert(unique);
    if (i % 2 == 0) {
      batch += Frame(FUSE_GETATTR, unique, 1, Bytes(fuse_getattr_in{}));
    } else {
      batch += Frame(FUSE_LOOKUP, unique, 1, CName("p"));
    }
  }
  ASSERT_TRUE(client->Send(batch).ok());
  for (int i = 0; i < 40; ++i) {
    auto reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.error, 0);
    EXPECT_EQ(expected.erase(reply->header.unique), 1u);
  }
  EXPECT_TRUE(expected.empty());
}

TEST_F(WireTest, InflightLimitPausesButServesEverything) {
  wire::ClientHello hello = DefaultHello();
  hello.set_max_inflight(2);
  auto client = Connect(hello);
  ASSERT_NE(client, nullptr);
  std::string batch;
  for (int i = 0; i < 50; ++i) batch += Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{}));
  ASSERT_TRUE(client->Send(batch).ok());
  for (int i = 0; i < 50; ++i) {
    auto reply = client->Receive();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.error, 0);
  }
}

TEST_F(WireTest, OversizedFrameClosesOnlyThatConnection) {
  auto bad = Connect();
  auto good = Connect();
  ASSERT_NE(bad, nullptr);
  ASSERT_NE(good, nullptr);
  fuse_in_header header{};
  header.len = wire::kMaxFrameBytes + 1;
  header.opcode = FUSE_WRITE;
  header.unique = ++unique_;
  ASSERT_TRUE(bad->Send(Bytes(header)).ok());
  EXPECT_TRUE(bad->WaitClosed());
  Reply r = Call(*good, Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{})));
  EXPECT_EQ(r.header.error, 0);
  // A length below the header size is just as untrustworthy.
  auto tiny = Connect();
  header.len = 8;
  ASSERT_TRUE(tiny->Send(Bytes(header)).ok());
  EXPECT_TRUE(tiny->WaitClosed());
}

TEST_F(WireTest, MalformedRequestsGetErrorsAndConnectionLives) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("a/b"))).header.error, -EINVAL);
  EXPECT_EQ(Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName(".."))).header.error, -EINVAL);
  EXPECT_EQ(Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, "noterm")).header.error, -EINVAL);
  EXPECT_EQ(Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName(std::string(300, 'x'))))
                .header.error,
            -ENAMETOOLONG);
  EXPECT_EQ(Call(*client, Frame(FUSE_GETLK, ++unique_, 1, std::string(64, '\0'))).header.error,
            -ENOSYS);
  EXPECT_EQ(Call(*client, Frame(77, ++unique_, 1, "")).header.error, -ENOSYS);
  // Ids this server never handed out are stale, not "no such file" or "bad descriptor".
  EXPECT_EQ(Call(*client, Frame(FUSE_GETATTR, ++unique_, 999, Bytes(fuse_getattr_in{})))
                .header.error,
            -ESTALE);
  EXPECT_EQ(Call(*client, Frame(FUSE_READ, ++unique_, 1, ReadIn(4242, 0, 10))).header.error,
            -ESTALE);
  EXPECT_EQ(Call(*client, Frame(FUSE_READ, ++unique_, 1, ReadIn(1, ~0ull, 10))).header.error,
            -EINVAL);
  EXPECT_EQ(Call(*client, Frame(FUSE_READ, ++unique_, 1, ReadIn(1, 0, 8u << 20))).header.error,
            -E2BIG);
  // FORGET and INTERRUPT have no reply: the next reply belongs to the GETATTR.
  ASSERT_TRUE(client->Send(Frame(FUSE_FORGET, ++unique_, 1, Bytes(fuse_forget_in{1}))).ok());
  ASSERT_TRUE(client->Send(Frame(FUSE_INTERRUPT, ++unique_, 0, Bytes(fuse_interrupt_in{5}))).ok());
  EXPECT_EQ(Call(*client, Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{}))).header.error,
            0);
}

TEST_F(WireTest, LargeWriteAndRead) {
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0644;
  Reply r = Call(*client, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName("big")));
  ASSERT_EQ(r.header.error, 0);
  auto entry = r.As<fuse_entry_out>();
  fuse_open_out open;
  std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
  std::string data(wire::kMaxIoBytes, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  // Two maximal WRITEs pipelined, then small ones, then read it all back.
  std::string batch = Frame(FUSE_WRITE, ++unique_, entry.nodeid, WriteIn(open.fh, 0, data));
  batch += Frame(FUSE_WRITE, ++unique_, entry.nodeid, WriteIn(open.fh, data.size(), data));
  batch += Frame(FUSE_WRITE, ++unique_, entry.nodeid, WriteIn(open.fh, 2 * data.size(), "tail"));
  ASSERT_TRUE(client->Send(batch).ok());
  for (int i = 0; i < 3; ++i) {
    auto reply = client->Receive();
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->header.error, 0);
  }
  r = Call(*client, Frame(FUSE_READ, ++unique_, entry.nodeid,
                          ReadIn(open.fh, data.size(), wire::kMaxIoBytes)));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_TRUE(r.body == data);
  r = Call(*client, Frame(FUSE_READ, ++unique_, entry.nodeid,
                          ReadIn(open.fh, 2 * data.size(), 100)));
  EXPECT_EQ(r.body, "tail");
  struct stat st {};
  ASSERT_EQ(stat(export_.Join("big").c_str(), &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), 2 * data.size() + 4);
}

// A READ at offset -1 went to io_uring as "read at the file position" and returned data; WRITE
// (above the inline size, also io_uring) would have written there. Both are EINVAL now.
TEST_F(WireTest, NegativeOffsetsAreEinval) {
  std::ofstream(export_.Join("pos")) << "position zero";
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Reply r = Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("pos")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t node = r.As<fuse_entry_out>().nodeid;
  fuse_open_in open_in{};
  open_in.flags = O_RDWR;
  r = Call(*client, Frame(FUSE_OPEN, ++unique_, node, Bytes(open_in)));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t fh = r.As<fuse_open_out>().fh;
  for (uint64_t offset : {~uint64_t{0}, uint64_t{1} << 63}) {
    r = Call(*client, Frame(FUSE_READ, ++unique_, node, ReadIn(fh, offset, 100)));
    EXPECT_EQ(r.header.error, -EINVAL) << offset << ": got \"" << r.body << "\"";
    r = Call(*client, Frame(FUSE_WRITE, ++unique_, node,
                            WriteIn(fh, offset, std::string(256 * 1024, 'w'))));
    EXPECT_EQ(r.header.error, -EINVAL) << offset;
  }
  std::ifstream in(export_.Join("pos"));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content.size(), 13u) << "a WRITE at a negative offset wrote somewhere";
  EXPECT_EQ(content.substr(0, 13), "position zero");
}

TEST_F(WireTest, ConnectionsOfOneClientShareNodes) {
  std::ofstream(export_.Join("shared")) << "x";
  auto first = Connect(DefaultHello("mount-a"));
  auto second = Connect(DefaultHello("mount-a"));
  auto other = Connect(DefaultHello("mount-b"));
  Reply r = Call(*first, Frame(FUSE_LOOKUP, ++unique_, 1, CName("shared")));
  ASSERT_EQ(r.header.error, 0);
  uint64_t node = r.As<fuse_entry_out>().nodeid;
  fuse_open_in open_in{};
  open_in.flags = O_RDONLY;
  r = Call(*second, Frame(FUSE_OPEN, ++unique_, node, Bytes(open_in)));
  ASSERT_EQ(r.header.error, 0);
  uint64_t fh = r.As<fuse_open_out>().fh;
  EXPECT_EQ(Call(*first, Frame(FUSE_READ, ++unique_, node, ReadIn(fh, 0, 10))).body, "x");
  EXPECT_EQ(Call(*other, Frame(FUSE_GETATTR, ++unique_, node, Bytes(fuse_getattr_in{})))
                .header.error,
            -ESTALE);
  // The state survives a reconnect of the same client.
  first.reset();
  second.reset();
  auto again = Connect(DefaultHello("mount-a"));
  EXPECT_EQ(Call(*again, Frame(FUSE_GETATTR, ++unique_, node, Bytes(fuse_getattr_in{})))
                .header.error,
            0);
}

// Several connections of one client on both workers, each creating, writing, reading back and
// removing its own files with requests pipelined, while sharing one node and handle table.
TEST_F(WireTest, ConcurrentConnectionsOfOneClient) {
  constexpr int kThreads = 6;
  constexpr int kFiles = 20;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      wire::ServerHello hello_reply;
      auto client = TestClient::Connect(address_, DefaultHello("stress"), &hello_reply);
      if (!client.ok()) {
        ++failures;
        return;
      }
      uint64_t unique = 1000;
      auto call = [&](const std::string& frame) -> Reply {
        auto reply = (*client)->Call(frame);
        if (!reply.ok()) {
          ++failures;
          return Reply{};
        }
        return *reply;
      };
      for (int i = 0; i < kFiles; ++i) {
        std::string name = "t" + std::to_string(t) + "_" + std::to_string(i);
        fuse_create_in create{};
        create.flags = O_RDWR | O_CREAT;
        create.mode = S_IFREG | 0644;
        Reply r = call(Frame(FUSE_CREATE, ++unique, 1, Bytes(create) + CName(name)));
        if (r.header.error != 0) {
          ++failures;
          continue;
        }
        auto entry = r.As<fuse_entry_out>();
        fuse_open_out open;
        std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
        std::string data(4096 * (1 + i % 5), static_cast<char>('a' + t));
        std::string batch;
        for (int k = 0; k < 4; ++k) {
          batch += Frame(FUSE_WRITE, ++unique, entry.nodeid,
                         WriteIn(open.fh, k * data.size(), data));
        }
        if (!(*client)->Send(batch).ok()) ++failures;
        for (int k = 0; k < 4; ++k) {
          auto reply = (*client)->Receive();
          if (!reply.ok() || reply->header.error != 0) ++failures;
        }
        r = call(Frame(FUSE_READ, ++unique, entry.nodeid, ReadIn(open.fh, data.size(),
                                                               static_cast<uint32_t>(data.size()))));
        if (r.body != data) ++failures;
        fuse_release_in release{};
        release.fh = open.fh;
        call(Frame(FUSE_RELEASE, ++unique, entry.nodeid, Bytes(release)));
        if (!(*client)->Send(Frame(FUSE_FORGET, ++unique, entry.nodeid, Bytes(fuse_forget_in{1})))
                 .ok()) {
          ++failures;
        }
        if (call(Frame(FUSE_UNLINK, ++unique, 1, CName(name))).header.error != 0) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  auto state = server_->registry()->GetOrCreate(ClientStateKey("", "stress"));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->handles.size(), 0u);
  EXPECT_EQ((*state)->nodes->size(), 1u);  // every node forgotten, only the root is left
}

// Regression: with one O_PATH fd per known node, a client that looked up more files than the
// fd limit allows got EMFILE. Under a soft RLIMIT_NOFILE of 256 the server now serves 4000
// lookups and then every node again (most reopened by file handle).
TEST_F(WireTest, ThousandsOfLookupsUnderLowFdLimit) {
  server_->Stop();
  server_.reset();
  constexpr int kFiles = 4000;
  constexpr int kBatch = 64;  // DefaultHello's max_inflight
  std::vector<ino_t> inos(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = export_.Join("n" + std::to_string(i));
    std::ofstream(path) << std::string(static_cast<size_t>(i % 13), 'z');
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    inos[i] = st.st_ino;
  }
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit low = saved;
  low.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  struct Restore {
    rlimit limit;
    ~Restore() { setrlimit(RLIMIT_NOFILE, &limit); }
  } restore{saved};

  StartServer();  // sizes its node fd cache from the lowered limit
  auto client = Connect(DefaultHello("many-files"));
  ASSERT_NE(client, nullptr);
  // Sends one request per file in pipelined batches; `check` sees each reply with its index.
  auto for_all = [&](auto frame_of, auto check) {
    for (int start = 0; start < kFiles; start += kBatch) {
      const int end = std::min(kFiles, start + kBatch);
      const uint64_t base = unique_ + 1;
      std::string batch;
      for (int i = start; i < end; ++i) batch += frame_of(i, ++unique_);
      ASSERT_TRUE(client->Send(batch).ok());
      for (int n = start; n < end; ++n) {
        auto reply = client->Receive();
        ASSERT_TRUE(reply.ok()) << reply.status();
        const int i = start + static_cast<int>(reply->header.unique - base);
        ASSERT_EQ(reply->header.error, 0) << "file " << i;
        check(i, *reply);
      }
    }
  };
  std::vector<uint64_t> ids(kFiles);
  for_all(
      [](int i, uint64_t unique) {
        return Frame(FUSE_LOOKUP, unique, 1, CName("n" + std::to_string(i)));
      },
      [&](int i, const Reply& r) {
        ids[i] = r.As<fuse_entry_out>().nodeid;
        EXPECT_EQ(r.As<fuse_entry_out>().attr.ino, inos[i]);
      });
  for_all(
      [&](int i, uint64_t unique) {
        return Frame(FUSE_GETATTR, unique, ids[i], Bytes(fuse_getattr_in{}));
      },
      [&](int i, const Reply& r) {
        EXPECT_EQ(r.As<fuse_attr_out>().attr.ino, inos[i]);
        EXPECT_EQ(r.As<fuse_attr_out>().attr.size, static_cast<uint64_t>(i % 13));
      });
  // Opening and reading a node that was pushed out long ago works too.
  fuse_open_in open_in{};
  open_in.flags = O_RDONLY;
  Reply r = Call(*client, Frame(FUSE_OPEN, ++unique_, ids[12], Bytes(open_in)));
  ASSERT_EQ(r.header.error, 0);
  r = Call(*client, Frame(FUSE_READ, ++unique_, ids[12], ReadIn(r.As<fuse_open_out>().fh, 0, 64)));
  EXPECT_EQ(r.body, std::string(12, 'z'));

  auto state = server_->registry()->GetOrCreate(ClientStateKey("", "many-files"));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->nodes->size(), static_cast<size_t>(kFiles) + 1);
  // FORGET of every node, then the server is down to the root again.
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_TRUE(client->Send(Frame(FUSE_FORGET, ++unique_, ids[i], Bytes(fuse_forget_in{1}))).ok());
  }
  EXPECT_EQ(Call(*client, Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{}))).header.error,
            0);
  for (int i = 0; i < 100 && (*state)->nodes->size() > 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*state)->nodes->size(), 1u);
}

TEST_F(WireTest, StopClosesIdleConnectionsAndPendingHandshakes) {
  auto idle = Connect();
  ASSERT_NE(idle, nullptr);
  auto silent = TestClient::ConnectRaw(address_);  // never sends its handshake
  ASSERT_TRUE(silent.ok());
  auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_TRUE(idle->WaitClosed());
  EXPECT_TRUE((*silent)->WaitClosed());
}

TEST_F(WireTest, UnixSocket) {
  server_->Stop();
  StartServer("", "unix:" + export_.path() + ".sock");
  EXPECT_EQ(address_, "unix:" + export_.path() + ".sock");
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(Call(*client, Frame(FUSE_GETATTR, ++unique_, 1, Bytes(fuse_getattr_in{}))).header.error,
            0);
  client.reset();
  server_->Stop();
  struct stat st {};
  EXPECT_NE(stat((export_.path() + ".sock").c_str(), &st), 0);
}

// Floor mode: READ gives zeros clipped at the file's size and WRITE reports success, neither
// touching the file; metadata requests still run for real.
TEST_F(WireTest, FloorModeAnswersWithoutFileIo) {
  server_->Stop();
  StartServer("", "127.0.0.1:0", /*floor=*/true);
  std::ofstream(export_.Join("data")) << std::string(10000, 'x');
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Reply r = Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("data")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t node = r.As<fuse_entry_out>().nodeid;
  EXPECT_EQ(r.As<fuse_entry_out>().attr.size, 10000u);
  fuse_open_in open_in{};
  open_in.flags = O_RDWR;
  r = Call(*client, Frame(FUSE_OPEN, ++unique_, node, Bytes(open_in)));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t fh = r.As<fuse_open_out>().fh;

  r = Call(*client, Frame(FUSE_READ, ++unique_, node, ReadIn(fh, 0, 8192)));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body, std::string(8192, '\0'));
  r = Call(*client, Frame(FUSE_READ, ++unique_, node, ReadIn(fh, 8192, 8192)));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body, std::string(10000 - 8192, '\0'));  // clipped at the file's size
  r = Call(*client, Frame(FUSE_READ, ++unique_, node, ReadIn(fh, 20000, 4096)));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_TRUE(r.body.empty());

  r = Call(*client, Frame(FUSE_WRITE, ++unique_, node, WriteIn(fh, 0, std::string(5000, 'y'))));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.As<fuse_write_out>().size, 5000u);
  r = Call(*client, Frame(FUSE_WRITE, ++unique_, node, WriteIn(fh, 1 << 20, "far")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.As<fuse_write_out>().size, 3u);
  std::ifstream in(export_.Join("data"), std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, std::string(10000, 'x'));  // nothing written

  // A bad handle is still refused, and metadata requests run as usual.
  r = Call(*client, Frame(FUSE_READ, ++unique_, node, ReadIn(fh + 1000, 0, 10)));
  EXPECT_EQ(r.header.error, -ESTALE);
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0644;
  r = Call(*client, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName("made")));
  ASSERT_EQ(r.header.error, 0);
  struct stat st {};
  EXPECT_EQ(stat(export_.Join("made").c_str(), &st), 0);
}

}  // namespace
}  // namespace ringfs::server

namespace ringfs::server {
namespace {

std::vector<wire::DirAttrTrailer> Trailers(const Reply& r, size_t plain_size) {
  std::vector<wire::DirAttrTrailer> out;
  EXPECT_GE(r.body.size(), plain_size);
  EXPECT_EQ((r.body.size() - plain_size) % sizeof(wire::DirAttrTrailer), 0u);
  for (size_t at = plain_size; at + sizeof(wire::DirAttrTrailer) <= r.body.size();
       at += sizeof(wire::DirAttrTrailer)) {
    wire::DirAttrTrailer t;
    std::memcpy(&t, r.body.data() + at, sizeof(t));
    out.push_back(t);
  }
  return out;
}

TEST_F(WireTest, DirAttrsFollowDirectoryChangesWhenAsked) {
  wire::ClientHello hello = DefaultHello();
  hello.set_want_dir_attrs(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_TRUE(accepted.dir_attrs());
  TestClient& client = **connected;

  fuse_mkdir_in mkdir_in{};
  mkdir_in.mode = 0755;
  Reply r = Call(client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName("d")));
  ASSERT_EQ(r.header.error, 0);
  auto trailers = Trailers(r, sizeof(fuse_entry_out));
  // The parent, then the new directory: it was empty once in this client's table (any name made
  // in it later is pushed), so the client may answer lookups in it (frontend/complete_dirs.h).
  ASSERT_EQ(trailers.size(), 2u);
  EXPECT_EQ(trailers[1].nodeid, r.As<fuse_entry_out>().nodeid);
  EXPECT_EQ(trailers[1].attr.attr.nlink, 2u);
  EXPECT_EQ(trailers[1].attr.attr.mode & S_IFMT, static_cast<uint32_t>(S_IFDIR));
  struct stat root {};
  ASSERT_EQ(stat(export_.path().c_str(), &root), 0);
  EXPECT_EQ(trailers[0].nodeid, 1u);
  EXPECT_EQ(trailers[0].attr.attr.nlink, root.st_nlink);  // the new subdirectory's ".." counts
  EXPECT_EQ(trailers[0].attr.attr.mtime, static_cast<uint64_t>(root.st_mtim.tv_sec));
  EXPECT_EQ(trailers[0].attr.attr.mtimensec, static_cast<uint32_t>(root.st_mtim.tv_nsec));
  const uint64_t dir = r.As<fuse_entry_out>().nodeid;

  fuse_create_in create{};
  create.flags = O_WRONLY | O_CREAT;
  create.mode = S_IFREG | 0644;
  r = Call(client, Frame(FUSE_CREATE, ++unique_, dir, Bytes(create) + CName("f")));
  ASSERT_EQ(r.header.error, 0);
  trailers = Trailers(r, sizeof(fuse_entry_out) + sizeof(fuse_open_out));
  ASSERT_EQ(trailers.size(), 1u);
  EXPECT_EQ(trailers[0].nodeid, dir);

  // A rename between two directories reports both.
  fuse_rename_in rename{};
  rename.newdir = 1;
  r = Call(client, Frame(FUSE_RENAME, ++unique_, dir, Bytes(rename) + CName("f") + CName("g")));
  ASSERT_EQ(r.header.error, 0);
  trailers = Trailers(r, 0);
  ASSERT_EQ(trailers.size(), 2u);
  EXPECT_EQ(trailers[0].nodeid, dir);
  EXPECT_EQ(trailers[1].nodeid, 1u);

  r = Call(client, Frame(FUSE_UNLINK, ++unique_, 1, CName("g")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(Trailers(r, 0).size(), 1u);

  // Failures and requests that change no directory carry nothing.
  r = Call(client, Frame(FUSE_UNLINK, ++unique_, 1, CName("g")));
  EXPECT_EQ(r.header.error, -ENOENT);
  EXPECT_TRUE(r.body.empty());
  r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("d")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body.size(), sizeof(fuse_entry_out));
}

// With listing attrs, every successful listing ends with one record of the listed directory as
// it is after the listing (its atime included), whatever the listing's length; errors carry
// none. Not granted without dir attrs, never sent unasked.
TEST_F(WireTest, AListingEndsWithItsDirectorysAttributesWhenAsked) {
  ASSERT_EQ(::mkdir((export_.path() + "/l").c_str(), 0755), 0);
  for (int i = 0; i < 40; ++i) {
    std::ofstream(export_.Join("l/" + std::to_string(i) + std::string(60, 'n'))) << "x";
  }
  wire::ClientHello hello = DefaultHello();
  hello.set_want_dir_attrs(true);
  hello.set_want_listing_attrs(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_TRUE(accepted.listing_attrs());
  TestClient& client = **connected;
  Reply r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("l")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t dir = r.As<fuse_entry_out>().nodeid;
  fuse_open_in opendir{};
  opendir.flags = O_RDONLY;
  r = Call(client, Frame(FUSE_OPENDIR, ++unique_, dir, Bytes(opendir)));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t fh = r.As<fuse_open_out>().fh;
  const size_t record = sizeof(wire::DirAttrTrailer);
  std::set<std::string> names;
  uint64_t offset = 0;
  for (int calls = 0; calls < 100; ++calls) {
    for (uint32_t opcode : {FUSE_READDIRPLUS, FUSE_READDIR}) {
      // Small pages: several answers, each filled up to the size asked, then the record.
      r = Call(client, Frame(opcode, ++unique_, dir, ReadIn(fh, offset, 1024)));
      ASSERT_EQ(r.header.error, 0);
      ASSERT_GE(r.body.size(), record);
      ASSERT_LE(r.body.size() - record, 1024u);
      auto trailers = Trailers(r, r.body.size() - record);
      ASSERT_EQ(trailers.size(), 1u);
      EXPECT_EQ(trailers[0].nodeid, dir);
      struct stat st {};
      ASSERT_EQ(stat((export_.path() + "/l").c_str(), &st), 0);
      EXPECT_EQ(trailers[0].attr.attr.ino, st.st_ino);
      EXPECT_EQ(trailers[0].attr.attr.atime, static_cast<uint64_t>(st.st_atim.tv_sec));
      EXPECT_EQ(trailers[0].attr.attr.atimensec, static_cast<uint32_t>(st.st_atim.tv_nsec));
      EXPECT_EQ(trailers[0].attr.attr.mtime, static_cast<uint64_t>(st.st_mtim.tv_sec));
      EXPECT_EQ(trailers[0].attr.attr.nlink, st.st_nlink);
    }
    // The READDIRPLUS answer's names (the READDIR asked for the same page).
    r = Call(client, Frame(FUSE_READDIRPLUS, ++unique_, dir, ReadIn(fh, offset, 1024)));
    ASSERT_EQ(r.header.error, 0);
    const std::string listing = r.body.substr(0, r.body.size() - record);
    if (listing.empty()) break;
    for (const PlusEntry& e : ParsePlus(listing)) {
      names.insert(e.name);
      offset = e.off;
    }
  }
  EXPECT_EQ(names.size(), 42u) << "every name once, \".\" and \"..\" included";
  // An error: no body at all.
  r = Call(client, Frame(FUSE_READDIR, ++unique_, dir, ReadIn(fh + 1000, 0, 1024)));
  EXPECT_LT(r.header.error, 0);
  EXPECT_TRUE(r.body.empty());

  // Without dir attrs, or unasked: plain listings.
  for (bool dir_attrs : {false, true}) {
    wire::ClientHello other = DefaultHello();
    other.set_want_dir_attrs(dir_attrs);
    other.set_want_listing_attrs(!dir_attrs);
    auto plain = TestClient::Connect(address_, other, &accepted);
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(accepted.listing_attrs());
    r = Call(**plain, Frame(FUSE_OPENDIR, ++unique_, 1, Bytes(opendir)));
    ASSERT_EQ(r.header.error, 0);
    const uint64_t root_fh = r.As<fuse_open_out>().fh;
    r = Call(**plain, Frame(FUSE_READDIR, ++unique_, 1, ReadIn(root_fh, 0, 4096)));
    ASSERT_EQ(r.header.error, 0);
    size_t dirents = 0;
    for (size_t at = 0; at < r.body.size(); ++dirents) {
      fuse_dirent d;
      std::memcpy(&d, r.body.data() + at, sizeof(d));
      at += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + d.namelen);
      ASSERT_LE(at, r.body.size());
    }
    EXPECT_EQ(dirents, 3u) << "\".\", \"..\" and l, nothing after them";
  }
}

// Write attrs (common/dir_attrs.h): every WRITE answer, small (written inline) or large (on the
// worker's ring), ends with exactly one record of the file as it is after the write; errors
// carry none; not granted without dir attrs, never sent unasked.
TEST_F(WireTest, AWriteEndsWithItsFilesAttributesWhenAsked) {
  wire::ClientHello hello = DefaultHello();
  hello.set_want_dir_attrs(true);
  hello.set_want_write_attrs(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_TRUE(accepted.write_attrs());
  TestClient& client = **connected;
  fuse_create_in create{};
  create.flags = O_WRONLY | O_CREAT;
  create.mode = S_IFREG | 0644;
  Reply r = Call(client, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName("w")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t node = r.As<fuse_entry_out>().nodeid;
  fuse_open_out open;
  std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
  uint64_t offset = 0;
  for (size_t size : {size_t{10}, size_t{200'000}, size_t{3}}) {
    const std::string data(size, 'w');
    r = Call(client, Frame(FUSE_WRITE, ++unique_, node, WriteIn(open.fh, offset, data)));
    offset += size;
    ASSERT_EQ(r.header.error, 0);
    ASSERT_EQ(r.body.size(), sizeof(fuse_write_out) + sizeof(wire::DirAttrTrailer)) << size;
    EXPECT_EQ(r.As<fuse_write_out>().size, size);
    auto trailers = Trailers(r, sizeof(fuse_write_out));
    ASSERT_EQ(trailers.size(), 1u);
    EXPECT_EQ(trailers[0].nodeid, node);
    struct stat st {};
    ASSERT_EQ(stat(export_.Join("w").c_str(), &st), 0);
    EXPECT_EQ(trailers[0].attr.attr.ino, st.st_ino);
    EXPECT_EQ(trailers[0].attr.attr.size, offset) << "the size after this write";
    EXPECT_EQ(trailers[0].attr.attr.mtime, static_cast<uint64_t>(st.st_mtim.tv_sec));
    EXPECT_EQ(trailers[0].attr.attr.mtimensec, static_cast<uint32_t>(st.st_mtim.tv_nsec));
    EXPECT_EQ(trailers[0].attr.attr.ctime, static_cast<uint64_t>(st.st_ctim.tv_sec));
    EXPECT_EQ(trailers[0].attr.attr.ctimensec, static_cast<uint32_t>(st.st_ctim.tv_nsec));
    EXPECT_GT(trailers[0].attr.attr_valid + trailers[0].attr.attr_valid_nsec, 0u);
  }
  r = Call(client, Frame(FUSE_WRITE, ++unique_, node, WriteIn(open.fh + 1000, 0, "x")));
  EXPECT_LT(r.header.error, 0);
  EXPECT_TRUE(r.body.empty()) << "an error carries no record";

  for (bool dir_attrs : {false, true}) {
    wire::ClientHello other = DefaultHello();
    other.set_want_dir_attrs(dir_attrs);
    other.set_want_write_attrs(!dir_attrs);
    auto plain = TestClient::Connect(address_, other, &accepted);
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(accepted.write_attrs());
    r = Call(**plain, Frame(FUSE_CREATE, ++unique_, 1,
                            Bytes(create) + CName("p" + std::to_string(dir_attrs))));
    ASSERT_EQ(r.header.error, 0);
    std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
    const uint64_t plain_node = r.As<fuse_entry_out>().nodeid;
    for (size_t size : {size_t{10}, size_t{200'000}}) {
      r = Call(**plain, Frame(FUSE_WRITE, ++unique_, plain_node,
                              WriteIn(open.fh, 0, std::string(size, 'p'))));
      ASSERT_EQ(r.header.error, 0);
      EXPECT_EQ(r.body.size(), sizeof(fuse_write_out));
    }
  }
}

// Open attrs (common/dir_attrs.h): every OPEN answer ends with exactly one record -- the file
// as the open found it, or a zero record while its change time is less than
// kOpenAttrsSettledNs old (a change in the same clock tick could keep it); errors carry none;
// not granted without dir attrs, never sent unasked.
TEST_F(WireTest, AnOpenEndsWithItsFilesAttributesOnceTheyHaveSettled) {
  std::ofstream(export_.Join("o")) << "open me";
  wire::ClientHello hello = DefaultHello();
  hello.set_want_dir_attrs(true);
  hello.set_want_open_attrs(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_TRUE(accepted.open_attrs());
  TestClient& client = **connected;
  Reply r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("o")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t node = r.As<fuse_entry_out>().nodeid;
  fuse_open_in open{};
  open.flags = O_RDONLY;
  auto open_once = [&] {
    Reply reply = Call(client, Frame(FUSE_OPEN, ++unique_, node, Bytes(open)));
    EXPECT_EQ(reply.header.error, 0);
    EXPECT_EQ(reply.body.size(), sizeof(fuse_open_out) + sizeof(wire::DirAttrTrailer));
    fuse_release_in release{};
    release.fh = reply.As<fuse_open_out>().fh;
    Call(client, Frame(FUSE_RELEASE, ++unique_, node, Bytes(release)));
    return reply;
  };
  r = open_once();
  auto trailers = Trailers(r, sizeof(fuse_open_out));
  ASSERT_EQ(trailers.size(), 1u);
  EXPECT_EQ(trailers[0].nodeid, 0u) << "changed just now: no record";

  std::this_thread::sleep_for(std::chrono::nanoseconds(wire::kOpenAttrsSettledNs) +
                              std::chrono::milliseconds(100));
  r = open_once();
  trailers = Trailers(r, sizeof(fuse_open_out));
  ASSERT_EQ(trailers.size(), 1u);
  EXPECT_EQ(trailers[0].nodeid, node);
  struct stat st {};
  ASSERT_EQ(stat(export_.Join("o").c_str(), &st), 0);
  EXPECT_EQ(trailers[0].attr.attr.ino, st.st_ino);
  EXPECT_EQ(trailers[0].attr.attr.size, 7u);
  EXPECT_EQ(trailers[0].attr.attr.ctime, static_cast<uint64_t>(st.st_ctim.tv_sec));
  EXPECT_EQ(trailers[0].attr.attr.ctimensec, static_cast<uint32_t>(st.st_ctim.tv_nsec));
  EXPECT_EQ(trailers[0].attr.attr.mtimensec, static_cast<uint32_t>(st.st_mtim.tv_nsec));

  // A change makes the next open's record go again, until it has settled.
  ASSERT_EQ(chmod(export_.Join("o").c_str(), 0640), 0);
  r = open_once();
  trailers = Trailers(r, sizeof(fuse_open_out));
  ASSERT_EQ(trailers.size(), 1u);
  EXPECT_EQ(trailers[0].nodeid, 0u) << "the chmod moved the change time";

  r = Call(client, Frame(FUSE_OPEN, ++unique_, node + 1000, Bytes(open)));
  EXPECT_LT(r.header.error, 0);
  EXPECT_TRUE(r.body.empty()) << "an error carries no record";

  for (bool dir_attrs : {false, true}) {
    wire::ClientHello other = DefaultHello();
    other.set_want_dir_attrs(dir_attrs);
    other.set_want_open_attrs(!dir_attrs);
    auto plain = TestClient::Connect(address_, other, &accepted);
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(accepted.open_attrs());
    r = Call(**plain, Frame(FUSE_LOOKUP, ++unique_, 1, CName("o")));
    ASSERT_EQ(r.header.error, 0);
    r = Call(**plain, Frame(FUSE_OPEN, ++unique_, r.As<fuse_entry_out>().nodeid, Bytes(open)));
    ASSERT_EQ(r.header.error, 0);
    EXPECT_EQ(r.body.size(), sizeof(fuse_open_out));
  }
}

// Open attrs: no record while anything has the file open for writing -- a descriptor on the
// storage node, a shared writable mapping whose descriptor is closed, another handle of this
// server's -- nor for an open that is not read-only: its change time could stay as it is while
// the data changes (stores through a mapping). The record comes back once the writer is gone,
// also for a caller who does not own the file (the lease test runs as the server).
TEST_F(WireTest, AnOpenGetsNoRecordWhileTheFileIsOpenForWriting) {
  std::ofstream(export_.Join("w")) << std::string(4096, 'a');
  ASSERT_EQ(chmod(export_.Join("w").c_str(), 0644), 0);
  wire::ClientHello hello = DefaultHello();
  hello.set_want_dir_attrs(true);
  hello.set_want_open_attrs(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  ASSERT_TRUE(accepted.open_attrs());
  TestClient& client = **connected;
  Reply r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("w")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t node = r.As<fuse_entry_out>().nodeid;
  // The record's node id (0: none); the handle is released unless `keep` is given.
  auto open_once = [&](uint32_t flags, uint32_t uid = 0, uint64_t* keep = nullptr) {
    fuse_open_in open{};
    open.flags = flags;
    Reply reply = Call(client, Frame(FUSE_OPEN, ++unique_, node, Bytes(open), uid, uid));
    EXPECT_EQ(reply.header.error, 0);
    auto trailers = Trailers(reply, sizeof(fuse_open_out));
    EXPECT_EQ(trailers.size(), 1u);
    if (keep != nullptr) {
      *keep = reply.As<fuse_open_out>().fh;
    } else {
      fuse_release_in release{};
      release.fh = reply.As<fuse_open_out>().fh;
      Call(client, Frame(FUSE_RELEASE, ++unique_, node, Bytes(release)));
    }
    return trailers.empty() ? uint64_t{1} << 63 : trailers[0].nodeid;
  };
  std::this_thread::sleep_for(std::chrono::nanoseconds(wire::kOpenAttrsSettledNs) +
                              std::chrono::milliseconds(100));
  EXPECT_EQ(open_once(O_RDONLY), node) << "settled, nobody writing";
  EXPECT_EQ(open_once(O_RDONLY, 1000), node) << "a caller who does not own the file";
  EXPECT_EQ(open_once(O_RDWR), 0u) << "a writer's own open";

  {
    UniqueFd writer(open(export_.Join("w").c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(writer.valid());
    EXPECT_EQ(open_once(O_RDONLY), 0u) << "open for writing on the storage node";
    EXPECT_EQ(open_once(O_RDONLY, 1000), 0u);
  }
  EXPECT_EQ(open_once(O_RDONLY), node) << "the writer closed";

  uint64_t write_fh = 0;
  EXPECT_EQ(open_once(O_WRONLY, 0, &write_fh), 0u);
  EXPECT_EQ(open_once(O_RDONLY), 0u) << "another handle of the server's is open for writing";
  fuse_release_in release{};
  release.fh = write_fh;
  Call(client, Frame(FUSE_RELEASE, ++unique_, node, Bytes(release)));
  EXPECT_EQ(open_once(O_RDONLY), node) << "released";

  void* map = nullptr;
  {
    UniqueFd fd(open(export_.Join("w").c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    ASSERT_NE(map, MAP_FAILED);
  }
  // The first store's write fault may set the times (ext4 does; tmpfs never): let them settle.
  // A store to the page made writable then sets nothing.
  static_cast<char*>(map)[0] = 'b';
  std::this_thread::sleep_for(std::chrono::nanoseconds(wire::kOpenAttrsSettledNs) +
                              std::chrono::milliseconds(100));
  static_cast<char*>(map)[1] = 'c';
  EXPECT_EQ(open_once(O_RDONLY), 0u) << "a shared writable mapping outlives its descriptor";
  ASSERT_EQ(munmap(map, 4096), 0);
  std::this_thread::sleep_for(std::chrono::nanoseconds(wire::kOpenAttrsSettledNs) +
                              std::chrono::milliseconds(100));
  EXPECT_EQ(open_once(O_RDONLY), node) << "every writer gone";
  struct sigaction was {};
  ASSERT_EQ(sigaction(SIGIO, nullptr, &was), 0);
  EXPECT_EQ(was.sa_handler, SIG_IGN) << "a lease break must not end the server";
}

// Handle-less listings (wire_format.md): READDIR/READDIRPLUS with fh 0 list the request's node
// from the export's own cookies, under the caller's credentials, and FSYNCDIR with fh 0 syncs
// it; the server never hands out an fh with bit 63 set (the client's own handles).
TEST_F(WireTest, AListingWithoutAHandleReadsTheDirectoryByNodeFromTheExportsCookies) {
  ASSERT_EQ(::mkdir((export_.path() + "/h").c_str(), 0755), 0);
  std::set<std::string> made = {".", ".."};
  for (int i = 0; i < 300; ++i) {
    const std::string name = std::to_string(i) + std::string(40, 'h');
    std::ofstream(export_.Join("h/" + name)) << "x";
    made.insert(name);
  }
  wire::ClientHello hello = DefaultHello();
  hello.set_want_handleless_listings(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_TRUE(accepted.handleless_listings());
  TestClient& client = **connected;
  Reply r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("h")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t dir = r.As<fuse_entry_out>().nodeid;

  // Pages of 2 KiB, each continued from the last entry's cookie; the names removed after the
  // first page (already listed) shift nothing: every other name comes exactly once.
  std::map<std::string, int> seen;
  uint64_t offset = 0;
  int pages = 0;
  for (; pages < 1000; ++pages) {
    r = Call(client, Frame(pages % 2 == 0 ? FUSE_READDIRPLUS : FUSE_READDIR, ++unique_, dir,
                           ReadIn(/*fh=*/0, offset, 2048)));
    ASSERT_EQ(r.header.error, 0) << "page " << pages;
    ASSERT_LE(r.body.size(), 2048u);
    if (r.body.empty()) break;
    if (pages % 2 == 0) {
      for (const PlusEntry& e : ParsePlus(r.body)) {
        ++seen[e.name];
        offset = e.off;
        if (e.name != "." && e.name != "..") {
          EXPECT_NE(e.entry.nodeid, 0u) << e.name;
          struct stat st {};
          ASSERT_EQ(::stat(export_.Join("h/" + e.name).c_str(), &st), 0);
          EXPECT_EQ(e.entry.attr.ino, st.st_ino) << e.name;
        }
      }
    } else {
      for (size_t at = 0; at < r.body.size();) {
        fuse_dirent d;
        std::memcpy(&d, r.body.data() + at, sizeof(d));
        ++seen[std::string(r.body.data() + at + FUSE_NAME_OFFSET, d.namelen)];
        offset = d.off;
        at += FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + d.namelen);
        ASSERT_LE(at, r.body.size());
      }
    }
    if (pages == 0) {
      for (const auto& [name, count] : seen) {
        if (name == "." || name == "..") continue;
        ASSERT_EQ(::unlink(export_.Join("h/" + name).c_str()), 0);
      }
    }
  }
  EXPECT_GT(pages, 10) << "small pages: many answers";
  std::set<std::string> names;
  for (const auto& [name, count] : seen) {
    EXPECT_EQ(count, 1) << name << " listed " << count << " times";
    names.insert(name);
  }
  EXPECT_EQ(names, made);

  // FSYNCDIR by node; a file is no directory; a caller who may not read it gets EACCES, as an
  // OPENDIR would have.
  fuse_fsync_in sync{};
  EXPECT_EQ(Call(client, Frame(FUSE_FSYNCDIR, ++unique_, dir, Bytes(sync))).header.error, 0);
  r = Call(client, Frame(FUSE_LOOKUP, ++unique_, dir, CName("299" + std::string(40, 'h'))));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t file = r.As<fuse_entry_out>().nodeid;
  EXPECT_EQ(Call(client, Frame(FUSE_READDIR, ++unique_, file, ReadIn(0, 0, 4096))).header.error,
            -ENOTDIR);
  ASSERT_EQ(::chmod(export_.Join("h").c_str(), 0700), 0);
  EXPECT_EQ(Call(client, Frame(FUSE_READDIR, ++unique_, dir, ReadIn(0, 0, 4096), 1234, 1234))
                .header.error,
            -EACCES);
  EXPECT_EQ(Call(client, Frame(FUSE_READDIR, ++unique_, dir, ReadIn(0, 0, 4096))).header.error, 0)
      << "root may";
  // Syncing checks no permission (as on the descriptor the caller holds), whoever ran last.
  for (uint32_t uid : {1234u, 0u, 1234u}) {
    EXPECT_EQ(
        Call(client, Frame(FUSE_FSYNCDIR, ++unique_, dir, Bytes(sync), uid, uid)).header.error, 0)
        << uid;
  }

  // No handle this server hands out has bit 63: 2,000 opens of directories and files, each
  // one as likely as not to have it without the rule.
  fuse_open_in open{};
  open.flags = O_RDONLY;
  for (int i = 0; i < 2000; ++i) {
    const bool is_dir = i % 2 == 0;
    const uint64_t node = is_dir ? dir : file;
    r = Call(client, Frame(is_dir ? FUSE_OPENDIR : FUSE_OPEN, ++unique_, node, Bytes(open)));
    ASSERT_EQ(r.header.error, 0);
    fuse_release_in release{};
    release.fh = r.As<fuse_open_out>().fh;
    EXPECT_EQ(release.fh & wire::kClientDirHandleBit, 0u) << std::hex << release.fh;
    r = Call(client,
             Frame(is_dir ? FUSE_RELEASEDIR : FUSE_RELEASE, ++unique_, node, Bytes(release)));
    EXPECT_EQ(r.header.error, 0);
  }
  auto unasked = TestClient::Connect(address_, DefaultHello(), &accepted);
  ASSERT_TRUE(unasked.ok());
  EXPECT_FALSE(accepted.handleless_listings());
}

// A LOOKUP that finds no entry in an empty directory says so with that directory's trailer, so
// the client may answer lookups in it itself (frontend/complete_dirs.h). Only when asked, with
// dir attrs and invalidations (the client must hear of names made there later).
TEST_F(WireTest, ANegativeLookupInAnEmptyDirectorySaysItIsEmptyWhenAsked) {
  wire::ClientHello hello = DefaultHello();
  hello.set_want_dir_attrs(true);
  hello.set_want_invalidations(true);
  hello.set_want_empty_dir_hints(true);
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  ASSERT_TRUE(accepted.invalidations());
  EXPECT_TRUE(accepted.empty_dir_hints());
  TestClient& client = **connected;
  ASSERT_EQ(::mkdir((export_.path() + "/made-on-export").c_str(), 0755), 0);
  Reply r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("made-on-export")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t dir = r.As<fuse_entry_out>().nodeid;
  ASSERT_NE(dir, 0u);
  EXPECT_EQ(r.body.size(), sizeof(fuse_entry_out));  // found: no trailer

  r = Call(client, Frame(FUSE_LOOKUP, ++unique_, dir, CName("absent")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.As<fuse_entry_out>().nodeid, 0u);
  auto trailers = Trailers(r, sizeof(fuse_entry_out));
  ASSERT_EQ(trailers.size(), 1u);
  EXPECT_EQ(trailers[0].nodeid, dir);
  EXPECT_EQ(trailers[0].attr.attr.mode & S_IFMT, static_cast<uint32_t>(S_IFDIR));

  // Not empty (a name made on the export): a negative entry alone.
  ASSERT_EQ(::mkdir((export_.path() + "/made-on-export/x").c_str(), 0755), 0);
  r = Call(client, Frame(FUSE_LOOKUP, ++unique_, dir, CName("absent")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.As<fuse_entry_out>().nodeid, 0u);
  EXPECT_EQ(r.body.size(), sizeof(fuse_entry_out));

  // Not asked: never.
  ASSERT_EQ(::rmdir((export_.path() + "/made-on-export/x").c_str()), 0);
  hello.set_want_empty_dir_hints(false);
  connected = TestClient::Connect(address_, hello, &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_FALSE(accepted.empty_dir_hints());
  r = Call(**connected, Frame(FUSE_LOOKUP, ++unique_, 1, CName("made-on-export")));
  ASSERT_EQ(r.header.error, 0);
  r = Call(**connected, Frame(FUSE_LOOKUP, ++unique_, r.As<fuse_entry_out>().nodeid,
                              CName("absent")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body.size(), sizeof(fuse_entry_out));
}

// Files a request changes without naming them by node id are pushed to the other clients that
// hold them: the file an UNLINK or RENAME removes or replaces (its other names show one link
// fewer), and an existing file a CREATE (no O_EXCL: the caller's kernel thought the name absent)
// opens with O_TRUNC. The request names only the directory entry, and an entry push invalidates
// no inode in the receiving kernel.
TEST_F(WireTest, FilesChangedWithoutBeingNamedArePushedToTheirHolders) {
  auto open_with = [&](const std::string& client_id) {
    wire::ClientHello hello = DefaultHello(client_id);
    hello.set_want_invalidations(true);
    wire::ServerHello accepted;
    auto connected = TestClient::Connect(address_, hello, &accepted);
    EXPECT_TRUE(connected.ok() && accepted.invalidations());
    return connected.ok() ? *std::move(connected) : nullptr;
  };
  auto holder = open_with("holder");
  auto changer = open_with("changer");
  ASSERT_TRUE(holder && changer);
  for (const char* name : {"h", "t", "x", "e"}) std::ofstream(export_.Join(name)) << "contents";
  ASSERT_EQ(::link(export_.Join("h").c_str(), export_.Join("h2").c_str()), 0);
  ASSERT_EQ(::link(export_.Join("t").c_str(), export_.Join("t2").c_str()), 0);
  auto lookup = [&](TestClient& client, const char* name) {
    Reply r = Call(client, Frame(FUSE_LOOKUP, ++unique_, 1, CName(name)));
    EXPECT_EQ(r.header.error, 0) << name;
    return r.header.error == 0 ? r.As<fuse_entry_out>().nodeid : 0;
  };
  // The holder knows the files by their other names only (h2, t2), and e.
  const uint64_t h2 = lookup(*holder, "h2");
  const uint64_t t2 = lookup(*holder, "t2");
  const uint64_t e = lookup(*holder, "e");
  ASSERT_NE(h2 * t2 * e, 0u);
  // The kInode records pushed to the holder until none comes for 300 ms; entry records of the
  // root are ignored (the holder holds the root).
  auto pushed_inodes = [&]() {
    std::vector<wire::Invalidation> inodes;
    for (;;) {
      auto frame = holder->Receive(std::chrono::milliseconds(300));
      if (!frame.ok()) return inodes;
      EXPECT_EQ(frame->header.unique, 0u);
      EXPECT_EQ(frame->header.error, wire::kNotifyInvalidate);
      std::vector<wire::Invalidation> records;
      EXPECT_TRUE(wire::ParseInvalidations(frame->body, &records));
      for (const auto& record : records) {
        if (record.kind == wire::InvalidationKind::kInode) inodes.push_back(record);
      }
    }
  };
  const uint64_t dir = lookup(*changer, "x");  // any lookup: the changer works in the root
  ASSERT_NE(dir, 0u);
  ASSERT_EQ(Call(*changer, Frame(FUSE_UNLINK, ++unique_, 1, CName("h"))).header.error, 0);
  std::vector<wire::Invalidation> inodes = pushed_inodes();
  ASSERT_EQ(inodes.size(), 1u) << "the unlinked file, held by its other name";
  EXPECT_EQ(inodes[0].nodeid, h2);
  EXPECT_EQ(inodes[0].offset, -1) << "attributes only";

  // rename x over t: t's other name t2 shows one link fewer.
  fuse_rename2_in rename{};
  rename.newdir = 1;
  ASSERT_EQ(
      Call(*changer, Frame(FUSE_RENAME2, ++unique_, 1, Bytes(rename) + CName("x") + CName("t")))
          .header.error,
      0);
  inodes = pushed_inodes();
  ASSERT_EQ(inodes.size(), 1u) << "the replaced file, held by its other name";
  EXPECT_EQ(inodes[0].nodeid, t2);

  // CREATE without O_EXCL of the existing e with O_TRUNC: its size and data.
  fuse_create_in create{};
  create.flags = O_CREAT | O_WRONLY | O_TRUNC;
  create.mode = S_IFREG | 0644;
  Reply created = Call(*changer, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName("e")));
  ASSERT_EQ(created.header.error, 0);
  struct stat st;
  ASSERT_EQ(::stat(export_.Join("e").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0) << "the existing file was truncated";
  inodes = pushed_inodes();
  ASSERT_EQ(inodes.size(), 1u) << "the truncated file";
  EXPECT_EQ(inodes[0].nodeid, e);
  EXPECT_EQ(inodes[0].offset, 0) << "its data from the start";

  // Without O_TRUNC nothing changed: nothing about e.
  create.flags = O_CREAT | O_WRONLY;
  ASSERT_EQ(
      Call(*changer, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName("e"))).header.error, 0);
  EXPECT_TRUE(pushed_inodes().empty());
}

TEST_F(WireTest, ServerHelloCarriesTheInstanceId) {
  wire::ServerHello first, second;
  auto a = TestClient::Connect(address_, DefaultHello("mount-a"), &first);
  auto b = TestClient::Connect(address_, DefaultHello("mount-b"), &second);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(first.instance_id(), 0u);
  EXPECT_EQ(first.instance_id(), server_->instance_id());
  EXPECT_EQ(second.instance_id(), first.instance_id());
  wire::ClientHello bad = DefaultHello();
  bad.set_wire_version(99);
  wire::ServerHello refused;
  auto c = TestClient::Connect(address_, bad, &refused);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(refused.result(), wire::ServerHello::VERSION_MISMATCH);
  EXPECT_EQ(refused.instance_id(), first.instance_id());

  server_->Stop();
  StartServer();
  wire::ServerHello restarted;
  auto d = TestClient::Connect(address_, DefaultHello("mount-a"), &restarted);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(restarted.instance_id(), 0u);
  EXPECT_NE(restarted.instance_id(), first.instance_id());
}

// Issue 10 on the wire: after a restart the same client (same client_id) gets node ids and fh
// the old instance never used, the old ones answer ESTALE, and generations stay what they were.
TEST_F(WireTest, RestartedServerNeverAliasesOldIds) {
  std::ofstream(export_.Join("old")) << "old";
  auto client = Connect(DefaultHello("mount-a"));
  ASSERT_NE(client, nullptr);
  Reply r = Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("old")));
  ASSERT_EQ(r.header.error, 0);
  const fuse_entry_out old_entry = r.As<fuse_entry_out>();
  EXPECT_NE(old_entry.generation, 0u);
  fuse_open_in open_in{};
  open_in.flags = O_RDWR;
  r = Call(*client, Frame(FUSE_OPEN, ++unique_, old_entry.nodeid, Bytes(open_in)));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t old_fh = r.As<fuse_open_out>().fh;
  fuse_mkdir_in mkdir_in{0755, 0};
  r = Call(*client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName("olddir")));
  ASSERT_EQ(r.header.error, 0);
  const uint64_t old_dir = r.As<fuse_entry_out>().nodeid;
  client.reset();

  server_->Stop();
  StartServer();
  client = Connect(DefaultHello("mount-a"));
  ASSERT_NE(client, nullptr);
  std::set<uint64_t> new_nodes, new_fhs;
  for (int i = 0; i < 24; ++i) {
    fuse_create_in create{};
    create.flags = O_RDWR | O_CREAT;
    create.mode = S_IFREG | 0644;
    const std::string name = "new" + std::to_string(i);
    r = Call(*client, Frame(FUSE_CREATE, ++unique_, 1, Bytes(create) + CName(name)));
    ASSERT_EQ(r.header.error, 0);
    new_nodes.insert(r.As<fuse_entry_out>().nodeid);
    fuse_open_out open;
    std::memcpy(&open, r.body.data() + sizeof(fuse_entry_out), sizeof(open));
    new_fhs.insert(open.fh);
    r = Call(*client, Frame(FUSE_MKDIR, ++unique_, 1, Bytes(mkdir_in) + CName(name + "d")));
    ASSERT_EQ(r.header.error, 0);
    new_nodes.insert(r.As<fuse_entry_out>().nodeid);
  }
  EXPECT_FALSE(new_nodes.contains(old_entry.nodeid));
  EXPECT_FALSE(new_nodes.contains(old_dir));
  EXPECT_FALSE(new_fhs.contains(old_fh));

  r = Call(*client, Frame(FUSE_WRITE, ++unique_, old_entry.nodeid, WriteIn(old_fh, 0, "XX")));
  EXPECT_EQ(r.header.error, -ESTALE);
  r = Call(*client, Frame(FUSE_READ, ++unique_, old_entry.nodeid, ReadIn(old_fh, 0, 10)));
  EXPECT_EQ(r.header.error, -ESTALE);
  r = Call(*client, Frame(FUSE_GETATTR, ++unique_, old_entry.nodeid, Bytes(fuse_getattr_in{})));
  EXPECT_EQ(r.header.error, -ESTALE);
  fuse_create_in create{};
  create.flags = O_RDWR | O_CREAT;
  create.mode = S_IFREG | 0644;
  r = Call(*client, Frame(FUSE_CREATE, ++unique_, old_dir, Bytes(create) + CName("x")));
  EXPECT_EQ(r.header.error, -ESTALE);
  for (int i = 0; i < 24; ++i) {
    const std::string name = "new" + std::to_string(i);
    struct stat st {};
    ASSERT_EQ(stat(export_.Join(name).c_str(), &st), 0);
    EXPECT_EQ(st.st_size, 0) << name;
    EXPECT_NE(access(export_.Join(name + "d/x").c_str(), F_OK), 0) << name;
  }
  EXPECT_NE(access(export_.Join("olddir/x").c_str(), F_OK), 0);

  // Looked up again, the file gets a new node id and the generation it had before the restart.
  r = Call(*client, Frame(FUSE_LOOKUP, ++unique_, 1, CName("old")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.As<fuse_entry_out>().generation, old_entry.generation);
  EXPECT_NE(r.As<fuse_entry_out>().nodeid, old_entry.nodeid);
}

TEST_F(WireTest, NoDirAttrsUnlessAsked) {
  wire::ServerHello accepted;
  auto connected = TestClient::Connect(address_, DefaultHello(), &accepted);
  ASSERT_TRUE(connected.ok());
  EXPECT_FALSE(accepted.dir_attrs());
  fuse_mknod_in mknod{};
  mknod.mode = S_IFREG | 0644;
  Reply r = Call(**connected, Frame(FUSE_MKNOD, ++unique_, 1, Bytes(mknod) + CName("x")));
  ASSERT_EQ(r.header.error, 0);
  EXPECT_EQ(r.body.size(), sizeof(fuse_entry_out));
}

}  // namespace
}  // namespace ringfs::server
