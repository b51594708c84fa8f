// Every FUSE operation ringfs supports, exercised through a real mount with plain syscalls,
// for both transports. Results are checked through the mount and, where it says something,
// directly in the export directory; errno is checked exactly where POSIX fixes it.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

constexpr long kFuseSuperMagic = 0x65735546;

class OpsTest : public MountedTest {
 protected:
  // The mount's count of local answers as of now.
  uint64_t AnsweredLocally() const { return StatNow("answered_locally"); }
  // A stats-file value as of now: read from the second rewrite of the file (about every
  // 200 ms) after this moment, whose counters were certainly taken after it.
  uint64_t StatNow(const std::string& key) const {
    timespec since{};
    clock_gettime(CLOCK_REALTIME, &since);
    for (int rewrites = 0, tries = 0; rewrites < 2 && tries < 200; ++tries) {
      usleep(20'000);
      struct stat st {};
      if (::stat(env_->stats_path().c_str(), &st) != 0) continue;
      if (st.st_mtim.tv_sec > since.tv_sec ||
          (st.st_mtim.tv_sec == since.tv_sec && st.st_mtim.tv_nsec > since.tv_nsec)) {
        since = st.st_mtim;
        ++rewrites;
      }
    }
    return StatNumber(env_->ReadStats(), key).value_or(0);
  }
};

struct stat Stat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path << ": " << ErrnoName(errno);
  return st;
}

struct stat Lstat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << ErrnoName(errno);
  return st;
}

TEST_P(OpsTest, CreateWriteReadClose) {
  int fd = ::open(Mnt("hello").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_EQ(::write(fd, "hello, ring", 11), 11) << ErrnoName(errno);
  ASSERT_EQ(::close(fd), 0) << ErrnoName(errno);

  fd = ::open(Mnt("hello").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  char buf[64] = {};
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), 11);
  EXPECT_STREQ(buf, "hello, ring");
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), 0) << "EOF expected";
  EXPECT_EQ(::close(fd), 0);

  EXPECT_EQ(ReadFile(Exp("hello")), "hello, ring");
  struct stat st = Stat(Mnt("hello"));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "0666 & ~umask 022";
  EXPECT_EQ(st.st_size, 11);

  // O_TRUNC empties it; a missing file without O_CREAT is ENOENT.
  fd = ::open(Mnt("hello").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ::close(fd);
  EXPECT_EQ(Stat(Mnt("hello")).st_size, 0);
  EXPECT_EQ(RINGFS_ERRNO(::open(Mnt("missing").c_str(), O_RDONLY)), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::open(Mnt("hello").c_str(), O_RDONLY | O_DIRECTORY)), ENOTDIR);
}

TEST_P(OpsTest, LargeSingleWriteAndRead) {
  const size_t kSize = 4 << 20;
  std::vector<char> data = RandomBytes(kSize, 7);
  int fd = ::open(Mnt("big").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_EQ(PwriteAll(fd, data.data(), kSize, 0), 0);
  std::vector<char> back(kSize);
  ASSERT_EQ(PreadAll(fd, back.data(), kSize, 0), static_cast<ssize_t>(kSize));
  EXPECT_TRUE(back == data);
  ::close(fd);
  std::string exported = ReadFile(Exp("big"));
  ASSERT_EQ(exported.size(), kSize);
  EXPECT_EQ(memcmp(exported.data(), data.data(), kSize), 0);
}

TEST_P(OpsTest, StatAndFstatMatchExport) {
  ASSERT_EQ(WriteFile(Mnt("f"), std::string(12345, 'x')), 0);
  struct stat m = Stat(Mnt("f"));
  struct stat e = Stat(Exp("f"));
  EXPECT_EQ(m.st_size, 12345);
  EXPECT_EQ(m.st_size, e.st_size);
  EXPECT_EQ(m.st_mode, e.st_mode);
  EXPECT_EQ(m.st_uid, e.st_uid);
  EXPECT_EQ(m.st_gid, e.st_gid);
  EXPECT_EQ(m.st_nlink, e.st_nlink);
  EXPECT_EQ(m.st_mtim.tv_sec, e.st_mtim.tv_sec);
  EXPECT_EQ(m.st_mtim.tv_nsec, e.st_mtim.tv_nsec);

  int fd = ::open(Mnt("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  struct stat f {};
  ASSERT_EQ(::fstat(fd, &f), 0) << ErrnoName(errno);
  EXPECT_EQ(f.st_ino, m.st_ino);
  EXPECT_EQ(f.st_size, 12345);
  ::close(fd);

  struct stat root = Stat(env_->mount_dir());
  EXPECT_TRUE(S_ISDIR(root.st_mode));
  EXPECT_EQ(RINGFS_ERRNO(::stat(Mnt("nope").c_str(), &f)), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::stat(Mnt("f/child").c_str(), &f)), ENOTDIR);
}

TEST_P(OpsTest, Chmod) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  ASSERT_EQ(::chmod(Mnt("f").c_str(), 0600), 0) << ErrnoName(errno);
  EXPECT_EQ(Stat(Mnt("f")).st_mode & 07777, 0600u);
  EXPECT_EQ(Stat(Exp("f")).st_mode & 07777, 0600u);
  int fd = ::open(Mnt("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchmod(fd, 04751), 0) << ErrnoName(errno);
  ::close(fd);
  EXPECT_EQ(Stat(Mnt("f")).st_mode & 07777, 04751u);
  EXPECT_EQ(Stat(Exp("f")).st_mode & 07777, 04751u);
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(Mnt("d").c_str(), 01777), 0) << ErrnoName(errno);
  EXPECT_EQ(Stat(Exp("d")).st_mode & 07777, 01777u);
}

TEST_P(OpsTest, ChownAsRoot) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  ASSERT_EQ(::chown(Mnt("f").c_str(), 65534, 65534), 0) << ErrnoName(errno);
  struct stat m = Stat(Mnt("f"));
  EXPECT_EQ(m.st_uid, 65534u);
  EXPECT_EQ(m.st_gid, 65534u);
  struct stat e = Stat(Exp("f"));
  EXPECT_EQ(e.st_uid, 65534u);
  EXPECT_EQ(e.st_gid, 65534u);
  // -1 leaves a field alone.
  ASSERT_EQ(::chown(Mnt("f").c_str(), -1, 0), 0) << ErrnoName(errno);
  e = Stat(Exp("f"));
  EXPECT_EQ(e.st_uid, 65534u);
  EXPECT_EQ(e.st_gid, 0u);
  int fd = ::open(Mnt("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchown(fd, 0, 0), 0) << ErrnoName(errno);
  ::close(fd);
  EXPECT_EQ(Stat(Exp("f")).st_uid, 0u);
}

TEST_P(OpsTest, TruncateAndFtruncate) {
  ASSERT_EQ(WriteFile(Mnt("f"), "0123456789abcdef"), 0);
  ASSERT_EQ(::truncate(Mnt("f").c_str(), 10), 0) << ErrnoName(errno);
  EXPECT_EQ(ReadFile(Mnt("f")), "0123456789");
  EXPECT_EQ(ReadFile(Exp("f")), "0123456789");
  ASSERT_EQ(::truncate(Mnt("f").c_str(), 20), 0) << ErrnoName(errno);
  EXPECT_EQ(ReadFile(Mnt("f")), std::string("0123456789") + std::string(10, '\0'));
  EXPECT_EQ(Stat(Exp("f")).st_size, 20);
  int fd = ::open(Mnt("f").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 3), 0) << ErrnoName(errno);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 3);
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  ::close(fd);
  EXPECT_EQ(Stat(Exp("f")).st_size, 0);
  EXPECT_EQ(RINGFS_ERRNO(::truncate(Mnt("missing").c_str(), 0)), ENOENT);
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  EXPECT_EQ(RINGFS_ERRNO(::truncate(Mnt("d").c_str(), 0)), EISDIR);
}

TEST_P(OpsTest, Utimensat) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  const timespec times[2] = {{1000000000, 111111111}, {1200000000, 222222222}};
  ASSERT_EQ(::utimensat(AT_FDCWD, Mnt("f").c_str(), times, 0), 0) << ErrnoName(errno);
  struct stat e = Stat(Exp("f"));
  EXPECT_EQ(e.st_atim.tv_sec, 1000000000);
  EXPECT_EQ(e.st_atim.tv_nsec, 111111111);
  EXPECT_EQ(e.st_mtim.tv_sec, 1200000000);
  EXPECT_EQ(e.st_mtim.tv_nsec, 222222222);
  struct stat m = Stat(Mnt("f"));
  EXPECT_EQ(m.st_mtim.tv_sec, 1200000000);
  EXPECT_EQ(m.st_mtim.tv_nsec, 222222222);

  // UTIME_NOW for mtime, UTIME_OMIT keeps atime.
  timespec before{};
  ::clock_gettime(CLOCK_REALTIME, &before);
  const timespec now_omit[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  ASSERT_EQ(::utimensat(AT_FDCWD, Mnt("f").c_str(), now_omit, 0), 0) << ErrnoName(errno);
  timespec after{};
  ::clock_gettime(CLOCK_REALTIME, &after);
  e = Stat(Exp("f"));
  EXPECT_EQ(e.st_atim.tv_sec, 1000000000) << "UTIME_OMIT must keep atime";
  EXPECT_GE(e.st_mtim.tv_sec, before.tv_sec - 1);
  EXPECT_LE(e.st_mtim.tv_sec, after.tv_sec + 1);

  // futimens(NULL) = both now.
  int fd = ::open(Mnt("f").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::futimens(fd, nullptr), 0) << ErrnoName(errno);
  ::close(fd);
  e = Stat(Exp("f"));
  EXPECT_GE(e.st_atim.tv_sec, before.tv_sec - 1);
  EXPECT_GE(e.st_mtim.tv_sec, before.tv_sec - 1);
}

TEST_P(OpsTest, SymlinkAndReadlink) {
  const std::string target = "some/where/that/does/not/exist";
  ASSERT_EQ(::symlink(target.c_str(), Mnt("link").c_str()), 0) << ErrnoName(errno);
  char buf[256] = {};
  ASSERT_EQ(::readlink(Mnt("link").c_str(), buf, sizeof(buf)), static_cast<ssize_t>(target.size()))
      << ErrnoName(errno);
  EXPECT_EQ(std::string(buf), target);
  struct stat st = Lstat(Mnt("link"));
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_size, static_cast<off_t>(target.size()));
  memset(buf, 0, sizeof(buf));
  ASSERT_GT(::readlink(Exp("link").c_str(), buf, sizeof(buf)), 0);
  EXPECT_EQ(std::string(buf), target);
  // A dangling link: stat follows it and fails, open too.
  EXPECT_EQ(RINGFS_ERRNO(::stat(Mnt("link").c_str(), &st)), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::symlink("x", Mnt("link").c_str())), EEXIST);
  ASSERT_EQ(WriteFile(Mnt("file"), "x"), 0);
  EXPECT_EQ(RINGFS_ERRNO(::readlink(Mnt("file").c_str(), buf, sizeof(buf))), EINVAL);

  // A relative link inside the export works through the mount.
  ASSERT_EQ(WriteFile(Mnt("real"), "through the link"), 0);
  ASSERT_EQ(::symlink("real", Mnt("rel").c_str()), 0);
  EXPECT_EQ(ReadFile(Mnt("rel")), "through the link");
}

