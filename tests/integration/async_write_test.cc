// The async_write mount option (frontend/async_removals.h): writes through write-only
// descriptors answered before the server ran them. Files written so end byte-exact on the
// export; what follows a write (a rewrite of the same bytes from another CPU, a utimes, a read
// or stat through another descriptor) never overtakes it; close and fsync report a write that
// failed at the server (a full filesystem), once; a close while the server is stopped ends with
// ETIMEDOUT instead of hanging, and the writes still land once it runs again; writes answered
// before a kill -9 run on the restarted server.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
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

// Bytes that differ with the file, the offset and the round, so a write landing in the wrong
// place or order shows.
std::string Pattern(size_t size, uint32_t seed) {
  std::string data(size, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < size; ++i) {
    x = x * 1103515245u + 12345u;
    data[i] = static_cast<char>(x >> 24);
  }
  return data;
}

std::vector<int> TwoCpus() {
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  return cpus;
}

// Pins the calling thread to `cpu` (on the ring: that CPU's queue and connection).
void RunOn(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ::sched_setaffinity(0, sizeof(one), &one);
}

// Writes all of `data` at the descriptor's offset; 0 or errno.
int WriteAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

class AsyncWriteTest : public MountedTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = MountedTest::Options();
    o.extra = {"async_write"};
    return o;
  }
  void TearDown() override {
    if (env_ && env_->server_process()) env_->server_process()->Signal(SIGCONT);
    MountedTest::TearDown();
  }

  // Writes `data` to a new file at `path` in calls of `chunk` bytes; returns the open fd.
  int WriteNew(const std::string& path, const std::string& data, size_t chunk) {
    int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    EXPECT_GE(fd, 0) << path << ": " << ErrnoName(errno);
    if (fd < 0) return fd;
    for (size_t done = 0; done < data.size(); done += chunk) {
      const size_t part = std::min(chunk, data.size() - done);
      EXPECT_EQ(::write(fd, data.data() + done, part), static_cast<ssize_t>(part))
          << path << ": " << ErrnoName(errno);
    }
    return fd;
  }
};

// Files written front to back in calls of many sizes (tar's 10 KiB records, cp's 128 KiB, 1 MiB
// and odd ones) are exact on the export once closed, and read back exact through the mount.
TEST_P(AsyncWriteTest, FilesWrittenFrontToBackAreExactOnceClosed) {
  ASSERT_EQ(::mkdir(Mnt("d").c_str(), 0755), 0) << ErrnoName(errno);
  const size_t chunks[] = {10240, 131072, 1 << 20, 4093, 1};
  int files = 0;
  for (size_t chunk : chunks) {
    for (size_t size : {size_t{0}, size_t{1}, chunk, 3 * chunk + 17, size_t{3} << 20}) {
      if (chunk == 1 && size > 4096) continue;
      const std::string name = "d/f" + std::to_string(files);
      const std::string data = Pattern(size, files++);
      int fd = WriteNew(Mnt(name), data, chunk);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::close(fd), 0) << name << ": " << ErrnoName(errno);
      // The close waited for the writes: the server holds every byte now.
      EXPECT_TRUE(ReadFile(Exp(name)) == data) << name << " (chunk " << chunk << ") on the export";
      EXPECT_TRUE(ReadFile(Mnt(name)) == data) << name << " through the mount";
    }
  }
  EXPECT_GT(StatAtLeast("async_writes", 100), 100u) << "writes were not answered early";
  EXPECT_EQ(StatAtLeast("async_write_failures", 0), 0u);
}

