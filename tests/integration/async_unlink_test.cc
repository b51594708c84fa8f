// The async_unlink mount option (frontend/async_removals.h): unlinks answered before the server
// ran them. Nothing that follows an unlink may see the name still there (a create of the same
// name, a readdir, the rmdir of the emptied directory); an unlink the server refuses brings the
// name back; unlinks answered while the server was stopped are done after it is killed and
// restarted; and the mount's end waits for those still owed.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

class AsyncUnlinkTest : public MountedTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = MountedTest::Options();
    o.extra = {"async_unlink"};
    return o;
  }

  void Create(const std::string& path, const std::string& content = "x") {
    int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << path << ": " << ErrnoName(errno);
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ::close(fd);
  }

  std::set<std::string> List(const std::string& dir) {
    std::set<std::string> names;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return names;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.insert(name);
    }
    ::closedir(d);
    return names;
  }

  // Makes d/f0..f<n-1> through the mount, stops the server (SIGSTOP) and unlinks them all: each
  // is answered early, none has run.
  void UnlinkWhileTheServerIsStopped(int n) {
    ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
    for (int i = 0; i < n; ++i) Create(Mnt("d/f" + std::to_string(i)));
    ASSERT_TRUE(env_->WaitMountServing());
    ASSERT_TRUE(StopAndWait(env_->server_process()));
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(::unlink(Mnt("d/f" + std::to_string(i)).c_str()), 0) << ErrnoName(errno);
    }
    EXPECT_EQ(List(Exp("d")).size(), static_cast<size_t>(n)) << "the server is stopped";
  }

};

// Whatever follows an unlink through this mount sees the name gone, on either queue.
TEST_P(AsyncUnlinkTest, WhatFollowsAnUnlinkSeesTheNameGone) {
  constexpr int kFiles = 300;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) Create(Mnt("d/f" + std::to_string(i)), "old");
  std::set<std::string> kept;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "f" + std::to_string(i);
    ASSERT_EQ(::unlink(Mnt("d/" + name).c_str()), 0) << name << ": " << ErrnoName(errno);
    struct stat st;
    if (i % 2 == 0) {
      // O_EXCL: EEXIST if the CREATE overtook the UNLINK at the server.
      Create(Mnt("d/" + name), "new");
      kept.insert(name);
    } else {
      EXPECT_NE(::stat(Mnt("d/" + name).c_str(), &st), 0) << name;
    }
  }
  EXPECT_EQ(List(Mnt("d")), kept);
  for (const std::string& name : kept) {
    std::ifstream in(Mnt("d/" + name));
    std::string content;
    in >> content;
    EXPECT_EQ(content, "new") << name;
  }
  for (const std::string& name : kept) ASSERT_EQ(::unlink(Mnt("d/" + name).c_str()), 0);
  // ENOTEMPTY if the RMDIR overtook the UNLINKs at the server.
  EXPECT_EQ(::rmdir(Mnt("d").c_str()), 0) << ErrnoName(errno);
  EXPECT_NE(::access(Exp("d").c_str(), F_OK), 0) << "the directory is still on the export";
  EXPECT_GE(StatAtLeast("async_unlinks", kFiles), static_cast<uint64_t>(kFiles))
      << "unlinks were not answered early";
  EXPECT_EQ(StatAtLeast("async_unlink_failures", 0), 0u);
}

// A directory opened right after unlinks in it (rm -rf's walk: the OPENDIR no longer waits for
// them, only the READDIR does) lists none of the names removed, from either CPU.
TEST_P(AsyncUnlinkTest, ADirectoryListedRightAfterUnlinksShowsNoneOfThem) {
  for (int round = 0; round < 40; ++round) {
    const std::string dir = "d" + std::to_string(round);
    ASSERT_EQ(::mkdir(Mnt(dir).c_str(), 0755), 0) << ErrnoName(errno);
    for (int i = 0; i < 20; ++i) Create(Mnt(dir + "/f" + std::to_string(i)));
    if (round % 2 == 0) Create(Mnt(dir + "/kept"));
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(::unlink(Mnt(dir + "/f" + std::to_string(i)).c_str()), 0) << ErrnoName(errno);
    }
    std::set<std::string> expected;
    if (round % 2 == 0) expected.insert("kept");
    std::set<std::string> listed;
    std::thread other([&] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(round % 2, &one);
      ::sched_setaffinity(0, sizeof(one), &one);  // either queue, whatever the unlinks took
      listed = List(Mnt(dir));
    });
    other.join();
    EXPECT_EQ(listed, expected) << dir;
  }
  EXPECT_EQ(StatAtLeast("async_unlink_failures", 0), 0u);
}

