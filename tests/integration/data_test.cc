// Data integrity and scale through a real mount, both transports: seeded random writes checked
// against a model and the export, a sparse file past 4 GiB, 10,000 files in one directory, two
// writers pinned to different CPUs (so both kernel queues carry requests), and a server that
// keeps only 8 node fds open.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

class DataTest : public MountedTest {};

// First differing offset, or -1.
ssize_t FirstDiff(const char* a, const char* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<ssize_t>(i);
  }
  return -1;
}

// Random writes of 1 B..1 MiB (log-uniform, so small and large sizes are both common) at random
// offsets in an 8 MiB file, with interleaved random reads, all checked against a model.
void RandomWriteWorkload(const std::string& mnt_path, const std::string& export_path, uint64_t seed,
                         bool fsync_before_export_check) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr size_t kFileMax = 8 << 20;
  constexpr int kOps = 300;
  std::mt19937_64 rng(seed);
  std::vector<char> model;
  int fd = ::open(mnt_path.c_str(), O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << ErrnoName(errno);
  std::vector<char> buf(1 << 20), back(1 << 20);
  std::uniform_real_distribution<double> log_size(0.0, 20.0);  // 2^0 .. 2^20
  for (int op = 0; op < kOps; ++op) {
    size_t size = std::min<size_t>(1 << 20, static_cast<size_t>(std::exp2(log_size(rng))));
    size = std::max<size_t>(size, 1);
    size_t offset = rng() % (kFileMax - size);
    if (rng() % 4 == 0) {
      // Read back a random range and compare with the model.
      size_t end = std::min(offset + size, model.size());
      ssize_t want = offset < model.size() ? static_cast<ssize_t>(end - offset) : 0;
      ssize_t got = PreadAll(fd, back.data(), size, offset);
      ASSERT_EQ(got, want) << "read op " << op << " at " << offset << " size " << size;
      if (want > 0) {
        ssize_t diff = FirstDiff(back.data(), model.data() + offset, want);
        ASSERT_EQ(diff, -1) << "read op " << op << " differs at file offset " << offset + diff;
      }
      continue;
    }
    for (size_t i = 0; i < size; i += 8) {
      uint64_t v = rng();
      memcpy(buf.data() + i, &v, std::min<size_t>(8, size - i));
    }
    ASSERT_EQ(PwriteAll(fd, buf.data(), size, offset), 0)
        << "write op " << op << " at " << offset << " size " << size;
    if (model.size() < offset + size) model.resize(offset + size, 0);
    memcpy(model.data() + offset, buf.data(), size);
  }
  if (fsync_before_export_check) {
    ASSERT_EQ(::fsync(fd), 0) << ErrnoName(errno);
  }
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), model.size());
  std::vector<char> whole(model.size() + 4096);
  ASSERT_EQ(PreadAll(fd, whole.data(), whole.size(), 0), static_cast<ssize_t>(model.size()));
  EXPECT_EQ(FirstDiff(whole.data(), model.data(), model.size()), -1) << "through the mount";
  ASSERT_EQ(::close(fd), 0) << ErrnoName(errno);

  std::string exported = ReadFile(export_path);
  ASSERT_EQ(exported.size(), model.size()) << "size in the export dir";
  EXPECT_EQ(FirstDiff(exported.data(), model.data(), model.size()), -1) << "in the export dir";
}

TEST_P(DataTest, RandomWritesMatchModelAndExport) {
  for (uint64_t seed : {1u, 20240601u}) {
    RandomWriteWorkload(Mnt("random.bin"), Exp("random.bin"), seed, false);
    if (HasFatalFailure()) return;
  }
}

