// Mount and daemon lifecycle: unmount on SIGTERM/SIGINT idle and busy, the daemonizing forms
// (ringfs-mount without -f, mount.ringfs), proof that the ring (not /dev/fuse) carries the
// requests, and failures at the edges: wrong token, no server, a mountpoint left dead by
// kill -9 (detached and mounted again) beside a live mount or another file system's (left alone).

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Open descriptors of a process.
size_t FdsOf(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) n += entry->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

bool WaitFor(const std::function<bool()>& pred, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return pred();
}

class LifecycleTest : public MountedTest {};

TEST_P(LifecycleTest, SigtermWhileIdleUnmountsAndExitsZero) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  EXPECT_TRUE(env_->Unmount(SIGTERM));
  EXPECT_FALSE(IsMounted(env_->mount_dir()));
  // The mountpoint is an ordinary empty directory again, and the data is in the export.
  EXPECT_EQ(RINGFS_ERRNO(::access(Mnt("f").c_str(), F_OK)), ENOENT);
  EXPECT_EQ(ReadFile(Exp("f")), "x");
  EXPECT_TRUE(env_->StopServer());
}

// The scheduling policy (field 41 of /proc/PID/task/TID/stat) of each thread of `pid`.
std::vector<int> ThreadPolicies(pid_t pid) {
  std::vector<int> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      if (entry->d_name[0] == '.') continue;
      std::ifstream in(dir + "/" + entry->d_name + "/stat");
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // The command name may hold spaces: count fields after its closing parenthesis. A thread
      // that ended since the directory was read leaves no text.
      const size_t close = text.rfind(')');
      if (close == std::string::npos || close + 2 > text.size()) continue;
      std::istringstream fields(text.substr(close + 2));
      std::string field;
      for (int i = 3; i <= 41 && fields >> field; ++i) {
        if (i == 41) out.push_back(std::stoi(field));
      }
    }
    ::closedir(d);
  }
  return out;
}

// Ring workers run SCHED_IDLE (queue::WorkerPriority: the kernel then wakes callers on their
// own CPU); worker_sched=normal keeps every thread SCHED_OTHER. Classic workers never change.
TEST_P(LifecycleTest, RingWorkersRunSchedIdleUnlessAskedNot) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);  // every worker has started
  std::vector<int> policies = ThreadPolicies(env_->mount_process()->pid());
  const auto idle = std::count(policies.begin(), policies.end(), SCHED_IDLE);
  if (GetParam() == "classic") {
    EXPECT_EQ(idle, 0);
    return;
  }
  EXPECT_GE(idle, 1) << "one per ring worker";
  ASSERT_TRUE(env_->Unmount());
  MountOptions normal = Options();
  normal.extra.push_back("worker_sched=normal");
  ASSERT_TRUE(env_->Mount(normal));
  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_EQ(WriteFile(Mnt("g"), "x"), 0);
  policies = ThreadPolicies(env_->mount_process()->pid());
  EXPECT_EQ(std::count(policies.begin(), policies.end(), SCHED_IDLE), 0);
}

// One process per CPU, pinned there, spinning until the guard goes: a compute job on every CPU.
class CpuHogs {
 public:
  CpuHogs() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    ::sched_getaffinity(0, sizeof(allowed), &allowed);
    const pid_t parent = ::getpid();
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      pid_t pid = ::fork();
      if (pid == 0) {
        // Killed with the test even if ctest's timeout kills it before the destructor runs.
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent) ::_exit(0);
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ::sched_setaffinity(0, sizeof(set), &set);
        for (;;) __asm__ volatile("");  // a side effect each turn: the loop stays
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~CpuHogs() { Stop(); }
  void Stop() {
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;
};

// A SCHED_IDLE worker gets almost no CPU while a SCHED_OTHER thread is runnable on its CPU: with
// a compute job on every CPU each request waited for it (7-9 ms per file created, 100-300 ms per
// request in it_coherence). So a worker that waits to run goes SCHED_OTHER, and back to
// SCHED_IDLE once its CPU is quiet (common/cpu_contention.h).
bool WaitUntil(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

// Until `done` (at most 10 s): one file written in `dir` from each CPU in turn, so that every
// CPU's workers have requests while the CPUs are busy (they wait to run for them, which is what
// the mount and the server look at). The calling thread gets its CPU set back.
bool WriteFromEveryCpuUntil(const std::string& dir, const std::function<bool()>& done) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  std::unique_ptr<cpu_set_t, std::function<void(cpu_set_t*)>> restore(
      &allowed, [](cpu_set_t* set) { ::sched_setaffinity(0, sizeof(*set), set); });
  int written = 0;
  return WaitUntil([&] {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      ::sched_setaffinity(0, sizeof(one), &one);
      EXPECT_EQ(WriteFile(dir + "/f" + std::to_string(written++), "y"), 0);
    }
    return done();
  });
}

size_t IdleThreads(pid_t pid) {
  std::vector<int> policies = ThreadPolicies(pid);
  return std::count(policies.begin(), policies.end(), SCHED_IDLE);
}

// Without the right to leave SCHED_IDLE (no CAP_SYS_NICE, RLIMIT_NICE 0: an unprivileged
// container), a worker made idle would stay idle beside a compute job, 7-9 ms per request: the
// mount and the server then keep every thread SCHED_OTHER, and say so.
TEST_P(LifecycleTest, WithoutTheRightToLeaveSchedIdleNoWorkerGoesIdle) {
  if (GetParam() == "classic") GTEST_SKIP() << "classic workers never run SCHED_IDLE";
  // Both rights gone: CAP_SYS_NICE (setpriv) and a hard RLIMIT_NICE that would allow nice 0
  // (prlimit; a host may set one, and the probe raises the soft limit to it).
  if (std::system("/usr/bin/prlimit --nice=0:0 /usr/bin/setpriv --bounding-set -sys_nice "
                  "--inh-caps -sys_nice /bin/true") != 0) {
    GTEST_SKIP() << "cannot drop CAP_SYS_NICE here (no prlimit/setpriv, or no CAP_SETPCAP)";
  }
  const std::vector<std::string> no_nice = {"/usr/bin/prlimit", "--nice=0:0", "/usr/bin/setpriv",
                                            "--bounding-set",   "-sys_nice",  "--inh-caps",
                                            "-sys_nice"};
  ASSERT_TRUE(env_->Unmount());
  ASSERT_TRUE(env_->StopServer());
  ServerOptions server_options = ServerOpts();
  server_options.wrapper = no_nice;
  ASSERT_TRUE(env_->RestartServer(server_options));
  MountOptions options = Options();
  options.wrapper = no_nice;
  ASSERT_TRUE(env_->Mount(options));
  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(WriteFile(Mnt("d/f" + std::to_string(i)), "x"), 0);
  // The server's watch and the mount's stats loop decide every 200 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(IdleThreads(env_->mount_process()->pid()), 0u);
  EXPECT_EQ(IdleThreads(env_->server_process()->pid()), 0u);
  EXPECT_NE(ReadFileOrEmpty(env_->mount_log()).find("worker_sched=idle is off"), std::string::npos);
  const std::string server_log = ReadFileOrEmpty(env_->server_log());
  EXPECT_TRUE(server_log.find("--worker-sched idle is off") != std::string::npos ||
              server_log.find("workers unpinned") != std::string::npos)
      << server_log;
}