// rm -rf with early unlinks: it looks into a directory (one getdents), removes what it found,
// then lists it again before removing it. The page kept from the look (frontend/kept_listings.h)
// must not answer that listing while the unlinks, answered already, have not run: with the
// server stopped the listing waits for it, and then shows none of the names.
TEST_P(AsyncUnlinkTest, APageKeptFromALookBeforeUnlinksDoesNotListThem) {
  constexpr int kFiles = 5;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) Create(Mnt("d/f" + std::to_string(i)));
  ASSERT_TRUE(env_->WaitMountServing());
  usleep(20'000);  // the creates settled: the look's page may be kept
  ASSERT_GT(ReadFirstPage(Mnt("d")), 0);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_EQ(::unlink(Mnt("d/f" + std::to_string(i)).c_str()), 0) << ErrnoName(errno);
  }
  std::thread resume([&] {
    usleep(300'000);
    env_->server_process()->Signal(SIGCONT);
  });
  const std::set<std::string> listed = List(Mnt("d"));
  resume.join();
  EXPECT_TRUE(listed.empty()) << "listed " << listed.size() << " names unlinked";
  EXPECT_EQ(::rmdir(Mnt("d").c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(StatAtLeast("async_unlink_failures", 0), 0u);
}

// An unlink the server refuses (the file is immutable on the export) was answered success; the
// name then comes back, the failure is counted and logged.
TEST_P(AsyncUnlinkTest, AnUnlinkTheServerRefusesBringsTheNameBack) {
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  Create(Mnt("d/locked"));
  ScopedImmutable locked(Exp("d/locked"));
  ASSERT_TRUE(locked.ok()) << ErrnoName(locked.error());
  Create(Mnt("d/fresh"));  // the directory's attributes, just sent by the server

  EXPECT_EQ(::unlink(Mnt("d/locked").c_str()), 0)
      << "answered before the server ran it: " << ErrnoName(errno);
  const auto deadline = Clock::now() + seconds(5);
  struct stat st;
  int err = ENOENT;
  while (err != 0 && Clock::now() < deadline) {
    err = ::stat(Mnt("d/locked").c_str(), &st) == 0 ? 0 : errno;
    if (err != 0) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(err, 0) << "the name the server kept stays hidden: " << ErrnoName(err);
  EXPECT_EQ(::access(Exp("d/locked").c_str(), F_OK), 0);
  EXPECT_EQ(StatAtLeast("async_unlink_failures", 1), 1u);
  std::ifstream log(env_->mount_log());
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("unlink of \"locked\""), std::string::npos) << env_->DescribeLogs();
}

// Unlinks answered while the server was stopped (SIGSTOP) are sent again to the server started
// after a kill -9, and run there.
TEST_P(AsyncUnlinkTest, UnlinksAnsweredBeforeAKillRunAfterTheRestart) {
  // 40: within what a queue may owe (BackendChannel::kDetached).
  ASSERT_NO_FATAL_FAILURE(UnlinkWhileTheServerIsStopped(40));
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer());
  struct statfs fs;
  ASSERT_EQ(WhileReconnecting([&] { return ::statfs(Mnt("").c_str(), &fs) == 0 ? 0 : errno; }),
            0);
  // A listing through the mount waits for the unlinks before it.
  EXPECT_EQ(WhileReconnecting([&] { return List(Mnt("d")).empty() ? 0 : EEXIST; }), 0);
  EXPECT_TRUE(List(Exp("d")).empty()) << List(Exp("d")).size() << " files left on the export\n"
                                      << env_->DescribeLogs();
  EXPECT_EQ(StatAtLeast("async_unlink_failures", 0), 0u);
}

// The mount's end waits for unlinks still owed to the server: after the unmount a server that
// was stopped is killed and started again, and the waiting mount sends them to it.
TEST_P(AsyncUnlinkTest, TheMountsEndWaitsForUnlinksOwed) {
  ASSERT_NO_FATAL_FAILURE(UnlinkWhileTheServerIsStopped(30));
  env_->mount_process()->Signal(SIGTERM);
  const auto unmounted = Clock::now() + seconds(10);
  while (IsMounted(env_->mount_dir()) && Clock::now() < unmounted) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_FALSE(IsMounted(env_->mount_dir()));
  EXPECT_TRUE(env_->mount_process()->Running()) << "the mount left with unlinks owed";
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer());
  std::optional<int> status = env_->mount_process()->WaitExit(seconds(20));
  ASSERT_TRUE(status.has_value()) << "the mount still runs";
  EXPECT_EQ(*status, 0) << DescribeWaitStatus(*status);
  EXPECT_TRUE(List(Exp("d")).empty()) << List(Exp("d")).size() << " files left on the export\n"
                                      << env_->DescribeLogs();
}

