// Issue 10 ("identity never aliases"): descriptors opened through the mount before the server
// is killed with SIGKILL and started again on the same port and export must never reach files or
// directories created after the restart. Each old descriptor either fails (ESTALE, or EIO while
// the mount reconnects) or still reaches its own file. Before the fix the restarted server
// numbered node ids and fh from scratch, so old descriptors wrote into, read from and created
// entries inside the new objects.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
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

constexpr int kOldFiles = 8;
constexpr int kNewFiles = 24;
constexpr int kOldDirs = 4;
constexpr int kNewDirs = 60;
// Old contents fill [0, kContentBytes); markers go right after, so a marker that lands in its
// own file leaves the original bytes intact and is easy to find.
constexpr size_t kContentBytes = 64;

std::string Padded(std::string s) {
  s.resize(kContentBytes, '.');
  return s;
}
std::string OldContent(int i) { return Padded("old-file-" + std::to_string(i) + "-"); }
std::string NewContent(int i) { return Padded("new-file-" + std::to_string(i) + "-"); }
std::string Marker(int i) { return "MARKER-" + std::to_string(i) + "-"; }

// Runs `attempt` (which returns 0 or an errno) until it succeeds, or fails with something other
// than ENOTCONN (and EIO when `also_eio`), or 20 s pass. Right after the kill a queue of the
// mount answers EIO or ENOTCONN until it has reconnected (it retries on its next request, at
// most once a second). For old descriptors EIO is an accepted answer, so only ENOTCONN is
// retried there.
int RetryWhileReconnecting(const std::function<int()>& attempt, bool also_eio = true) {
  const auto deadline = Clock::now() + seconds(20);
  for (;;) {
    int err = attempt();
    const bool reconnecting = err == ENOTCONN || (also_eio && err == EIO);
    if (!reconnecting || Clock::now() >= deadline) return err;
    std::this_thread::sleep_for(milliseconds(100));
  }
}

bool IsStaleOrIo(int err) { return err == ESTALE || err == EIO; }

class RestartTest : public MountedTest {
 protected:
  // What the old descriptors got, e.g. "write: errno 116 (Stale file handle)" x 8; printed at the
  // end of a test so a log shows which way the requests failed (or that they reached their own
  // objects).
  void Note(const std::string& op, int err) {
    ++outcomes_[op + ": " + (err == 0 ? std::string("ok") : ErrnoName(err))];
  }
  void PrintOutcomes() const {
    for (const auto& [what, count] : outcomes_) {
      std::cout << "old descriptors, " << what << " x " << count << "\n";
    }
  }

  std::map<std::string, int> outcomes_;

  void KillAndRestart() {
    ASSERT_TRUE(env_->WaitMountServing());
    ASSERT_TRUE(env_->KillServer());
    ASSERT_TRUE(env_->RestartServer());
  }

  // Reads up to kContentBytes at offset 0 through old descriptor `i`: it must fail with ESTALE
  // or EIO, or return the file's own data.
  void ExpectOldReadIsOwnOrFails(int fd, int i, const std::vector<std::string>& others) {
    char buf[kContentBytes] = {};
    ssize_t n = -1;
    const int err = RetryWhileReconnecting(
        [&] {
          n = ::pread(fd, buf, sizeof(buf), 0);
          return n < 0 ? errno : 0;
        },
        /*also_eio=*/false);
    Note("read", n < 0 ? err : 0);
    if (n < 0) {
      EXPECT_TRUE(IsStaleOrIo(err)) << "old fd " << i << ": read " << ErrnoName(err);
      return;
    }
    const std::string got(buf, static_cast<size_t>(n));
    EXPECT_EQ(got, OldContent(i)) << "old fd " << i << " read another file's data";
    for (size_t k = 0; k < others.size(); ++k) {
      EXPECT_NE(got, others[k]) << "old fd " << i << " read the data of new file " << k;
    }
  }
};