TEST_P(OpsTest, MknodRegularAndFifo) {
  ASSERT_EQ(::mknod(Mnt("reg").c_str(), S_IFREG | 0640, 0), 0) << ErrnoName(errno);
  struct stat st = Stat(Mnt("reg"));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_TRUE(S_ISREG(Stat(Exp("reg")).st_mode));

  ASSERT_EQ(::mkfifo(Mnt("fifo").c_str(), 0600), 0) << ErrnoName(errno);
  st = Stat(Mnt("fifo"));
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_TRUE(S_ISFIFO(Stat(Exp("fifo")).st_mode));
  // The pipe itself lives in the client kernel.
  int fd = ::open(Mnt("fifo").c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_EQ(::write(fd, "pipe", 4), 4);
  char buf[8] = {};
  EXPECT_EQ(::read(fd, buf, sizeof(buf)), 4);
  EXPECT_STREQ(buf, "pipe");
  ::close(fd);

  EXPECT_EQ(RINGFS_ERRNO(::mknod(Mnt("reg").c_str(), S_IFREG | 0600, 0)), EEXIST);
}

TEST_P(OpsTest, MkdirAndRmdir) {
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0750), 0) << ErrnoName(errno);
  struct stat st = Stat(Mnt("d"));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_TRUE(S_ISDIR(Stat(Exp("d")).st_mode));
  EXPECT_EQ(RINGFS_ERRNO(::mkdir(Mnt("d").c_str(), 0755)), EEXIST);
  ASSERT_EQ(::mkdir(Mnt("d/sub").c_str(), 0755), 0) << ErrnoName(errno);
  ASSERT_EQ(WriteFile(Mnt("d/sub/f"), "x"), 0);
  EXPECT_EQ(RINGFS_ERRNO(::rmdir(Mnt("d").c_str())), ENOTEMPTY);
  EXPECT_EQ(RINGFS_ERRNO(::rmdir(Mnt("d/sub/f").c_str())), ENOTDIR);
  EXPECT_EQ(RINGFS_ERRNO(::rmdir(Mnt("missing").c_str())), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::mkdir(Mnt("missing/x").c_str(), 0755)), ENOENT);
  ASSERT_EQ(::unlink(Mnt("d/sub/f").c_str()), 0);
  ASSERT_EQ(::rmdir(Mnt("d/sub").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::rmdir(Mnt("d").c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(RINGFS_ERRNO(::stat(Mnt("d").c_str(), &st)), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::lstat(Exp("d").c_str(), &st)), ENOENT);
}

// A directory's attributes right after each change come from the post-operation snapshot the
// server sends with the reply (common/dir_attrs.h) instead of a GETATTR: they must match the
// export exactly, and the shortcut must really be taken.
TEST_P(OpsTest, DirectoryAttributesExactAfterEachChange) {
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  auto expect_same = [&](const std::string& step) {
    struct stat seen = Stat(Mnt("d"));
    struct stat truth = Stat(Exp("d"));
    EXPECT_EQ(seen.st_nlink, truth.st_nlink) << step;
    EXPECT_EQ(seen.st_size, truth.st_size) << step;
    EXPECT_EQ(seen.st_mtim.tv_sec, truth.st_mtim.tv_sec) << step;
    EXPECT_EQ(seen.st_mtim.tv_nsec, truth.st_mtim.tv_nsec) << step;
    EXPECT_EQ(seen.st_ctim.tv_nsec, truth.st_ctim.tv_nsec) << step;
    EXPECT_EQ(seen.st_mode, truth.st_mode) << step;
  };
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    ASSERT_EQ(WriteFile(Mnt("d/f" + n), "x"), 0);
    expect_same("create f" + n);
    ASSERT_EQ(::mkdir(Mnt("d/s" + n).c_str(), 0755), 0) << ErrnoName(errno);
    expect_same("mkdir s" + n);
    ASSERT_EQ(::rename(Mnt("d/f" + n).c_str(), Mnt("d/s" + n + "/g").c_str()), 0);
    expect_same("rename f" + n);
    ASSERT_EQ(::unlink(Mnt("d/s" + n + "/g").c_str()), 0) << ErrnoName(errno);
    ASSERT_EQ(::rmdir(Mnt("d/s" + n).c_str()), 0) << ErrnoName(errno);
    expect_same("rmdir s" + n);
  }
  // A mode change carries no snapshot; the next stat must not see an old one.
  ASSERT_EQ(WriteFile(Mnt("d/last"), "x"), 0);
  ASSERT_EQ(::chmod(Mnt("d").c_str(), 0700), 0);
  EXPECT_EQ(Stat(Mnt("d")).st_mode & 07777, 0700u);
  // The stats file is rewritten about every 200 ms. Each step above answers one GETATTR
  // locally at most; 40 of the 80 leaves room for a snapshot outliving its 1 s on a slow host.
  uint64_t local = 0;
  for (int tries = 0; tries < 30 && local < 40; ++tries) {
    usleep(100'000);
    local = StatNumber(env_->ReadStats(), "answered_locally").value_or(0);
  }
  EXPECT_GE(local, 40u);
}

TEST_P(OpsTest, Unlink) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  ASSERT_EQ(::unlink(Mnt("f").c_str()), 0) << ErrnoName(errno);
  struct stat st {};
  EXPECT_EQ(RINGFS_ERRNO(::stat(Mnt("f").c_str(), &st)), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::lstat(Exp("f").c_str(), &st)), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::unlink(Mnt("f").c_str())), ENOENT);
  EXPECT_EQ(RINGFS_ERRNO(::unlink(Mnt("never").c_str())), ENOENT);
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  EXPECT_EQ(RINGFS_ERRNO(::unlink(Mnt("d").c_str())), EISDIR);

  // An open file stays readable after unlink.
  ASSERT_EQ(WriteFile(Mnt("open"), "still here"), 0);
  int fd = ::open(Mnt("open").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::unlink(Mnt("open").c_str()), 0);
  char buf[32] = {};
  EXPECT_EQ(::pread(fd, buf, sizeof(buf), 0), 10) << ErrnoName(errno);
  EXPECT_STREQ(buf, "still here");
  ::close(fd);
}

