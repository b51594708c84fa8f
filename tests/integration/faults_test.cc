// A server that stops answering must never hang its callers: with timeout=S every request ends
// within about S seconds (ETIMEDOUT), umount(8) returns, and a hard mount still lets a caller be
// interrupted or killed (no D state). Both transports, real server and mount processes.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutSeconds = 2;
// What "within timeout + 1 s" allows on a loaded 2-CPU VM: the deadline is checked every 100 ms.
constexpr auto kLatest = seconds(kTimeoutSeconds) + milliseconds(1500);

// The result of one call run on its own thread: errno (0 on success) and how long it took.
struct Outcome {
  int err = -1;
  milliseconds took{0};
};

std::future<Outcome> Async(std::function<int()> call) {
  return std::async(std::launch::async, [call = std::move(call)] {
    auto start = Clock::now();
    int err = call();
    return Outcome{err, std::chrono::duration_cast<milliseconds>(Clock::now() - start)};
  });
}

// The process state letter from /proc (R, S, D, Z, ...), or 0 when the process is gone.
char ProcessState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  size_t paren = line.rfind(')');
  return paren + 2 < line.size() ? line[paren + 2] : 0;
}

// Forks a child that reads 4 KiB at offset 0 from `fd` (opened O_DIRECT by the parent, so the
// READ itself reaches the server), on `cpu` if ≥ 0, and exits with the read's errno (0 on
// success). SIGUSR1 is caught without SA_RESTART, so a read the kernel interrupts returns EINTR.
pid_t ForkReader(int fd, int cpu = -1) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  struct sigaction action {};
  action.sa_handler = [](int) {};
  sigaction(SIGUSR1, &action, nullptr);
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  // Only async-signal-safe calls after fork() in a threaded parent: no malloc.
  alignas(4096) static char buffer[4096];
  ssize_t n = pread(fd, buffer, sizeof(buffer), 0);
  _exit(n < 0 ? (errno & 0x7f) : 0);
}

// Waits until `pid` sleeps inside pread(2) (/proc/PID/syscall names the call it is blocked in),
// at most `limit`. A signal that comes before the call is handled in user space and the read
// then waits for the stopped server forever: on a loaded 2-CPU machine a caller pinned to a busy
// CPU was seen still runnable, short of its pread, a whole second after fork.
bool WaitUntilBlockedIn(pid_t pid, long syscall, milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
    long number = -1;
    char state = ProcessState(pid);
    if ((in >> number) && number == syscall && (state == 'S' || state == 'D')) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}
bool WaitUntilBlockedInRead(pid_t pid, milliseconds limit) {
  return WaitUntilBlockedIn(pid, SYS_pread64, limit);
}

// Waits for `pid` to exit; nullopt if it is still there after `limit`.
std::optional<int> WaitChild(pid_t pid, milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return std::nullopt;
}

