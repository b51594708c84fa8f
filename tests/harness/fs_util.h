// Small syscall wrappers for the integration tests: whole-file read/write, errno capture,
// deterministic data. Header-only; any thread.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace ringfs::testing {

// Writes all of data at offset (loops over short writes). Returns 0 or errno.
inline int PwriteAll(int fd, const void* data, size_t size, off_t offset) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, p, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    size -= n;
    offset += n;
  }
  return 0;
}

// Reads up to size bytes at offset (loops until EOF or size). Returns bytes read or -errno.
inline ssize_t PreadAll(int fd, void* data, size_t size, off_t offset) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, p + done, size - done, offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    done += n;
  }
  return static_cast<ssize_t>(done);
}

// Creates/truncates path with data. Returns 0 or errno.
inline int WriteFile(const std::string& path, const std::string& data, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return errno;
  int err = PwriteAll(fd, data.data(), data.size(), 0);
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Whole file, or "<errno N>" text that never equals real test data.
inline std::string ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "<open errno " + std::to_string(errno) + ">";
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return "<read errno " + std::to_string(err) + ">";
    }
    if (n == 0) break;
    out.append(buf, n);
  }
  ::close(fd);
  return out;
}

// errno after a call that returned -1, or 0 when it succeeded.
#define RINGFS_ERRNO(call) ((call) < 0 ? errno : 0)

inline std::vector<char> RandomBytes(size_t size, uint64_t seed) {
  std::vector<char> out(size);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v = rng();
    memcpy(out.data() + i, &v, 8);
  }
  for (; i < size; ++i) out[i] = static_cast<char>(rng());
  return out;
}

// What `rm -rf` does to each directory before it lists it (coreutils checks it is not empty):
// open it, read one getdents of `buffer` bytes, close it. The kernel's copy of the listing stays
// incomplete (it never read past the end). Returns the bytes read, or -1.
inline long ReadFirstPage(const std::string& dir, size_t buffer = 32768) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  std::vector<char> buf(buffer);
  const long n = ::syscall(SYS_getdents64, fd, buf.data(), buf.size());
  ::close(fd);
  return n;
}

// "errno 2 (No such file or directory)" for messages.
inline std::string ErrnoName(int err) {
  return "errno " + std::to_string(err) + " (" + strerror(err) + ")";
}

// Descriptors a test keeps open (across a restart, say) and closes at the end of scope.
class OpenFds {
 public:
  OpenFds() = default;
  OpenFds(const OpenFds&) = delete;
  OpenFds& operator=(const OpenFds&) = delete;
  ~OpenFds() {
    for (int fd : fds_) ::close(fd);
  }
  void Add(int fd) { fds_.push_back(fd); }
  int operator[](size_t i) const { return fds_[i]; }

 private:
  std::vector<int> fds_;
};

// Makes a file on the export immutable (chattr +i: every change of it fails with EPERM) for
// its lifetime; ok() is false, with the errno in error(), when that could not be done.
class ScopedImmutable {
 public:
  explicit ScopedImmutable(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    int flags = 0;
    if (fd_ < 0 || ::ioctl(fd_, FS_IOC_GETFLAGS, &flags) != 0) {
      error_ = errno;
      return;
    }
    flags |= FS_IMMUTABLE_FL;
    if (::ioctl(fd_, FS_IOC_SETFLAGS, &flags) != 0) error_ = errno;
  }
  ~ScopedImmutable() {
    if (fd_ < 0) return;
    int flags = 0;
    if (::ioctl(fd_, FS_IOC_GETFLAGS, &flags) == 0) {
      flags &= ~FS_IMMUTABLE_FL;
      ::ioctl(fd_, FS_IOC_SETFLAGS, &flags);
    }
    ::close(fd_);
  }
  ScopedImmutable(const ScopedImmutable&) = delete;
  ScopedImmutable& operator=(const ScopedImmutable&) = delete;
  bool ok() const { return error_ == 0; }
  int error() const { return error_; }

 private:
  int fd_;
  int error_ = 0;
};

}  // namespace ringfs::testing
