// Issue 12: the Debian packages as an operator uses them. One test builds them with cpack from
// this build tree, installs them with apt-get, checks their units with systemd-analyze verify,
// runs the installed server as its unit would (Type=notify: READY=1 on $NOTIFY_SOCKET), mounts
// with `mount -t ringfs` and from an fstab line (mount(8) runs the installed /sbin/mount.ringfs),
// unmounts, and purges both packages, checking that nothing of them stays.
// This machine has no systemd as PID 1, so the units are verified, not started; the notify
// protocol is checked against a socket of the test, as systemd would listen on.
// It installs into the real system: it skips if ringfs packages are already installed (an
// operator's install is never touched) and always purges what it installed. On a host whose
// PID 1 is systemd the client's postinst also starts ringfs-uring.service, which turns
// enable_uring on for the machine, as it does for an operator (this suite sets it anyway).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/harness/process.h"
#include "tests/harness/system.h"

namespace ringfs::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Outcome {
  int exit_code = -1;
  std::string output;
};

// Runs argv to completion (bounded by `timeout`), its output captured.
Outcome RunWith(const std::vector<std::string>& argv, const std::string& log, seconds timeout) {
  std::filesystem::remove(log);
  std::optional<int> status = RunCommand(argv, log, timeout);
  Outcome run;
  run.output = ReadFileOrEmpty(log);
  if (status && WIFEXITED(*status)) run.exit_code = WEXITSTATUS(*status);
  return run;
}

bool PackageInstalled(const std::string& name) {
  std::string log = std::string(RINGFS_IT_PREFIX) + "dpkg-query.log";
  Outcome run = RunWith({"/usr/bin/dpkg-query", "-W", "-f=${Status}", name}, log, seconds(20));
  std::filesystem::remove(log);
  return run.output.find("install ok installed") != std::string::npos;
}

// The datagram socket a service manager listens on ($NOTIFY_SOCKET).
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  // Waits for a message that contains `what`; returns all messages seen meanwhile.
  bool WaitFor(const std::string& what, seconds timeout, std::string* seen) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      timeval tv{0, 100'000};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buffer[4096];
      ssize_t n = recv(fd_, buffer, sizeof(buffer) - 1, 0);
      if (n <= 0) continue;
      std::string message(buffer, static_cast<size_t>(n));
      *seen += message + " | ";
      if (message.find(what) != std::string::npos) return true;
    }
    return false;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (installs packages, mounts)";
    for (const char* tool : {"/usr/bin/cpack", "/usr/bin/apt-get", "/usr/bin/dpkg-shlibdeps"}) {
      if (access(tool, X_OK) != 0) GTEST_SKIP() << tool << " missing (scripts/install-deps.sh)";
    }
    if (PackageInstalled("ringfs-server") || PackageInstalled("ringfs-client")) {
      GTEST_SKIP() << "ringfs packages are installed on this machine; the test leaves them alone";
    }
    std::string pattern = std::string(RINGFS_IT_PREFIX) + "pkgXXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    for (const char* sub : {"/exp", "/mnt"}) {
      ASSERT_TRUE(std::filesystem::create_directory(dir_ + sub));
    }
    std::filesystem::permissions(dir_ + "/exp", std::filesystem::perms::all |
                                                    std::filesystem::perms::sticky_bit);
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (IsMounted(dir_ + "/mnt")) ADD_FAILURE() << ForceUnmount(dir_ + "/mnt");
    if (server_) server_->Kill();
    if (installed_) Purge();
    unsetenv("NOTIFY_SOCKET");
    RemoveTree(dir_);
  }

  void Purge() {
    Outcome purge = RunWith({"/usr/bin/apt-get", "purge", "-y", "ringfs-server", "ringfs-client"},
                            dir_ + "/purge.log", seconds(90));
    EXPECT_EQ(purge.exit_code, 0) << purge.output;
    installed_ = false;
  }

  // Every step within the test's budget, so that the purge in TearDown always has its time
  // before ctest's TIMEOUT (420 s) would kill the test with the packages installed.
  Outcome Sh(const std::vector<std::string>& argv, seconds timeout = seconds(60)) {
    auto left = std::chrono::duration_cast<seconds>(deadline_ - Clock::now());
    return RunWith(argv, dir_ + "/cmd.log", std::max(seconds(1), std::min(timeout, left)));
  }

  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline_ = Clock::now() + seconds(300);
  std::string dir_;
  bool installed_ = false;
  std::unique_ptr<ChildProcess> server_;
};