// Write-only descriptors bypass the page cache (FOPEN_DIRECT_IO, frontend/open_reply.h): each
// write() is one WRITE, and a reader of the same file through this mount, by read() and by a
// shared mapping, sees every write at once (the kernel drops the pages a direct write covers).
TEST_P(DataTest, WriteOnlyDescriptorsWriteThroughAndReadersSeeEveryWrite) {
  constexpr size_t kStart = 64 << 10;
  std::vector<char> model = RandomBytes(kStart, 9);
  ASSERT_EQ(WriteFile(Mnt("wo.bin"), std::string(model.begin(), model.end())), 0);
  int reader = ::open(Mnt("wo.bin").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(reader, 0) << ErrnoName(errno);
  std::vector<char> back(256 << 10);
  ASSERT_EQ(PreadAll(reader, back.data(), kStart, 0), static_cast<ssize_t>(kStart));  // cached
  void* map = ::mmap(nullptr, kStart, PROT_READ, MAP_SHARED, reader, 0);
  ASSERT_NE(map, MAP_FAILED) << ErrnoName(errno);
  const char* mapped = static_cast<const char*>(map);
  int writer = ::open(Mnt("wo.bin").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(writer, 0) << ErrnoName(errno);

  auto received = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(450));  // stats: every 200 ms
    Stats s = env_->ReadStats();
    return StatNumber(s, "ring_requests").value_or(0) + StatNumber(s, "devfuse_requests").value_or(0);
  };
  // 10 KiB writes that start inside a page: through the page cache each was cut in two.
  constexpr int kCut = 20;
  const uint64_t before = received();
  std::vector<char> buf = RandomBytes(10240, 10);
  for (int i = 0; i < kCut; ++i) {
    ASSERT_EQ(PwriteAll(writer, buf.data(), buf.size(), 2048 + i * 10240), 0);
  }
  const uint64_t requests = received() - before;
  EXPECT_LE(requests, static_cast<uint64_t>(kCut + 4))
      << requests << " requests for " << kCut << " writes: the page cache cut them";
  model.resize(std::max<size_t>(model.size(), 2048 + kCut * 10240));
  for (int i = 0; i < kCut; ++i) std::memcpy(model.data() + 2048 + i * 10240, buf.data(), 10240);

  std::mt19937_64 rng(11);
  for (int op = 0; op < 200; ++op) {
    const size_t size = 1 + rng() % 20000;
    const size_t offset = rng() % (model.size() + 4096);
    std::vector<char> data = RandomBytes(size, op + 100);
    ASSERT_EQ(PwriteAll(writer, data.data(), size, offset), 0) << "op " << op;
    if (model.size() < offset + size) model.resize(offset + size, 0);
    std::memcpy(model.data() + offset, data.data(), size);
    ASSERT_EQ(PreadAll(reader, back.data(), size, offset), static_cast<ssize_t>(size));
    ASSERT_EQ(FirstDiff(back.data(), model.data() + offset, size), -1) << "read after op " << op;
    if (offset < kStart) {
      const size_t n = std::min(size, kStart - offset);
      ASSERT_EQ(FirstDiff(mapped + offset, model.data() + offset, n), -1) << "map after op " << op;
    }
  }
  ::munmap(map, kStart);
  ASSERT_EQ(::close(writer), 0);
  ASSERT_EQ(::close(reader), 0);
  const std::string exported = ReadFile(Exp("wo.bin"));
  ASSERT_EQ(exported.size(), model.size());
  EXPECT_EQ(FirstDiff(exported.data(), model.data(), model.size()), -1) << "in the export dir";
}