TEST_P(LifecycleTest, RingWorkersLeaveSchedIdleWhileOtherWorkKeepsTheirCpuBusy) {
  if (GetParam() == "classic") GTEST_SKIP() << "classic workers never run SCHED_IDLE";
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);  // every worker has started
  const pid_t mount = env_->mount_process()->pid();
  auto idle_threads = [&] { return IdleThreads(mount); };
  auto idle_in_stats = [&] {
    uint64_t idle = 0;
    for (const auto& [key, value] : env_->ReadStats()) {
      if (key.size() > 11 && key.compare(key.size() - 11, 11, ".sched_idle") == 0) {
        idle += std::stoull(value);
      }
    }
    return idle;
  };
  ASSERT_GE(idle_threads(), 1u) << "one per ring worker";
  {
    CpuHogs hogs;
    ASSERT_EQ(::mkdir(Mnt("busy").c_str(), 0755), 0);
    ASSERT_TRUE(WriteFromEveryCpuUntil(Mnt("busy"), [&] { return idle_threads() == 0; }))
        << "the workers stayed SCHED_IDLE beside a busy loop on every CPU";
    EXPECT_TRUE(WaitUntil([&] { return idle_in_stats() == 0; }));
  }
  EXPECT_TRUE(WaitUntil([&] { return idle_threads() >= 1; }))
      << "the workers did not go back to SCHED_IDLE once the CPUs were free";
  EXPECT_TRUE(WaitUntil([&] { return idle_in_stats() >= 1; }));
}

// The server runs on this host: its workers are pinned one per CPU, serve each of the mount's
// connections on the CPU of its queue, and run SCHED_IDLE like the mount's ring workers, so a
// caller is not moved to another CPU on every request (server/cpu_placement.h,
// server/worker_sched.h). Beside a busy loop on every CPU they go SCHED_OTHER, io-wq threads
// included, and come back once the CPUs are free.
TEST_P(LifecycleTest, ServerWorkersServingThisMountLeaveSchedIdleWhileTheirCpuIsBusy) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  const pid_t server = env_->server_process()->pid();
  std::string log = ReadFileOrEmpty(env_->server_log());
  if (log.find("workers unpinned") != std::string::npos ||
      log.find("--worker-sched idle is off") != std::string::npos) {
    GTEST_SKIP() << "the server does not place or idle its workers here (another CPU set, or "
                    "no right to leave SCHED_IDLE)";
  }
  // "... served on its queue's CPU (worker i on CPU a,b,...)": worker i belongs to the i-th.
  const std::string plan = "(worker i on CPU ";
  const size_t plan_at = log.find(plan);
  ASSERT_NE(plan_at, std::string::npos) << log;
  std::vector<unsigned> cpus;
  for (std::istringstream list(
           log.substr(plan_at + plan.size(), log.find(')', plan_at) - plan_at - plan.size()));
       !list.eof();) {
    std::string cpu;
    std::getline(list, cpu, ',');
    cpus.push_back(std::stoul(cpu));
  }
  // Each of the mount's connections of a CPU's queue is served by that CPU's worker.
  int colocated = 0;
  for (size_t at = 0; (at = log.find(" (this host) as session ", at)) != std::string::npos; ++at) {
    const size_t line = log.rfind('\n', at) + 1;
    const size_t queue_at = log.find(" queue ", line);
    const unsigned queue = std::stoul(log.substr(queue_at + 7));
    const std::string session = log.substr(at + 24, log.find(' ', at + 24) - (at + 24));
    const auto cpu = std::find(cpus.begin(), cpus.end(), queue);
    if (cpu == cpus.end()) continue;  // the side channel's queue is no CPU
    const std::string served = ": serving session " + session + " of";
    ASSERT_TRUE(WaitUntil([&] {  // the worker logs it once it took the connection
      log = ReadFileOrEmpty(env_->server_log());
      return log.find(served) != std::string::npos;
    })) << session;
    const size_t worker_at = log.rfind("worker ", log.find(served));
    EXPECT_EQ(std::stoul(log.substr(worker_at + 7)), cpu - cpus.begin()) << "session " << session;
    ++colocated;
  }
  EXPECT_GE(colocated, 1) << log;
  size_t pinned = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(server) + "/task")) {
    const std::string status = ReadFileOrEmpty(task.path() / "status");
    const size_t at = status.find("Cpus_allowed_list:");
    if (at == std::string::npos) continue;
    const std::string list = status.substr(at + 18, status.find('\n', at) - at - 18);
    if (list.find_first_of(",-") == std::string::npos) ++pinned;  // a single CPU
  }
  EXPECT_GE(pinned, 1u) << "no server thread is pinned to its mount's CPU";
  ASSERT_TRUE(WaitUntil([&] { return IdleThreads(server) >= 1; }))
      << "no server worker serving this mount runs SCHED_IDLE";
  {
    CpuHogs hogs;
    ASSERT_EQ(::mkdir(Mnt("busy").c_str(), 0755), 0);
    ASSERT_TRUE(WriteFromEveryCpuUntil(Mnt("busy"), [&] { return IdleThreads(server) == 0; }))
        << "server workers stayed SCHED_IDLE beside a busy loop on every CPU";
  }
  EXPECT_TRUE(WaitUntil([&] {
    (void)WriteFile(Mnt("f"), "z");
    return IdleThreads(server) >= 1;
  })) << "the server's workers did not go back to SCHED_IDLE once the CPUs were free";
}

TEST_P(LifecycleTest, SigintUnmountsAndExitsZero) {
  EXPECT_TRUE(env_->Unmount(SIGINT));
  EXPECT_FALSE(IsMounted(env_->mount_dir()));
}

