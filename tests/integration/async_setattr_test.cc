// The async_setattr mount option (frontend/async_removals.h): chmod, chown and utimes of regular
// files answered before the server ran them. What the callers and the export end up with is
// exactly what was asked for (a tar-like sequence); what follows a change on the same file (a
// write, an fstat) or by its name (an unlink) never overtakes it at the server; a change the
// server refuses is undone in the kernel; changes answered while the server was stopped run
// after it is killed and restarted.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr uid_t kUid = 4321;
constexpr gid_t kGid = 8765;
constexpr time_t kMtime = 1788809622;

class AsyncSetattrTest : public MountedTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = MountedTest::Options();
    o.extra = {"async_setattr"};
    return o;
  }

  // Creates `path` 0600 and writes `size` bytes in three calls, as tar does; returns the fd.
  int CreateAndWrite(const std::string& path, size_t size) {
    int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0) << path << ": " << ErrnoName(errno);
    if (fd < 0) return fd;
    const std::string data(size, 'd');
    size_t done = 0;
    for (size_t part : {size / 4, size / 2, size - size / 4 - size / 2}) {
      EXPECT_EQ(::write(fd, data.data() + done, part), static_cast<ssize_t>(part));
      done += part;
    }
    return fd;
  }

  static void ExpectAsked(const struct stat& st, size_t size, const std::string& where) {
    EXPECT_EQ(st.st_mode, S_IFREG | 0644u) << where;
    EXPECT_EQ(st.st_uid, kUid) << where;
    EXPECT_EQ(st.st_gid, kGid) << where;
    EXPECT_EQ(st.st_size, static_cast<off_t>(size)) << where;
    EXPECT_EQ(st.st_mtim.tv_sec, kMtime) << where;
    EXPECT_EQ(st.st_mtim.tv_nsec, 500) << where;
  }

};

// tar's sequence per file: create, write, utimes, chown, chmod, close. The answers, an fstat
// right after (the kernel was given the attributes valid for no time: it asks the server, behind
// the changes), a stat through the mount and on the export all show what was asked for.
TEST_P(AsyncSetattrTest, FilesEndWithTheAttributesAskedFor) {
  constexpr int kFiles = 200;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    const size_t size = 1000 + 97 * i;
    int fd = CreateAndWrite(Mnt(name), size);
    ASSERT_GE(fd, 0);
    const timespec times[2] = {{0, UTIME_OMIT}, {kMtime, 500}};
    ASSERT_EQ(::futimens(fd, times), 0) << ErrnoName(errno);
    ASSERT_EQ(::fchown(fd, kUid, kGid), 0) << ErrnoName(errno);
    ASSERT_EQ(::fchmod(fd, 0644), 0) << ErrnoName(errno);
    struct stat st;
    if (i % 3 == 0) {
      ASSERT_EQ(::fstat(fd, &st), 0);
      ExpectAsked(st, size, "fstat of " + name + " while open");
    }
    ASSERT_EQ(::close(fd), 0);
    ASSERT_EQ(::stat(Mnt(name).c_str(), &st), 0) << ErrnoName(errno);
    ExpectAsked(st, size, "stat of " + name + " through the mount");
  }
  EXPECT_GE(StatAtLeast("async_setattrs", 3 * kFiles), 3u * kFiles)
      << "changes were not answered early";
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    struct stat st;
    ASSERT_EQ(::stat(Exp(name).c_str(), &st), 0) << ErrnoName(errno);
    ExpectAsked(st, 1000 + 97 * i, "stat of " + name + " on the export");
  }
  EXPECT_EQ(StatAtLeast("async_setattr_failures", 0), 0u);
}