// Waits (3 s) until the stats file's `key` is at least `at_least`.
bool WaitForStat(RingfsEnv* env, const std::string& key, uint64_t at_least) {
  auto deadline = Clock::now() + seconds(3);
  while (Clock::now() < deadline) {
    if (StatNumber(env->ReadStats(), key).value_or(0) >= at_least) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return false;
}

class StoppedServerTest : public MountedTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = MountedTest::Options();
    o.extra = {"timeout=" + std::to_string(kTimeoutSeconds)};
    return o;
  }
  void TearDown() override {
    if (env_ && env_->server_process()) env_->server_process()->Signal(SIGCONT);
    MountedTest::TearDown();
  }
  // Creates `count` files `prefix`0, `prefix`1, ... through the mount and returns them open for
  // writing, each holding its own name.
  std::vector<int> CreateOpen(const std::string& prefix, int count) {
    std::vector<int> fds;
    for (int i = 0; i < count; ++i) {
      const std::string name = prefix + std::to_string(i);
      int fd = ::open(Mnt(name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      EXPECT_GE(fd, 0) << ErrnoName(errno);
      if (fd < 0) break;
      EXPECT_EQ(::write(fd, name.data(), name.size()), static_cast<ssize_t>(name.size()));
      fds.push_back(fd);
    }
    return fds;
  }
};

TEST_P(StoppedServerTest, ReadsWritesAndCreatesEndWithinTheTimeout) {
  ASSERT_EQ(WriteFile(Mnt("data"), std::string(8192, 'd')), 0);
  int read_fd = ::open(Mnt("data").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  int write_fd = ::open(Mnt("data").c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  ASSERT_GE(read_fd, 0);
  ASSERT_GE(write_fd, 0);
  void* buffer = nullptr;
  ASSERT_EQ(posix_memalign(&buffer, 4096, 4096), 0);
  std::memset(buffer, 'w', 4096);

  ASSERT_TRUE(StopAndWait(env_->server_process()));
  auto reader = Async([&] { return RINGFS_ERRNO(::pread(read_fd, buffer, 4096, 0)); });
  auto writer = Async([&] { return RINGFS_ERRNO(::pwrite(write_fd, buffer, 4096, 4096)); });
  auto creator = Async([&] {
    int fd = ::open(Mnt("new").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd >= 0) ::close(fd);
    return fd < 0 ? errno : 0;
  });
  for (auto* call : {&reader, &writer, &creator}) {
    ASSERT_EQ(call->wait_for(seconds(15)), std::future_status::ready) << "a caller hangs";
    Outcome outcome = call->get();
    EXPECT_EQ(outcome.err, ETIMEDOUT) << ErrnoName(outcome.err);
    EXPECT_LE(outcome.took, kLatest);
    EXPECT_GE(outcome.took, seconds(kTimeoutSeconds) - milliseconds(200));
  }

  // Counted as failures (reason timeout) for the operator; the stats file has the total.
  EXPECT_TRUE(WaitForStat(env_.get(), "failures", 3));

  // Once the server runs again, the mount works: late replies were dropped, nothing got out of
  // step.
  env_->server_process()->Signal(SIGCONT);
  EXPECT_EQ(PwriteAll(write_fd, buffer, 4096, 0), 0) << ErrnoName(errno);
  char check[16] = {};
  EXPECT_EQ(WriteFile(Mnt("after"), "after"), 0);
  EXPECT_EQ(ReadFile(Mnt("after")), "after");
  ::close(read_fd);
  ::close(write_fd);
  int fd = ::open(Exp("data").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pread(fd, check, sizeof(check), 0), static_cast<ssize_t>(sizeof(check)));
  EXPECT_EQ(std::string(check, sizeof(check)), std::string(sizeof(check), 'w'));
  ::close(fd);
  free(buffer);
}

// An unlink past its deadline fails (ETIMEDOUT), so the kernel keeps the name; the server runs
// it once it is back, and the mount learns so from the late answer. It must then drop the name
// from its kernel: before, the removed file stayed visible through this mount (stat: nlink 0,
// open: its old bytes) for the 60 s entry lifetime (found by a red-team pass).
TEST_P(StoppedServerTest, AnUnlinkThatTimedOutButRanLaterLeavesNoNameBehind) {
  ASSERT_EQ(WriteFile(Mnt("u"), "U"), 0);
  ASSERT_EQ(ReadFile(Mnt("u")), "U");
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  auto remover = Async([&] { return RINGFS_ERRNO(::unlink(Mnt("u").c_str())); });
  ASSERT_EQ(remover.wait_for(seconds(15)), std::future_status::ready) << "unlink hangs";
  EXPECT_EQ(remover.get().err, ETIMEDOUT);
  env_->server_process()->Signal(SIGCONT);
  auto deadline = Clock::now() + seconds(5);
  struct stat st;
  while (Clock::now() < deadline && ::lstat(Exp("u").c_str(), &st) == 0) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_NE(::lstat(Exp("u").c_str(), &st), 0) << "the unlink never ran at the server";
  deadline = Clock::now() + seconds(5);
  while (Clock::now() < deadline && ::lstat(Mnt("u").c_str(), &st) == 0) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_NE(::lstat(Mnt("u").c_str(), &st), 0) << "the mount still shows the removed name";
  EXPECT_EQ(errno, ENOENT);
}

TEST_P(StoppedServerTest, UmountReturnsWhileTheServerIsStopped) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  auto start = Clock::now();
  std::optional<int> status =
      RunCommand({"/bin/umount", env_->mount_dir()}, env_->base() + "/umount.log", seconds(10));
  ASSERT_TRUE(status.has_value()) << "umount hangs";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << DescribeWaitStatus(*status) << ReadFileOrEmpty(env_->base() + "/umount.log");
  EXPECT_LE(Clock::now() - start, seconds(5));
  EXPECT_FALSE(IsMounted(env_->mount_dir()));
  // The daemon notices the unmount and exits on its own.
  EXPECT_TRUE(env_->mount_process()->WaitExit(seconds(10)).has_value());
}

TEST_P(StoppedServerTest, KilledServerFailsCallersWithinTheTimeout) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  env_->server_process()->Kill();
  auto stat_call = Async([&] {
    // A create always needs the server (a lookup of an absent name may be answered by the
    // mount: frontend/complete_dirs.h).
    return RINGFS_ERRNO(::mkdir(Mnt("made").c_str(), 0755));
  });
  ASSERT_EQ(stat_call.wait_for(seconds(15)), std::future_status::ready);
  Outcome outcome = stat_call.get();
  EXPECT_EQ(outcome.err, ETIMEDOUT) << ErrnoName(outcome.err);
  EXPECT_LE(outcome.took, kLatest);
}

// Files of the export that process `pid` holds open for I/O (not the O_PATH descriptors a
// server keeps for the nodes it knows).
int OpenFilesUnder(pid_t pid, const std::string& dir) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  int count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(fds, ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    if (link_ec || target.rfind(dir + "/", 0) != 0) continue;
    struct stat st;
    if (::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    std::ifstream info("/proc/" + std::to_string(pid) + "/fdinfo/" +
                       entry.path().filename().string());
    std::string key;
    unsigned flags = 0;
    while (info >> key) {
      if (key == "flags:") {
        info >> std::oct >> flags;
        break;
      }
    }
    if ((flags & O_PATH) == 0) ++count;
  }
  return count;
}

// Polls OpenFilesUnder until it is 0 (at most `limit`); returns the last count.
int WaitNoOpenFiles(pid_t pid, const std::string& dir, milliseconds limit) {
  auto deadline = Clock::now() + limit;
  int open = OpenFilesUnder(pid, dir);
  while (open != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
    open = OpenFilesUnder(pid, dir);
  }
  return open;
}

// A file's last close is answered by the mount and its RELEASE goes to the server with the next
// request or within 1 ms (BackendConfig::detach_releases): the server's file is closed soon all
// the same, with nothing else sent.
TEST_P(StoppedServerTest, AClosedFileIsClosedAtTheServerSoonWithNothingElseSent) {
  constexpr int kFiles = 20;
  std::vector<int> fds = CreateOpen("c", kFiles);
  ASSERT_EQ(fds.size(), static_cast<size_t>(kFiles));
  const pid_t server = env_->server_process()->pid();
  EXPECT_EQ(OpenFilesUnder(server, env_->export_dir()), kFiles);
  for (int fd : fds) ASSERT_EQ(::close(fd), 0);
  EXPECT_EQ(WaitNoOpenFiles(server, env_->export_dir(), milliseconds(3000)), 0)
      << "the server still holds files this mount closed";
}

// RELEASEs owed to a stopped server: the closes return at once, and the mount's end does not
// wait for them (the 30 s it gives early unlinks and writes would keep ringfs-mount running
// long after umount(8)).
TEST_P(StoppedServerTest, ReleasesOwedToAStoppedServerDoNotHoldUpTheMountsEnd) {
  constexpr int kFiles = 20;
  std::vector<int> fds = CreateOpen("r", kFiles);
  ASSERT_EQ(fds.size(), static_cast<size_t>(kFiles));
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  auto start = Clock::now();
  for (int fd : fds) ASSERT_EQ(::close(fd), 0);
  EXPECT_LE(Clock::now() - start, seconds(1)) << "a close waited for the stopped server";
  start = Clock::now();
  std::optional<int> status =
      RunCommand({"/bin/umount", env_->mount_dir()}, env_->base() + "/umount.log", seconds(10));
  ASSERT_TRUE(status.has_value()) << "umount hangs";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << DescribeWaitStatus(*status) << ReadFileOrEmpty(env_->base() + "/umount.log");
  std::optional<int> exited = env_->mount_process()->WaitExit(seconds(8));
  EXPECT_TRUE(exited.has_value()) << "ringfs-mount still runs 8 s after umount";
  EXPECT_LE(Clock::now() - start, seconds(8));
}

// More closes on one queue than it keeps RELEASEs answered early (64), while the server is
// stopped for longer than timeout=: the RELEASEs past those wait for the window, which the
// early ones fill, and reach their deadline unsent. Each must still close its file once the
// server runs again (found by a red-team pass: 6 of 70 files stayed open at the server for the
// session's life).
TEST_P(StoppedServerTest, ReleasesThatTimeOutUnsentStillCloseTheirFiles) {
  constexpr int kFiles = 90;
  // One CPU, so one queue: its 64 early RELEASEs and its window are what is filled.
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  std::vector<int> fds = CreateOpen("t", kFiles);
  ASSERT_EQ(fds.size(), static_cast<size_t>(kFiles));
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  for (int fd : fds) ASSERT_EQ(::close(fd), 0);
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  std::this_thread::sleep_for(seconds(kTimeoutSeconds) + milliseconds(1500));
  env_->server_process()->Signal(SIGCONT);
  EXPECT_EQ(WaitNoOpenFiles(env_->server_process()->pid(), env_->export_dir(), seconds(5)), 0)
      << "files closed while the server was stopped are still open there";
  EXPECT_EQ(WriteFile(Mnt("after"), "after"), 0);
  EXPECT_EQ(ReadFile(Exp("after")), "after");
}

// RELEASEs owed when the server is killed: a restarted server gets the files re-opened by
// reclaim (the mount counts them held until the server answered their RELEASE), then the
// RELEASEs, and ends up holding none of them open. Lost, each would leave a descriptor open
// at the server for the session's life; counted closed too early, a RELEASE replayed to the
// new instance could close a file opened there since.
TEST_P(StoppedServerTest, ReleasesOwedToAKilledServerAreRunByTheRestartedOne) {
  constexpr int kFiles = 20;
  std::vector<int> fds = CreateOpen("k", kFiles);
  ASSERT_EQ(fds.size(), static_cast<size_t>(kFiles));
  // One file stays open across the restart: its descriptor must still write into it.
  int kept = ::open(Mnt("kept").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(kept, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  for (int fd : fds) ASSERT_EQ(::close(fd), 0);
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer());
  EXPECT_EQ(WhileReconnecting([&] { return RINGFS_ERRNO(::write(kept, "kept", 4)); }), 0);
  const pid_t server = env_->server_process()->pid();
  auto deadline = Clock::now() + seconds(10);
  while (OpenFilesUnder(server, env_->export_dir()) != 1 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(OpenFilesUnder(server, env_->export_dir()), 1)
      << "the restarted server holds the closed files open, or lost the one still open";
  ASSERT_EQ(::close(kept), 0);
  EXPECT_EQ(WaitNoOpenFiles(server, env_->export_dir(), milliseconds(3000)), 0);
  EXPECT_EQ(ReadFile(Exp("kept")), "kept");
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "k" + std::to_string(i);
    EXPECT_EQ(ReadFile(Exp(name)), name);
  }
}

RINGFS_INSTANTIATE_TRANSPORTS(StoppedServerTest);

class HardMountTest : public MountedTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = MountedTest::Options();
    o.extra = {"hard"};
    return o;
  }
  // Writes 4 KiB to "data", opens it O_DIRECT and reads it once while the server answers: the
  // attributes are then fresh, so a later caller's read sends no GETATTR first and waits in the
  // READ itself. -1 (with a failure recorded) if any step fails.
  int OpenFreshDirectFile() {
    alignas(4096) static char buffer[4096];
    if (WriteFile(Mnt("data"), std::string(4096, 'd')) != 0) {
      ADD_FAILURE() << "write data";
      return -1;
    }
    int fd = ::open(Mnt("data").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0 || ::pread(fd, buffer, sizeof(buffer), 0) != 4096) {
      ADD_FAILURE() << "open and read data: " << ErrnoName(errno);
      if (fd >= 0) ::close(fd);
      return -1;
    }
    return fd;
  }
  // Forks a reader of `fd` (ForkReader) and waits until it sleeps in its read.
  pid_t ForkBlockedReader(int fd) {
    pid_t pid = ForkReader(fd);
    EXPECT_TRUE(WaitUntilBlockedInRead(pid, seconds(10)))
        << "caller " << pid << " not blocked in its read: state " << ProcessState(pid);
    return pid;
  }
  void TearDown() override {
    if (env_ && env_->mount_process()) env_->mount_process()->Signal(SIGCONT);
    if (env_ && env_->server_process()) env_->server_process()->Signal(SIGCONT);
    MountedTest::TearDown();
  }
};