// A caller without CAP_FSETID: the kernel asks the server to clear setuid/setgid bits with each
// of its writes (FUSE_WRITE_KILL_SUIDGID); they are answered early all the same, and a setgid
// file written so loses the bit, as on a local disk.
TEST_P(AsyncWriteTest, WritesOfAnUnprivilegedCallerAreAnsweredEarlyAndClearSetgid) {
  constexpr uid_t kUid = 4321;
  ASSERT_EQ(::mkdir(Mnt("open").c_str(), 0777), 0) << ErrnoName(errno);
  ASSERT_EQ(::chmod(Mnt("open").c_str(), 0777), 0);
  const std::string data = Pattern(300000, 9);
  const std::string plain = Mnt("open/plain"), setgid = Mnt("open/setgid");
  ASSERT_EQ(WriteFile(setgid, ""), 0);
  ASSERT_EQ(::chown(setgid.c_str(), kUid, kUid), 0);
  ASSERT_EQ(::chmod(setgid.c_str(), 02775), 0);
  const uint64_t before = StatAtLeast("async_writes", 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(kUid) != 0 || ::setuid(kUid) != 0) ::_exit(10);
    for (const std::string* path : {&plain, &setgid}) {
      int fd = ::open(path->c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) ::_exit(11);
      if (WriteAll(fd, data) != 0) ::_exit(12);
      if (::close(fd) != 0) ::_exit(13);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(ReadFile(Exp("open/plain")) == data);
  EXPECT_TRUE(ReadFile(Exp("open/setgid")) == data);
  struct stat st;
  ASSERT_EQ(::stat(setgid.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0775u) << "the write kept the setgid bit";
  EXPECT_GT(StatAtLeast("async_writes", before + 2), before + 1) << "not answered early";
}

// The same bytes written again and again, alternately from each CPU (on the ring another queue
// and connection, which nothing but the early writes' order keeps in step), the first of each
// pair behind a large write to elsewhere in the file on its connection: the last write wins,
// on the export and through the mount.
TEST_P(AsyncWriteTest, RewritesOfTheSameBytesLandInTheOrderAnswered) {
  const std::vector<int> cpus = TwoCpus();
  ASSERT_FALSE(cpus.empty());
  constexpr size_t kLarge = 1 << 20;
  std::string last;
  std::thread writer([&] {
    int fd = ::open(Mnt("f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    const std::string large = Pattern(kLarge, 1);
    auto put = [&](size_t offset, const std::string& data) {
      ASSERT_EQ(::pwrite(fd, data.data(), data.size(), offset), static_cast<ssize_t>(data.size()));
      if (last.size() < offset + data.size()) last.resize(offset + data.size());
      last.replace(offset, data.size(), data);
    };
    for (int round = 0; round < 60; ++round) {
      RunOn(cpus[0]);
      put((1 << 20) + round * kLarge, large);
      // Overlapping ranges of different lengths: 0..64 KiB, then 4 KiB..52 KiB, ...
      put((round % 3) * 4096, Pattern(65536 - (round % 3) * 16384, 1000 + 2 * round));
      RunOn(cpus[cpus.size() - 1]);
      put((round % 2) * 8192, Pattern(40000, 1001 + 2 * round));
    }
    ASSERT_EQ(::close(fd), 0) << ErrnoName(errno);
  });
  writer.join();
  EXPECT_TRUE(ReadFile(Exp("f")) == last) << "a rewrite was overtaken by an older one";
  EXPECT_TRUE(ReadFile(Mnt("f")) == last);
  EXPECT_GT(StatAtLeast("async_writes", 150), 150u);
}

// What follows a write on the same file waits for it: a utimes (the write's own mtime must not
// land after it), and a read and a stat through other descriptors and the name (they must see
// the bytes and the size), each from the other CPU.
TEST_P(AsyncWriteTest, WhatFollowsAWriteDoesNotOvertakeIt) {
  const std::vector<int> cpus = TwoCpus();
  ASSERT_FALSE(cpus.empty());
  constexpr time_t kMtime = 1788809622;
  std::thread worker([&] {
    for (int i = 0; i < 100; ++i) {
      const std::string name = "f" + std::to_string(i);
      RunOn(cpus[0]);
      const std::string data = Pattern(20000 + i, i);
      int fd = WriteNew(Mnt(name), data, 10240);
      ASSERT_GE(fd, 0);
      RunOn(cpus[cpus.size() - 1]);
      struct stat st;
      ASSERT_EQ(::stat(Mnt(name).c_str(), &st), 0) << ErrnoName(errno);
      EXPECT_EQ(st.st_size, static_cast<off_t>(data.size())) << name << ": stat by name";
      EXPECT_TRUE(ReadFile(Mnt(name)) == data) << name << ": read through another descriptor";
      const timespec times[2] = {{0, UTIME_OMIT}, {kMtime, 0}};
      RunOn(cpus[0]);
      ASSERT_EQ(WriteAll(fd, data.substr(0, 100)), 0);  // one more write, then the time
      RunOn(cpus[cpus.size() - 1]);
      ASSERT_EQ(::futimens(fd, times), 0) << ErrnoName(errno);
      ASSERT_EQ(::close(fd), 0) << ErrnoName(errno);
      ASSERT_EQ(::stat(Exp(name).c_str(), &st), 0);
      EXPECT_EQ(st.st_mtim.tv_sec, kMtime) << name << ": a write landed after the utimes";
    }
  });
  worker.join();
}

// A full filesystem under the export: writes answered early fail at the server. The close
// reports it (ENOSPC, or EIO for a write the server cut short), once: the next close of the
// file succeeds. An fsync reports it the same way.
TEST_P(AsyncWriteTest, CloseAndFsyncReportAWriteThatFailedAtTheServer) {
  const std::string small = Exp("small");
  ASSERT_EQ(::mkdir(small.c_str(), 0755), 0);
  ASSERT_EQ(::mount("ringfs-test-small", small.c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                    "size=1m,mode=0755"),
            0)
      << ErrnoName(errno);
  struct Unmount {
    std::string dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{small};
  const std::string big = Pattern(4 << 20, 7);
  for (bool use_fsync : {false, true}) {
    const std::string name = use_fsync ? "small/g" : "small/f";
    int fd = ::open(Mnt(name).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    // Another descriptor of the file: its close neither waits for the writes nor takes their
    // error (it belongs to the descriptor that wrote).
    int reader = ::open(Mnt(name).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(reader, 0) << ErrnoName(errno);
    // Early writes succeed; once a failure is known the file writes synchronously and the
    // server's error comes back at once.
    size_t written = 0;
    int write_error = 0;
    for (size_t done = 0; done < big.size(); done += 65536) {
      ssize_t n = ::write(fd, big.data() + done, 65536);
      if (n < 0) {
        write_error = errno;
        break;
      }
      written += static_cast<size_t>(n);
    }
    EXPECT_GT(written, 0u);
    if (write_error != 0) {
      EXPECT_EQ(write_error, ENOSPC) << ErrnoName(write_error);
    }
    ASSERT_EQ(::fsync(reader), 0) << "another descriptor's fsync: " << ErrnoName(errno);
    EXPECT_EQ(::close(reader), 0) << "another descriptor's close took the error";
    const int reported = use_fsync ? ::fsync(fd) : ::close(fd);
    const int reported_errno = errno;
    EXPECT_EQ(reported, -1) << (use_fsync ? "fsync" : "close") << " hid a failed write";
    EXPECT_TRUE(reported_errno == ENOSPC || reported_errno == EIO) << ErrnoName(reported_errno);
    if (use_fsync) {
      EXPECT_EQ(::close(fd), 0) << "reported once: " << ErrnoName(errno);
    }
    // Room again (the server frees the blocks at the RELEASE, which the kernel sends on its own
    // time): the file is rewritten, and its close succeeds.
    ASSERT_EQ(::unlink(Mnt(name).c_str()), 0) << ErrnoName(errno);
    const auto deadline = Clock::now() + seconds(10);
    struct statfs fs {};
    while (::statfs(small.c_str(), &fs) == 0 && fs.f_bfree * fs.f_bsize < (512u << 10) &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    fd = ::open(Mnt(name).c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    ASSERT_EQ(::write(fd, big.data(), 100000), 100000);
    EXPECT_EQ(::close(fd), 0) << ErrnoName(errno);
    EXPECT_TRUE(ReadFile(Exp(name)) == big.substr(0, 100000));
    ASSERT_EQ(::unlink(Mnt(name).c_str()), 0);
  }
  EXPECT_GT(StatAtLeast("async_write_failures", 2), 1u);
}

// Errors and waits belong to the open file that wrote: the close of another descriptor of the
// same file (a reader, opened before) neither waits for those writes nor takes their error.
TEST_P(AsyncWriteTest, AnotherDescriptorsCloseNeitherWaitsNorTakesTheError) {
  ASSERT_EQ(WriteFile(Mnt("f"), "x"), 0);
  int reader = ::open(Mnt("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  int writer = ::open(Mnt("f").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  const std::string data = Pattern(100000, 4);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  ASSERT_EQ(WriteAll(writer, data), 0);
  const auto start = Clock::now();
  EXPECT_EQ(::close(reader), 0) << ErrnoName(errno);
  EXPECT_LT(Clock::now() - start, seconds(2)) << "the reader's close waited for the writer";
  env_->server_process()->Signal(SIGCONT);
  EXPECT_EQ(::close(writer), 0) << ErrnoName(errno);
  EXPECT_TRUE(ReadFile(Exp("f")) == data);
}

// A close of a file opened read-only sends no FLUSH (FOPEN_NOFLUSH): with the option the kernel
// would send one per close, a ring round trip each. A close of one opened for writing still does,
// which also shows the count below sees FLUSHes.
TEST_P(AsyncWriteTest, AReadOnlyCloseSendsNoFlush) {
  ASSERT_EQ(WriteFile(Mnt("r"), "data"), 0);
  struct stat st {};
  ASSERT_EQ(::stat(Mnt("r").c_str(), &st), 0);
  // Kernel requests the mount has taken, once they stopped coming (RELEASE goes in the
  // background after close returns); the stats file is rewritten every 200 ms.
  auto settled_requests = [&] {
    uint64_t last = ~0ull;
    for (int i = 0; i < 20; ++i) {
      Stats stats = env_->ReadStats();
      uint64_t now = 0;
      for (const char* key : {"ring_requests", "devfuse_requests"}) {
        if (!stats[key].empty()) now += std::stoull(stats[key]);
      }
      if (now == last) return now;
      last = now;
      std::this_thread::sleep_for(milliseconds(500));
    }
    return last;
  };
  constexpr uint64_t kCycles = 200;
  auto open_close = [&](int flags) {
    const uint64_t before = settled_requests();
    for (uint64_t i = 0; i < kCycles; ++i) {
      int fd = ::open(Mnt("r").c_str(), flags | O_CLOEXEC);
      EXPECT_GE(fd, 0) << ErrnoName(errno);
      if (fd >= 0) EXPECT_EQ(::close(fd), 0) << ErrnoName(errno);
    }
    return settled_requests() - before;
  };
  const uint64_t read_only = open_close(O_RDONLY);
  const uint64_t write_only = open_close(O_WRONLY);
  EXPECT_GE(read_only, 2 * kCycles) << "OPEN and RELEASE";
  EXPECT_LE(read_only, 2 * kCycles + kCycles / 10) << "OPEN and RELEASE only, no FLUSH";
  EXPECT_GE(write_only, 3 * kCycles) << "OPEN, FLUSH and RELEASE";
}

// A close waiting for its writes is not failed by a caught signal (EINTR would read as a failed
// close to cp or tar), but a SIGKILL ends it at once: the process dies while the server is
// stopped.
void Ignore(int) {}

TEST_P(AsyncWriteTest, ACaughtSignalDoesNotFailTheCloseAndSigkillEndsIt) {
  const std::string data = Pattern(100000, 5);
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  struct sigaction action {};
  action.sa_handler = Ignore;  // no SA_RESTART
  struct sigaction old {};
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &old), 0);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  ASSERT_EQ(WriteAll(fd, data), 0);
  int close_result = -2, close_errno = 0;
  std::thread closer([&] {
    close_result = ::close(fd);
    close_errno = errno;
  });
  std::this_thread::sleep_for(milliseconds(300));
  for (int i = 0; i < 5; ++i) {
    ::pthread_kill(closer.native_handle(), SIGUSR1);
    std::this_thread::sleep_for(milliseconds(150));
  }
  env_->server_process()->Signal(SIGCONT);
  closer.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(close_result, 0) << ErrnoName(close_errno);
  EXPECT_TRUE(ReadFile(Exp("f")) == data);

  // The same wait in a child, killed. The file is opened before the stop (an open waits for
  // the server); the child writes through the descriptor it inherits, then closes it.
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  int g = ::open(Mnt("g").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(g, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::sigaction(SIGUSR1, &action, nullptr);  // caught: the close must not end for it
    if (WriteAll(g, data) != 0) ::_exit(1);
    (void)!::write(ready[1], "w", 1);
    ::close(g);
    ::_exit(0);
  }
  ::close(ready[1]);
  char step = 0;
  const bool wrote = ::read(ready[0], &step, 1) == 1;
  ::close(ready[0]);
  std::this_thread::sleep_for(milliseconds(200));  // into its close
  // The kernel's one INTERRUPT goes for the caught signal; the SIGKILL after it sends none.
  ::kill(child, SIGUSR1);
  std::this_thread::sleep_for(milliseconds(300));
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the close ended for a caught signal";
  const auto killed = Clock::now();
  ::kill(child, SIGKILL);
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_LT(Clock::now() - killed, seconds(3)) << "the dying caller's close was not ended";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << DescribeWaitStatus(status);
  EXPECT_TRUE(wrote);
  env_->server_process()->Signal(SIGCONT);
  EXPECT_EQ(::close(g), 0) << "the parent's copy: the writes ran once the server was back, "
                           << ErrnoName(errno);
  EXPECT_TRUE(ReadFile(Exp("g")) == data);
}

// A process that exits without closing its file: its exit closes it as close() does, and waits
// for the writes (as on NFS), so they are on the server when its parent's wait returns.
TEST_P(AsyncWriteTest, AnExitWaitsForTheWritesAsACloseDoes) {
  const std::string data = Pattern(300000, 8);
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(WriteAll(fd, data) == 0 ? 0 : 1);  // no close: the exit closes it
  }
  std::this_thread::sleep_for(milliseconds(600));
  int status = 0;
  EXPECT_EQ(::waitpid(child, &status, WNOHANG), 0) << "the exit did not wait for the writes";
  env_->server_process()->Signal(SIGCONT);
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeWaitStatus(status);
  EXPECT_TRUE(ReadFile(Exp("f")) == data) << "the parent's wait returned before the writes ran";
  EXPECT_EQ(::close(fd), 0) << ErrnoName(errno);
}

class AsyncWriteTimeoutTest : public AsyncWriteTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = AsyncWriteTest::Options();
    o.extra.push_back("timeout=2");
    return o;
  }
};

// The server stopped (SIGSTOP): writes are answered, the close waits for them no longer than
// timeout= and ends with ETIMEDOUT (nothing hangs); once the server runs again the writes land.
TEST_P(AsyncWriteTimeoutTest, ACloseWhileTheServerIsStoppedTimesOutAndTheWritesLandLater) {
  const std::string data = Pattern(300000, 3);
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  const auto start = Clock::now();
  ASSERT_EQ(WriteAll(fd, data), 0) << "early writes do not wait for the server";
  EXPECT_LT(Clock::now() - start, seconds(1));
  EXPECT_EQ(::close(fd), -1);
  EXPECT_EQ(errno, ETIMEDOUT) << ErrnoName(errno);
  EXPECT_LT(Clock::now() - start, seconds(10)) << "the close hung";
  EXPECT_EQ(ReadFile(Exp("f")), "") << "the server is stopped";
  env_->server_process()->Signal(SIGCONT);
  const auto deadline = Clock::now() + seconds(10);
  while (ReadFile(Exp("f")) != data && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(ReadFile(Exp("f")) == data) << "the writes were lost";
  EXPECT_EQ(StatAtLeast("async_write_failures", 0), 0u);
}

// Writes answered while the server was stopped are sent again to the server restarted after a
// kill -9 (the file is re-opened there: reclaim), and the close reports success once they ran.
// The files are written and closed by a child: the server the test starts again inherits none of
// them (at exec it would close them, and each close waits for the file's writes: NFS's
// close-to-open, and here a wait for itself).
TEST_P(AsyncWriteTest, WritesAnsweredBeforeAKillRunOnTheRestartedServer) {
  constexpr int kFiles = 4;
  std::vector<std::string> data;
  std::vector<std::string> paths;  // made before the fork: the child does not allocate
  for (int i = 0; i < kFiles; ++i) {
    data.push_back(Pattern(200000 + i, 50 + i));
    paths.push_back(Mnt("f" + std::to_string(i)));
  }
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(to_parent, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Steps: open, then (told) write, then (told) close; one byte back after each. Exit status:
    // how many steps failed.
    int failed = 0, fds[kFiles];
    char step;
    for (int i = 0; i < kFiles; ++i) {
      fds[i] = ::open(paths[i].c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
      if (fds[i] < 0) ++failed;
    }
    (void)!::write(to_parent[1], "o", 1);
    if (::read(to_child[0], &step, 1) != 1) ::_exit(100);
    for (int i = 0; i < kFiles; ++i) {
      if (fds[i] >= 0 && WriteAll(fds[i], data[i]) != 0) ++failed;
    }
    (void)!::write(to_parent[1], "w", 1);
    if (::read(to_child[0], &step, 1) != 1) ::_exit(100);
    for (int i = 0; i < kFiles; ++i) {
      if (fds[i] >= 0 && ::close(fds[i]) != 0) ++failed;
    }
    ::_exit(failed);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  struct Reap {
    pid_t pid;
    int status = -1;
    ~Reap() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reap{child};
  char step = 0;
  ASSERT_EQ(::read(to_parent[0], &step, 1), 1);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  ASSERT_EQ(::write(to_child[1], "g", 1), 1);
  ASSERT_EQ(::read(to_parent[0], &step, 1), 1) << "the writes waited for the stopped server";
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer());
  ASSERT_EQ(::write(to_child[1], "c", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  reap.pid = 0;
  ::close(to_child[1]);
  ::close(to_parent[0]);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "opens, writes or closes failed\n" << env_->DescribeLogs();
  for (int i = 0; i < kFiles; ++i) {
    EXPECT_TRUE(ReadFile(Exp("f" + std::to_string(i))) == data[i]) << "f" << i << " on the export";
  }
  EXPECT_EQ(StatAtLeast("async_write_failures", 0), 0u);
}

// The close timed out (the server stopped), so the kernel released the file with its writes
// still owed; the server is then killed and restarted: the file is re-opened there (its RELEASE
// had not run), the writes run, then the RELEASE.
TEST_P(AsyncWriteTimeoutTest, WritesOwedAfterATimedOutCloseRunOnARestartedServer) {
  const std::string data = Pattern(300000, 6);
  int fd = ::open(Mnt("f").c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  ASSERT_EQ(WriteAll(fd, data), 0);
  EXPECT_EQ(::close(fd), -1);
  EXPECT_EQ(errno, ETIMEDOUT) << ErrnoName(errno);
  ASSERT_TRUE(env_->KillServer());
  ASSERT_TRUE(env_->RestartServer());
  const auto deadline = Clock::now() + seconds(15);
  while (ReadFile(Exp("f")) != data && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(ReadFile(Exp("f")) == data) << "the writes were lost\n" << env_->DescribeLogs();
  EXPECT_EQ(StatAtLeast("async_write_failures", 0), 0u);
}

// With every detached record of a queue taken by writes the server has not run, the RELEASE of
// a file closed meanwhile waits in its channel behind them, with no deadline. The server then
// dies for good and the mount ends: ringfs-mount waits 30 s for what it owes, then gives those
// RELEASEs up too and exits. Over /dev/fuse such a RELEASE held its slot, and the worker waited
// for that slot for ever. (The ring's workers always left at the end of the 30 s.)
class AsyncWriteDrainTest : public AsyncWriteTimeoutTest {};

TEST_P(AsyncWriteDrainTest, TheMountsEndGivesUpAReleaseBehindWritesOfAServerGoneForGood) {
  // One /dev/fuse worker per CPU, 64 detached records each: filled by 160 writes on 2 CPUs.
  if (TwoCpus().size() != 2 || ::sysconf(_SC_NPROCESSORS_CONF) != 2) {
    GTEST_SKIP() << "sized for 2 CPUs (one worker each)";
  }
  constexpr int kFiles = 160;
  std::vector<int> fds;
  for (int i = 0; i < kFiles; ++i) {
    int fd = ::open(Mnt("f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << ErrnoName(errno);
    fds.push_back(fd);
  }
  ASSERT_TRUE(StopAndWait(env_->server_process()));
  // Past 64 owed on a queue a write waits for the server again (ETIMEDOUT after 2 s): every
  // queue's records are taken once two writes waited.
  int waited = 0;
  for (int i = 0; i < kFiles && waited < 2; ++i) {
    const auto start = Clock::now();
    (void)::write(fds[i], "x", 1);
    if (Clock::now() - start > milliseconds(1500)) ++waited;
  }
  ASSERT_EQ(waited, 2) << "writes were never refused an early answer";
  // Each close waits for its writes until timeout=, then its RELEASE comes, behind them.
  std::vector<std::thread> closers;
  for (int fd : fds) closers.emplace_back([fd] { ::close(fd); });
  for (std::thread& t : closers) t.join();
  ASSERT_TRUE(env_->KillServer());
  env_->mount_process()->Signal(SIGTERM);
  const auto unmounted = Clock::now() + seconds(10);
  while (IsMounted(env_->mount_dir()) && Clock::now() < unmounted) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_FALSE(IsMounted(env_->mount_dir()));
  std::optional<int> status = env_->mount_process()->WaitExit(seconds(50));
  ASSERT_TRUE(status.has_value()) << "the mount still runs 50 s after its end";
  // The path was taken: a queue gave up more than its 64 detached records, i.e. RELEASEs that
  // waited without one ("queue N: K requests answered early ... were not answered ...").
  const std::string log = ReadFile(env_->mount_log());
  std::istringstream lines(log);
  size_t most = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t queue = line.find("queue ");
    if (queue == std::string::npos || line.find("were not answered") == std::string::npos) continue;
    const size_t count = line.find(": ", queue);
    if (count != std::string::npos) {
      most = std::max<size_t>(most, std::strtoul(line.c_str() + count + 2, nullptr, 10));
    }
  }
  EXPECT_GT(most, 64u) << "no RELEASE waited without a detached record\n" << log;
}

RINGFS_INSTANTIATE_TRANSPORTS(AsyncWriteTest);
RINGFS_INSTANTIATE_TRANSPORTS(AsyncWriteTimeoutTest);
INSTANTIATE_TEST_SUITE_P(Classic, AsyncWriteDrainTest, ::testing::Values("classic"),
                         ::ringfs::testing::TransportName);

}  // namespace
}  // namespace ringfs::testing