TEST_P(RestartTest, OldFileDescriptorsNeverReachFilesCreatedAfterRestart) {
  OpenFds old_fds;
  for (int i = 0; i < kOldFiles; ++i) {
    int fd = ::open(Mnt("old" + std::to_string(i)).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    old_fds.Add(fd);
    ASSERT_EQ(PwriteAll(fd, OldContent(i).data(), kContentBytes, 0), 0);
  }

  KillAndRestart();
  if (HasFatalFailure()) return;

  OpenFds new_fds;
  std::vector<std::string> new_contents;
  for (int k = 0; k < kNewFiles; ++k) {
    const std::string path = Mnt("new" + std::to_string(k));
    int fd = -1;
    int err = RetryWhileReconnecting([&] {
      fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
      return fd < 0 ? errno : 0;
    });
    ASSERT_EQ(err, 0) << "create " << path << ": " << ErrnoName(err);
    new_fds.Add(fd);
    new_contents.push_back(NewContent(k));
    ASSERT_EQ(PwriteAll(fd, new_contents.back().data(), kContentBytes, 0), 0);
  }

  for (int i = 0; i < kOldFiles; ++i) ExpectOldReadIsOwnOrFails(old_fds[i], i, new_contents);

  std::vector<bool> written(kOldFiles, false);
  for (int i = 0; i < kOldFiles; ++i) {
    const std::string marker = Marker(i);
    ssize_t n = -1;
    const int err = RetryWhileReconnecting(
        [&] {
          n = ::pwrite(old_fds[i], marker.data(), marker.size(), kContentBytes);
          return n < 0 ? errno : 0;
        },
        /*also_eio=*/false);
    Note("write", n < 0 ? err : 0);
    if (n < 0) {
      EXPECT_TRUE(IsStaleOrIo(err)) << "old fd " << i << ": write " << ErrnoName(err);
      continue;
    }
    EXPECT_EQ(static_cast<size_t>(n), marker.size());
    written[i] = true;
  }

  for (int i = 0; i < kOldFiles; ++i) ExpectOldReadIsOwnOrFails(old_fds[i], i, new_contents);

  // The export side: each marker is in its own old file or nowhere.
  for (int k = 0; k < kNewFiles; ++k) {
    const std::string content = ReadFile(Exp("new" + std::to_string(k)));
    EXPECT_EQ(content, new_contents[k]) << "new file " << k << " was changed";
    for (int i = 0; i < kOldFiles; ++i) {
      EXPECT_EQ(content.find(Marker(i)), std::string::npos)
          << "the write through old fd " << i << " landed in new file " << k;
    }
  }
  for (int i = 0; i < kOldFiles; ++i) {
    const std::string content = ReadFile(Exp("old" + std::to_string(i)));
    const std::string want = written[i] ? OldContent(i) + Marker(i) : OldContent(i);
    EXPECT_EQ(content, want) << "old file " << i;
  }
  PrintOutcomes();
}

TEST_P(RestartTest, OldDirectoryDescriptorsNeverReachDirectoriesCreatedAfterRestart) {
  OpenFds old_dirs;
  for (int i = 0; i < kOldDirs; ++i) {
    const std::string path = Mnt("olddir" + std::to_string(i));
    ASSERT_EQ(RINGFS_ERRNO(::mkdir(path.c_str(), 0755)), 0);
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    old_dirs.Add(fd);
  }

  KillAndRestart();
  if (HasFatalFailure()) return;

  for (int k = 0; k < kNewDirs; ++k) {
    const std::string path = Mnt("newdir" + std::to_string(k));
    int err = RetryWhileReconnecting([&] { return RINGFS_ERRNO(::mkdir(path.c_str(), 0755)); });
    ASSERT_EQ(err, 0) << "mkdir " << path << ": " << ErrnoName(err);
  }

  for (int i = 0; i < kOldDirs; ++i) {
    int fd = -1;
    const int err = RetryWhileReconnecting(
        [&] {
          fd = ::openat(old_dirs[i], "x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
          return fd < 0 ? errno : 0;
        },
        /*also_eio=*/false);
    Note("openat(O_CREAT)", fd < 0 ? err : 0);
    if (fd < 0) {
      EXPECT_TRUE(IsStaleOrIo(err) || err == ENOENT)
          << "old dir fd " << i << ": openat " << ErrnoName(err);
      EXPECT_NE(::access(Exp("olddir" + std::to_string(i) + "/x").c_str(), F_OK), 0)
          << "openat failed but created x in old dir " << i;
      continue;
    }
    ::close(fd);
    EXPECT_EQ(::access(Exp("olddir" + std::to_string(i) + "/x").c_str(), F_OK), 0)
        << "openat through old dir fd " << i << " succeeded, but not in that directory";
  }
  for (int k = 0; k < kNewDirs; ++k) {
    const std::string x = Exp("newdir" + std::to_string(k) + "/x");
    EXPECT_NE(::access(x.c_str(), F_OK), 0) << "an old directory fd created " << x;
  }
  PrintOutcomes();
}

// ringfs-mount answers the READDIR at a listing's end itself (frontend/dir_ends.h) from what
// the old server said. Across a SIGKILL and restart that stays an end (the handle's snapshot is
// the old one), and a rewind lists what the new server has, a name made meanwhile included --
// or fails as an old descriptor may (ESTALE/EIO), never lists a stale directory.
TEST_P(RestartTest, AListingOpenAcrossARestartStillEndsAndARewindListsTheNewServer) {
  // The rewind's listing at the new server: without kept listings (frontend/kept_listings.h),
  // whose copy a rewind reads until the mount has reconnected and the kernel dropped it.
  RemountWith("no_kept_listings");
  if (HasFatalFailure()) return;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  std::set<std::string> want = {".", "..", "a", "b", "c"};
  for (const char* name : {"a", "b", "c"})
    ASSERT_EQ(WriteFile(Mnt(std::string("d/") + name), "x"), 0);
  // The listing from the current position; 0 or the errno of the getdents that failed.
  auto list = [](int fd, std::set<std::string>* names) {
    alignas(8) char buf[4096];
    for (;;) {
      long n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
      if (n < 0) return errno;
      if (n == 0) return 0;
      for (long pos = 0; pos < n;) {
        auto* d = reinterpret_cast<struct dirent64*>(buf + pos);
        names->insert(d->d_name);
        pos += d->d_reclen;
      }
    }
  };
  int fd = ::open(Mnt("d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  OpenFds hold;
  hold.Add(fd);
  std::set<std::string> before;
  ASSERT_EQ(list(fd, &before), 0);
  ASSERT_EQ(before, want);

  KillAndRestart();
  if (HasFatalFailure()) return;
  ASSERT_EQ(WriteFile(Exp("d/new"), "y"), 0);
  want.insert("new");

  std::set<std::string> at_end;
  EXPECT_EQ(list(fd, &at_end), 0);
  EXPECT_TRUE(at_end.empty()) << "the end of a listing moved";
  std::set<std::string> again;
  const int err = RetryWhileReconnecting([&] {
    again.clear();
    if (::lseek(fd, 0, SEEK_SET) != 0) return errno;
    return list(fd, &again);
  });
  Note("rewind and list", err);
  if (err != 0) {
    EXPECT_TRUE(IsStaleOrIo(err)) << "rewind: " << ErrnoName(err);
  } else {
    EXPECT_EQ(again, want) << "a rewind after the restart listed the old directory";
  }
  // A new descriptor always lists the new server's directory.
  std::set<std::string> fresh;
  int fd2 = ::open(Mnt("d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd2, 0) << ErrnoName(errno);
  EXPECT_EQ(list(fd2, &fresh), 0);
  ::close(fd2);
  EXPECT_EQ(fresh, want);
  PrintOutcomes();
}

// A directory opened through the mount has no handle at the server (handle-less listings,
// frontend/local_dir_handles.h): its listing continues from the export's own cookie, so a
// listing half read when the server is killed goes on at the new instance with every name that
// stayed listed exactly once -- also when names already listed were removed meanwhile (a
// listing by position would skip as many names as were removed before it).
TEST_P(RestartTest, AListingHalfReadAcrossARestartListsEveryNameThatStayedExactlyOnce) {
  ASSERT_EQ(::mkdir(Mnt("half").c_str(), 0755), 0) << ErrnoName(errno);
  std::set<std::string> stayed = {".", ".."};
  for (int i = 0; i < 400; ++i) {
    const std::string name = "entry-" + std::to_string(i) + std::string(30, 'x');
    ASSERT_EQ(WriteFile(Exp("half/" + name), ""), 0);
    stayed.insert(name);
  }
  int fd = ::open(Mnt("half").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  OpenFds hold;
  hold.Add(fd);
  std::map<std::string, int> seen;
  alignas(8) char buf[2048];  // a fraction of the listing per call
  auto take = [&](long n) {
    for (long pos = 0; pos < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + pos);
      ++seen[d->d_name];
      pos += d->d_reclen;
    }
  };
  const long first = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
  ASSERT_GT(first, 0) << ErrnoName(errno);
  take(first);
  ASSERT_LT(seen.size(), stayed.size() / 2) << "the first call read only part of the listing";

  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_TRUE(env_->KillServer());
  for (const auto& [name, count] : seen) {
    if (name == "." || name == "..") continue;
    ASSERT_EQ(::unlink(Exp("half/" + name).c_str()), 0) << name;
  }
  ASSERT_TRUE(env_->RestartServer());

  int err = 0;
  for (;;) {
    long n = -1;
    err = RetryWhileReconnecting([&] {
      n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
      return n < 0 ? errno : 0;
    });
    if (err != 0 || n == 0) break;
    take(n);
  }
  ASSERT_EQ(err, 0) << "the listing failed after the restart: " << ErrnoName(err);
  std::set<std::string> listed;
  for (const auto& [name, count] : seen) {
    EXPECT_EQ(count, 1) << name << " listed " << count << " times";
    listed.insert(name);
  }
  for (const std::string& name : stayed) EXPECT_TRUE(listed.contains(name)) << name << " skipped";
}

// A directory this mount made is known complete (frontend/complete_dirs.h): LOOKUPs of absent
// names are answered by the mount. A name made while the server was down (here on the export
// itself, as a process on the storage node or another client of the new instance would) must be
// found after the restart: pushes are lost with the old instance, so the knowledge must go.
TEST_P(RestartTest, ANameMadeWhileTheServerWasDownIsFoundInADirectoryThisMountMade) {
  ASSERT_EQ(::mkdir(Mnt("made").c_str(), 0755), 0) << ErrnoName(errno);
  auto answered_locally = [&] {
    std::this_thread::sleep_for(milliseconds(450));  // the stats file is rewritten every 200 ms
    return StatNumber(env_->ReadStats(), "answered_locally").value_or(0);
  };
  const uint64_t before = answered_locally();
  struct stat st;
  ASSERT_NE(::stat(Mnt("made/probe").c_str(), &st), 0);
  ASSERT_EQ(errno, ENOENT);
  ASSERT_GT(answered_locally(), before) << "the absent name was not answered by the mount";

  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_TRUE(env_->KillServer());
  int fd = ::open(env_->Exp("made/while-down").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ::close(fd);
  ASSERT_TRUE(env_->RestartServer());
  const int err = RetryWhileReconnecting([&] {
    return ::stat(Mnt("made/while-down").c_str(), &st) == 0 ? 0 : errno;
  });
  EXPECT_EQ(err, 0) << "a name made while the server was down stays hidden: " << ErrnoName(err);
}

// Entries the kernel forgot are kept by the mount (frontend/kept_entries.h). Names changed on
// the export while the server was down must be seen after it comes back: the mount forgets what
// it kept when the connection goes, and gives the lookups back.
TEST_P(RestartTest, ANameChangedWhileTheServerWasDownIsSeenThoughTheMountKeptIt) {
  ASSERT_EQ(::mkdir(Mnt("kept").c_str(), 0755), 0) << ErrnoName(errno);
  for (const char* name : {"kept/a", "kept/b", "kept/c"}) {
    int fd = ::open(Mnt(name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ASSERT_EQ(::write(fd, name, 6), 6);
    ::close(fd);
  }
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "2\n";  // the kernel forgets them; the mount keeps
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_TRUE(env_->KillServer());
  ASSERT_EQ(::rename(env_->Exp("kept/a").c_str(), env_->Exp("kept/moved").c_str()), 0);
  ASSERT_EQ(::unlink(env_->Exp("kept/b").c_str()), 0);
  ASSERT_TRUE(env_->RestartServer());
  struct stat st;
  int err = RetryWhileReconnecting([&] {
    return ::stat(Mnt("kept/moved").c_str(), &st) == 0 ? 0 : errno;
  });
  EXPECT_EQ(err, 0) << ErrnoName(err);
  EXPECT_NE(::stat(Mnt("kept/a").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_NE(::stat(Mnt("kept/b").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  ASSERT_EQ(::stat(Mnt("kept/c").c_str(), &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_size, 6);
  EXPECT_EQ(::unlink(Mnt("kept/c").c_str()), 0) << ErrnoName(errno);
  EXPECT_NE(::stat(env_->Exp("kept/c").c_str(), &st), 0);
}

// What the kernel cached before a server restart (attributes and data; 60 s lifetimes) is not
// trusted after it: the new instance cannot push what changed meanwhile (here on the export
// itself, as a process on the storage node or another client of the new instance would), so the
// mount resets the kernel's caches when it reconnects (KernelNotifier::ResetKernelCaches).
// Without that, the old mode, size and name below stay visible for their whole lifetime.
TEST_P(RestartTest, WhatTheKernelCachedBeforeARestartIsAskedForAgain) {
  ASSERT_EQ(::mkdir(Mnt("cached").c_str(), 0755), 0) << ErrnoName(errno);
  for (const char* name : {"cached/x", "cached/y"}) {
    int fd = ::open(Mnt(name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ASSERT_EQ(::write(fd, "one", 3), 3);
    ::close(fd);
  }
  struct stat st;
  ASSERT_EQ(::stat(Mnt("cached/x").c_str(), &st), 0) << ErrnoName(errno);
  ASSERT_EQ(st.st_mode & 07777, 0644u);
  ASSERT_EQ(::stat(Mnt("cached/y").c_str(), &st), 0) << ErrnoName(errno);
  OpenFds open_fds;
  const int open_fd = ::open(Mnt("cached/x").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(open_fd, 0) << ErrnoName(errno);
  open_fds.Add(open_fd);

  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_TRUE(env_->KillServer());
  ASSERT_EQ(::chmod(env_->Exp("cached/x").c_str(), 0600), 0);
  {
    std::ofstream more(env_->Exp("cached/x"), std::ios::app);
    more << "twotwo";  // 9 bytes now
  }
  ASSERT_EQ(::unlink(env_->Exp("cached/y").c_str()), 0);
  ASSERT_TRUE(env_->RestartServer());
  struct statfs fs;  // always asked of the server: waits for the reconnect
  ASSERT_EQ(RetryWhileReconnecting([&] { return ::statfs(Mnt("").c_str(), &fs) == 0 ? 0 : errno; }),
            0);

  // The reset runs on the notifier's thread just after the reconnect: allow it a moment.
  const auto deadline = Clock::now() + seconds(5);
  bool fresh = false;
  while (!fresh && Clock::now() < deadline) {
    struct stat x, y, by_fd;
    fresh = ::stat(Mnt("cached/x").c_str(), &x) == 0 && (x.st_mode & 07777) == 0600 &&
            x.st_size == 9 && ::stat(Mnt("cached/y").c_str(), &y) != 0 && errno == ENOENT &&
            ::fstat(open_fd, &by_fd) == 0 && by_fd.st_size == 9;
    if (!fresh) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ(::stat(Mnt("cached/x").c_str(), &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "the mode cached before the restart is still seen";
  EXPECT_EQ(st.st_size, 9) << "the size cached before the restart is still seen";
  // Even without reset_names: the kernel's GETATTR of the removed file gets ESTALE (the new
  // instance could not reclaim it), and the kernel then looks the name up again.
  EXPECT_NE(::stat(Mnt("cached/y").c_str(), &st), 0) << "a name removed meanwhile is still seen";
  ASSERT_EQ(::fstat(open_fd, &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_size, 9) << "an open file keeps the size cached before the restart";
  char buf[16] = {};
  EXPECT_EQ(::pread(open_fd, buf, sizeof(buf), 0), 9) << ErrnoName(errno);
  EXPECT_EQ(std::string(buf), "onetwotwo");
}

RINGFS_INSTANTIATE_TRANSPORTS(RestartTest);

// With reset_names, a reset also marks every cached name stale (FUSE_NOTIFY_INC_EPOCH).
class ResetNamesTest : public RestartTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = RestartTest::Options();
    o.extra = {"reset_names"};
    return o;
  }
};

// A name the kernel cached as absent (negative entries live as long as positive ones, 60 s)
// and created while the server was down is found as soon as the mount reconnects. Without
// reset_names it stays hidden for the rest of its lifetime.
TEST_P(ResetNamesTest, ANameCachedAsAbsentIsFoundAfterARestart) {
  ASSERT_EQ(::mkdir(env_->Exp("shared").c_str(), 0755), 0) << ErrnoName(errno);
  struct stat st;
  ASSERT_EQ(::stat(Mnt("shared").c_str(), &st), 0) << ErrnoName(errno);
  ASSERT_NE(::stat(Mnt("shared/later").c_str(), &st), 0);
  ASSERT_EQ(errno, ENOENT);
  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_TRUE(env_->KillServer());
  { std::ofstream(env_->Exp("shared/later")) << "made while the server was down"; }
  ASSERT_TRUE(env_->RestartServer());
  struct statfs fs;
  ASSERT_EQ(RetryWhileReconnecting([&] { return ::statfs(Mnt("").c_str(), &fs) == 0 ? 0 : errno; }),
            0);
  const auto deadline = Clock::now() + seconds(5);
  int err = ENOENT;
  while (err != 0 && Clock::now() < deadline) {
    err = ::stat(Mnt("shared/later").c_str(), &st) == 0 ? 0 : errno;
    if (err != 0) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(err, 0) << "a name made while the server was down stays hidden: " << ErrnoName(err);
}

// The kernel detaches a mount whose dentry fails revalidation, so even with reset_names a reset
// keeps cached names while something is mounted inside the mount (they live out their lifetime)
// and drops only cached attributes and data: an operator's bind mount survives a restart.
TEST_P(ResetNamesTest, AMountInsideTheMountSurvivesARestart) {
  ASSERT_EQ(::mkdir(Mnt("inner").c_str(), 0755), 0) << ErrnoName(errno);
  ASSERT_EQ(::mkdir(Mnt("inner/on").c_str(), 0755), 0) << ErrnoName(errno);
  int fd = ::open(Mnt("inner/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ::close(fd);
  const std::string source = env_->base() + "/bind-source";
  ::mkdir(source.c_str(), 0755);
  { std::ofstream(source + "/marker") << "here"; }
  ASSERT_EQ(::mount(source.c_str(), Mnt("inner/on").c_str(), nullptr, MS_BIND, nullptr), 0)
      << ErrnoName(errno);
  struct stat st;
  ASSERT_EQ(::stat(Mnt("inner/f").c_str(), &st), 0) << ErrnoName(errno);

  ASSERT_TRUE(env_->WaitMountServing());
  ASSERT_TRUE(env_->KillServer());
  ASSERT_EQ(::chmod(env_->Exp("inner/f").c_str(), 0600), 0);
  ASSERT_TRUE(env_->RestartServer());
  struct statfs fs;
  ASSERT_EQ(RetryWhileReconnecting([&] { return ::statfs(Mnt("").c_str(), &fs) == 0 ? 0 : errno; }),
            0);
  const auto deadline = Clock::now() + seconds(5);
  while (Clock::now() < deadline &&
         !(::stat(Mnt("inner/f").c_str(), &st) == 0 && (st.st_mode & 07777) == 0600)) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "attributes cached before the restart are still seen";
  EXPECT_EQ(::access(Mnt("inner/on/marker").c_str(), F_OK), 0)
      << "the bind mount inside the mount is gone after the restart";
  ::umount2(Mnt("inner/on").c_str(), MNT_DETACH);
}

RINGFS_INSTANTIATE_TRANSPORTS(ResetNamesTest);

}  // namespace
}  // namespace ringfs::testing