TEST_P(HardMountTest, WaitingCallersCanBeInterruptedAndKilled) {
  ASSERT_EQ(WriteFile(Mnt("data"), std::string(4096, 'd')), 0);
  // Opened first, so no OPEN waits. Each caller then waits in the GETATTR its read sends first
  // (FUSE_AUTO_INVAL_DATA, and the write above left the size stale; /proc/PID/wchan is
  // request_wait_answer): a foreground request, which the kernel interrupts. With fresh
  // attributes the O_DIRECT READ itself waits: DirectIoCallersCanBeInterruptedAndKilled.
  int fd = ::open(Mnt("data").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));

  pid_t patient = ForkReader(fd);
  pid_t interrupted = ForkReader(fd);
  pid_t killed = ForkReader(fd);
  std::this_thread::sleep_for(milliseconds(1500));
  // A hard mount does not give up by itself.
  for (pid_t pid : {patient, interrupted, killed}) {
    char state = ProcessState(pid);
    if (state == 'S' || state == 'D') continue;
    int status = 0;
    std::string how = waitpid(pid, &status, WNOHANG) == pid ? DescribeWaitStatus(status) : "?";
    ADD_FAILURE() << "caller " << pid << " did not wait for the stopped server: state " << state
                  << ", " << how << " (exit code = errno of its open/read)";
  }

  // ringfs-mount answers within a 100 ms tick; the bound leaves room for a loaded CI machine.
  ::kill(interrupted, SIGUSR1);
  std::optional<int> status = WaitChild(interrupted, milliseconds(2500));
  ASSERT_TRUE(status.has_value()) << "a signalled caller stays blocked";
  EXPECT_TRUE(WIFEXITED(*status)) << DescribeWaitStatus(*status);
  EXPECT_EQ(WEXITSTATUS(*status), EINTR);

  ::kill(killed, SIGKILL);
  status = WaitChild(killed, milliseconds(2500));
  ASSERT_TRUE(status.has_value()) << "a killed caller stays in state " << ProcessState(killed);
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);

  // The server comes back: the patient caller gets its data.
  env_->server_process()->Signal(SIGCONT);
  status = WaitChild(patient, seconds(10));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
  EXPECT_EQ(ReadFile(Mnt("data")), std::string(4096, 'd'));
  ::close(fd);
}