TEST_P(DataTest, SparseFileBeyond4GiB) {
  constexpr off_t k5G = 5LL << 30;
  std::vector<char> data = RandomBytes(1 << 20, 55);
  int fd = ::open(Mnt("huge").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(PwriteAll(fd, data.data(), data.size(), k5G), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(st.st_size, k5G + (1 << 20));
  std::vector<char> back(1 << 20);
  ASSERT_EQ(PreadAll(fd, back.data(), back.size(), k5G), 1 << 20);
  EXPECT_TRUE(back == data);
  // Just below and above 4 GiB is a hole.
  ASSERT_EQ(PreadAll(fd, back.data(), 8192, (4LL << 30) - 4096), 8192);
  EXPECT_TRUE(std::all_of(back.begin(), back.begin() + 8192, [](char c) { return c == 0; }));
  // A write straddling the 4 GiB boundary (32-bit offset truncation would show here).
  ASSERT_EQ(PwriteAll(fd, "boundary", 8, (4LL << 30) - 4), 0);
  char small[9] = {};
  ASSERT_EQ(PreadAll(fd, small, 8, (4LL << 30) - 4), 8);
  EXPECT_STREQ(small, "boundary");
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), (4LL << 30) - 4096) << ErrnoName(errno);
  ::close(fd);
  struct stat e {};
  ASSERT_EQ(::stat(Exp("huge").c_str(), &e), 0);
  EXPECT_EQ(e.st_size, k5G + (1 << 20));
  EXPECT_LT(e.st_blocks * 512, 16 << 20) << "the export file must stay sparse";
  int efd = ::open(Exp("huge").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(efd, 0);
  ASSERT_EQ(PreadAll(efd, back.data(), back.size(), k5G), 1 << 20);
  EXPECT_TRUE(back == data);
  ASSERT_EQ(PreadAll(efd, small, 8, (4LL << 30) - 4), 8);
  EXPECT_STREQ(small, "boundary");
  ::close(efd);
}

class ManyFilesTest : public DataTest {
 protected:
  std::chrono::seconds Budget() const override { return std::chrono::seconds(150); }
};

TEST_P(ManyFilesTest, TenThousandFilesReaddirOnceEach) {
  constexpr int kFiles = 10000;
  ASSERT_EQ(::mkdir(Mnt("many").c_str(), 0755), 0) << ErrnoName(errno);
  for (int i = 0; i < kFiles; ++i) {
    std::string name = Mnt("many/file-" + std::to_string(i));
    int fd = ::open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << name << ": " << ErrnoName(errno);
    ASSERT_EQ(::close(fd), 0);
  }
  std::unordered_map<std::string, int> seen;
  DIR* dir = ::opendir(Mnt("many").c_str());
  ASSERT_NE(dir, nullptr) << ErrnoName(errno);
  errno = 0;
  while (dirent* d = ::readdir(dir)) ++seen[d->d_name];
  ASSERT_EQ(errno, 0) << "readdir: " << ErrnoName(errno);
  ::closedir(dir);
  int missing = 0, duplicated = 0;
  std::string examples;
  for (int i = 0; i < kFiles; ++i) {
    auto it = seen.find("file-" + std::to_string(i));
    if (it == seen.end()) {
      if (++missing <= 5) examples += " missing file-" + std::to_string(i);
    } else if (it->second != 1) {
      if (++duplicated <= 5)
        examples += " file-" + std::to_string(i) + " x" + std::to_string(it->second);
    }
  }
  EXPECT_EQ(missing, 0) << examples;
  EXPECT_EQ(duplicated, 0) << examples;
  EXPECT_EQ(seen["."], 1);
  EXPECT_EQ(seen[".."], 1);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kFiles + 2));

  for (int i = 0; i < kFiles; ++i) {
    std::string name = Mnt("many/file-" + std::to_string(i));
    ASSERT_EQ(::unlink(name.c_str()), 0) << name << ": " << ErrnoName(errno);
  }
  dir = ::opendir(Mnt("many").c_str());
  ASSERT_NE(dir, nullptr);
  int left = 0;
  while (::readdir(dir)) ++left;
  ::closedir(dir);
  EXPECT_EQ(left, 2);
  ASSERT_EQ(::rmdir(Mnt("many").c_str()), 0) << ErrnoName(errno);
}

// The server keeps 8 node fds open (--node-fd-cache 8) and the kernel keeps names for a minute
// but attributes for 1 µs, so a stat is a GETATTR of a node the server has to reopen by file
// handle; meanwhile a file that was unlinked is still used through its open fd.
class FewNodeFdsTest : public DataTest {
 protected:
  ServerOptions ServerOpts() const override {
    ServerOptions o;
    o.extra_args = {"--node-fd-cache", "8"};
    return o;
  }
  MountOptions Options() const override {
    MountOptions o = DataTest::Options();
    o.extra = {"entry_timeout=60", "attr_timeout=0.000001"};
    return o;
  }
};

int OpenFds(pid_t pid) {
  DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* d = ::readdir(dir)) n += d->d_name[0] != '.';
  ::closedir(dir);
  return n;
}