TEST_P(LifecycleTest, SigtermDuringActivityUnmountsAndKeepsAckedData) {
  constexpr size_t kBlock = 4096;
  std::atomic<bool> stop{false};
  std::atomic<long> acked{0};
  std::atomic<int> writer_errno{0};
  const std::string path = Mnt("busy");
  auto pattern = [](long i, char* buf) {
    for (size_t j = 0; j < kBlock; j += 8) {
      uint64_t v = (static_cast<uint64_t>(i) << 20) ^ j ^ 0x5a5a5a5a5a5aULL;
      memcpy(buf + j, &v, 8);
    }
  };
  std::thread writer([&]() {
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      writer_errno = errno;
      return;
    }
    char buf[kBlock];
    for (long i = 0; !stop.load(); ++i) {
      pattern(i, buf);
      if (::pwrite(fd, buf, kBlock, i * kBlock) != static_cast<ssize_t>(kBlock)) {
        writer_errno = errno;
        break;
      }
      acked = i + 1;
    }
    ::close(fd);
  });
  std::thread reader([&]() {
    struct stat st {};
    while (!stop.load()) {
      if (::stat(path.c_str(), &st) != 0 && errno != ENOENT) break;
      if (::access(env_->mount_dir().c_str(), R_OK) != 0) break;
    }
  });
  bool busy =
      WaitFor([&]() { return acked.load() >= 200 || writer_errno.load() != 0; }, seconds(20));
  EXPECT_TRUE(busy) << "the writer made no progress: " << acked.load() << " blocks";
  EXPECT_EQ(writer_errno.load(), 0) << "before SIGTERM: " << ErrnoName(writer_errno.load());

  env_->mount_process()->Signal(SIGTERM);
  // The mount must go away while the application is still busy; only then do the threads stop
  // (and close their descriptors), so a daemon that waits for them can finish too.
  bool gone = WaitFor([&]() { return !IsMounted(env_->mount_dir()); }, seconds(15));
  stop = true;
  writer.join();
  reader.join();
  EXPECT_TRUE(gone) << "still mounted 15 s after SIGTERM during activity";
  auto status = env_->mount_process()->WaitExit(seconds(15));
  ASSERT_TRUE(status.has_value()) << "ringfs-mount still running 15 s after SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
  EXPECT_FALSE(IsMounted(env_->mount_dir()));

  // Every write that returned success is in the export.
  const long n = acked.load();
  std::string exported = ReadFile(Exp("busy"));
  ASSERT_GE(exported.size(), static_cast<size_t>(n) * kBlock) << n << " writes were acknowledged";
  char want[kBlock];
  for (long i = 0; i < n; ++i) {
    pattern(i, want);
    ASSERT_EQ(memcmp(exported.data() + i * kBlock, want, kBlock), 0) << "block " << i;
  }
}

// A lazily detached mount (`umount -l`) lives on while files are open on it: the kernel keeps
// the superblock and the FUSE connection until the last one is closed, and only then ends the
// connection (fuse_kill_sb_anon -> fuse_conn_destroy: no DESTROY for a fuse mount; the /dev/fuse
// readers see ENODEV). ringfs-mount serves it until then, every byte right, and then exits by
// itself. A report blamed ringfs for fio verify errors after `umount -l`; they came from fio
// reopening its file by path between passes, which after the detach lands on the empty
// directory underneath (short reads, fio verifies its stale buffer). Both tests hold the
// mount the way a program must: by descriptors, or with its working directory inside.
class LazyUnmountTest : public MountedTest {
 protected:
  std::chrono::seconds Budget() const override { return seconds(60); }

  // After the caller closed everything: the mount ends by itself, cleanly and soon.
  void ExpectMountExitsByItself() {
    auto status = env_->mount_process()->WaitExit(seconds(5));
    ASSERT_TRUE(status.has_value())
        << "ringfs-mount still running 5 s after the last file of the detached mount closed";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
    EXPECT_NE(ReadFileOrEmpty(env_->mount_log()).find("unmounted " + env_->mount_dir()),
              std::string::npos);
  }
};

constexpr size_t kLazyBlock = 1 << 20;  // the largest request: a full ring payload
constexpr uint64_t kLazyBlocks = 16;
constexpr int kLazyThreads = 4;  // block b belongs to thread b % kLazyThreads

// Block `block` as written the `generation`-th time: every 8-byte word names both, so a block
// that comes back with another's data says whose.
void FillLazyBlock(uint64_t block, uint64_t generation, char* out) {
  for (size_t at = 0; at < kLazyBlock; at += 8) {
    uint64_t word = (generation << 40) ^ (block << 28) ^ at ^ 0x6c617a79ULL;
    memcpy(out + at, &word, 8);
  }
}

std::string DescribeLazyMismatch(uint64_t block, uint64_t generation, const char* got,
                                 const char* want) {
  for (size_t at = 0; at < kLazyBlock; at += 8) {
    if (memcmp(got + at, want + at, 8) == 0) continue;
    uint64_t word;
    memcpy(&word, got + at, 8);
    word ^= at ^ 0x6c617a79ULL;
    return "block " + std::to_string(block) + " generation " + std::to_string(generation) +
           ": byte " + std::to_string(at) + " holds block " + std::to_string((word >> 28) & 0xfff) +
           " generation " + std::to_string(word >> 40) + " (or foreign data)";
  }
  return "";
}

struct AlignedBuffer {
  AlignedBuffer() : data(static_cast<char*>(std::aligned_alloc(4096, kLazyBlock))) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  char* data;
};