// A burst of callers on one CPU while the server is stopped: every one of them can be interrupted.
// The kernel sends INTERRUPT only for a request ringfs-mount has; one it queued because no entry
// of its CPU's queue was waiting waits for that queue's next commit (an entry registered later
// does not take it), which a stopped server never allows. So every queue registers its entries
// up front (initial_depth=queue_depth); with initial_depth=1 this failed most of the time.
// On classic, two /dev/fuse readers post the burst's INTERRUPTs at once: an entry stamped just
// after another reader's clock reading was taken for expired and its caller stayed blocked
// (InterruptBoardTest.AnEntryStampedAfterTheCallersClockIsKept), 2 runs in 20.
// Direct I/O with fresh attributes: the O_DIRECT READ itself waits for the stopped server. A
// hard mount does without FUSE_ASYNC_DIO (frontend/init_negotiation.h), so that READ is an
// ordinary request: a signal interrupts it and kill -9 ends it. With async DIO both callers sat
// in D state in fuse_direct_IO through SIGUSR1 and SIGKILL, until the server came back.
TEST_P(HardMountTest, DirectIoCallersCanBeInterruptedAndKilled) {
  const int fd = OpenFreshDirectFile();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  pid_t interrupted = ForkBlockedReader(fd);
  pid_t killed = ForkBlockedReader(fd);
  ::kill(interrupted, SIGUSR1);
  std::optional<int> status = WaitChild(interrupted, milliseconds(2500));
  EXPECT_TRUE(status.has_value()) << "an O_DIRECT caller ignores a signal: state "
                                  << ProcessState(interrupted);
  if (status) {
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == EINTR)
        << DescribeWaitStatus(*status);
  }
  ::kill(killed, SIGKILL);
  std::optional<int> killed_status = WaitChild(killed, milliseconds(2500));
  EXPECT_TRUE(killed_status.has_value()) << "an O_DIRECT caller survives kill -9: state "
                                         << ProcessState(killed);
  // Let whatever still waits finish, so the test ends either way (and reap it).
  env_->server_process()->Signal(SIGCONT);
  if (!status) (void)WaitChild(interrupted, seconds(10));
  if (!killed_status) (void)WaitChild(killed, seconds(10));
  ::close(fd);
}

