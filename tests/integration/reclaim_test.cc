// Issue 10 ("reclaim after reconnect", "several servers"): on a hard mount, descriptors opened
// before the server is killed and started again keep working — the mount re-establishes every
// node and open file on the new instance (sealed handles, common/node_handle.h) before it sends
// the requests it held — and a mount that names two servers of one export moves to the second
// when the first dies. Under verifying fio nothing reaches the application: no error, no
// corrupted or lost block.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr int kFiles = 8;
constexpr int kDirs = 4;
constexpr size_t kContentBytes = 64;

std::string Content(int i) {
  std::string s = "file-" + std::to_string(i) + "-";
  s.resize(kContentBytes, '.');
  return s;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The three verifying fio jobs of the cycle tests: random 4 KiB writes with fsync, a sequential
// writer and random direct reads and writes; all keep their files open the whole time.
std::vector<std::vector<std::string>> FioJobs(const RingfsEnv& env, int runtime_s) {
  const std::string runtime = "--runtime=" + std::to_string(runtime_s);
  return {
      {"/usr/bin/fio", "--name=sync", "--rw=randwrite", "--bs=4k", "--ioengine=psync",
       "--fsync=16", "--verify=crc32c", "--verify_backlog=64", "--size=16m", runtime,
       "--time_based", "--filename=" + env.Mnt("sync")},
      {"/usr/bin/fio", "--name=seq", "--rw=write", "--bs=256k", "--ioengine=psync",
       "--verify=crc32c", "--verify_backlog=32", "--size=24m", runtime, "--time_based",
       "--filename=" + env.Mnt("seq")},
      {"/usr/bin/fio", "--name=direct", "--rw=randrw", "--bs=64k", "--direct=1",
       "--ioengine=io_uring", "--iodepth=16", "--verify=crc32c", "--verify_backlog=64",
       "--size=32m", runtime, "--time_based", "--filename=" + env.Mnt("direct")}};
}

class ReclaimTest : public MountedTest {
 protected:
  std::chrono::seconds Budget() const override { return seconds(150); }
  MountOptions Options() const override {
    MountOptions o;
    o.transport = GetParam();
    o.extra = {"hard"};
    // Each restart resets the kernel's caches; on the ring also its names (every dentry looked
    // up again while fio runs: LOOKUPs crossing FORGETs, NodeLedger's forgotten handles).
    if (o.transport == "uring") o.extra.push_back("reset_names");
    return o;
  }

  // Kill -9 and start again with the same key; returns the seconds from the kill until a new
  // file could be created through the mount (which needs the state re-established first).
  double KillRestartAndTimeRecovery(int cycle) {
    EXPECT_TRUE(env_->WaitMountServing());
    const auto killed = Clock::now();
    EXPECT_TRUE(env_->KillServer());
    // The harness gives every server of the deployment the same --handle-key.
    EXPECT_TRUE(env_->RestartServer(ServerOpts()));
    const std::string probe = Mnt("probe" + std::to_string(cycle));
    int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << "create after restart " << cycle << ": " << ErrnoName(errno);
    if (fd >= 0) ::close(fd);
    return std::chrono::duration<double>(Clock::now() - killed).count();
  }

  void RunFio(const std::vector<std::vector<std::string>>& jobs,
              std::vector<std::future<std::optional<int>>>* runs) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      runs->push_back(std::async(std::launch::async, [this, i, jobs] {
        return RunCommand(jobs[i], env_->base() + "/fio" + std::to_string(i) + ".log",
                          seconds(120));
      }));
    }
  }
  void ExpectFioClean(std::vector<std::future<std::optional<int>>>* runs) {
    for (size_t i = 0; i < runs->size(); ++i) {
      std::optional<int> status = (*runs)[i].get();
      std::string log = ReadFileOrEmpty(env_->base() + "/fio" + std::to_string(i) + ".log");
      ASSERT_TRUE(status.has_value()) << "fio hangs\n" << log;
      EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log;
      EXPECT_NE(log.find("err= 0"), std::string::npos) << log;
    }
  }
};

