// The seccomp profile the Kubernetes manifests name (deploy/k8s/seccomp/ringfs-io-uring.json),
// loaded with libseccomp as runc loads a Localhost profile, around the real ringfs-server: it
// starts, serves a mount (file data through its io_uring, metadata, xattrs, handles) and stops
// cleanly; with the profile's io_uring calls taken out, as in the runtimes' default profiles,
// it cannot start. What this does not show: that a kubelet and a runtime load the file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

constexpr const char* kProfile = RINGFS_SECCOMP_PROFILE;

std::vector<std::string> Launcher(const std::string& without = "") {
  std::vector<std::string> argv = {BinPath("seccomp_exec"), kProfile};
  if (!without.empty()) {
    argv.push_back("--without");
    argv.push_back(without);
  }
  argv.push_back("--");
  return argv;
}

// "Seccomp:" of /proc/PID/status: 2 is filter mode.
std::string SeccompMode(pid_t pid) {
  std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  size_t at = status.find("\nSeccomp:");
  if (at == std::string::npos) return "?";
  size_t start = status.find_first_not_of(" \t", at + 9);
  return status.substr(start, status.find('\n', start) - start);
}

class SeccompProfileTest : public MountedTest {
 protected:
  ServerOptions ServerOpts() const override {
    ServerOptions o;
    o.wrapper = Launcher();
    return o;
  }
};

TEST_P(SeccompProfileTest, ServerUnderTheProfileServesTheMount) {
  ASSERT_EQ(SeccompMode(env_->server_process()->pid()), "2")
      << "the server does not run under a seccomp filter";

  // Large writes and reads: the server does them on its io_uring.
  std::vector<char> data = RandomBytes(3 << 20, 7);
  ASSERT_EQ(WriteFile(Mnt("big"), std::string(data.begin(), data.end())), 0);
  int fd = ::open(Mnt("big").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fsync(fd), 0) << ErrnoName(errno);
  ::close(fd);
  EXPECT_EQ(ReadFile(Exp("big")), std::string(data.begin(), data.end()));
  EXPECT_EQ(ReadFile(Mnt("big")), std::string(data.begin(), data.end()));

  // Metadata, links, xattrs, statfs.
  ASSERT_EQ(::mkdir(Mnt("dir").c_str(), 0755), 0) << ErrnoName(errno);
  ASSERT_EQ(::rename(Mnt("big").c_str(), Mnt("dir/moved").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::symlink("moved", Mnt("dir/link").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::link(Mnt("dir/moved").c_str(), Mnt("dir/hard").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::setxattr(Mnt("dir/moved").c_str(), "user.k8s", "yes", 3, 0), 0) << ErrnoName(errno);
  char value[8] = {};
  EXPECT_EQ(::getxattr(Exp("dir/moved").c_str(), "user.k8s", value, sizeof(value)), 3);
  EXPECT_STREQ(value, "yes");
  struct stat st {};
  ASSERT_EQ(::stat(Mnt("dir/link").c_str(), &st), 0) << ErrnoName(errno);
  EXPECT_EQ(st.st_size, 3 << 20);
  EXPECT_EQ(st.st_nlink, 2u);
  struct statvfs vfs {};
  EXPECT_EQ(::statvfs(Mnt("").c_str(), &vfs), 0) << ErrnoName(errno);
  ASSERT_EQ(::unlink(Mnt("dir/hard").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::unlink(Mnt("dir/link").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::unlink(Mnt("dir/moved").c_str()), 0) << ErrnoName(errno);
  ASSERT_EQ(::rmdir(Mnt("dir").c_str()), 0) << ErrnoName(errno);

  // Node handles work under the filter (open_by_handle_at is in the profile).
  EXPECT_NE(ReadFile(env_->server_log()).find("nodes by file handle"), std::string::npos)
      << ReadFile(env_->server_log());
  // And it stops cleanly (SIGTERM, exit 0) under it.
  ASSERT_TRUE(env_->Unmount());
  EXPECT_TRUE(env_->StopServer());
}

RINGFS_INSTANTIATE_TRANSPORTS(SeccompProfileTest);

class SeccompProfileFileTest : public RingfsTestBase {};

// The control: the same profile without the io_uring calls, which is what the container
// runtimes' default profiles do, and the server cannot start. So the filter really applies, and
// the three calls are what the profile adds for ringfs.
TEST_F(SeccompProfileFileTest, WithoutTheIoUringCallsTheServerCannotStart) {
  ASSERT_TRUE(NewEnv());
  ServerOptions options;
  options.wrapper = Launcher("io_uring_setup,io_uring_enter,io_uring_register");
  EXPECT_FALSE(env_->StartServer(options));
  EXPECT_NE(ReadFile(env_->server_log()).find("io_uring_queue_init: Operation not permitted"),
            std::string::npos)
      << ReadFile(env_->server_log());
}

// Every name in the profile is a system call libseccomp knows (a misspelt name would be
// skipped silently by runc, leaving that call refused).
TEST_F(SeccompProfileFileTest, EveryNameIsASystemCall) {
  std::string command = BinPath("seccomp_exec") + " " + kProfile + " --unknown";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string unknown;
  char buffer[256];
  size_t n;
  while ((n = ::fread(buffer, 1, sizeof(buffer), pipe)) > 0) unknown.append(buffer, n);
  EXPECT_EQ(::pclose(pipe), 0);
  EXPECT_EQ(unknown, "") << "names libseccomp does not know";
}

}  // namespace
}  // namespace ringfs::testing