// A caller signalled after its request reached the kernel's queue and before ringfs-mount took
// it. On the ring the kernel sends no INTERRUPT for it (it marks a request sent only when the
// mount's thread copies it, and does not then look whether the caller was interrupted, as a
// /dev/fuse read does), and a killed caller's wait becomes uninterruptible: with the server
// stopped on a hard mount, both waited until the server came back (seen in CI once, reproduced
// here every time by stopping the mount, so no thread of it takes the requests). ringfs-mount
// looks at a request's caller once it has waited a second (caller_state.h) and answers EINTR.
// On classic the kernel itself sends the INTERRUPT when the request is read.
TEST_P(HardMountTest, CallersSignalledBeforeTheMountTookTheirRequestsEnd) {
  const int fd = OpenFreshDirectFile();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  ASSERT_TRUE(StopAndWait(env_->mount_process()));
  pid_t interrupted = ForkBlockedReader(fd);
  pid_t killed = ForkBlockedReader(fd);
  ::kill(interrupted, SIGUSR1);
  ::kill(killed, SIGKILL);
  std::this_thread::sleep_for(milliseconds(200));
  env_->mount_process()->Signal(SIGCONT);
  std::optional<int> status = WaitChild(interrupted, milliseconds(3000));
  EXPECT_TRUE(status.has_value()) << "a caller signalled before the mount took its request "
                                  << "stays blocked: state " << ProcessState(interrupted);
  if (status) {
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == EINTR) << DescribeWaitStatus(*status);
  }
  std::optional<int> killed_status = WaitChild(killed, milliseconds(3000));
  EXPECT_TRUE(killed_status.has_value()) << "a caller killed before the mount took its request "
                                         << "survives: state " << ProcessState(killed);
  if (killed_status) {
    EXPECT_TRUE(WIFSIGNALED(*killed_status) && WTERMSIG(*killed_status) == SIGKILL)
        << DescribeWaitStatus(*killed_status);
  }
  // The mount still serves: the server comes back and a read gets the data.
  env_->server_process()->Signal(SIGCONT);
  if (!status) (void)WaitChild(interrupted, seconds(10));
  if (!killed_status) (void)WaitChild(killed, seconds(10));
  alignas(4096) static char buffer[4096];
  EXPECT_EQ(::pread(fd, buffer, sizeof(buffer), 0), 4096) << ErrnoName(errno);
  ::close(fd);
}

