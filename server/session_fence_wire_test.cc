// A connection the client lost may still hold requests the server has not run: received
// behind a write stuck on slow storage. The client resends them on a new connection and, once
// answered, goes on. Caught in review (session 29): the old connection's copy of a WRITE then
// ran after the resent copy and after the client's next write of the same bytes, and put the
// older data back. Here the "slow storage" is a file whose inode lock a process holds, over a
// real socket and a real server with two workers.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "server/server.h"
#include "server/test_client.h"
#include "tests/harness/system.h"

namespace ringfs::server {
namespace {

using testing::Bytes;
using testing::CName;
using testing::DefaultHello;
using testing::Frame;
using testing::Reply;
using testing::TestClient;

constexpr char kClientId[] = "fenced-mount";
constexpr size_t kPage = 4096;

// Holds the inode lock of a file: a write(2) to it from a page that is not there yet and is
// registered with userfaultfd stops inside the filesystem's write, lock held, until Release()
// fills the page. Writes to that file from others wait for the lock meanwhile.
class InodeLockHolder {
 public:
  // Empty when userfaultfd cannot stop a kernel fault here (not root, or no userfaultfd).
  static std::unique_ptr<InodeLockHolder> Hold(const std::string& path, std::string* why) {
    auto holder = std::unique_ptr<InodeLockHolder>(new InodeLockHolder());
    holder->uffd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
    if (holder->uffd_ < 0) {
      *why = std::string("userfaultfd: ") + std::strerror(errno);
      return nullptr;
    }
    uffdio_api api{.api = UFFD_API};
    if (ioctl(holder->uffd_, UFFDIO_API, &api) != 0) {
      *why = std::string("UFFDIO_API: ") + std::strerror(errno);
      return nullptr;
    }
    holder->page_ =
        mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uffdio_register reg{};
    reg.range = {reinterpret_cast<uint64_t>(holder->page_), kPage};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(holder->uffd_, UFFDIO_REGISTER, &reg) != 0) {
      *why = std::string("UFFDIO_REGISTER: ") + std::strerror(errno);
      return nullptr;
    }
    holder->fd_ = open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (holder->fd_ < 0) {
      *why = std::string("open: ") + std::strerror(errno);
      return nullptr;
    }
    InodeLockHolder* h = holder.get();
    h->writer_ = std::thread([h] {
      h->tid_.store(gettid());
      h->written_ = pwrite(h->fd_, h->page_, kPage, 0);
    });
    // The fault arrives once the write is inside the filesystem with the lock taken.
    pollfd p{.fd = h->uffd_, .events = POLLIN};
    uffd_msg msg{};
    if (poll(&p, 1, 5000) != 1 || read(h->uffd_, &msg, sizeof(msg)) != sizeof(msg) ||
        msg.event != UFFD_EVENT_PAGEFAULT) {
      *why = "the write never faulted on the registered page";
      h->Release();
      return nullptr;
    }
    return holder;
  }

  void Release() {
    if (released_) return;
    released_ = true;
    static char zeros[kPage] = {};
    uffdio_copy copy{.dst = reinterpret_cast<uint64_t>(page_),
                     .src = reinterpret_cast<uint64_t>(zeros),
                     .len = kPage};
    ioctl(uffd_, UFFDIO_COPY, &copy);
    if (writer_.joinable()) writer_.join();
  }

  pid_t tid() const { return tid_.load(); }

  ~InodeLockHolder() {
    Release();
    if (fd_ >= 0) close(fd_);
    if (page_ != MAP_FAILED) munmap(page_, kPage);
    if (uffd_ >= 0) close(uffd_);
  }

 private:
  InodeLockHolder() = default;
  int uffd_ = -1;
  int fd_ = -1;
  void* page_ = MAP_FAILED;
  std::thread writer_;
  std::atomic<pid_t> tid_{0};
  ssize_t written_ = 0;
  bool released_ = false;
};

// Whether a thread of this process (the server runs in it) other than `holder` waits
// uninterruptibly: a worker stuck on the inode lock.
bool AThreadWaitsUninterruptibly(pid_t holder) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    if (task.path().filename() == std::to_string(holder)) continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t end = line.rfind(')');
    if (end != std::string::npos && end + 2 < line.size() && line[end + 2] == 'D') return true;
  }
  return false;
}