// A write after a utimes must not overtake it at the server (the file would keep the old
// time); a listing after a chmod must not either (it would bring the old mode), nor an unlink
// (the chmod could find no file). Each
// follower is sent from another CPU than the change where there are two: on the ring that is
// another queue and another connection, which nothing else orders.
TEST_P(AsyncSetattrTest, WhatFollowsAChangeDoesNotOvertakeIt) {
  constexpr int kFiles = 100;
  cpu_set_t allowed;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  struct Restore {
    cpu_set_t set;
    ~Restore() { ::sched_setaffinity(0, sizeof(set), &set); }
  } restore{allowed};
  auto on_cpu = [&](size_t which) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[which % cpus.size()], &one);
    ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0) << ErrnoName(errno);
  };
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/w" + std::to_string(i);
    on_cpu(0);
    int fd = CreateAndWrite(Mnt(name), 100);
    ASSERT_GE(fd, 0);
    const timespec old_times[2] = {{1000, 0}, {1000, 0}};
    ASSERT_EQ(::futimens(fd, old_times), 0) << ErrnoName(errno);
    on_cpu(1);
    ASSERT_EQ(::write(fd, "more", 4), 4);
    ASSERT_EQ(::close(fd), 0);
    const std::string gone = "d/u" + std::to_string(i);
    on_cpu(0);
    fd = CreateAndWrite(Mnt(gone), 10);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::close(fd), 0);
    ASSERT_EQ(::chmod(Mnt(gone).c_str(), 0640), 0) << ErrnoName(errno);
    on_cpu(1);
    // A listing brings the attributes of every file in it (READDIRPLUS): from before the chmod,
    // they would stay in the kernel for their lifetime.
    DIR* dir = ::opendir(Mnt("d").c_str());
    ASSERT_NE(dir, nullptr) << ErrnoName(errno);
    while (::readdir(dir) != nullptr) {
    }
    ::closedir(dir);
    struct stat st;
    ASSERT_EQ(::stat(Mnt(gone).c_str(), &st), 0) << ErrnoName(errno);
    EXPECT_EQ(st.st_mode & 07777, 0640u) << "a listing overtook the chmod: " << gone;
    ASSERT_EQ(::unlink(Mnt(gone).c_str()), 0) << ErrnoName(errno);
    // Three changes of one file from alternating CPUs: the third must not be folded into the
    // first (waiting in one queue) and so run before the second (in the other).
    const std::string mode = "d/m" + std::to_string(i);
    fd = CreateAndWrite(Mnt(mode), 10);
    ASSERT_GE(fd, 0);
    for (int k = 0; k < 3; ++k) {
      on_cpu(k);
      // Each a change (created 0600): one to the mode it has is answered without the server.
      ASSERT_EQ(::fchmod(fd, k == 0 ? 0604 : k == 1 ? 0640 : 0644), 0) << ErrnoName(errno);
    }
    ASSERT_EQ(::close(fd), 0);
  }
  EXPECT_GE(StatAtLeast("async_setattrs", 5 * kFiles), 5u * kFiles)
      << "changes were not answered early";
  for (int i = 0; i < kFiles; ++i) {
    struct stat st;
    ASSERT_EQ(::stat(Exp("d/w" + std::to_string(i)).c_str(), &st), 0);
    EXPECT_GT(st.st_mtim.tv_sec, 1000) << "the write ran before the utimes: w" << i;
    EXPECT_EQ(st.st_size, 104) << "w" << i;
    EXPECT_NE(::access(Exp("d/u" + std::to_string(i)).c_str(), F_OK), 0) << "u" << i;
    ASSERT_EQ(::stat(Mnt("d/m" + std::to_string(i)).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u) << "the changes of m" << i << " ran out of order";
  }
  EXPECT_EQ(StatAtLeast("async_setattr_failures", 0), 0u) << "a change ran after what followed it\n"
                                                          << env_->DescribeLogs();
}