TEST_F(PackageTest, BuildInstallVerifyMountUnmountPurge) {
  // Build.
  Outcome cpack = Sh({"/usr/bin/cpack", "-G", "DEB", "--config",
                  std::string(RINGFS_BUILD_DIR) + "/CPackConfig.cmake", "-B", dir_ + "/pkg"},
                 seconds(300));
  ASSERT_EQ(cpack.exit_code, 0) << cpack.output;
  std::string server_deb, client_deb;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/pkg")) {
    std::string name = entry.path().filename();
    if (name.rfind("ringfs-server_", 0) == 0 && entry.path().extension() == ".deb") server_deb = entry.path();
    if (name.rfind("ringfs-client_", 0) == 0 && entry.path().extension() == ".deb") client_deb = entry.path();
  }
  ASSERT_FALSE(server_deb.empty()) << cpack.output;
  ASSERT_FALSE(client_deb.empty()) << cpack.output;

  // What they declare and carry.
  Outcome depends = Sh({"/usr/bin/dpkg-deb", "-f", client_deb, "Depends"});
  for (const char* dependency : {"liburing2", "libgrpc++", "libsystemd0", "mount"}) {
    EXPECT_NE(depends.output.find(dependency), std::string::npos) << depends.output;
  }
  Outcome client_files = Sh({"/usr/bin/dpkg-deb", "-c", client_deb});
  for (const char* path : {"./usr/sbin/ringfs-mount", "./usr/sbin/mount.ringfs -> ringfs-mount",
                           "./usr/bin/ringfsctl", "./usr/lib/systemd/system/ringfs-mount@.service",
                           "./usr/lib/systemd/system/ringfs-uring.service",
                           "./usr/share/doc/ringfs-client/examples/fstab"}) {
    EXPECT_NE(client_files.output.find(path), std::string::npos) << path << "\n" << client_files.output;
  }
  Outcome server_files = Sh({"/usr/bin/dpkg-deb", "-c", server_deb});
  for (const char* path : {"./usr/sbin/ringfs-server", "./usr/lib/systemd/system/ringfs-server@.service"}) {
    EXPECT_NE(server_files.output.find(path), std::string::npos) << path << "\n" << server_files.output;
  }

  // Install as the README says.
  installed_ = true;
  Outcome install = Sh({"/usr/bin/env", "DEBIAN_FRONTEND=noninteractive", "/usr/bin/apt-get", "install",
                    "-y", "--no-install-recommends", server_deb, client_deb},
                   seconds(300));
  ASSERT_EQ(install.exit_code, 0) << install.output;
  ASSERT_TRUE(PackageInstalled("ringfs-server"));
  ASSERT_TRUE(PackageInstalled("ringfs-client"));
  ASSERT_EQ(access("/sbin/mount.ringfs", X_OK), 0) << "mount(8) looks for its helper there";

  // The units as systemd reads them (executables present, no unknown keys).
  for (const char* unit : {"ringfs-server@data.service", "ringfs-mount@mnt-data.service",
                           "ringfs-uring.service"}) {
    Outcome verify = Sh({"/usr/bin/systemd-analyze", "verify", unit});
    EXPECT_EQ(verify.exit_code, 0) << unit << ": " << verify.output;
    EXPECT_EQ(verify.output, "") << unit;
  }

  // The installed server, as ringfs-server@.service starts it (Type=notify).
  NotifySocket notify(dir_ + "/notify");
  ASSERT_TRUE(notify.bound());
  setenv("NOTIFY_SOCKET", (dir_ + "/notify").c_str(), 1);
  std::string error;
  server_ = ChildProcess::Spawn({"/usr/sbin/ringfs-server", "--export", dir_ + "/exp", "--listen",
                                 "127.0.0.1:0", "--ready-file", dir_ + "/ready"},
                                dir_ + "/server.log", &error);
  ASSERT_NE(server_, nullptr) << error;
  std::string seen;
  ASSERT_TRUE(notify.WaitFor("READY=1", seconds(10), &seen))
      << seen << ReadFileOrEmpty(dir_ + "/server.log");
  std::string address = ReadFileOrEmpty(dir_ + "/ready");
  while (!address.empty() && std::isspace(static_cast<unsigned char>(address.back()))) address.pop_back();
  ASSERT_FALSE(address.empty());

  // The mount as ringfs-mount@.service runs it (-f, Type=notify): READY=1 once it answers,
  // STOPPING=1 when it is unmounted, then it exits.
  const std::string mnt = dir_ + "/mnt";
  std::unique_ptr<ChildProcess> service =
      ChildProcess::Spawn({"/usr/sbin/ringfs-mount", address + ":/", mnt, "-f", "-o", "control=none"},
                          dir_ + "/mount.log", &error);
  ASSERT_NE(service, nullptr) << error;
  EXPECT_TRUE(notify.WaitFor("READY=1", seconds(10), &seen))
      << seen << ReadFileOrEmpty(dir_ + "/mount.log");
  {
    std::ofstream(mnt + "/hello") << "from the package";
  }
  EXPECT_EQ(ReadFileOrEmpty(mnt + "/hello"), "from the package");
  Outcome umount = Sh({"/bin/umount", mnt});
  EXPECT_EQ(umount.exit_code, 0) << umount.output;
  EXPECT_TRUE(notify.WaitFor("STOPPING=1", seconds(10), &seen)) << seen;
  std::optional<int> service_exit = service->WaitExit(seconds(10));
  ASSERT_TRUE(service_exit.has_value()) << "ringfs-mount -f outlived its unmount";
  EXPECT_TRUE(WIFEXITED(*service_exit) && WEXITSTATUS(*service_exit) == 0)
      << DescribeWaitStatus(*service_exit);

  // mount -t ringfs: mount(8) runs /sbin/mount.ringfs, which returns once the mount answers and
  // leaves its daemon. That daemon is no service's main process: it sends nothing to the
  // service manager of whoever ran mount(8).
  Outcome mount = Sh({"/bin/mount", "-t", "ringfs", address + ":/", mnt, "-o", "control=none"});
  ASSERT_EQ(mount.exit_code, 0) << mount.output;
  EXPECT_EQ(ReadFileOrEmpty(mnt + "/hello"), "from the package");
  umount = Sh({"/bin/umount", mnt});
  EXPECT_EQ(umount.exit_code, 0) << umount.output;
  EXPECT_FALSE(notify.WaitFor("READY=1", seconds(1), &seen)) << seen;
  unsetenv("NOTIFY_SOCKET");

  // An fstab line with the options of the shipped example (_netdev, x-systemd.*: for mount(8)
  // and systemd, ignored by ringfs).
  {
    std::ofstream(dir_ + "/fstab")
        << address << ":/ " << mnt
        << " ringfs _netdev,x-systemd.automount,x-systemd.requires=ringfs-uring.service,"
           "control=none 0 0\n";
  }
  Outcome fstab_mount = Sh({"/bin/mount", "--fstab", dir_ + "/fstab", mnt});
  ASSERT_EQ(fstab_mount.exit_code, 0) << fstab_mount.output;
  std::optional<MountEntry> entry = FindMount(mnt);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(ReadFileOrEmpty(mnt + "/hello"), "from the package");
  umount = Sh({"/bin/umount", mnt});
  EXPECT_EQ(umount.exit_code, 0) << umount.output;
  // The mount's daemon ends by itself once unmounted.
  auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (!FindProcessesWithArg(mnt).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(FindProcessesWithArg(mnt).empty()) << "ringfs-mount outlived its unmount";

  server_->Signal(SIGTERM);
  EXPECT_TRUE(server_->WaitExit(seconds(10)).has_value());

  // Purge: nothing of either package stays.
  Purge();
  EXPECT_FALSE(PackageInstalled("ringfs-server"));
  EXPECT_FALSE(PackageInstalled("ringfs-client"));
  for (const char* path : {"/usr/sbin/ringfs-server", "/usr/sbin/ringfs-mount", "/sbin/mount.ringfs",
                           "/usr/bin/ringfsctl", "/usr/lib/systemd/system/ringfs-server@.service",
                           "/usr/share/doc/ringfs-client"}) {
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(path))) << path;
  }
}

}  // namespace
}  // namespace ringfs::testing
