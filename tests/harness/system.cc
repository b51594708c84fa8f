#include "tests/harness/system.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "common/unique_fd.h"
#include "tests/harness/process.h"

#ifndef RINGFS_BIN_DIR
#error "RINGFS_BIN_DIR must point at the build's bin/ directory"
#endif

namespace ringfs::testing {
namespace {

constexpr char kEnableUring[] = "/sys/module/fuse/parameters/enable_uring";
constexpr char kFuseCtl[] = "/sys/fs/fuse/connections";

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3; ++j) {
        if (s[i + j] < '0' || s[i + j] > '7') {
          ok = false;
          break;
        }
        v = v * 8 + (s[i + j] - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

}  // namespace

std::string BinDir() { return RINGFS_BIN_DIR; }
std::string BinPath(const std::string& name) { return BinDir() + "/" + name; }

::testing::AssertionResult CheckRoot() {
  if (::geteuid() != 0) {
    return ::testing::AssertionFailure()
           << "the ringfs integration tests mount filesystems and must run as root (euid is "
           << ::geteuid() << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult SetUringEnabled(bool on) {
  const std::string want = on ? "Y" : "N";
  std::string current = ReadFileOrEmpty(kEnableUring);
  if (!current.empty() && current[0] == want[0]) return ::testing::AssertionSuccess();
  {
    std::ofstream out(kEnableUring);
    if (!out) {
      return ::testing::AssertionFailure()
             << "cannot open " << kEnableUring << " (" << strerror(errno)
             << "); is the fuse module loaded and this kernel built with FUSE_IO_URING?";
    }
    out << (on ? "1" : "0") << "\n";
  }
  current = ReadFileOrEmpty(kEnableUring);
  if (current.empty() || current[0] != want[0]) {
    return ::testing::AssertionFailure()
           << kEnableUring << " reads '" << current << "' after writing " << (on ? 1 : 0);
  }
  return ::testing::AssertionSuccess();
}

std::vector<MountEntry> ReadMountInfo() {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount_point options [optional...] - fstype source superopts
    std::istringstream fields(line);
    std::string id, parent, devs, root, mp, opts;
    fields >> id >> parent >> devs >> root >> mp >> opts;
    std::string tok;
    while (fields >> tok && tok != "-") {
    }
    MountEntry e;
    e.mount_point = Unescape(mp);
    fields >> e.fstype >> e.source;
    e.source = Unescape(e.source);
    sscanf(devs.c_str(), "%u:%u", &e.dev_major, &e.dev_minor);
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<MountEntry> FindMount(const std::string& mount_point) {
  std::optional<MountEntry> found;
  for (MountEntry& e : ReadMountInfo()) {
    if (e.mount_point == mount_point) found = e;  // Last one is the top of the stack.
  }
  return found;
}

bool IsMounted(const std::string& mount_point) { return FindMount(mount_point).has_value(); }

std::string ForceUnmount(const std::string& mount_point, bool allow_fork) {
  std::ostringstream did;
  for (int round = 0; round < 8; ++round) {
    std::optional<MountEntry> e = FindMount(mount_point);
    if (!e) break;
    did << "forced unmount of " << mount_point << " (" << e->fstype << ")";
    if (e->fstype.rfind("fuse", 0) == 0) {
      // Abort the connection first so that nothing blocked on it (in this process too) hangs.
      bool mounted_ctl = false;
      struct stat st;
      std::string abort_path =
          std::string(kFuseCtl) + "/" + std::to_string(e->dev_minor) + "/abort";
      if (::stat(abort_path.c_str(), &st) != 0 &&
          ::mount("fusectl", kFuseCtl, "fusectl", 0, nullptr) == 0) {
        mounted_ctl = true;
      }
      int fd = ::open(abort_path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        if (::write(fd, "1", 1) == 1) did << ", connection aborted";
        ::close(fd);
      }
      if (mounted_ctl) ::umount2(kFuseCtl, MNT_DETACH);
    }
    if (::umount2(mount_point.c_str(), MNT_DETACH) == 0) {
      did << ", umount -l ok; ";
      continue;
    }
    did << ", umount -l: " << strerror(errno);
    if (allow_fork) {
      auto st = RunCommand({"/usr/bin/fusermount3", "-uz", mount_point}, "/dev/null",
                           std::chrono::seconds(10));
      did << ", fusermount3 -uz: " << (st ? DescribeWaitStatus(*st) : "did not run");
    }
    did << "; ";
  }
  if (IsMounted(mount_point)) did << "STILL MOUNTED: " << mount_point;
  return did.str();
}

std::vector<pid_t> FindProcessesWithArg(const std::string& needle) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (!proc) return pids;
  const pid_t self = ::getpid();
  while (dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    long pid = strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    std::string cmdline = ReadFileOrEmpty("/proc/" + std::string(d->d_name) + "/cmdline");
    size_t start = 0;
    while (start < cmdline.size()) {
      size_t nul = cmdline.find('\0', start);
      if (nul == std::string::npos) nul = cmdline.size();
      if (cmdline.compare(start, nul - start, needle) == 0 ||
          cmdline.substr(start, nul - start).find(needle) != std::string::npos) {
        pids.push_back(static_cast<pid_t>(pid));
        break;
      }
      start = nul + 1;
    }
  }
  ::closedir(proc);
  return pids;
}

Stats ParseStats(const std::string& text) {
  Stats stats;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    stats[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return stats;
}

std::optional<uint64_t> StatNumber(const Stats& stats, const std::string& key) {
  auto it = stats.find(key);
  if (it == stats.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  unsigned long long v = strtoull(it->second.c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  return v;
}

std::string RunAsUser(uid_t uid, gid_t gid, const std::function<std::string()>& fn,
                      std::chrono::seconds timeout) {
  return RunAsUserWithGroups(uid, gid, {}, fn, timeout);
}

std::string RunAsUserWithGroups(uid_t uid, gid_t gid, const std::vector<gid_t>& groups,
                                const std::function<std::string()>& fn,
                                std::chrono::seconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::string("pipe: ") + strerror(errno);
  pid_t pid = ::fork();
  if (pid < 0) return std::string("fork: ") + strerror(errno);
  if (pid == 0) {
    ::close(fds[0]);
    std::string result;
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 ||
        ::setuid(uid) != 0) {
      result = std::string("dropping privileges: ") + strerror(errno);
    } else if (::geteuid() != uid || ::getegid() != gid) {
      result = "privileges not dropped";
    } else {
      result = fn();
    }
    size_t off = 0;
    while (off < result.size()) {
      ssize_t n = ::write(fds[1], result.data() + off, result.size() - off);
      if (n <= 0) break;
      off += n;
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string message;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = (r == 0);
      break;
    }
    char buf[4096];
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n <= 0) break;
    message.append(buf, n);
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return "child as uid " + std::to_string(uid) + " timed out; " + message;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "child as uid " + std::to_string(uid) + " " + DescribeWaitStatus(status) + "; " +
           message;
  }
  return message;
}

int UnusedLoopbackPort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  socklen_t len = sizeof(addr);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  return ntohs(addr.sin_port);  // Closed on return; nothing listened on it.
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "";
  }
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") == std::string::npos ||
      body == std::string::npos) {
    return "";
  }
  return response.substr(body + 4);
}

namespace {
int RemoveEntry(const char* path, const struct stat* st, int type, struct FTW*) {
  if (type == FTW_DP) {
    ::rmdir(path);
  } else {
    ::unlink(path);
  }
  return 0;
}
}  // namespace

bool RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return true;
  ::nftw(path.c_str(), RemoveEntry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  return ::lstat(path.c_str(), &st) != 0;
}

}  // namespace ringfs::testing