std::string WriteFrame(uint64_t unique, uint64_t nodeid, uint64_t fh, const std::string& data) {
  fuse_write_in in{};
  in.fh = fh;
  in.offset = 0;
  in.size = static_cast<uint32_t>(data.size());
  return Frame(FUSE_WRITE, unique, nodeid, Bytes(in) + data);
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

class SessionFenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerConfig config;
    config.export_dir = export_.path();
    config.export_options.squash = ExportOptions::Squash::kNone;
    config.listen = "127.0.0.1:0";
    config.workers = 2;  // connection after connection goes to the other worker
    config.metrics = "127.0.0.1:0";
    server_ = std::make_unique<Server>(config);
    ASSERT_TRUE(server_->Start().ok());
  }

  // A counter of the server's /metrics (-1: not there).
  double Metric(const std::string& name) {
    const std::string address = server_->metrics_address();
    const std::string text =
        ringfs::testing::HttpGet(std::stoi(address.substr(address.rfind(':') + 1)), "/metrics");
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
    }
    return -1;
  }

  // Waits until a thread of this process other than `holder`'s waits uninterruptibly.
  ::testing::AssertionResult AWorkerStops(pid_t holder) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!AThreadWaitsUninterruptibly(holder)) {
      if (std::chrono::steady_clock::now() > deadline) {
        return ::testing::AssertionFailure() << "no thread ever stopped on the lock";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return ::testing::AssertionSuccess();
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<TestClient> Connect(const wire::ClientHello& hello, wire::ServerHello* reply) {
    auto client = TestClient::Connect(server_->bound_address(), hello, reply);
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_EQ(reply->result(), wire::ServerHello::OK) << reply->message();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // A connection of `client_id` that names `replaced` as the one it replaces (on `instance`;
  // 0: the replaced one's).
  std::unique_ptr<TestClient> Replace(const wire::ServerHello& replaced, wire::ServerHello* reply,
                                      const std::string& client_id = kClientId,
                                      uint64_t instance = 0) {
    wire::ClientHello hello = DefaultHello(client_id);
    hello.set_replaces_session(replaced.session_id());
    hello.set_replaces_instance(instance != 0 ? instance : replaced.instance_id());
    return Connect(hello, reply);
  }

  // Whether a GETATTR sent on `client` stays unanswered for 300 ms (the connection waits).
  static bool GetattrWaits(TestClient& client, uint64_t unique) {
    EXPECT_TRUE(client.Send(Frame(FUSE_GETATTR, unique, 1, Bytes(fuse_getattr_in{}))).ok());
    return !client.Receive(std::chrono::milliseconds(300)).ok();
  }

  // LOOKUP and OPEN (write-only) of `name` in the export root: {nodeid, fh}.
  std::pair<uint64_t, uint64_t> Open(TestClient& client, uint64_t unique, const std::string& name) {
    auto entry = client.Call(Frame(FUSE_LOOKUP, unique, 1, CName(name)));
    EXPECT_TRUE(entry.ok() && entry->header.error == 0);
    const uint64_t nodeid = entry.ok() ? entry->As<fuse_entry_out>().nodeid : 0;
    fuse_open_in in{};
    in.flags = O_WRONLY;
    auto opened = client.Call(Frame(FUSE_OPEN, unique + 1, nodeid, Bytes(in)));
    EXPECT_TRUE(opened.ok() && opened->header.error == 0);
    return {nodeid, opened.ok() ? opened->As<fuse_open_out>().fh : 0};
  }

  testing::TempDir export_;
  std::unique_ptr<Server> server_;
};

TEST_F(SessionFenceTest, AWriteTheLostConnectionHadNotStartedNeverRunsAfterItsResentCopy) {
  std::ofstream(export_.Join("slow")) << "";
  std::ofstream(export_.Join("f")) << "";
  wire::ServerHello first;
  auto lost = Connect(DefaultHello(kClientId), &first);
  ASSERT_NE(lost, nullptr);
  const auto [slow, slow_fh] = Open(*lost, 1, "slow");
  const auto [f, f_fh] = Open(*lost, 3, "f");
  ASSERT_NE(slow_fh, 0u);
  ASSERT_NE(f_fh, 0u);

  std::string why;
  auto holder = InodeLockHolder::Hold(export_.Join("slow"), &why);
  if (holder == nullptr) GTEST_SKIP() << "cannot hold an inode lock here: " << why;
  const std::string old_bytes(kPage, 'A');
  const std::string new_bytes(kPage, 'B');
  // In one send: the worker takes the first write and stops on the lock; the second is
  // received behind it and not started.
  ASSERT_TRUE(lost->Send(WriteFrame(10, slow, slow_fh, std::string(kPage, 's')) +
                         WriteFrame(11, f, f_fh, old_bytes))
                  .ok());
  ASSERT_TRUE(AWorkerStops(holder->tid()));
  lost.reset();  // the client gives the connection up

  wire::ServerHello second;
  auto next = Replace(first, &second);
  ASSERT_NE(next, nullptr);
  ASSERT_TRUE(next->Send(WriteFrame(11, f, f_fh, old_bytes)).ok());  // the resent copy
  auto early = next->Receive(std::chrono::milliseconds(300));
  EXPECT_FALSE(early.ok()) << "the resent write was answered while the lost connection's worker "
                              "still held its first copy";

  holder->Release();
  if (!early.ok()) {
    auto resent = next->Receive();
    ASSERT_TRUE(resent.ok()) << resent.status();
    EXPECT_EQ(resent->header.unique, 11u);
    EXPECT_EQ(resent->header.error, 0);
  }
  // The client has its answer and writes the same bytes anew.
  auto later = next->Call(WriteFrame(12, f, f_fh, new_bytes));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->header.error, 0);
  // A copy of unique 11 that ran now would put 'A' back.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Contents(export_.Join("f")), new_bytes) << "the older write ran after the newer one";

  auto state = server_->registry()->GetOrCreate(ClientStateKey("", kClientId));
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->fence->replaced_total(), 1u);
  EXPECT_EQ((*state)->fence->live(), 1u) << "the replaced connection has ended";
  EXPECT_EQ(Metric("ringfs_server_sessions_replaced_total"), 1);
  EXPECT_EQ(Metric("ringfs_server_sessions_replaced_with_unstarted_total"), 1)
      << "the staged copy was not dropped";
  EXPECT_EQ(Metric("ringfs_server_sessions_fenced_total"), 1);
}