// Signals once the connection ended (the mount was detached from outside; ringfs-mount still
// owes early unlinks to a stopped server) touch no other mount: the connection's number (its
// device minor, its fusectl id) may be another FUSE mount's by then, at the same path even. Here
// it is, on purpose: tmpfs mounts take the lower free numbers, then a FUSE mount nobody serves
// gets the number and the path this mount had. The first signal must not detach it, the second
// must not abort it. (Over the ring the signals are not looked at then; over /dev/fuse the
// second aborted that other mount, and the first detached it.)
TEST_P(AsyncUnlinkTest, SignalsAfterTheEndLeaveANewMountWithTheSameNumberAlone) {
  const std::string dir = env_->mount_dir();
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  const unsigned ours = minor(st.st_dev);
  ASSERT_NO_FATAL_FAILURE(UnlinkWhileTheServerIsStopped(5));
  // Whatever happens below (a skip too), the server runs again and the mount can drain.
  struct Resume {
    ChildProcess* server;
    ~Resume() { server->Signal(SIGCONT); }
  } resume{env_->server_process()};
  ASSERT_EQ(::umount2(dir.c_str(), MNT_DETACH), 0) << ErrnoName(errno);  // nothing is open
  ASSERT_TRUE(env_->mount_process()->Running()) << "the mount left with unlinks owed";

  const std::string scratch = dir + "-numbers";
  ASSERT_EQ(::mkdir(scratch.c_str(), 0755), 0) << ErrnoName(errno);
  struct Mounts {
    std::vector<std::string> dirs;
    int fuse_fd = -1;
    ~Mounts() {
      for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
      if (fuse_fd >= 0) ::close(fuse_fd);  // the last descriptor: its connection ends
    }
  } mounts;
  bool freed = false;
  for (int i = 0; i < 256 && !freed; ++i) {
    const std::string filler = scratch + "/" + std::to_string(i);
    ASSERT_EQ(::mkdir(filler.c_str(), 0755), 0) << ErrnoName(errno);
    ASSERT_EQ(::mount("ringfs-it-number", filler.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=4k"),
              0)
        << ErrnoName(errno);
    mounts.dirs.push_back(filler);
    std::optional<MountEntry> entry = FindMount(filler);
    ASSERT_TRUE(entry.has_value());
    if (entry->dev_minor == ours) {
      ASSERT_EQ(::umount2(filler.c_str(), MNT_DETACH), 0);
      mounts.dirs.pop_back();
      freed = true;
    }
  }
  if (!freed) GTEST_SKIP() << "device number " << ours << " was not free again";
  mounts.fuse_fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  ASSERT_GE(mounts.fuse_fd, 0) << ErrnoName(errno);
  const std::string options =
      "fd=" + std::to_string(mounts.fuse_fd) + ",rootmode=40000,user_id=0,group_id=0";
  ASSERT_EQ(::mount("ringfs-it-other", dir.c_str(), "fuse", MS_NOSUID | MS_NODEV, options.c_str()),
            0)
      << ErrnoName(errno);
  mounts.dirs.push_back(dir);  // never looked into: nobody answers its requests
  std::optional<MountEntry> other = FindMount(dir);
  ASSERT_TRUE(other.has_value());
  if (other->dev_minor != ours) GTEST_SKIP() << "the other mount got another number";

  auto signals_logged = [&] {
    const std::string log = ReadFileOrEmpty(env_->mount_log());
    size_t n = 0;
    for (size_t at = log.find("signal 15"); at != std::string::npos;
         at = log.find("signal 15", at + 1)) {
      ++n;
    }
    return n;
  };
  for (const char* signal : {"first", "second"}) {
    const size_t before = signals_logged();
    env_->mount_process()->Signal(SIGTERM);
    // Taken, one at a time (two pending at once would be one).
    const bool classic = GetParam() == std::string("classic");
    const auto taken = Clock::now() + (classic ? seconds(5) : seconds(1));
    while (signals_logged() == before && Clock::now() < taken) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    // Over the ring the signals are not looked at once the connection ended (nothing to check
    // then but that the other mount is left alone); over /dev/fuse they are.
    if (classic) {
      ASSERT_GT(signals_logged(), before) << "the " << signal << " SIGTERM was not taken";
    }
    std::this_thread::sleep_for(milliseconds(100));
    std::optional<MountEntry> top = FindMount(dir);
    EXPECT_TRUE(top.has_value() && top->fstype == "fuse" && top->dev_minor == ours)
        << "the " << signal << " SIGTERM detached the other mount";
    pollfd device{mounts.fuse_fd, 0, 0};
    ASSERT_GE(::poll(&device, 1, 0), 0);
    EXPECT_EQ(device.revents & POLLERR, 0)
        << "the " << signal << " SIGTERM aborted the other mount's connection";
  }
  env_->server_process()->Signal(SIGCONT);
  std::optional<int> status = env_->mount_process()->WaitExit(seconds(20));
  ASSERT_TRUE(status.has_value()) << "the mount still runs";
}

RINGFS_INSTANTIATE_TRANSPORTS(AsyncUnlinkTest);

}  // namespace
}  // namespace ringfs::testing