TEST_P(HardMountTest, ABurstOfCallersOnOneCpuCanAllBeInterrupted) {
  ASSERT_EQ(WriteFile(Mnt("data"), std::string(4096, 'd')), 0);
  int fd = ::open(Mnt("data").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  std::vector<pid_t> callers;
  for (int i = 0; i < 8; ++i) callers.push_back(ForkReader(fd, /*cpu=*/0));
  std::this_thread::sleep_for(milliseconds(1000));
  for (pid_t pid : callers) {
    EXPECT_TRUE(WaitUntilBlockedInRead(pid, seconds(10)))
        << "caller " << pid << " not blocked in its read: state " << ProcessState(pid);
  }
  for (pid_t pid : callers) ::kill(pid, SIGUSR1);
  std::vector<pid_t> blocked;
  for (pid_t pid : callers) {
    std::optional<int> status = WaitChild(pid, milliseconds(2500));
    if (!status) {
      blocked.push_back(pid);
      ::kill(pid, SIGKILL);  // a fatal signal ends a request still waiting in the kernel
      continue;
    }
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == EINTR) << DescribeWaitStatus(*status);
  }
  EXPECT_TRUE(blocked.empty()) << blocked.size() << " signalled callers stayed blocked";
  env_->server_process()->Signal(SIGCONT);
  for (pid_t pid : blocked) (void)WaitChild(pid, seconds(10));  // reaped, whatever held them
  ::close(fd);
}