TEST_F(SessionFenceTest, FileIoOfALostConnectionHoldsEveryConnectionThatReplacesIt) {
  std::ofstream(export_.Join("slow")) << "";
  wire::ServerHello first;
  auto lost = Connect(DefaultHello(kClientId), &first);
  ASSERT_NE(lost, nullptr);
  const auto [slow, slow_fh] = Open(*lost, 1, "slow");
  ASSERT_NE(slow_fh, 0u);
  std::string why;
  auto holder = InodeLockHolder::Hold(export_.Join("slow"), &why);
  if (holder == nullptr) GTEST_SKIP() << "cannot hold an inode lock here: " << why;
  // Larger than the writes a worker makes itself: it goes to the worker's io_uring, and an
  // io-wq thread waits for the lock while the worker goes on.
  ASSERT_TRUE(lost->Send(WriteFrame(10, slow, slow_fh, std::string(256 * 1024, 's'))).ok());
  ASSERT_TRUE(AWorkerStops(holder->tid()));
  lost.reset();  // the server sees this end; its write is still in flight

  wire::ServerHello second;
  auto again = Replace(first, &second);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(GetattrWaits(*again, 20))
      << "a request ran while the replaced connection's write was still in flight";
  again.reset();  // lost too, before it ran anything

  wire::ServerHello third;
  auto last = Replace(second, &third);
  ASSERT_NE(last, nullptr);
  EXPECT_TRUE(GetattrWaits(*last, 21))
      << "the replacement of a replacement did not wait for the first connection";
  holder->Release();
  auto r = last->Receive();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.unique, 21u);
  EXPECT_EQ(r->header.error, 0);
  EXPECT_EQ(Metric("ringfs_server_sessions_fenced_total"), 2);
  EXPECT_EQ(Metric("ringfs_server_sessions_replaced_total"), 1)
      << "only the second was closed for it; the first had closed itself";
}

TEST_F(SessionFenceTest, ANewConnectionOfAnIdleClientStartsAtOnce) {
  wire::ServerHello first;
  auto lost = Connect(DefaultHello(kClientId), &first);
  ASSERT_NE(lost, nullptr);
  auto alive = lost->Call(Frame(FUSE_GETATTR, 1, 1, Bytes(fuse_getattr_in{})));
  ASSERT_TRUE(alive.ok());
  // The server has not seen the old connection end (it is still open): the new one replaces
  // it, which closes it, and starts as soon as that is done.
  wire::ServerHello second;
  auto next = Replace(first, &second);
  ASSERT_NE(next, nullptr);
  auto r = next->Call(Frame(FUSE_GETATTR, 2, 1, Bytes(fuse_getattr_in{})));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.error, 0);
  EXPECT_TRUE(lost->WaitClosed()) << "the replaced connection stays open";
}

TEST_F(SessionFenceTest, AnotherInstancesSessionIdReplacesNothing) {
  wire::ServerHello first;
  auto kept = Connect(DefaultHello(kClientId), &first);
  ASSERT_NE(kept, nullptr);
  wire::ServerHello second;
  auto next = Replace(first, &second, kClientId, first.instance_id() ^ 1);
  ASSERT_NE(next, nullptr);
  auto r = kept->Call(Frame(FUSE_GETATTR, 1, 1, Bytes(fuse_getattr_in{})));
  ASSERT_TRUE(r.ok()) << "a session id of another instance closed a live connection";
  EXPECT_EQ(r->header.error, 0);
}

TEST_F(SessionFenceTest, AClientCannotReplaceAnotherClientsConnection) {
  wire::ServerHello first;
  auto victim = Connect(DefaultHello("victim"), &first);
  ASSERT_NE(victim, nullptr);
  wire::ServerHello second;
  auto intruder = Replace(first, &second, "intruder");
  ASSERT_NE(intruder, nullptr);
  auto r = victim->Call(Frame(FUSE_GETATTR, 1, 1, Bytes(fuse_getattr_in{})));
  ASSERT_TRUE(r.ok()) << "another client's hello closed this connection";
  EXPECT_EQ(r->header.error, 0);
}

}  // namespace
}  // namespace ringfs::server