TEST_P(FewNodeFdsTest, ManyFilesAndAnUnlinkedOpenFile) {
  int held = ::open(Mnt("held").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0) << ErrnoName(errno);
  ASSERT_EQ(::write(held, "0123456789", 10), 10);
  ASSERT_EQ(::unlink(Mnt("held").c_str()), 0) << ErrnoName(errno);

  constexpr int kFiles = 2000;
  ASSERT_EQ(::mkdir(Mnt("many").c_str(), 0755), 0) << ErrnoName(errno);
  auto name = [&](int i) { return Mnt("many/f-" + std::to_string(i)); };
  for (int i = 0; i < kFiles; ++i) {
    int fd = ::open(name(i).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0) << name(i) << ": " << ErrnoName(errno);
    const std::string content = std::to_string(i);
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ASSERT_EQ(::close(fd), 0);
  }
  const int server_fds = OpenFds(env_->server_process()->pid());
  EXPECT_GT(server_fds, 0);
  EXPECT_LT(server_fds, 200) << "node fds must not grow with the " << kFiles << " files";
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < kFiles; ++i) {
      struct stat st {};
      ASSERT_EQ(::stat(name(i).c_str(), &st), 0) << name(i) << ": " << ErrnoName(errno);
      ASSERT_EQ(st.st_size, static_cast<off_t>(std::to_string(i).size())) << name(i);
      if (i % 97 == 0) {
        EXPECT_EQ(ReadFile(name(i)), std::to_string(i));
      }
    }
  }

  // The unlinked file, through its fd: fstat, ftruncate, fchmod, xattrs, read.
  struct stat st {};
  ASSERT_EQ(::fstat(held, &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_size, 10);
  ASSERT_EQ(::ftruncate(held, 4), 0) << ErrnoName(errno);
  ASSERT_EQ(::fchmod(held, 0600), 0) << ErrnoName(errno);
  ASSERT_EQ(::fsetxattr(held, "user.k", "v", 1, 0), 0) << ErrnoName(errno);
  char value[8] = {};
  EXPECT_EQ(::fgetxattr(held, "user.k", value, sizeof(value)), 1) << ErrnoName(errno);
  ASSERT_EQ(::fstat(held, &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_size, 4);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  char buf[16] = {};
  EXPECT_EQ(::pread(held, buf, sizeof(buf), 0), 4);
  EXPECT_STREQ(buf, "0123");
  ASSERT_EQ(::close(held), 0);

  // Deleted in the export behind the client's back: the server answers the cached name's GETATTR
  // with ESTALE, the kernel looks the name up again and finds it gone.
  ASSERT_EQ(::unlink(Exp("many/f-1").c_str()), 0);
  EXPECT_EQ(RINGFS_ERRNO(::stat(name(1).c_str(), &st)), ENOENT);
  EXPECT_LE(OpenFds(env_->server_process()->pid()), server_fds);
}

TEST_P(DataTest, TwoWritersPinnedToDifferentCpus) {
  const int cpus = static_cast<int>(std::thread::hardware_concurrency());
  ASSERT_GE(cpus, 1);
  constexpr size_t kRegion = 16 << 20;
  constexpr size_t kChunk = 64 << 10;
  int fd = ::open(Mnt("shared.bin").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  std::vector<std::vector<char>> data = {RandomBytes(kRegion, 1001), RandomBytes(kRegion, 1002)};
  std::atomic<int> errors{0};
  std::string messages[2];
  auto writer = [&](int index) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(index % cpus, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
      messages[index] = "sched_setaffinity: " + ErrnoName(errno);
      ++errors;
      return;
    }
    // Each thread also writes its own file, to load both queues with independent inodes.
    std::string own = Mnt("own-" + std::to_string(index));
    int own_fd = ::open(own.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    for (size_t off = 0; off < kRegion; off += kChunk) {
      if (::sched_getcpu() != index % cpus) {
        messages[index] = "thread left its CPU";
        ++errors;
        return;
      }
      int err = PwriteAll(fd, data[index].data() + off, kChunk, index * kRegion + off);
      if (err == 0 && own_fd >= 0) err = PwriteAll(own_fd, data[index].data() + off, kChunk, off);
      if (err != 0) {
        messages[index] = "pwrite at " + std::to_string(off) + ": " + ErrnoName(err);
        ++errors;
        break;
      }
    }
    if (own_fd >= 0) ::close(own_fd);
  };
  std::thread t0(writer, 0), t1(writer, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(errors.load(), 0) << messages[0] << " / " << messages[1];
  ::close(fd);
  std::string whole = ReadFile(Mnt("shared.bin"));
  ASSERT_EQ(whole.size(), 2 * kRegion);
  EXPECT_EQ(FirstDiff(whole.data(), data[0].data(), kRegion), -1);
  EXPECT_EQ(FirstDiff(whole.data() + kRegion, data[1].data(), kRegion), -1);
  std::string exported = ReadFile(Exp("shared.bin"));
  ASSERT_EQ(exported.size(), 2 * kRegion);
  EXPECT_EQ(FirstDiff(exported.data(), data[0].data(), kRegion), -1);
  EXPECT_EQ(FirstDiff(exported.data() + kRegion, data[1].data(), kRegion), -1);
  for (int i = 0; i < 2; ++i) {
    std::string own = ReadFile(Exp("own-" + std::to_string(i)));
    ASSERT_EQ(own.size(), kRegion);
    EXPECT_EQ(FirstDiff(own.data(), data[i].data(), kRegion), -1) << "own-" << i;
  }
}

// The same random workload with the kernel's writeback cache on (mount option), where WRITEs
// reach the server later and in different shapes; fsync makes them reach the export.
class WritebackCacheTest : public DataTest {
 protected:
  MountOptions Options() const override {
    MountOptions o = DataTest::Options();
    o.extra.push_back("writeback_cache");
    return o;
  }
};

TEST_P(WritebackCacheTest, RandomWritesMatchModelAndExport) {
  RandomWriteWorkload(Mnt("random.bin"), Exp("random.bin"), 777, true);
}

// With the writeback cache the kernel places appended bytes itself and writes pages back at
// their offsets, and reads a page before it writes part of it, even through a write-only
// descriptor. An O_APPEND or write-only fd at the server broke both: each append copied the
// bytes before it to the end again, and `echo >>` failed with EBADF from its second line on
// (the mount now opens such files read-write without O_APPEND at the server).
TEST_P(WritebackCacheTest, AppendsAndPartialPageWritesLandWhereTheKernelPutThem) {
  auto append = [&](const std::string& path, int access, const std::string& line) {
    int fd = ::open(path.c_str(), access | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return errno;
    const bool wrote = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
    const int err = wrote ? 0 : errno;
    return ::close(fd) == 0 ? err : errno;
  };
  for (int access : {O_RDWR, O_WRONLY}) {
    const std::string name = access == O_RDWR ? "log-rdwr" : "log-wronly";
    for (const char* line : {"line1\n", "line2\n", "line3\n"}) {
      ASSERT_EQ(append(Mnt(name), access, line), 0) << name << " " << line;
    }
    EXPECT_EQ(ReadFile(Exp(name)), "line1\nline2\nline3\n") << name;
    EXPECT_EQ(ReadFile(Mnt(name)), "line1\nline2\nline3\n") << name;
  }
  // A write at offset 0 through one descriptor while another has the file open O_APPEND.
  ASSERT_EQ(WriteFile(Mnt("mixed"), "hello world\n"), 0);
  int rdwr = ::open(Mnt("mixed").c_str(), O_RDWR | O_CLOEXEC);
  int appending = ::open(Mnt("mixed").c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  ASSERT_GE(rdwr, 0);
  ASSERT_GE(appending, 0);
  ASSERT_EQ(::pwrite(rdwr, "XX", 2, 0), 2);
  ASSERT_EQ(::write(appending, "more\n", 5), 5);
  ASSERT_EQ(::close(rdwr), 0);
  ASSERT_EQ(::close(appending), 0);
  EXPECT_EQ(ReadFile(Exp("mixed")), "XXllo world\nmore\n");
  // A partial-page write in the middle of a page through a write-only descriptor.
  ASSERT_EQ(WriteFile(Mnt("pages"), std::string(8192, 'z')), 0);
  int wronly = ::open(Mnt("pages").c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(wronly, 0);
  EXPECT_EQ(::pwrite(wronly, "QQQ", 3, 4096 + 100), 3) << ErrnoName(errno);
  ASSERT_EQ(::close(wronly), 0);
  std::string expected(8192, 'z');
  expected.replace(4196, 3, "QQQ");
  EXPECT_EQ(ReadFile(Exp("pages")), expected);
}

RINGFS_INSTANTIATE_TRANSPORTS(DataTest);
RINGFS_INSTANTIATE_TRANSPORTS(ManyFilesTest);
RINGFS_INSTANTIATE_TRANSPORTS(WritebackCacheTest);
RINGFS_INSTANTIATE_TRANSPORTS(FewNodeFdsTest);

}  // namespace
}  // namespace ringfs::testing