TEST_P(OpsTest, Rename) {
  ASSERT_EQ(WriteFile(Mnt("a"), "content of a"), 0);
  ASSERT_EQ(::rename(Mnt("a").c_str(), Mnt("b").c_str()), 0) << ErrnoName(errno);
  struct stat st {};
  EXPECT_EQ(RINGFS_ERRNO(::stat(Mnt("a").c_str(), &st)), ENOENT);
  EXPECT_EQ(ReadFile(Mnt("b")), "content of a");
  EXPECT_EQ(ReadFile(Exp("b")), "content of a");
  // Over an existing file: replaced.
  ASSERT_EQ(WriteFile(Mnt("c"), "old c"), 0);
  ASSERT_EQ(::rename(Mnt("b").c_str(), Mnt("c").c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(ReadFile(Mnt("c")), "content of a");
  // Into another directory, and a directory itself.
  ASSERT_EQ(::mkdir(Mnt("d1").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(Mnt("d2").c_str(), 0755), 0);
  ASSERT_EQ(::rename(Mnt("c").c_str(), Mnt("d1/c").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::rename(Mnt("d1").c_str(), Mnt("d2/d1").c_str()), 0) << ErrnoName(errno);
  EXPECT_EQ(ReadFile(Mnt("d2/d1/c")), "content of a");
  EXPECT_EQ(ReadFile(Exp("d2/d1/c")), "content of a");
  EXPECT_EQ(RINGFS_ERRNO(::rename(Mnt("missing").c_str(), Mnt("x").c_str())), ENOENT);
  // A directory over a non-empty directory.
  ASSERT_EQ(::mkdir(Mnt("d3").c_str(), 0755), 0);
  EXPECT_EQ(RINGFS_ERRNO(::rename(Mnt("d3").c_str(), Mnt("d2").c_str())), ENOTEMPTY);
  // A file over a directory and the reverse.
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  EXPECT_EQ(RINGFS_ERRNO(::rename(Mnt("f").c_str(), Mnt("d3").c_str())), EISDIR);
  EXPECT_EQ(RINGFS_ERRNO(::rename(Mnt("d3").c_str(), Mnt("f").c_str())), ENOTDIR);
}

TEST_P(OpsTest, RenameNoReplace) {
  ASSERT_EQ(WriteFile(Mnt("a"), "a"), 0);
  ASSERT_EQ(WriteFile(Mnt("b"), "b"), 0);
  EXPECT_EQ(RINGFS_ERRNO(::renameat2(AT_FDCWD, Mnt("a").c_str(), AT_FDCWD, Mnt("b").c_str(),
                                     RENAME_NOREPLACE)),
            EEXIST);
  EXPECT_EQ(ReadFile(Exp("a")), "a");
  EXPECT_EQ(ReadFile(Exp("b")), "b");
  ASSERT_EQ(::renameat2(AT_FDCWD, Mnt("a").c_str(), AT_FDCWD, Mnt("c").c_str(), RENAME_NOREPLACE),
            0)
      << ErrnoName(errno);
  EXPECT_EQ(ReadFile(Mnt("c")), "a");
  struct stat st {};
  EXPECT_EQ(RINGFS_ERRNO(::lstat(Exp("a").c_str(), &st)), ENOENT);
}

TEST_P(OpsTest, RenameExchange) {
  ASSERT_EQ(WriteFile(Mnt("a"), "first"), 0);
  ASSERT_EQ(::mkdir(Mnt("b").c_str(), 0755), 0);
  ASSERT_EQ(WriteFile(Mnt("b/inside"), "second"), 0);
  ASSERT_EQ(::renameat2(AT_FDCWD, Mnt("a").c_str(), AT_FDCWD, Mnt("b").c_str(), RENAME_EXCHANGE), 0)
      << ErrnoName(errno);
  EXPECT_TRUE(S_ISDIR(Stat(Mnt("a")).st_mode));
  EXPECT_EQ(ReadFile(Mnt("a/inside")), "second");
  EXPECT_EQ(ReadFile(Mnt("b")), "first");
  EXPECT_EQ(ReadFile(Exp("a/inside")), "second");
  EXPECT_EQ(ReadFile(Exp("b")), "first");
  EXPECT_EQ(RINGFS_ERRNO(::renameat2(AT_FDCWD, Mnt("b").c_str(), AT_FDCWD, Mnt("missing").c_str(),
                                     RENAME_EXCHANGE)),
            ENOENT);
}

TEST_P(OpsTest, HardLink) {
  ASSERT_EQ(WriteFile(Mnt("a"), "shared"), 0);
  ASSERT_EQ(::link(Mnt("a").c_str(), Mnt("b").c_str()), 0) << ErrnoName(errno);
  struct stat a = Stat(Mnt("a"));
  struct stat b = Stat(Mnt("b"));
  EXPECT_EQ(a.st_nlink, 2u);
  EXPECT_EQ(b.st_nlink, 2u);
  EXPECT_EQ(a.st_ino, b.st_ino);
  struct stat ea = Stat(Exp("a"));
  struct stat eb = Stat(Exp("b"));
  EXPECT_EQ(ea.st_ino, eb.st_ino);
  EXPECT_EQ(ea.st_nlink, 2u);
  // Writing through one name shows through the other.
  int fd = ::open(Mnt("b").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "!", 1), 1);
  ::close(fd);
  EXPECT_EQ(ReadFile(Mnt("a")), "shared!");
  EXPECT_EQ(RINGFS_ERRNO(::link(Mnt("a").c_str(), Mnt("b").c_str())), EEXIST);
  ASSERT_EQ(::unlink(Mnt("a").c_str()), 0);
  EXPECT_EQ(Stat(Mnt("b")).st_nlink, 1u);
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  EXPECT_EQ(RINGFS_ERRNO(::link(Mnt("d").c_str(), Mnt("d2").c_str())), EPERM);
}

std::map<std::string, unsigned char> ListDir(const std::string& path) {
  std::map<std::string, unsigned char> out;
  DIR* dir = ::opendir(path.c_str());
  EXPECT_NE(dir, nullptr) << path << ": " << ErrnoName(errno);
  if (!dir) return out;
  errno = 0;
  while (dirent* d = ::readdir(dir)) {
    EXPECT_TRUE(out.emplace(d->d_name, d->d_type).second) << "duplicate entry " << d->d_name;
  }
  EXPECT_EQ(errno, 0) << "readdir: " << ErrnoName(errno);
  ::closedir(dir);
  return out;
}

TEST_P(OpsTest, OpendirReaddir) {
  ASSERT_EQ(WriteFile(Mnt("file"), "x"), 0);
  ASSERT_EQ(::mkdir(Mnt("dir").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("file", Mnt("link").c_str()), 0);
  ASSERT_EQ(::mkfifo(Mnt("fifo").c_str(), 0644), 0);
  std::map<std::string, unsigned char> entries = ListDir(env_->mount_dir());
  std::set<std::string> names;
  for (auto& [name, type] : entries) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "file", "dir", "link", "fifo"}));
  EXPECT_EQ(entries["file"], DT_REG);
  EXPECT_EQ(entries["dir"], DT_DIR);
  EXPECT_EQ(entries["link"], DT_LNK);
  EXPECT_EQ(entries["fifo"], DT_FIFO);
  std::map<std::string, unsigned char> empty = ListDir(Mnt("dir"));
  EXPECT_EQ(empty.size(), 2u) << "an empty directory lists . and ..";

  // rewinddir gives the same listing again; opendir on a file is ENOTDIR.
  DIR* dir = ::opendir(env_->mount_dir().c_str());
  ASSERT_NE(dir, nullptr);
  int first = 0, second = 0;
  while (::readdir(dir)) ++first;
  ::rewinddir(dir);
  while (::readdir(dir)) ++second;
  ::closedir(dir);
  EXPECT_EQ(first, 6);
  EXPECT_EQ(second, 6);
  errno = 0;
  EXPECT_EQ(::opendir(Mnt("file").c_str()), nullptr);
  EXPECT_EQ(errno, ENOTDIR);
}

// A directory listed again is read from the kernel's copy (frontend/kept_listings.h): the
// second listing costs the OPENDIR and RELEASEDIR the mount answers, no READDIR. A change made
// through the mount, or on the export, is in the next listing; so is a listing after the
// server's restart.
TEST_P(OpsTest, ADirectoryListedAgainIsReadFromTheKernelsCopyUntilItChanges) {
  ASSERT_EQ(::mkdir(Mnt("kept").c_str(), 0755), 0);
  for (int i = 0; i < 30; ++i) ASSERT_EQ(WriteFile(Mnt("kept/f" + std::to_string(i)), "x"), 0);
  auto received = [&] { return StatNow("ring_requests") + StatNow("devfuse_requests"); };
  std::map<std::string, unsigned char> listed = ListDir(Mnt("kept"));
  ASSERT_EQ(listed.size(), 32u);
  uint64_t before = received();
  ASSERT_EQ(ListDir(Mnt("kept")), listed);
  // StatNow reads the stats file twice after the listing; a FORGET may come in between.
  EXPECT_LE(received() - before, 3u) << "listed again: OPENDIR and RELEASEDIR only";

  ASSERT_EQ(WriteFile(Mnt("kept/made"), "m"), 0);
  ASSERT_EQ(::unlink(Mnt("kept/f0").c_str()), 0);
  ASSERT_EQ(::rename(Mnt("kept/f1").c_str(), Mnt("kept/moved").c_str()), 0);
  listed = ListDir(Mnt("kept"));
  EXPECT_EQ(listed.size(), 32u);
  EXPECT_TRUE(listed.contains("made") && listed.contains("moved"));
  EXPECT_FALSE(listed.contains("f0") || listed.contains("f1"));
  before = received();
  ASSERT_EQ(ListDir(Mnt("kept")), listed);
  EXPECT_LE(received() - before, 3u) << "kept again once listed after the changes";

  // A new server instance: what was pushed to the old one's mount may be lost.
  ASSERT_TRUE(env_->KillServer());
  ASSERT_EQ(WriteFile(env_->Exp("kept/while-down"), "d"), 0);
  ServerOptions watching;
  watching.extra_args = {"--export-watch"};
  ASSERT_TRUE(env_->RestartServer(watching));
  listed = ListDir(Mnt("kept"));
  EXPECT_TRUE(listed.contains("while-down")) << "listed from before the restart";
  ASSERT_EQ(ListDir(Mnt("kept")), listed);

  // On the export, with the server's export watch: it pushes the name.
  ASSERT_EQ(WriteFile(env_->Exp("kept/local"), "l"), 0);
  bool seen = false;
  for (int i = 0; i < 1000 && !seen; ++i) {
    seen = ListDir(Mnt("kept")).contains("local");
    if (!seen) usleep(2'000);
  }
  EXPECT_TRUE(seen) << "a name made on the export never listed";
}

// rm -rf looks into each directory (one getdents: is it empty?) before it lists it. The page the
// server sent for the look is kept by ringfs-mount (frontend/kept_listings.h) and answers the
// listing: the server is not asked again, and need not even be running. Changes through the
// mount between the look and the listing are in it.
TEST_P(OpsTest, ADirectoryLookedIntoIsListedFromThePageTheMountKept) {
  ASSERT_EQ(::mkdir(Mnt("looked").c_str(), 0755), 0);
  std::map<std::string, unsigned char> expected = {{".", DT_DIR}, {"..", DT_DIR}};
  bool replayed = false;
  for (int round = 0; round < 20 && !replayed; ++round) {
    // A change first: the kernel drops the copy it kept, so the look goes to the server.
    const std::string name = "f" + std::to_string(round);
    ASSERT_EQ(WriteFile(Mnt("looked/" + name), "x"), 0);
    expected[name] = DT_REG;
    usleep(20'000);  // the change settled (a listing sent beside it is never kept)
    ASSERT_GT(ReadFirstPage(Mnt("looked")), 0);
    ASSERT_TRUE(StopAndWait(env_->server_process()));
    const auto start = std::chrono::steady_clock::now();
    std::atomic<bool> done{false};
    std::thread resume([&] {
      while (!done.load() && std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
        usleep(5'000);
      }
      env_->server_process()->Signal(SIGCONT);
    });
    const std::map<std::string, unsigned char> listed = ListDir(Mnt("looked"));
    const auto took = std::chrono::steady_clock::now() - start;
    done = true;
    resume.join();
    EXPECT_EQ(listed, expected) << "round " << round;
    replayed = took < std::chrono::milliseconds(700);
  }
  EXPECT_TRUE(replayed) << "every listing after a look waited for the stopped server";

  // A name made or removed through the mount after the look is in (or gone from) the listing.
  ASSERT_GT(ReadFirstPage(Mnt("looked")), 0);
  ASSERT_EQ(WriteFile(Mnt("looked/made"), "m"), 0);
  expected["made"] = DT_REG;
  EXPECT_EQ(ListDir(Mnt("looked")), expected);
  ASSERT_GT(ReadFirstPage(Mnt("looked")), 0);
  ASSERT_EQ(::unlink(Mnt("looked/f0").c_str()), 0);
  expected.erase("f0");
  EXPECT_EQ(ListDir(Mnt("looked")), expected);
  ASSERT_GT(ReadFirstPage(Mnt("looked")), 0);
  ASSERT_EQ(::rename(Mnt("looked/made").c_str(), Mnt("looked/moved").c_str()), 0);
  expected.erase("made");
  expected["moved"] = DT_REG;
  EXPECT_EQ(ListDir(Mnt("looked")), expected);
}

// opendir and closedir are answered by ringfs-mount (frontend/local_dir_handles.h): the server
// lists a directory by its node at each readdir. Opened directories list exactly what the
// export has, also many at once, and a closed one costs the server nothing.
TEST_P(OpsTest, OpendirAndClosedirAreAnsweredByTheMount) {
  ASSERT_EQ(::mkdir(Mnt("o").c_str(), 0755), 0);
  ASSERT_EQ(WriteFile(Mnt("o/f"), "x"), 0);
  Stat(Mnt("o"));
  const uint64_t start = AnsweredLocally();
  {
    OpenFds open;
    for (int i = 0; i < 20; ++i) {
      int fd = ::open(Mnt("o").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << ErrnoName(errno);
      open.Add(fd);
    }
    EXPECT_EQ(StatNow("local_open_dirs"), 20u);
  }
  EXPECT_EQ(StatNow("local_open_dirs"), 0u);
  EXPECT_EQ(AnsweredLocally() - start, 40u) << "20 opendir and 20 closedir";

  std::vector<DIR*> dirs;
  for (int i = 0; i < 50; ++i) {
    DIR* d = ::opendir(Mnt("o").c_str());
    ASSERT_NE(d, nullptr) << ErrnoName(errno);
    dirs.push_back(d);
  }
  ASSERT_EQ(WriteFile(Exp("o/g"), "y"), 0);
  for (DIR* d : dirs) {
    std::set<std::string> names;
    while (dirent* e = ::readdir(d)) names.insert(e->d_name);
    EXPECT_EQ(names, (std::set<std::string>{".", "..", "f", "g"}));
    ::closedir(d);
  }
}

// The READDIR after a listing's last entry is answered by ringfs-mount (frontend/dir_ends.h):
// every listing below ends that way, and what it answers must be what the server would -- in
// particular a rewind after the directory changed on the server lists the change.
TEST_P(OpsTest, TheEndOfAListingIsAnsweredLocallyAndARewindSeesChanges) {
  // What a listing at the server does: every opendir and rewind lists there, as without
  // kept listings (frontend/kept_listings.h, which keep what the kernel read before).
  RemountWith("no_kept_listings");
  if (HasFatalFailure()) return;
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(Mnt("big").c_str(), 0755), 0);
  std::set<std::string> want = {".", ".."};
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(WriteFile(Mnt("d/f" + std::to_string(i)), "x"), 0);
    want.insert("f" + std::to_string(i));
  }
  // Many pages of 100-byte names: every answer but the last stops for room.
  std::set<std::string> want_big = {".", ".."};
  for (int i = 0; i < 200; ++i) {
    std::string name = std::to_string(i) + std::string(100, 'n');
    ASSERT_EQ(WriteFile(Mnt("big/" + name), ""), 0);
    want_big.insert(name);
  }
  // The whole listing of the open directory `fd` from its current position, each name once.
  auto list = [](int fd) {
    std::vector<std::string> names;
    alignas(8) char buf[4096];
    for (;;) {
      long n = ::syscall(SYS_getdents64, fd, buf, sizeof(buf));
      if (n <= 0) break;
      for (long pos = 0; pos < n;) {
        auto* d = reinterpret_cast<struct dirent64*>(buf + pos);
        names.emplace_back(d->d_name);
        pos += d->d_reclen;
      }
    }
    return names;
  };
  auto as_set = [](const std::vector<std::string>& names) {
    return std::set<std::string>(names.begin(), names.end());
  };
  auto answered_locally = [&] {
    return StatNumber(env_->ReadStats(), "answered_locally").value_or(0);
  };
  usleep(300'000);  // the stats file is rewritten about every 200 ms
  const uint64_t before = AnsweredLocally();

  int fd = ::open(Mnt("d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  std::vector<std::string> first = list(fd);
  EXPECT_EQ(first.size(), want.size());
  EXPECT_EQ(as_set(first), want);
  // At the end, reading again stays at the end.
  EXPECT_TRUE(list(fd).empty());
  // Made on the server: not in the snapshot this handle lists (POSIX leaves it open), but a
  // rewind takes a new one.
  ASSERT_EQ(WriteFile(Exp("d/new"), "y"), 0);
  EXPECT_TRUE(list(fd).empty());
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  want.insert("new");
  std::vector<std::string> second = list(fd);
  EXPECT_EQ(second.size(), want.size());
  EXPECT_EQ(as_set(second), want) << "a rewind after a change on the server missed it";
  ASSERT_EQ(::unlink(Exp("d/new").c_str()), 0);
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  want.erase("new");
  EXPECT_EQ(as_set(list(fd)), want) << "a rewind after a removal on the server listed it";
  ::close(fd);

  for (int pass = 0; pass < 2; ++pass) {
    int big = ::open(Mnt("big").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(big, 0) << ErrnoName(errno);
    std::vector<std::string> names = list(big);
    ::close(big);
    EXPECT_EQ(names.size(), want_big.size()) << "pass " << pass;
    EXPECT_EQ(as_set(names), want_big) << "pass " << pass;
  }
  // Five listings ended (the small one three times, the big one twice), and the small one was
  // read at its end twice more: seven ends, none asked of the server.
  uint64_t local = 0;
  for (int tries = 0; tries < 30 && local < 7; ++tries) {
    usleep(100'000);
    local = AnsweredLocally() - before;
  }
  EXPECT_GE(local, 7u) << "the ends of listings went to the server";
}

// The kernel voids a directory's atime after each listing, so the stat that find and rm make of
// every directory they open would be a GETATTR round trip; the listing's answer brought the
// directory's attributes (listing attrs, common/dir_attrs.h) and ringfs-mount answers it. They
// are the server's, atime included.
TEST_P(OpsTest, AStatAfterAListingIsAnsweredWithTheDirectorysAttributes) {
  // What a listing at the server does: every opendir and rewind lists there, as without
  // kept listings (frontend/kept_listings.h, which keep what the kernel read before).
  RemountWith("no_kept_listings");
  if (HasFatalFailure()) return;
  ASSERT_EQ(::mkdir(Mnt("l").c_str(), 0755), 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(WriteFile(Mnt("l/f" + std::to_string(i)), "x"), 0);
  alignas(8) char buf[4096];
  auto list = [&](int fd) {
    while (::syscall(SYS_getdents64, fd, buf, sizeof(buf)) > 0) {
    }
  };
  for (int round = 0; round < 2; ++round) {
    // The listing alone (its end is answered locally too), then the listing and the stat. The
    // creates voided the directory's attributes: the stat here takes the GETATTR they cause.
    Stat(Mnt("l"));
    const uint64_t start = AnsweredLocally();
    int fd = ::open(Mnt("l").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    list(fd);
    ::close(fd);
    const uint64_t listed = AnsweredLocally();
    fd = ::open(Mnt("l").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    list(fd);
    struct stat through {};
    ASSERT_EQ(::fstat(fd, &through), 0);
    ::close(fd);  // both counts include what opendir and closedir are (answered or not)
    EXPECT_EQ(AnsweredLocally() - listed, listed - start + 1)
        << "round " << round << ": the GETATTR went out";
    const struct stat exported = Stat(Exp("l"));
    EXPECT_EQ(through.st_ino, exported.st_ino);
    EXPECT_EQ(through.st_nlink, exported.st_nlink);
    EXPECT_EQ(through.st_mtim.tv_sec, exported.st_mtim.tv_sec);
    EXPECT_EQ(through.st_mtim.tv_nsec, exported.st_mtim.tv_nsec);
    EXPECT_EQ(through.st_atim.tv_sec, exported.st_atim.tv_sec) << "round " << round;
    EXPECT_EQ(through.st_atim.tv_nsec, exported.st_atim.tv_nsec) << "round " << round;
    // Changed on the export: the next listing's record carries the new times.
    ASSERT_EQ(WriteFile(Exp("l/made" + std::to_string(round)), "y"), 0);
  }
}

// Write attrs: every WRITE's answer carries the file as the server saw it after the write, so
// the stat that follows a written file's close (git's index, rsync) is answered by the mount.
// Whatever changes the file or a name after the write goes first: the stat then shows it.
TEST_P(OpsTest, AStatAfterWritesIsAnsweredFromTheLastWritesRecord) {
  auto write = [&](const std::string& rel, int flags, const std::string& data) {
    int fd = ::open(Mnt(rel).c_str(), flags | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    for (size_t at = 0; at < data.size(); at += 3000) {  // several WRITEs
      const std::string part = data.substr(at, 3000);
      ASSERT_EQ(::write(fd, part.data(), part.size()), static_cast<ssize_t>(part.size()));
    }
    ::close(fd);
  };
  auto same = [&](const std::string& rel, const char* what) {
    struct stat through {};
    ASSERT_EQ(::stat(Mnt(rel).c_str(), &through), 0) << what << ": " << ErrnoName(errno);
    const struct stat exported = Stat(Exp(rel));
    EXPECT_EQ(through.st_ino, exported.st_ino) << what;
    EXPECT_EQ(through.st_size, exported.st_size) << what;
    EXPECT_EQ(through.st_mode, exported.st_mode) << what;
    EXPECT_EQ(through.st_nlink, exported.st_nlink) << what;
    EXPECT_EQ(through.st_mtim.tv_sec, exported.st_mtim.tv_sec) << what;
    EXPECT_EQ(through.st_mtim.tv_nsec, exported.st_mtim.tv_nsec) << what;
    EXPECT_EQ(through.st_ctim.tv_sec, exported.st_ctim.tv_sec) << what;
    EXPECT_EQ(through.st_ctim.tv_nsec, exported.st_ctim.tv_nsec) << what;
  };
  // Write-only (direct) and read-write (page cache) descriptors alike: the stat after the
  // writes is one more local answer than the writes alone.
  const std::string data(10'000, 'w');
  for (int flags : {O_WRONLY | O_CREAT | O_EXCL, O_RDWR | O_CREAT | O_EXCL}) {
    const std::string tag = std::to_string(flags & O_ACCMODE);
    // The create voided the directory's attributes, which the next path walk takes from the
    // create's record (dir attrs): taken here in both rounds.
    const uint64_t start = AnsweredLocally();
    write("w-alone" + tag, flags, data);
    Stat(Mnt(""));
    const uint64_t written = AnsweredLocally();
    write("w-stat" + tag, flags, data);
    Stat(Mnt(""));
    same("w-stat" + tag, "after writes");
    EXPECT_EQ(AnsweredLocally() - written, written - start + 1)
        << "flags " << flags << ": the GETATTR went out";
  }
  // Each change after the write, through another descriptor or name: the record is not used.
  write("t", O_WRONLY | O_CREAT, data);
  int fd = ::open(Mnt("t").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ::close(fd);
  same("t", "truncated by open");
  write("t", O_WRONLY, data);
  ASSERT_EQ(::truncate(Mnt("t").c_str(), 10), 0);
  same("t", "truncated");
  write("t", O_WRONLY, data);
  ASSERT_EQ(::chmod(Mnt("t").c_str(), 0600), 0);
  same("t", "chmod");
  write("t", O_WRONLY, data);
  ASSERT_EQ(::link(Mnt("t").c_str(), Mnt("t2").c_str()), 0);
  same("t", "linked");
  write("t", O_WRONLY, data);
  ASSERT_EQ(::unlink(Mnt("t2").c_str()), 0);
  same("t", "other name unlinked");
  write("t", O_WRONLY, data);
  ASSERT_EQ(::rename(Mnt("t").c_str(), Mnt("u").c_str()), 0);
  same("u", "renamed");
  // Read after its writes: under relatime the read moved the atime, which no record saw.
  write("r", O_WRONLY | O_CREAT, data);
  fd = ::open(Mnt("r").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::string back(data.size(), '\0');
  ASSERT_EQ(::read(fd, back.data(), back.size()), static_cast<ssize_t>(data.size()));
  ::close(fd);
  struct stat through {};
  ASSERT_EQ(::stat(Mnt("r").c_str(), &through), 0);
  EXPECT_EQ(through.st_atim.tv_sec, Stat(Exp("r")).st_atim.tv_sec);
  EXPECT_EQ(through.st_atim.tv_nsec, Stat(Exp("r")).st_atim.tv_nsec);
  same("r", "read");
}

// getdents with a buffer of megabytes makes the kernel ask for listings as large as the
// request's whole buffer (max_pages): ringfs-mount asks the server for the record's size less
// (Forwarder::LeaveRoomForRecord), so the listing and its record still fit.
TEST_P(OpsTest, AListingAsLargeAsTheBufferStillHasRoomForItsRecord) {
  // What a listing at the server does: every opendir and rewind lists there, as without
  // kept listings (frontend/kept_listings.h, which keep what the kernel read before).
  RemountWith("no_kept_listings");
  if (HasFatalFailure()) return;
  ASSERT_EQ(::mkdir(Mnt("big").c_str(), 0755), 0);
  // 232-byte names make 256-byte READDIR records: 4,096 fill 1 MiB exactly, with no room left
  // for the record unless the size asked for left it.
  std::set<std::string> want = {".", ".."};
  for (int i = 0; i < 8000; ++i) {
    std::string name = absl::StrFormat("%06d", i) + std::string(226, 'n');
    int fd = ::open(Mnt("big/" + name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ::close(fd);
    want.insert(name);
  }
  ASSERT_EQ(::system("echo 2 > /proc/sys/vm/drop_caches"), 0);  // READDIRPLUS again
  std::vector<uint64_t> words(512 * 1024);                      // 4 MiB, aligned for dirent64
  char* const buf = reinterpret_cast<char*>(words.data());
  const size_t size = words.size() * sizeof(uint64_t);
  for (int pass = 0; pass < 2; ++pass) {
    int fd = ::open(Mnt("big").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    std::set<std::string> seen;
    long n, calls = 0, largest = 0;
    while ((n = ::syscall(SYS_getdents64, fd, buf, size)) > 0) {
      ++calls;
      largest = std::max(largest, n);
      for (long at = 0; at < n;) {
        auto* d = reinterpret_cast<struct dirent64*>(buf + at);
        EXPECT_TRUE(seen.insert(d->d_name).second) << d->d_name << " twice";
        at += d->d_reclen;
      }
    }
    EXPECT_EQ(n, 0) << "pass " << pass << ": " << ErrnoName(errno);
    ::close(fd);
    EXPECT_EQ(seen.size(), want.size()) << "pass " << pass;
    EXPECT_TRUE(seen == want) << "pass " << pass << ": other names";
    if (largest <= 64 * 1024) {
      GTEST_SKIP() << "this kernel sizes READDIR by the page, not by the getdents buffer (before "
                      "Linux 6.16?): no listing reaches the buffer's size";
    }
    EXPECT_LE(calls, 4) << "the listing came in small pieces: the test misses its point";
    EXPECT_GE(calls, 2) << "one call: the test misses its point";
  }
}

TEST_P(OpsTest, FsyncAndFdatasync) {
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "durable", 7), 7);
  EXPECT_EQ(::fsync(fd), 0) << ErrnoName(errno);
  ASSERT_EQ(::pwrite(fd, "D", 1, 0), 1);
  EXPECT_EQ(::fdatasync(fd), 0) << ErrnoName(errno);
  ::close(fd);
  EXPECT_EQ(ReadFile(Exp("f")), "Durable");
}

TEST_P(OpsTest, FsyncDirectory) {
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  ASSERT_EQ(WriteFile(Mnt("d/f"), "x"), 0);
  int fd = ::open(Mnt("d").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  EXPECT_EQ(::fsync(fd), 0) << ErrnoName(errno);
  EXPECT_EQ(::fdatasync(fd), 0) << ErrnoName(errno);
  ::close(fd);
  fd = ::open(env_->mount_dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fsync(fd), 0) << ErrnoName(errno);
  ::close(fd);
}

TEST_P(OpsTest, Statfs) {
  struct statfs fs {};
  ASSERT_EQ(::statfs(env_->mount_dir().c_str(), &fs), 0) << ErrnoName(errno);
  EXPECT_EQ(fs.f_type, kFuseSuperMagic);
  struct statvfs m {
  }, e{};
  ASSERT_EQ(::statvfs(env_->mount_dir().c_str(), &m), 0) << ErrnoName(errno);
  ASSERT_EQ(::statvfs(env_->export_dir().c_str(), &e), 0);
  EXPECT_GT(m.f_blocks, 0u);
  EXPECT_GT(m.f_bsize, 0u);
  EXPECT_GT(m.f_namemax, 0u);
  // Capacity is the export's filesystem's (the server reports statvfs of the export).
  const double mount_bytes = static_cast<double>(m.f_blocks) * m.f_frsize;
  const double export_bytes = static_cast<double>(e.f_blocks) * e.f_frsize;
  EXPECT_NEAR(mount_bytes / export_bytes, 1.0, 0.01);
  const double mount_free = static_cast<double>(m.f_bavail) * m.f_frsize;
  const double export_free = static_cast<double>(e.f_bavail) * e.f_frsize;
  EXPECT_NEAR(mount_free / export_bytes, export_free / export_bytes, 0.02);
  EXPECT_EQ(m.f_files, e.f_files);
  struct statvfs sub {};
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  ASSERT_EQ(::statvfs(Mnt("d").c_str(), &sub), 0) << ErrnoName(errno);
  EXPECT_EQ(sub.f_blocks, m.f_blocks);
}

TEST_P(OpsTest, Xattrs) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  const std::string path = Mnt("f");
  ASSERT_EQ(::setxattr(path.c_str(), "user.color", "indigo", 6, 0), 0) << ErrnoName(errno);
  char buf[256] = {};
  EXPECT_EQ(::getxattr(path.c_str(), "user.color", buf, sizeof(buf)), 6) << ErrnoName(errno);
  EXPECT_EQ(std::string(buf, 6), "indigo");
  EXPECT_EQ(::getxattr(path.c_str(), "user.color", nullptr, 0), 6) << "size query";
  EXPECT_EQ(RINGFS_ERRNO(::getxattr(path.c_str(), "user.color", buf, 3)), ERANGE);
  EXPECT_EQ(RINGFS_ERRNO(::getxattr(path.c_str(), "user.missing", buf, sizeof(buf))), ENODATA);
  // Visible in the export.
  memset(buf, 0, sizeof(buf));
  EXPECT_EQ(::getxattr(Exp("f").c_str(), "user.color", buf, sizeof(buf)), 6);
  EXPECT_EQ(std::string(buf), "indigo");
  // Flags.
  EXPECT_EQ(RINGFS_ERRNO(::setxattr(path.c_str(), "user.color", "x", 1, XATTR_CREATE)), EEXIST);
  EXPECT_EQ(RINGFS_ERRNO(::setxattr(path.c_str(), "user.none", "x", 1, XATTR_REPLACE)), ENODATA);
  ASSERT_EQ(::setxattr(path.c_str(), "user.color", "teal", 4, XATTR_REPLACE), 0);
  ASSERT_EQ(::setxattr(path.c_str(), "user.empty", "", 0, 0), 0) << ErrnoName(errno);
  EXPECT_EQ(::getxattr(path.c_str(), "user.empty", buf, sizeof(buf)), 0);
  // A binary value with NULs survives.
  const char bin[5] = {'a', '\0', 'b', '\0', 'c'};
  ASSERT_EQ(::setxattr(path.c_str(), "user.bin", bin, 5, 0), 0);
  EXPECT_EQ(::getxattr(path.c_str(), "user.bin", buf, sizeof(buf)), 5);
  EXPECT_EQ(memcmp(buf, bin, 5), 0);

  // listxattr: exact size, ERANGE on a small buffer.
  ssize_t size = ::listxattr(path.c_str(), nullptr, 0);
  ASSERT_GT(size, 0) << ErrnoName(errno);
  std::vector<char> list(size);
  ASSERT_EQ(::listxattr(path.c_str(), list.data(), list.size()), size);
  std::set<std::string> names;
  for (ssize_t i = 0; i < size;) {
    std::string n(list.data() + i);
    i += n.size() + 1;
    if (n.rfind("user.", 0) == 0) names.insert(n);
  }
  EXPECT_EQ(names, (std::set<std::string>{"user.color", "user.empty", "user.bin"}));
  EXPECT_EQ(RINGFS_ERRNO(::listxattr(path.c_str(), list.data(), 2)), ERANGE);

  ASSERT_EQ(::removexattr(path.c_str(), "user.color"), 0) << ErrnoName(errno);
  EXPECT_EQ(RINGFS_ERRNO(::getxattr(path.c_str(), "user.color", buf, sizeof(buf))), ENODATA);
  EXPECT_EQ(RINGFS_ERRNO(::removexattr(path.c_str(), "user.color")), ENODATA);
  EXPECT_EQ(RINGFS_ERRNO(::getxattr(Exp("f").c_str(), "user.color", buf, sizeof(buf))), ENODATA);
  // fd-based variants and a directory.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fsetxattr(fd, "user.fd", "1", 1, 0), 0) << ErrnoName(errno);
  EXPECT_EQ(::fgetxattr(fd, "user.fd", buf, sizeof(buf)), 1);
  ::close(fd);
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  ASSERT_EQ(::setxattr(Mnt("d").c_str(), "user.dir", "yes", 3, 0), 0) << ErrnoName(errno);
  EXPECT_EQ(::getxattr(Exp("d").c_str(), "user.dir", buf, sizeof(buf)), 3);
}

TEST_P(OpsTest, Access) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x", 0644), 0);
  ASSERT_EQ(::chmod(Mnt("f").c_str(), 0644), 0);
  EXPECT_EQ(::access(Mnt("f").c_str(), F_OK), 0) << ErrnoName(errno);
  EXPECT_EQ(::access(Mnt("f").c_str(), R_OK | W_OK), 0) << ErrnoName(errno);
  // Even root needs one x bit to execute.
  EXPECT_EQ(RINGFS_ERRNO(::access(Mnt("f").c_str(), X_OK)), EACCES);
  ASSERT_EQ(::chmod(Mnt("f").c_str(), 0744), 0);
  EXPECT_EQ(::access(Mnt("f").c_str(), X_OK), 0) << ErrnoName(errno);
  EXPECT_EQ(RINGFS_ERRNO(::access(Mnt("missing").c_str(), F_OK)), ENOENT);
  EXPECT_EQ(::faccessat(AT_FDCWD, Mnt("f").c_str(), R_OK, AT_EACCESS), 0) << ErrnoName(errno);
}

TEST_P(OpsTest, Fallocate) {
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fallocate(fd, 0, 0, 1 << 20), 0) << ErrnoName(errno);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  struct stat e = Stat(Exp("f"));
  EXPECT_EQ(e.st_size, 1 << 20);
  EXPECT_GE(e.st_blocks * 512, 1 << 20) << "space is really allocated in the export";
  // KEEP_SIZE allocates past EOF without changing the size.
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20), 0) << ErrnoName(errno);
  EXPECT_EQ(Stat(Exp("f")).st_size, 1 << 20);
  // Punch a hole into written data: it reads back as zeros.
  std::vector<char> data(1 << 20, 'z');
  ASSERT_EQ(PwriteAll(fd, data.data(), data.size(), 0), 0);
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 65536), 0)
      << ErrnoName(errno);
  std::vector<char> back(1 << 20);
  ASSERT_EQ(PreadAll(fd, back.data(), back.size(), 0), 1 << 20);
  std::vector<char> want = data;
  std::fill(want.begin() + 65536, want.begin() + 131072, 0);
  EXPECT_TRUE(back == want);
  std::string exported = ReadFile(Exp("f"));
  EXPECT_TRUE(exported.size() == want.size() &&
              memcmp(exported.data(), want.data(), want.size()) == 0);
  ::close(fd);
  fd = ::open(Mnt("f").c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_EQ(RINGFS_ERRNO(::fallocate(fd, 0, 0, 4096)), EBADF);
  ::close(fd);
}

TEST_P(OpsTest, LseekDataAndHole) {
  // Data at [0, 64K) and [1M, 1M+64K), size 2M. Block-aligned so any fs reports it exactly.
  int fd = ::open(Mnt("sparse").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::vector<char> data(65536, 'd');
  ASSERT_EQ(PwriteAll(fd, data.data(), data.size(), 0), 0);
  ASSERT_EQ(PwriteAll(fd, data.data(), data.size(), 1 << 20), 0);
  ASSERT_EQ(::ftruncate(fd, 2 << 20), 0);
  ASSERT_EQ(::fsync(fd), 0);
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), 0) << ErrnoName(errno);
  EXPECT_EQ(::lseek(fd, 0, SEEK_HOLE), 65536) << ErrnoName(errno);
  EXPECT_EQ(::lseek(fd, 65536, SEEK_DATA), 1 << 20) << ErrnoName(errno);
  EXPECT_EQ(::lseek(fd, 1 << 20, SEEK_HOLE), (1 << 20) + 65536) << ErrnoName(errno);
  EXPECT_EQ(::lseek(fd, (1 << 20) + 65536, SEEK_HOLE), (1 << 20) + 65536);
  EXPECT_EQ(RINGFS_ERRNO(::lseek(fd, (1 << 20) + 65536, SEEK_DATA)), ENXIO);
  EXPECT_EQ(RINGFS_ERRNO(::lseek(fd, 3 << 20, SEEK_DATA)), ENXIO);
  EXPECT_EQ(RINGFS_ERRNO(::lseek(fd, 3 << 20, SEEK_HOLE)), ENXIO);
  // SEEK_SET/CUR/END are the kernel's own.
  EXPECT_EQ(::lseek(fd, 0, SEEK_END), 2 << 20);
  ::close(fd);
}

TEST_P(OpsTest, CopyFileRange) {
  const size_t kSize = 1 << 20;
  std::vector<char> src_data = RandomBytes(kSize, 99);
  int src = ::open(Mnt("src").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  int dst = ::open(Mnt("dst").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(src, 0);
  ASSERT_GE(dst, 0);
  ASSERT_EQ(PwriteAll(src, src_data.data(), kSize, 0), 0);
  loff_t in_off = 4096, out_off = 8192;
  size_t left = 512 * 1024;
  while (left > 0) {
    ssize_t n = ::copy_file_range(src, &in_off, dst, &out_off, left, 0);
    ASSERT_GT(n, 0) << ErrnoName(errno);
    left -= n;
  }
  EXPECT_EQ(in_off, 4096 + 512 * 1024);
  EXPECT_EQ(out_off, 8192 + 512 * 1024);
  std::vector<char> want(8192 + 512 * 1024, 0);
  memcpy(want.data() + 8192, src_data.data() + 4096, 512 * 1024);
  std::vector<char> back(want.size() + 100);
  ASSERT_EQ(PreadAll(dst, back.data(), back.size(), 0), static_cast<ssize_t>(want.size()));
  back.resize(want.size());
  EXPECT_TRUE(back == want);
  std::string exported = ReadFile(Exp("dst"));
  EXPECT_TRUE(exported.size() == want.size() &&
              memcmp(exported.data(), want.data(), want.size()) == 0);
  // Past the source's EOF copies nothing.
  in_off = kSize;
  EXPECT_EQ(::copy_file_range(src, &in_off, dst, nullptr, 4096, 0), 0) << ErrnoName(errno);
  ::close(src);
  ::close(dst);
}

TEST_P(OpsTest, AppendMode) {
  ASSERT_EQ(WriteFile(Mnt("log"), "hello"), 0);
  int fd = ::open(Mnt("log").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::lseek(fd, 0, SEEK_SET), 0);
  ASSERT_EQ(::write(fd, " world", 6), 6);
  ASSERT_EQ(::write(fd, "!", 1), 1);
  ::close(fd);
  EXPECT_EQ(ReadFile(Mnt("log")), "hello world!");
  EXPECT_EQ(ReadFile(Exp("log")), "hello world!");
  // Two appending descriptors interleave without overwriting each other.
  int a = ::open(Mnt("log2").c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
  int b = ::open(Mnt("log2").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(::write(a, "A", 1), 1);
    ASSERT_EQ(::write(b, "B", 1), 1);
  }
  ::close(a);
  ::close(b);
  std::string both = ReadFile(Exp("log2"));
  EXPECT_EQ(both.size(), 20u);
  EXPECT_EQ(std::count(both.begin(), both.end(), 'A'), 10);
}

TEST_P(OpsTest, ExclusiveCreate) {
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ::close(fd);
  EXPECT_EQ(RINGFS_ERRNO(::open(Mnt("f").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600)),
            EEXIST);
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0);
  EXPECT_EQ(RINGFS_ERRNO(::open(Mnt("d").c_str(), O_CREAT | O_EXCL | O_RDONLY | O_CLOEXEC, 0600)),
            EEXIST);
  EXPECT_EQ(RINGFS_ERRNO(::open(Mnt("d").c_str(), O_WRONLY | O_CLOEXEC)), EISDIR);
}

TEST_P(OpsTest, DirectIo) {
  int fd = ::open(Mnt("direct").c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, 4096, 1 << 20), 0);
  std::vector<char> data = RandomBytes(1 << 20, 5);
  memcpy(buf, data.data(), data.size());
  ASSERT_EQ(::pwrite(fd, buf, 1 << 20, 0), 1 << 20) << ErrnoName(errno);
  memset(buf, 0, 1 << 20);
  ASSERT_EQ(::pread(fd, buf, 1 << 20, 0), 1 << 20) << ErrnoName(errno);
  EXPECT_EQ(memcmp(buf, data.data(), data.size()), 0);
  ::free(buf);
  ::close(fd);
}

RINGFS_INSTANTIATE_TRANSPORTS(OpsTest);

}  // namespace
}  // namespace ringfs::testing