TEST_P(LazyUnmountTest, ServesOpenFilesUntilTheLastCloseThenExits) {
  const std::string& dir = env_->mount_dir();
  std::vector<uint64_t> generation(kLazyBlocks, 0);
  {
    OpenFds fds;
    const int fd = ::open(Mnt("held").c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    fds.Add(fd);
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dir_fd, 0) << ErrnoName(errno);
    fds.Add(dir_fd);
    AlignedBuffer buffer;
    for (uint64_t block = 0; block < kLazyBlocks; ++block) {
      FillLazyBlock(block, 0, buffer.data);
      ASSERT_EQ(PwriteAll(fd, buffer.data, kLazyBlock, block * kLazyBlock), 0);
    }

    ASSERT_EQ(::umount2(dir.c_str(), MNT_DETACH), 0) << ErrnoName(errno);
    ASSERT_FALSE(IsMounted(dir));

    // Reads and writes through the held descriptor, on every queue the threads run on.
    std::atomic<bool> stop{false};
    std::atomic<long> operations{0};
    std::mutex failures_mu;
    std::vector<std::string> failures;
    auto fail = [&](std::string what) {
      std::lock_guard<std::mutex> lock(failures_mu);
      if (failures.size() < 8) failures.push_back(std::move(what));
      stop = true;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kLazyThreads; ++t) {
      threads.emplace_back([&, t] {
        AlignedBuffer got, want;
        std::mt19937_64 rng(t + 1);
        while (!stop.load()) {
          const uint64_t block = (rng() % (kLazyBlocks / kLazyThreads)) * kLazyThreads + t;
          const off_t offset = static_cast<off_t>(block * kLazyBlock);
          if (rng() & 1) {
            FillLazyBlock(block, generation[block] + 1, want.data);
            if (int err = PwriteAll(fd, want.data, kLazyBlock, offset); err != 0) {
              fail("write of block " + std::to_string(block) + ": " + ErrnoName(err));
              return;
            }
            ++generation[block];
          } else {
            ssize_t n = PreadAll(fd, got.data, kLazyBlock, offset);
            if (n != static_cast<ssize_t>(kLazyBlock)) {
              fail("read of block " + std::to_string(block) + ": " +
                   (n < 0 ? ErrnoName(static_cast<int>(-n)) : std::to_string(n) + " bytes"));
              return;
            }
            FillLazyBlock(block, generation[block], want.data);
            if (memcmp(got.data, want.data, kLazyBlock) != 0) {
              fail(DescribeLazyMismatch(block, generation[block], got.data, want.data));
              return;
            }
          }
          ++operations;
        }
      });
    }
    // Lookups and creates through the held directory work too.
    const int late = ::openat(dir_fd, "late", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(late, 0) << ErrnoName(errno);
    if (late >= 0) {
      fds.Add(late);
      EXPECT_EQ(PwriteAll(late, "after the detach", 16, 0), 0);
    }
    // Two seconds and 64 verified operations at least (ring workers run SCHED_IDLE: on a
    // machine busy with a build they get little), unless a failure or the end of
    // ringfs-mount cuts them short.
    const auto io_start = Clock::now();
    WaitFor(
        [&]() {
          return stop.load() || !env_->mount_process()->Running() ||
                 (Clock::now() - io_start >= seconds(2) && operations.load() >= 64);
        },
        seconds(20));
    stop = true;
    for (std::thread& thread : threads) thread.join();
    for (const std::string& failure : failures) ADD_FAILURE() << failure;
    EXPECT_TRUE(env_->mount_process()->Running())
        << "ringfs-mount ended while files of the detached mount were open";
    EXPECT_GE(operations.load(), 64) << "hardly any I/O after the detach";
    ASSERT_TRUE(failures.empty());
  }  // the last descriptor closes: the kernel ends the connection
  ExpectMountExitsByItself();
  EXPECT_FALSE(IsMounted(dir));

  // What the server has is what the last writes put there.
  std::string exported = ReadFile(Exp("held"));
  ASSERT_EQ(exported.size(), kLazyBlocks * kLazyBlock);
  AlignedBuffer want;
  for (uint64_t block = 0; block < kLazyBlocks; ++block) {
    FillLazyBlock(block, generation[block], want.data);
    ASSERT_EQ(memcmp(exported.data() + block * kLazyBlock, want.data, kLazyBlock), 0)
        << DescribeLazyMismatch(block, generation[block], exported.data() + block * kLazyBlock,
                                want.data);
  }
  EXPECT_EQ(ReadFile(Exp("late")), "after the detach");
}

// The reported scenario, done so that fio's reopens stay on the mount: its working directory
// is inside, and its file name relative.
TEST_P(LazyUnmountTest, VerifyingFioWithItsCwdInsideRunsToTheEnd) {
  const std::string& dir = env_->mount_dir();
  const std::string log = env_->base() + "/fio.log";
  auto fio = std::async(std::launch::async, [&] {
    return RunCommand({"/bin/sh", "-c",
                       "cd '" + dir +
                           "' && exec /usr/bin/fio --name=lazy --filename=lazy.fio "
                           "--rw=randrw --bs=1M --size=16M --iodepth=16 --ioengine=io_uring "
                           "--direct=1 --verify=crc32c --time_based --runtime=4"},
                      log, seconds(40));
  });
  // fio has laid its file out and runs (or has failed already, which the end reports).
  WaitFor([&]() { return ::access(Exp("lazy.fio").c_str(), F_OK) == 0; }, seconds(10));
  std::this_thread::sleep_for(seconds(1));
  ASSERT_EQ(::umount2(dir.c_str(), MNT_DETACH), 0) << ErrnoName(errno);
  std::optional<int> status = fio.get();
  const std::string output = ReadFileOrEmpty(log);
  ASSERT_TRUE(status.has_value()) << "fio hangs\n" << output;
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << output;
  EXPECT_NE(output.find("err= 0"), std::string::npos) << output;
  EXPECT_EQ(output.find("verify:"), std::string::npos) << output;
  ExpectMountExitsByItself();
  EXPECT_FALSE(IsMounted(dir));
}

// Regression: after `umount -l` the mountpoint may hold another mount (here a tmpfs; a new
// ringfs mount in practice). SIGTERM to the old ringfs-mount unmounted that one, by path,
// while its own detached mount went on serving.
TEST_P(LazyUnmountTest, SigtermAfterTheDetachLeavesTheNextMountAtThePathAlone) {
  const std::string& dir = env_->mount_dir();
  std::optional<OpenFds> fds(std::in_place);
  const int fd = ::open(Mnt("held").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  fds->Add(fd);
  ASSERT_EQ(PwriteAll(fd, "before", 6, 0), 0);
  ASSERT_EQ(::umount2(dir.c_str(), MNT_DETACH), 0) << ErrnoName(errno);
  ASSERT_EQ(::mount("lazy-next", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=1m"), 0)
      << ErrnoName(errno);
  // Whatever happens, the tmpfs goes (Teardown would count it as a mount left behind).
  struct UnmountTmpfs {
    std::string dir;
    ~UnmountTmpfs() {
      std::optional<MountEntry> top = FindMount(dir);
      if (top && top->fstype == "tmpfs") ::umount2(dir.c_str(), MNT_DETACH);
    }
  } unmount_tmpfs{dir};
  ASSERT_EQ(WriteFile(dir + "/next", "next"), 0);

  env_->mount_process()->Signal(SIGTERM);
  WaitFor(
      [&]() {
        return ReadFileOrEmpty(env_->mount_log()).find("no longer holds this mount") !=
                   std::string::npos ||
               !IsMounted(dir);
      },
      seconds(3));
  std::optional<MountEntry> top = FindMount(dir);
  ASSERT_TRUE(top.has_value()) << "the next mount at " << dir << " was unmounted";
  EXPECT_EQ(top->fstype, "tmpfs");
  EXPECT_EQ(ReadFile(dir + "/next"), "next");

  // The detached mount still serves its open file, until it is closed.
  EXPECT_TRUE(env_->mount_process()->Running());
  EXPECT_EQ(PwriteAll(fd, "after", 5, 6), 0);
  char back[11] = {};
  EXPECT_EQ(PreadAll(fd, back, sizeof(back), 0), 11);
  EXPECT_EQ(std::string(back, sizeof(back)), "beforeafter");
  fds.reset();  // the last file: the kernel ends the connection
  ExpectMountExitsByItself();
  EXPECT_EQ(ReadFile(Exp("held")), "beforeafter");
}

RINGFS_INSTANTIATE_TRANSPORTS(LazyUnmountTest);

int MountsAt(const std::string& mount_point) {
  int n = 0;
  for (const MountEntry& e : ReadMountInfo()) n += e.mount_point == mount_point;
  return n;
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// statfs, not stat: FUSE always asks the filesystem for statfs, while stat may be answered from
// the kernel's attribute cache (60 s by default) even after the connection died.
bool AnswersEnotconn(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) != 0 && errno == ENOTCONN;
}

// Regression (issue 9): after kill -9 of ringfs-mount its mountpoint answered ENOTCONN, and
// mounting there again failed until someone ran `umount -l`.
TEST_P(LifecycleTest, MountAfterKill9DetachesTheDeadMount) {
  const std::string& dir = env_->mount_dir();
  ASSERT_EQ(WriteFile(Mnt("before"), "x"), 0);
  env_->mount_process()->Signal(SIGKILL);
  ASSERT_TRUE(env_->mount_process()->WaitExit(seconds(10)).has_value());
  // The connection ends once the kernel has let go of the dead process's descriptors.
  ASSERT_TRUE(WaitFor([&]() { return AnswersEnotconn(dir); }, seconds(10)));
  std::optional<MountEntry> dead = FindMount(dir);
  ASSERT_TRUE(dead.has_value());
  ASSERT_EQ(dead->fstype, "fuse.ringfs");

  ASSERT_TRUE(env_->Mount(Options()));
  // Mount() is content with any fuse.ringfs entry, the dead one too: wait for an answer.
  struct stat st {};
  ASSERT_TRUE(WaitFor([&]() { return ::stat(dir.c_str(), &st) == 0; }, seconds(10)))
      << ErrnoName(errno) << "\n"
      << env_->DescribeLogs();
  EXPECT_EQ(MountsAt(dir), 1) << "the dead mount is still there, under the new one";
  EXPECT_EQ(ReadFile(Mnt("before")), "x");
  ASSERT_EQ(WriteFile(Mnt("after"), "y"), 0);
  EXPECT_EQ(ReadFile(Exp("after")), "y");
  EXPECT_EQ(Count(ReadFileOrEmpty(env_->mount_log()), "detached the dead ringfs mount on " + dir),
            1)
      << ReadFileOrEmpty(env_->mount_log());
  EXPECT_TRUE(env_->Unmount());
  EXPECT_FALSE(IsMounted(dir));
}

// Issue 10: 20 mounts killed with -9 while they hold open files and directories leave nothing
// at the server once the reclaim grace (3 s here) has passed: its open fds come back to where
// they were with one mount doing the same work.
// Every thread's state and kernel stack, for a process that does not die.
std::string TaskStacks(pid_t pid) {
  std::string out;
  const std::string base = "/proc/" + std::to_string(pid) + "/task";
  if (DIR* d = ::opendir(base.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      if (entry->d_name[0] == '.') continue;
      const std::string task = base + "/" + entry->d_name;
      out += "== " + std::string(entry->d_name) + " " + ReadFileOrEmpty(task + "/comm") +
             ReadFileOrEmpty(task + "/wchan") + "\n" + ReadFileOrEmpty(task + "/stack");
    }
    ::closedir(d);
  }
  return out;
}

class KilledMountsTest : public MountedTest {
 protected:
  ServerOptions ServerOpts() const override {
    ServerOptions s;
    s.extra_args = {"--reclaim-grace", "3"};
    return s;
  }
  size_t ServerFds() const { return FdsOf(env_->server_process()->pid()); }
  // Creates, opens and lists: the state a mount leaves at the server.
  void Work(int i) {
    const std::string dir = Mnt("dir" + std::to_string(i));
    ASSERT_EQ(RINGFS_ERRNO(::mkdir(dir.c_str(), 0755)), 0);
    ASSERT_EQ(WriteFile(dir + "/file", "x"), 0);
    held_file_ = ::open((dir + "/file").c_str(), O_RDWR | O_CLOEXEC);
    held_dir_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(held_file_, 0);
    ASSERT_GE(held_dir_, 0);
  }
  void CloseHeld() {
    ::close(held_file_);
    ::close(held_dir_);
  }
  int held_file_ = -1, held_dir_ = -1;
};

TEST_P(KilledMountsTest, TwentyKilledMountsLeaveNoServerFdsAfterTheGrace) {
  const std::string& dir = env_->mount_dir();
  ASSERT_TRUE(env_->WaitMountServing());
  Work(0);
  if (HasFatalFailure()) return;
  CloseHeld();
  std::this_thread::sleep_for(milliseconds(300));
  const size_t one_mount = ServerFds();
  for (int i = 1; i <= 20; ++i) {
    Work(i);
    if (HasFatalFailure()) return;
    env_->mount_process()->Signal(SIGKILL);
    ASSERT_TRUE(env_->mount_process()->WaitExit(seconds(10)).has_value())
        << "cycle " << i << ": the killed ringfs-mount is still there:\n"
        << TaskStacks(env_->mount_process()->pid());
    CloseHeld();
    ASSERT_TRUE(WaitFor([&]() { return AnswersEnotconn(dir); }, seconds(10)));
    ASSERT_TRUE(env_->Mount(Options()));
    // Past its start-up probe (see the README's known gaps: a kill -9 inside that window can
    // leave the process waiting on its own mount until the connection is aborted).
    ASSERT_TRUE(env_->WaitMountServing());
  }
  const size_t after_kills = ServerFds();
  size_t now = after_kills;
  WaitFor([&]() { return (now = ServerFds()) <= one_mount; }, seconds(15));
  std::cout << "server fds: " << one_mount << " with one mount, " << after_kills
            << " right after 20 killed mounts, " << now << " after the grace\n";
  EXPECT_LE(now, one_mount);
}

RINGFS_INSTANTIATE_TRANSPORTS(KilledMountsTest);

TEST_P(LifecycleTest, ServerSigtermExitsZeroAfterUnmount) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  ASSERT_TRUE(env_->Unmount());
  EXPECT_TRUE(env_->StopServer());
}
// Runs a workload that makes well over 1000 requests (timeouts 0 so lookups and getattrs are
// not answered from the kernel's cache), unmounts, and returns the final stats file.
Stats RunWorkloadAndStop(RingfsEnv* env) {
  int fd = ::open(env->Mnt("w").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  EXPECT_GE(fd, 0) << ErrnoName(errno);
  char buf[4096] = {};
  struct stat st {};
  for (int i = 0; i < 400; ++i) {
    EXPECT_EQ(::pwrite(fd, buf, sizeof(buf), i * 4096L), 4096) << ErrnoName(errno);
    EXPECT_EQ(::stat(env->Mnt("w").c_str(), &st), 0);
    int fd2 = ::open(env->Mnt("w").c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd2, 0);
    ::close(fd2);
  }
  ::close(fd);
  // While mounted, the stats file is refreshed about every 200 ms.
  bool live = WaitFor(
      [&]() {
        auto n = StatNumber(env->ReadStats(), "ring_requests");
        auto m = StatNumber(env->ReadStats(), "devfuse_requests");
        return n && m && *n + *m >= 1000;
      },
      seconds(3));
  EXPECT_TRUE(live) << "stats file not refreshed while mounted";
  EXPECT_TRUE(env->Unmount());
  return env->ReadStats();
}

class TransportStatsTest : public RingfsTestBase {
 protected:
  void StartWith(const std::string& transport) {
    ASSERT_TRUE(NewEnv());
    ASSERT_TRUE(env_->StartServer());
    MountOptions o;
    o.transport = transport;
    o.extra = {"attr_timeout=0", "entry_timeout=0"};
    ASSERT_TRUE(env_->Mount(o));
  }
};

TEST_F(TransportStatsTest, UringServesRequestsFromRingCompletions) {
  StartWith("uring");
  if (HasFatalFailure()) return;
  Stats stats = RunWorkloadAndStop(env_.get());
  const std::string dump = ReadFileOrEmpty(env_->stats_path());
  EXPECT_EQ(stats["transport"], "uring") << dump;
  auto ring = StatNumber(stats, "ring_requests");
  auto devfuse = StatNumber(stats, "devfuse_requests");
  auto forgets = StatNumber(stats, "forgets");
  ASSERT_TRUE(ring && devfuse && forgets) << "stats file lacks counters:\n" << dump;
  EXPECT_GE(*ring, 1000u) << dump;
  // Only INIT and FORGETs (plus at most a few INTERRUPT/DESTROY) may come through /dev/fuse.
  const uint64_t non_forget = *devfuse - std::min(*devfuse, *forgets);
  EXPECT_LE(non_forget, 8u) << dump;
  EXPECT_LE(*devfuse * 20, *ring) << dump;
  EXPECT_EQ(StatNumber(stats, "failures").value_or(0), 0u) << dump;
}

// Each unlinked file's inode is evicted, and the kernel queues a FORGET for it on /dev/fuse,
// waking a reader each time. The ring's side channel keeps one read posted and waits 1 ms after a
// forget (DevFuseWorkerConfig::forget_gather_ns), so the kernel hands a burst over as a few
// BATCH_FORGETs; the server still hears of every node (it closes each node's descriptor).
TEST_F(TransportStatsTest, UringGathersTheForgetsOfManyUnlinksAndLosesNone) {
  StartWith("uring");
  if (HasFatalFailure()) return;
  const pid_t server = env_->server_process()->pid();
  constexpr int kFiles = 600;
  const size_t fds_before = FdsOf(server);
  for (int i = 0; i < kFiles; ++i) {
    int fd =
        ::open(env_->Mnt("f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ::close(fd);
  }
  // The server holds a descriptor per node the kernel holds: the signal that forgets arrived.
  const size_t fds_created = FdsOf(server);
  ASSERT_GE(fds_created, fds_before + kFiles / 2);
  // The stats file is rewritten every 200 ms: settled once two readings agree.
  auto forgets_settled = [&]() -> std::optional<uint64_t> {
    std::optional<uint64_t> last;
    for (const auto deadline = Clock::now() + seconds(10); Clock::now() < deadline;) {
      std::this_thread::sleep_for(milliseconds(450));
      auto now = StatNumber(env_->ReadStats(), "forgets");
      if (now && last && *now == *last) return *now;
      last = now;
    }
    return std::nullopt;
  };
  const std::optional<uint64_t> forgets_before = forgets_settled();
  ASSERT_TRUE(forgets_before) << "the forgets counter did not settle within 10 s:\n"
                              << ReadFileOrEmpty(env_->stats_path());
  const auto start = Clock::now();
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_EQ(RINGFS_ERRNO(::unlink(env_->Mnt("f" + std::to_string(i)).c_str())), 0);
  }
  const auto unlinked_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  size_t fds_now = 0;
  EXPECT_TRUE(WaitFor([&]() { return (fds_now = FdsOf(server)) <= fds_before; }, seconds(10)))
      << "the server still holds " << fds_now - fds_before
      << " more descriptors than before the files were made: forgets did not reach it";
  const std::optional<uint64_t> forgets_after = forgets_settled();
  ASSERT_TRUE(forgets_after) << "the forgets counter did not settle within 10 s:\n"
                             << ReadFileOrEmpty(env_->stats_path());
  const uint64_t reads = *forgets_after - *forgets_before;
  std::cout << kFiles << " unlinks in " << unlinked_ms << " ms; the side channel read " << reads
            << " FORGET/BATCH_FORGET requests\n";
  // At most one read of forgets per millisecond of unlinking, and one after the last. Read one
  // by one they would be kFiles; the bound tells the two apart only while unlinking is faster
  // than one file per millisecond (here it runs at 5,000-20,000 a second): say so otherwise.
  const uint64_t bound = static_cast<uint64_t>(unlinked_ms) + 5;
  EXPECT_LE(reads, bound);
  if (bound >= kFiles) {
    std::cout << "NOTE: unlinking took " << unlinked_ms
              << " ms, too slow for this run to tell gathered forgets from forgets read one by "
                 "one; only the server's descriptors were checked\n";
    RecordProperty("forget_gather_checked", "no");
  }

  // Another burst, and the mount is stopped right after it, while the last forgets may still
  // be gathered: the side channel still sees the connection end and the mount exits 0.
  for (int i = 0; i < kFiles / 2; ++i) {
    int fd =
        ::open(env_->Mnt("g" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ::close(fd);
  }
  for (int i = 0; i < kFiles / 2; ++i) {
    ASSERT_EQ(RINGFS_ERRNO(::unlink(env_->Mnt("g" + std::to_string(i)).c_str())), 0);
  }
  EXPECT_TRUE(env_->Unmount(SIGTERM, seconds(5)));
}

// The kernel hands over as many queued forgets as one /dev/fuse read holds: 66,045 records in
// the 1 MiB + 8 KiB buffer, a frame larger than the wire allows (the server closed the
// connection, and the forgets it carried were lost: their nodes stayed open at the server). The
// mount sends them in frames of 4,096. Made by looking up 70,000 names, stopping the mount,
// dropping the caches (the kernel queues a forget per inode) and letting it go on.
TEST_F(TransportStatsTest, AForgetBatchLargerThanAFrameReachesTheServerInPieces) {
  StartWith("uring");
  if (HasFatalFailure()) return;
  const pid_t server = env_->server_process()->pid();
  const pid_t mount = env_->mount_process()->pid();
  constexpr int kFiles = 70'000;
  const size_t fds_before = FdsOf(server);
  ASSERT_EQ(::mkdir(env_->Exp("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) {
    int fd =
        ::open(env_->Exp("d/f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ::close(fd);
  }
  DIR* dir = ::opendir(env_->Mnt("d").c_str());
  ASSERT_NE(dir, nullptr) << ErrnoName(errno);
  int looked_up = 0;
  while (dirent* entry = ::readdir(dir)) {
    struct stat st;
    if (entry->d_name[0] == '.') continue;
    if (::fstatat(::dirfd(dir), entry->d_name, &st, 0) == 0) ++looked_up;
  }
  ::closedir(dir);
  ASSERT_EQ(looked_up, kFiles);
  // The server holds a descriptor for each node recently used (up to its cache's bound).
  ASSERT_GE(FdsOf(server), fds_before + 200);
  const std::optional<uint64_t> reads_before = StatNumber(env_->ReadStats(), "forgets");
  ASSERT_TRUE(reads_before);
  ::sync();  // before the mount stops: nothing may wait for it meanwhile
  ASSERT_EQ(::kill(mount, SIGSTOP), 0);
  {
    struct Resume {
      pid_t pid;
      ~Resume() { ::kill(pid, SIGCONT); }
    } resume{mount};
    std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
    std::this_thread::sleep_for(milliseconds(200));
  }
  size_t fds_now = 0;
  EXPECT_TRUE(WaitFor([&]() { return (fds_now = FdsOf(server)) <= fds_before; }, seconds(15)))
      << "the server still holds " << fds_now - fds_before
      << " more descriptors than before the names were looked up: forgets were lost";
  // The direct signs of the oversized frame: the server closed the connection on it.
  const std::string server_log = ReadFileOrEmpty(env_->server_log());
  EXPECT_EQ(server_log.find("outside ["), std::string::npos) << server_log;
  const std::string mount_log = ReadFileOrEmpty(env_->mount_log());
  EXPECT_EQ(mount_log.find("connection to"), std::string::npos) << mount_log;
  struct stat st;
  EXPECT_EQ(::stat(env_->Mnt("d/f1").c_str(), &st), 0) << ErrnoName(errno);
  // The 70,000 forgets came in a few reads (the first takes up to 66,045): the big batch formed.
  // (The stats file is rewritten every 200 ms.)
  Stats stats;
  std::optional<uint64_t> reads_after;
  EXPECT_TRUE(WaitFor(
      [&]() {
        stats = env_->ReadStats();
        reads_after = StatNumber(stats, "forgets");
        return reads_after && *reads_after > *reads_before;
      },
      seconds(5)));
  ASSERT_TRUE(reads_after);
  std::cout << "the side channel read " << *reads_after - *reads_before
            << " FORGET/BATCH_FORGET requests for " << kFiles << " forgets\n";
  EXPECT_LE(*reads_after - *reads_before, 20u);
  EXPECT_EQ(StatNumber(stats, "failures"), std::optional<uint64_t>(0));
  EXPECT_TRUE(env_->Unmount());
}

TEST_F(TransportStatsTest, ClassicUsesNoRing) {
  StartWith("classic");
  if (HasFatalFailure()) return;
  Stats stats = RunWorkloadAndStop(env_.get());
  const std::string dump = ReadFileOrEmpty(env_->stats_path());
  EXPECT_EQ(stats["transport"], "classic") << dump;
  EXPECT_EQ(StatNumber(stats, "ring_requests"), std::optional<uint64_t>(0)) << dump;
  EXPECT_GE(StatNumber(stats, "devfuse_requests").value_or(0), 1000u) << dump;
}

TEST_F(TransportStatsTest, AutoUsesTheRingWhenEnabled) {
  StartWith("auto");
  if (HasFatalFailure()) return;
  Stats stats = RunWorkloadAndStop(env_.get());
  EXPECT_EQ(stats["transport"], "uring") << ReadFileOrEmpty(env_->stats_path());
  EXPECT_GE(StatNumber(stats, "ring_requests").value_or(0), 1000u);
}

class DaemonTest : public RingfsTestBase {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(NewEnv());
    ASSERT_TRUE(env_->StartServer());
  }
};

TEST_F(DaemonTest, WithoutForegroundFlagDaemonizesOnceMounted) {
  MountOptions o;
  o.foreground = false;
  ASSERT_TRUE(env_->Mount(o));  // Checks the parent exited 0 with the mount already there.
  EXPECT_EQ(WriteFile(env_->Mnt("f"), "daemon"), 0);
  EXPECT_EQ(ReadFile(env_->Exp("f")), "daemon");
  EXPECT_FALSE(FindProcessesWithArg(env_->mount_dir()).empty()) << "no daemon left running";
  EXPECT_TRUE(env_->UnmountDaemonized());
}

TEST_F(DaemonTest, MountHelperFollowsMount8Convention) {
  struct stat st {};
  ASSERT_EQ(::stat(BinPath("mount.ringfs").c_str(), &st), 0)
      << BinPath("mount.ringfs") << " is missing: " << ErrnoName(errno);
  MountOptions o;
  o.use_mount_helper = true;
  o.transport = "classic";
  ASSERT_TRUE(env_->Mount(o));
  EXPECT_EQ(WriteFile(env_->Mnt("f"), "helper"), 0);
  EXPECT_EQ(ReadFile(env_->Exp("f")), "helper");
  EXPECT_TRUE(env_->UnmountDaemonized());
}

TEST_F(DaemonTest, ServerOnUnixSocketStartsAndStops) {
  // A second server in the same tree, listening on a Unix socket.
  RingfsEnv unix_env;
  ASSERT_TRUE(unix_env.Init());
  ServerOptions so;
  so.listen = "unix:" + unix_env.base() + "/ringfs.sock";
  ASSERT_TRUE(unix_env.StartServer(so));
  struct stat st {};
  ASSERT_EQ(::stat((unix_env.base() + "/ringfs.sock").c_str(), &st), 0) << ErrnoName(errno);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_TRUE(unix_env.StopServer());
  unix_env.Teardown();
  EXPECT_EQ(unix_env.teardown_notes(), "");
}

class EdgeTest : public RingfsTestBase {};

TEST_F(EdgeTest, WrongTokenIsRefusedWithAClearMessage) {
  ASSERT_TRUE(NewEnv());
  const std::string right = env_->base() + "/token.right";
  const std::string wrong = env_->base() + "/token.wrong";
  ASSERT_EQ(WriteFile(right, "correct horse battery staple\n", 0600), 0);
  ASSERT_EQ(WriteFile(wrong, "incorrect donkey\n", 0600), 0);
  ServerOptions so;
  so.token_file = right;
  ASSERT_TRUE(env_->StartServer(so));

  MountOptions o;
  o.token_file = wrong;
  auto status = env_->MountExpectingFailure(o, env_->server_address(), seconds(20));
  ASSERT_TRUE(status.has_value()) << "a mount with the wrong token neither failed nor gave up "
                                     "within 20 s";
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "mount with a wrong token " << DescribeWaitStatus(*status);
  EXPECT_FALSE(IsMounted(env_->mount_dir()));
  const std::string log = Lower(ReadFileOrEmpty(env_->mount_log()));
  EXPECT_TRUE(log.find("token") != std::string::npos || log.find("auth") != std::string::npos)
      << "the mount's message should say that authentication failed:\n"
      << log;
  const std::string slog = Lower(ReadFileOrEmpty(env_->server_log()));
  EXPECT_TRUE(slog.find("token") != std::string::npos || slog.find("auth") != std::string::npos)
      << "the server should log the refused client:\n"
      << slog;

  // No token at all is refused too, and the server keeps serving: the right token mounts.
  o.token_file.clear();
  status = env_->MountExpectingFailure(o, env_->server_address(), seconds(20));
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "mount without a token";
  EXPECT_FALSE(IsMounted(env_->mount_dir()));
  o.token_file = right;
  ASSERT_TRUE(env_->Mount(o));
  EXPECT_EQ(WriteFile(env_->Mnt("ok"), "authenticated"), 0);
  EXPECT_EQ(ReadFile(env_->Exp("ok")), "authenticated");
  EXPECT_TRUE(env_->Unmount());
}

TEST_F(EdgeTest, NoServerFailsWithinBoundedTime) {
  ASSERT_TRUE(NewEnv());
  const int port = UnusedLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string address = "127.0.0.1:" + std::to_string(port);
  for (const char* transport : {"uring", "classic"}) {
    SCOPED_TRACE(transport);
    MountOptions o;
    o.transport = transport;
    const auto start = Clock::now();
    auto status = env_->MountExpectingFailure(o, address, seconds(30));
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    ASSERT_TRUE(status.has_value())
        << "mount to " << address << " (nothing listening) still running after 30 s";
    EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "mount without a server " << DescribeWaitStatus(*status);
    EXPECT_FALSE(IsMounted(env_->mount_dir()));
    const std::string log = Lower(ReadFileOrEmpty(env_->mount_log()));
    EXPECT_TRUE(log.find(std::to_string(port)) != std::string::npos ||
                log.find("connect") != std::string::npos ||
                log.find("refused") != std::string::npos)
        << "the message should name the address or the connection failure:\n"
        << log;
    RecordProperty(std::string("fail_ms_") + transport, static_cast<int>(took.count()));
  }
}

TEST_F(EdgeTest, SecondMountLeavesALiveMountAlone) {
  ASSERT_TRUE(NewEnv());
  ASSERT_TRUE(env_->StartServer());
  ASSERT_TRUE(env_->Mount(MountOptions{}));
  const std::string& dir = env_->mount_dir();
  ASSERT_EQ(WriteFile(env_->Mnt("f"), "live"), 0);
  // Another ringfs-mount on the same directory; without a control socket, since the first
  // serves the default one.
  const std::string log = env_->base() + "/second.log";
  std::string error;
  std::unique_ptr<ChildProcess> second =
      ChildProcess::Spawn({BinPath("ringfs-mount"), env_->server_address() + ":/", dir, "-f", "-o",
                           "transport=classic,control=none"},
                          log, &error);
  ASSERT_TRUE(second) << error;
  // Whether it mounts over the live mount or gives up, it must not detach it.
  WaitFor([&]() { return MountsAt(dir) == 2 || !second->Running(); }, seconds(10));
  if (second->Running()) {
    second->Signal(SIGTERM);
    auto status = second->WaitExit(seconds(15));
    ASSERT_TRUE(status.has_value()) << "the second ringfs-mount ignored SIGTERM";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
  }
  EXPECT_EQ(Lower(ReadFileOrEmpty(log)).find("detach"), std::string::npos) << ReadFileOrEmpty(log);
  EXPECT_EQ(MountsAt(dir), 1);
  EXPECT_TRUE(env_->mount_process()->Running());
  EXPECT_EQ(ReadFile(env_->Mnt("f")), "live");
  EXPECT_TRUE(env_->Unmount());
}

TEST_F(EdgeTest, DeadMountOfAnotherTypeIsRefusedNotDetached) {
  ASSERT_TRUE(NewEnv());
  ASSERT_TRUE(env_->StartServer());
  const std::string& dir = env_->mount_dir();
  // A FUSE mount of another type whose daemon is gone: its /dev/fuse is closed before INIT.
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  const std::string data = "fd=" + std::to_string(fd) + ",rootmode=40000,user_id=0,group_id=0";
  int mounted = ::mount("other", dir.c_str(), "fuse.notringfs", MS_NOSUID | MS_NODEV, data.c_str());
  int mount_errno = errno;
  ::close(fd);
  ASSERT_EQ(mounted, 0) << ErrnoName(mount_errno);
  ASSERT_TRUE(WaitFor([&]() { return AnswersEnotconn(dir); }, seconds(10)));

  auto status = env_->MountExpectingFailure(MountOptions{}, env_->server_address(), seconds(20));
  ASSERT_TRUE(status.has_value()) << "still running after 20 s";
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << DescribeWaitStatus(*status);
  const std::string log = ReadFileOrEmpty(env_->mount_log());
  EXPECT_NE(log.find("fuse.notringfs"), std::string::npos) << log;
  EXPECT_NE(log.find("umount -l " + dir), std::string::npos) << log;
  std::optional<MountEntry> still = FindMount(dir);
  ASSERT_TRUE(still.has_value()) << "the other file system's mount was removed";
  EXPECT_EQ(still->fstype, "fuse.notringfs");
  EXPECT_EQ(MountsAt(dir), 1);
  EXPECT_EQ(::umount2(dir.c_str(), MNT_DETACH), 0) << ErrnoName(errno);
  EXPECT_FALSE(IsMounted(dir));
}

TEST_F(EdgeTest, MountOnMissingMountpointFails) {
  ASSERT_TRUE(NewEnv());
  ASSERT_TRUE(env_->StartServer());
  std::vector<std::string> argv = {BinPath("ringfs-mount"),
                                   env_->server_address() + ":/",
                                   env_->base() + "/does/not/exist",
                                   "-f",
                                   "-o",
                                   "transport=classic"};
  auto status = RunCommand(argv, env_->mount_log(), seconds(20));
  ASSERT_TRUE(status.has_value()) << "still running after 20 s";
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  EXPECT_NE(ReadFileOrEmpty(env_->mount_log()), "") << "no message at all";
}

RINGFS_INSTANTIATE_TRANSPORTS(LifecycleTest);

}  // namespace
}  // namespace ringfs::testing