// Connections cut again and again (ss -K) under two verifying fio jobs: every unanswered request
// is sent again on the next connection, and nothing reaches the application — no error, no
// corrupted block (fio verifies as it goes).
TEST_P(HardMountTest, CutConnectionsUnderVerifyingFioLoseNothing) {
  const std::string port = env_->server_address().substr(env_->server_address().rfind(':') + 1);
  const std::string runtime = "12";
  std::vector<std::vector<std::string>> jobs = {
      {"/usr/bin/fio", "--name=sync", "--rw=randwrite", "--bs=4k", "--ioengine=psync",
       "--fsync=16", "--verify=crc32c", "--verify_backlog=64", "--size=16m",
       "--runtime=" + runtime, "--time_based", "--filename=" + Mnt("sync")},
      {"/usr/bin/fio", "--name=direct", "--rw=randrw", "--bs=64k", "--direct=1",
       "--ioengine=io_uring", "--iodepth=16", "--verify=crc32c", "--verify_backlog=64",
       "--size=32m", "--runtime=" + runtime, "--time_based", "--filename=" + Mnt("direct")}};
  std::vector<std::future<std::optional<int>>> runs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    runs.push_back(std::async(std::launch::async, [this, i, &jobs] {
      return RunCommand(jobs[i], env_->base() + "/fio" + std::to_string(i) + ".log", seconds(90));
    }));
  }
  std::this_thread::sleep_for(seconds(2));
  int cuts = 0;
  auto end = Clock::now() + seconds(8);
  while (Clock::now() < end) {
    std::optional<int> status = RunCommand({"/usr/bin/ss", "-K", "-tn", "dport = :" + port},
                                           env_->base() + "/ss.log", seconds(5));
    if (status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) ++cuts;
    std::this_thread::sleep_for(milliseconds(300));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    std::optional<int> status = runs[i].get();
    std::string log = ReadFileOrEmpty(env_->base() + "/fio" + std::to_string(i) + ".log");
    ASSERT_TRUE(status.has_value()) << "fio hangs\n" << log;
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log;
    EXPECT_NE(log.find("err= 0"), std::string::npos) << log;
  }
  std::string mount_log = ReadFileOrEmpty(env_->mount_log());
  size_t losses = 0;
  for (size_t at = 0; (at = mount_log.find("lost (", at)) != std::string::npos; ++at) ++losses;
  EXPECT_GE(cuts, 10);
  EXPECT_GE(losses, 10u) << "the connections were not really cut";
  // Each new connection names the one it replaces, so the server runs no request of a cut
  // connection beside or after its resent copy (server/session_fence.h).
  std::string server_log = ReadFileOrEmpty(env_->server_log());
  size_t replacements = 0;
  for (size_t at = 0; (at = server_log.find("' replaces session ", at)) != std::string::npos;
       ++at) {
    ++replacements;
  }
  EXPECT_GE(replacements, 10u) << "reconnects do not name the connection they replace";
  EXPECT_EQ(StatNumber(env_->ReadStats(), "failures").value_or(0), 0u);
}

// Forks a child that writes 4 KiB of 'i' at `offset` through `fd` and exits with the write's
// errno (0 on success); SIGUSR1 is caught without SA_RESTART, as in ForkReader.
pid_t ForkWriter(int fd, off_t offset) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  struct sigaction action {};
  action.sa_handler = [](int) {};
  sigaction(SIGUSR1, &action, nullptr);
  static char buffer[4096];
  memset(buffer, 'i', sizeof(buffer));
  ssize_t n = pwrite(fd, buffer, sizeof(buffer), offset);
  _exit(n < 0 ? (errno & 0x7f) : 0);
}

bool WaitUntilBlockedInWrite(pid_t pid, milliseconds limit) {
  return WaitUntilBlockedIn(pid, SYS_pwrite64, limit);
}