TEST_P(ReclaimTest, OpenFilesAndDirectoriesSurviveARestart) {
  OpenFds files;
  for (int i = 0; i < kFiles; ++i) {
    int fd = ::open(Mnt("f" + std::to_string(i)).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    files.Add(fd);
    ASSERT_EQ(PwriteAll(fd, Content(i).data(), kContentBytes, 0), 0);
  }
  OpenFds dirs;
  for (int i = 0; i < kDirs; ++i) {
    const std::string path = Mnt("d" + std::to_string(i));
    ASSERT_EQ(RINGFS_ERRNO(::mkdir(path.c_str(), 0755)), 0);
    ASSERT_EQ(WriteFile(Exp("d" + std::to_string(i) + "/inside"), "x"), 0);
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    dirs.Add(fd);
  }

  KillRestartAndTimeRecovery(0);
  if (HasFailure()) return;

  for (int i = 0; i < kFiles; ++i) {
    const std::string marker = "after-restart-" + std::to_string(i);
    ASSERT_EQ(PwriteAll(files[i], marker.data(), marker.size(), kContentBytes), 0)
        << "old fd " << i << ": " << ErrnoName(errno);
    char buf[kContentBytes * 2] = {};
    ssize_t n = ::pread(files[i], buf, sizeof(buf), 0);
    ASSERT_GE(n, 0) << "old fd " << i << ": " << ErrnoName(errno);
    EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), Content(i) + marker);
    struct stat st {};
    EXPECT_EQ(RINGFS_ERRNO(::fstat(files[i], &st)), 0);
    EXPECT_EQ(ReadFile(Exp("f" + std::to_string(i))), Content(i) + marker);
  }
  for (int i = 0; i < kDirs; ++i) {
    int fd = ::openat(dirs[i], "created", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << "old dir fd " << i << ": " << ErrnoName(errno);
    ::close(fd);
    EXPECT_EQ(::access(Exp("d" + std::to_string(i) + "/created").c_str(), F_OK), 0);
    // The directory's open handle itself was reopened: reading it through the old fd works.
    int dup = ::dup(dirs[i]);
    ASSERT_GE(dup, 0);
    DIR* listing = ::fdopendir(dup);
    ASSERT_NE(listing, nullptr);
    ::rewinddir(listing);
    std::vector<std::string> names;
    while (dirent* entry = ::readdir(listing)) names.push_back(entry->d_name);
    ::closedir(listing);
    EXPECT_NE(std::find(names.begin(), names.end(), "inside"), names.end())
        << "old dir fd " << i << " listed " << names.size() << " names";
  }
  const std::string log = ReadFileOrEmpty(env_->mount_log());
  EXPECT_GE(Count(log, "re-established"), 1u) << log;
  EXPECT_EQ(Count(log, "open files refused"), 0u) << log;
  EXPECT_EQ(StatNumber(env_->ReadStats(), "failures").value_or(0), 0u);
}

// 20 kill -9/restart cycles while three verifying fio jobs keep their files open: with `hard`
// no job sees an error and every block verifies.
TEST_P(ReclaimTest, KillRestartCyclesUnderVerifyingFioLoseNothing) {
  constexpr int kCycles = 20;
  std::vector<std::future<std::optional<int>>> runs;
  RunFio(FioJobs(*env_, 40), &runs);
  std::this_thread::sleep_for(seconds(2));
  std::vector<double> recovery;
  const auto end = Clock::now() + seconds(34);
  for (int cycle = 1; cycle <= kCycles && Clock::now() < end; ++cycle) {
    recovery.push_back(KillRestartAndTimeRecovery(cycle));
    if (HasFailure()) break;
    std::this_thread::sleep_for(milliseconds(400));
  }
  ExpectFioClean(&runs);
  EXPECT_GE(recovery.size(), static_cast<size_t>(kCycles) * 3 / 4) << "too few cycles ran";
  std::cout << GetParam() << ": " << recovery.size() << " kill -9/restart cycles, time from "
            << "kill to a new create: median " << Median(recovery) << " s, max "
            << *std::max_element(recovery.begin(), recovery.end()) << " s\n";
  const std::string log = ReadFileOrEmpty(env_->mount_log());
  EXPECT_GE(Count(log, "re-established"), recovery.size()) << log;
  EXPECT_EQ(Count(log, "open files refused"), 0u) << log;
  EXPECT_EQ(StatNumber(env_->ReadStats(), "failures").value_or(0), 0u);
}

// Two servers export the same directory with the same handle key; the mount names both. The
// first is killed for good under verifying fio: the mount moves to the second and goes on.
TEST_P(ReclaimTest, FailoverToTheSecondServerLosesNothing) {
  std::string second;
  ServerOptions opts = ServerOpts();
  ASSERT_TRUE(env_->StartExtraServer(opts, &second));
  ASSERT_TRUE(env_->Unmount());
  ASSERT_TRUE(env_->Mount(Options(), env_->server_address() + "," + second));
  ASSERT_TRUE(env_->WaitMountServing());
  OpenFds held;
  int fd = ::open(Mnt("held").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  held.Add(fd);
  std::vector<std::future<std::optional<int>>> runs;
  RunFio(FioJobs(*env_, 12), &runs);
  std::this_thread::sleep_for(seconds(3));
  const auto killed = Clock::now();
  ASSERT_TRUE(env_->KillServer());
  int probe = ::open(Mnt("after-failover").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(probe, 0) << ErrnoName(errno);
  ::close(probe);
  const double failover = std::chrono::duration<double>(Clock::now() - killed).count();
  ASSERT_EQ(PwriteAll(held[0], "still-mine", 10, 0), 0) << ErrnoName(errno);
  ExpectFioClean(&runs);
  EXPECT_EQ(ReadFile(Exp("held")), "still-mine");
  std::cout << GetParam() << ": failover to the second server: " << failover
            << " s from the kill to a new create\n";
  const std::string log = ReadFileOrEmpty(env_->mount_log());
  EXPECT_GE(Count(log, "re-established"), 1u) << log;
  const Stats stats = env_->ReadStats();
  EXPECT_EQ(StatNumber(stats, "failures").value_or(0), 0u);
  EXPECT_GE(StatNumber(stats, "reclaims").value_or(0), 1u);
  EXPECT_EQ(StatNumber(stats, "reclaim_refused").value_or(1), 0u);
  EXPECT_GE(StatNumber(stats, "held_open_files").value_or(0), 1u);
}

RINGFS_INSTANTIATE_TRANSPORTS(ReclaimTest);

}  // namespace
}  // namespace ringfs::testing