// A mode and explicitly set times in a row (cp -p) are folded into one request to the server;
// both end exact.
TEST_P(AsyncSetattrTest, AModeAndTimesInARowAreFolded) {
  constexpr int kFiles = 50;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) {
    int fd = CreateAndWrite(Mnt("d/f" + std::to_string(i)), 100);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fchmod(fd, 0644), 0) << ErrnoName(errno);
    const timespec times[2] = {{kMtime, 500}, {kMtime, 500}};
    ASSERT_EQ(::futimens(fd, times), 0) << ErrnoName(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  EXPECT_GE(StatAtLeast("async_setattrs", 2 * kFiles), 2u * kFiles);
  EXPECT_GT(StatAtLeast("async_setattrs_folded", 1), 0u) << "nothing was folded";
  for (int i = 0; i < kFiles; ++i) {
    struct stat st;
    ASSERT_EQ(::stat(Exp("d/f" + std::to_string(i)).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0644u) << i;
    EXPECT_EQ(st.st_mtim.tv_sec, kMtime) << i;
    EXPECT_EQ(st.st_atim.tv_sec, kMtime) << i;
  }
  EXPECT_EQ(StatAtLeast("async_setattr_failures", 0), 0u);
}

// A chmod the server refuses (the file is immutable on the export) was answered success; the
// kernel is then told to ask again, and the file shows its real mode. Counted and logged.
TEST_P(AsyncSetattrTest, AChangeTheServerRefusesIsUndoneInTheKernel) {
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  int fd = CreateAndWrite(Mnt("d/locked"), 10);
  ASSERT_GE(fd, 0);
  ScopedImmutable locked(Exp("d/locked"));
  ASSERT_TRUE(locked.ok()) << ErrnoName(locked.error());

  EXPECT_EQ(::fchmod(fd, 0644), 0) << "answered before the server ran it: " << ErrnoName(errno);
  const auto deadline = Clock::now() + seconds(5);
  struct stat st {};
  while (Clock::now() < deadline) {
    ASSERT_EQ(::fstat(fd, &st), 0);
    if ((st.st_mode & 07777) == 0600) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "the kernel kept the refused mode";
  ::close(fd);
  EXPECT_EQ(StatAtLeast("async_setattr_failures", 1), 1u);
  std::ifstream log(env_->mount_log());
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("failed at the server: Operation not permitted"), std::string::npos)
      << env_->DescribeLogs();
}

// Changes answered while the server was stopped (SIGSTOP) are sent again to the server started
// after a kill -9, and run there.
TEST_P(AsyncSetattrTest, ChangesAnsweredBeforeAKillRunAfterTheRestart) {
  constexpr int kFiles = 20;  // within what a queue may owe (BackendChannel::kDetached)
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  std::vector<int> fds;
  for (int i = 0; i < kFiles; ++i) {
    fds.push_back(CreateAndWrite(Mnt("d/f" + std::to_string(i)), 50));
    ASSERT_GE(fds.back(), 0);
  }
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  // In a thread: a change that was not answered early waits for the server (kill -9 below).
  std::atomic<int> done{0};
  std::thread changer([&] {
    for (int fd : fds) {
      if (::fchmod(fd, 0604) == 0) done.fetch_add(1);
    }
  });
  const auto deadline = Clock::now() + seconds(3);
  while (done.load() < kFiles && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(done.load(), kFiles) << "changes waited for the stopped server";
  for (int i = 0; i < kFiles; ++i) {
    struct stat st;
    ASSERT_EQ(::stat(Exp("d/f" + std::to_string(i)).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u) << "the server is stopped";
  }
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer());
  changer.join();
  struct statfs fs;
  ASSERT_EQ(WhileReconnecting([&] { return ::statfs(Mnt("").c_str(), &fs) == 0 ? 0 : errno; }), 0);
  for (int i = 0; i < kFiles; ++i) {
    // Through the mount: the GETATTR waits for the change before it.
    struct stat st;
    ASSERT_EQ(WhileReconnecting([&] { return ::fstat(fds[i], &st) == 0 ? 0 : errno; }), 0);
    EXPECT_EQ(st.st_mode & 07777, 0604u) << "f" << i << "\n" << env_->DescribeLogs();
    ASSERT_EQ(::stat(Exp("d/f" + std::to_string(i)).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0604u) << "f" << i << " on the export";
    ::close(fds[i]);
  }
  EXPECT_EQ(StatAtLeast("async_setattr_failures", 0), 0u);
}

// Under root_squash, root's chown fails at the server (the squashed caller owns nothing it may
// give away), but its utimes and chmod of a file it made do not. Answered early, the chown's
// failure is only counted; the other changes must still be made, not taken down with it.
class AsyncSetattrSquashTest : public AsyncSetattrTest {
 protected:
  ServerOptions ServerOpts() const override {
    ServerOptions o = AsyncSetattrTest::ServerOpts();
    o.export_options = "root_squash";
    return o;
  }
};

TEST_P(AsyncSetattrSquashTest, AFailedChownDoesNotTakeTheOtherChangesDown) {
  // A directory the squashed root (65534) may create in.
  ASSERT_EQ(::mkdir(Exp("d").c_str(), 0755), 0) << ErrnoName(errno);
  ASSERT_EQ(::chown(Exp("d").c_str(), 65534, 65534), 0) << ErrnoName(errno);
  constexpr int kFiles = 20;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    int fd = CreateAndWrite(Mnt(name), 100);
    ASSERT_GE(fd, 0);
    const timespec times[2] = {{0, UTIME_OMIT}, {kMtime, 500}};
    ASSERT_EQ(::futimens(fd, times), 0) << ErrnoName(errno);
    ::fchown(fd, kUid, kGid);  // fails at the server; early, the caller is told success
    ASSERT_EQ(::fchmod(fd, 0644), 0) << ErrnoName(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  const uint64_t early = StatAtLeast("async_setattrs", 3 * kFiles);
  EXPECT_GE(early, static_cast<uint64_t>(kFiles)) << "changes were not answered early";
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    struct stat st;
    ASSERT_EQ(::stat(Mnt(name).c_str(), &st), 0) << ErrnoName(errno);  // behind the changes
    ASSERT_EQ(::stat(Exp(name).c_str(), &st), 0) << ErrnoName(errno);
    EXPECT_EQ(st.st_uid, 65534u) << name;
    EXPECT_EQ(st.st_mode & 07777, 0644u) << name << ": the chmod was lost";
    EXPECT_EQ(st.st_mtim.tv_sec, kMtime) << name << ": the utimes was lost";
  }
  // Chowns answered early failed, and nothing else did (a failure forgets the file's
  // attributes, so what follows it may go the synchronous way).
  const uint64_t failures = StatAtLeast("async_setattr_failures", 1);
  EXPECT_GE(failures, 1u) << env_->DescribeLogs();
  EXPECT_LE(failures, static_cast<uint64_t>(kFiles)) << early << " answered early\n"
                                                      << env_->DescribeLogs();
}

// With async_unlink too: tar-like files end exact and are removed, a file unlinked while open
// shows link count 0 and its new mode after a chmod, and the emptied directory can be removed;
// nothing fails at the server.
class AsyncSetattrAndUnlinkTest : public AsyncSetattrTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = AsyncSetattrTest::Options();
    o.extra = {"async_setattr", "async_unlink"};
    return o;
  }
};

TEST_P(AsyncSetattrAndUnlinkTest, ChangesAndUnlinksKeepTheirOrder) {
  constexpr int kFiles = 100;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    int fd = CreateAndWrite(Mnt(name), 500);
    ASSERT_GE(fd, 0);
    const timespec times[2] = {{0, UTIME_OMIT}, {kMtime, 500}};
    ASSERT_EQ(::futimens(fd, times), 0) << ErrnoName(errno);
    ASSERT_EQ(::fchown(fd, kUid, kGid), 0) << ErrnoName(errno);
    ASSERT_EQ(::fchmod(fd, 0644), 0) << ErrnoName(errno);
    if (i % 2 == 0) {
      ASSERT_EQ(::unlink(Mnt(name).c_str()), 0) << ErrnoName(errno);
      ASSERT_EQ(::fchmod(fd, 0640), 0) << ErrnoName(errno);
      struct stat st;
      ASSERT_EQ(::fstat(fd, &st), 0);
      EXPECT_EQ(st.st_nlink, 0u) << name << " unlinked while open";
      EXPECT_EQ(st.st_mode & 07777, 0640u) << name;
    }
    ASSERT_EQ(::close(fd), 0);
  }
  for (int i = 1; i < kFiles; i += 2) {
    struct stat st;
    ASSERT_EQ(::stat(Mnt("d/f" + std::to_string(i)).c_str(), &st), 0) << ErrnoName(errno);
    ExpectAsked(st, 500, "f" + std::to_string(i));
    ASSERT_EQ(::unlink(Mnt("d/f" + std::to_string(i)).c_str()), 0) << ErrnoName(errno);
  }
  // ENOTEMPTY if the RMDIR overtook an unlink, ESTALE-style failures if a change did.
  EXPECT_EQ(::rmdir(Mnt("d").c_str()), 0) << ErrnoName(errno);
  EXPECT_NE(::access(Exp("d").c_str(), F_OK), 0);
  EXPECT_GE(StatAtLeast("async_setattrs", kFiles), static_cast<uint64_t>(kFiles));
  // Not every one: an unlink is not answered early while a change is owed (it could be of
  // the file it removes).
  EXPECT_GT(StatAtLeast("async_unlinks", kFiles / 2), 0u);
  EXPECT_EQ(StatAtLeast("async_setattr_failures", 0), 0u) << env_->DescribeLogs();
  EXPECT_EQ(StatAtLeast("async_unlink_failures", 0), 0u) << env_->DescribeLogs();
}