// What stat(2) reports of `path` that a write record could get wrong, or "<errno N>".
std::string StatLine(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "<errno " + std::to_string(errno) + ">";
  return "size=" + std::to_string(st.st_size) + " nlink=" + std::to_string(st.st_nlink) +
         " mtime=" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) +
         " ctime=" + std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

// Waits (5 s) until the export's file is `size` bytes long.
bool WaitExportSize(const std::string& path, off_t size) {
  auto deadline = Clock::now() + seconds(5);
  while (Clock::now() < deadline) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size == size) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return false;
}

// Write records (the attributes a WRITE answer carries, which answer the next GETATTR) never
// outlive a fault. A write that ends without the server's answer may still run there after its
// caller gave up. An interrupt, not a timeout=: the record of the writes before is kept 1 s,
// and the shortest deadline is longer, so a timed-out write finds it gone already. Then a
// restarted server's export changed behind the mount's back: the lost connection dropped it.
TEST_P(HardMountTest, AnInterruptedWriteOrARestartLeavesNoStaleWriteRecordBehind) {
  const std::string block(4096, 'r');
  OpenFds fds;
  int fd = -1;
  std::string last;  // the file of the last round, written again below
  // One round: writes hold a record, a further write is interrupted while the server is
  // stopped and runs once it is let go; the stat must then show that write. Returns how long
  // after the record it was asked: past a second the record had expired anyway and the round
  // proved nothing, so a slow round (a loaded machine) is tried again, up to three times.
  auto round = [&](const std::string& name) -> std::optional<Clock::duration> {
    last = name;
    fd = ::open(Mnt(name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << ErrnoName(errno);
    if (fd < 0) return std::nullopt;
    fds.Add(fd);
    for (int i = 0; i < 4; ++i) {
      if (PwriteAll(fd, block.data(), block.size(), i * 4096) != 0) return std::nullopt;
    }
    auto record_taken = Clock::now();
    if (!StopAndWait(env_->server_process())) return std::nullopt;
    pid_t writer = ForkWriter(fd, 4 * 4096);
    EXPECT_TRUE(WaitUntilBlockedInWrite(writer, seconds(10)))
        << "writer not blocked in its write: state " << ProcessState(writer);
    ::kill(writer, SIGUSR1);
    std::optional<int> status = WaitChild(writer, milliseconds(2500));
    if (!status) ::kill(writer, SIGKILL);
    env_->server_process()->Signal(SIGCONT);
    if (!status) status = WaitChild(writer, seconds(10));
    EXPECT_TRUE(status.has_value()) << "the writer stays blocked";
    if (!status) return std::nullopt;
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == EINTR) << DescribeWaitStatus(*status);
    // The server still runs the abandoned WRITE once it is let go.
    EXPECT_TRUE(WaitExportSize(Exp(name), 5 * 4096)) << StatLine(Exp(name));
    EXPECT_EQ(StatLine(Mnt(name)), StatLine(Exp(name))) << "after an interrupted write";
    return Clock::now() - record_taken;
  };
  bool proved = false;
  for (int attempt = 0; attempt < 3 && !proved && !HasFailure(); ++attempt) {
    std::optional<Clock::duration> took = round("grown" + std::to_string(attempt));
    ASSERT_TRUE(took.has_value());
    proved = *took < milliseconds(900);
  }
  EXPECT_TRUE(proved) << "three rounds too slow to test the record";

  // Writes answered again hold a record; the server then dies and the file changes on the export.
  ASSERT_EQ(PwriteAll(fd, block.data(), block.size(), 5 * 4096), 0) << ErrnoName(errno);
  ASSERT_EQ(PwriteAll(fd, block.data(), block.size(), 6 * 4096), 0) << ErrnoName(errno);
  ASSERT_TRUE(env_->KillServer());
  ASSERT_EQ(::truncate(Exp(last).c_str(), 1000), 0) << ErrnoName(errno);
  ASSERT_TRUE(env_->RestartServer());
  // Asked at once, before anything reconnects (a GETATTR answered by a record sends nothing):
  // the lost connection dropped the record.
  EXPECT_EQ(StatLine(Mnt(last)), StatLine(Exp(last))) << "after a server restart";
}

RINGFS_INSTANTIATE_TRANSPORTS(HardMountTest);

}  // namespace
}  // namespace ringfs::testing