// A touch (times set to now: write access is enough) then a chmod the squashed root may not
// make: the chmod fails at the server, the touch must still be made (never folded with it).
TEST_P(AsyncSetattrSquashTest, ATouchIsNotFoldedWithAChmodThatFails) {
  ASSERT_EQ(::mkdir(Exp("d").c_str(), 0777), 0) << ErrnoName(errno);
  constexpr int kFiles = 20;
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    { std::ofstream(Exp(name)) << "x"; }
    ASSERT_EQ(::chown(Exp(name).c_str(), 1000, 1000), 0);
    ASSERT_EQ(::chmod(Exp(name).c_str(), 0666), 0);
    const timespec old_times[2] = {{1000, 0}, {1000, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, Exp(name).c_str(), old_times, 0), 0);
  }
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    int fd = ::open(Mnt(name).c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ASSERT_EQ(::futimens(fd, nullptr), 0) << ErrnoName(errno);
    ::fchmod(fd, 0644);  // root may locally; squashed at the server it is not the owner
    ASSERT_EQ(::close(fd), 0);
  }
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "d/f" + std::to_string(i);
    struct stat st;
    ASSERT_EQ(::stat(Mnt(name).c_str(), &st), 0) << ErrnoName(errno);  // behind the changes
    ASSERT_EQ(::stat(Exp(name).c_str(), &st), 0);
    EXPECT_GT(st.st_mtim.tv_sec, 1000) << name << ": the touch was lost";
    EXPECT_EQ(st.st_mode & 07777, 0666u) << name;
  }
  EXPECT_EQ(StatAtLeast("async_setattrs_folded", 0), 0u);
}

RINGFS_INSTANTIATE_TRANSPORTS(AsyncSetattrTest);
RINGFS_INSTANTIATE_TRANSPORTS(AsyncSetattrSquashTest);
RINGFS_INSTANTIATE_TRANSPORTS(AsyncSetattrAndUnlinkTest);

}  // namespace
}  // namespace ringfs::testing
