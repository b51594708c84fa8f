// Issue 12: deploy/local-cluster.sh brings up 2 servers and 2 clients in network namespaces of
// its own; a file written through one client is read through the other, a partition (a node's
// link cut) ends the cut-off client's calls with ETIMEDOUT while the other client goes on, and
// healing it brings the client back with what happened meanwhile. `down` leaves no namespace,
// mount or process.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "tests/harness/process.h"
#include "tests/harness/system.h"

namespace ringfs::testing {
namespace {

using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (network namespaces, mounts)";
    if (access("/usr/bin/nsenter", X_OK) != 0 || access("/usr/sbin/ip", X_OK) != 0) {
      GTEST_SKIP() << "needs nsenter (util-linux) and ip (iproute2)";
    }
    std::string pattern = std::string(RINGFS_IT_PREFIX) + "clusterXXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    // Namespaces are global: a name of this run's own.
    name_ = "rit" + std::to_string(getpid());
    setenv("RINGFS_BIN", BinDir().c_str(), 1);
    setenv("MOUNT_OPTS", "timeout=3", 1);
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (up_) {
      std::optional<int> status = Script({"down"});
      EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << ReadFileOrEmpty(dir_ + "/script.log");
    }
    std::string namespaces = Capture({"/usr/sbin/ip", "netns", "list"});
    EXPECT_EQ(namespaces.find(name_ + "-"), std::string::npos) << "left behind: " << namespaces;
    unsetenv("RINGFS_BIN");
    unsetenv("MOUNT_OPTS");
    RemoveTree(dir_);
  }

  std::optional<int> Script(std::vector<std::string> args) {
    std::vector<std::string> argv = {"/bin/bash",
                                     std::string(RINGFS_SOURCE_DIR) + "/deploy/local-cluster.sh"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--dir", dir_});
    if (args[0] == "up") argv.insert(argv.end(), {"--name", name_});
    return RunCommand(argv, dir_ + "/script.log", seconds(60));
  }

  std::string Capture(const std::vector<std::string>& argv) {
    const std::string log = dir_ + "/capture.log";
    std::filesystem::remove(log);
    (void)RunCommand(argv, log, seconds(20));
    return ReadFileOrEmpty(log);
  }

  std::string Mount(int client, int server) {
    return dir_ + "/c" + std::to_string(client) + "/s" + std::to_string(server);
  }

  std::string dir_, name_;
  bool up_ = false;
};

bool Ok(const std::optional<int>& status) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

// mkdir(2) through a mount: 0 or the errno, and how long it took. A create always needs the
// server (a lookup of an absent name may be answered by the mount: frontend/complete_dirs.h).
std::pair<int, double> TimedMkdir(const std::string& path) {
  auto start = Clock::now();
  int err = ::mkdir(path.c_str(), 0755) == 0 ? 0 : errno;
  return {err, std::chrono::duration<double>(Clock::now() - start).count()};
}

TEST_F(LocalClusterTest, TwoServersTwoClientsSurviveAPartition) {
  up_ = true;  // `down` also undoes a failed `up`
  ASSERT_TRUE(Ok(Script({"up", "--servers", "2", "--clients", "2"})))
      << ReadFileOrEmpty(dir_ + "/script.log");
  for (int c = 1; c <= 2; ++c) {
    for (int s = 1; s <= 2; ++s) ASSERT_TRUE(IsMounted(Mount(c, s))) << Mount(c, s);
  }
  // No address of the cluster outside its namespaces.
  EXPECT_EQ(Capture({"/usr/sbin/ip", "-o", "addr"}).find("10.77.0."), std::string::npos);

  // Written through one client, read through the other, and stored by the right server.
  { std::ofstream(Mount(1, 1) + "/from-c1") << "c1 to s1"; }
  { std::ofstream(Mount(2, 2) + "/from-c2") << "c2 to s2"; }
  EXPECT_EQ(ReadFileOrEmpty(Mount(2, 1) + "/from-c1"), "c1 to s1");
  EXPECT_EQ(ReadFileOrEmpty(Mount(1, 2) + "/from-c2"), "c2 to s2");
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/s1/export/from-c1"), "c1 to s1");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/s2/export/from-c1"));

  // Client 1 cut off: its calls end with ETIMEDOUT (timeout=3) instead of hanging; client 2 goes
  // on writing meanwhile.
  ASSERT_TRUE(Ok(Script({"cut", "c1"}))) << ReadFileOrEmpty(dir_ + "/script.log");
  auto [err, took] = TimedMkdir(Mount(1, 1) + "/asked-during-the-cut");
  EXPECT_EQ(err, ETIMEDOUT) << std::strerror(err);
  EXPECT_LT(took, 10.0);
  { std::ofstream(Mount(2, 1) + "/made-during-the-cut") << "while c1 was away"; }
  EXPECT_EQ(ReadFileOrEmpty(Mount(2, 1) + "/made-during-the-cut"), "while c1 was away");

  // Healed: client 1 reconnects and sees what client 2 did.
  ASSERT_TRUE(Ok(Script({"heal", "c1"}))) << ReadFileOrEmpty(dir_ + "/script.log");
  std::string seen;
  auto deadline = Clock::now() + seconds(15);
  while (Clock::now() < deadline &&
         (seen = ReadFileOrEmpty(Mount(1, 1) + "/made-during-the-cut")) != "while c1 was away") {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(seen, "while c1 was away");

  // A server cut off: both clients' calls to it time out, the other server serves on.
  ASSERT_TRUE(Ok(Script({"cut", "s2"}))) << ReadFileOrEmpty(dir_ + "/script.log");
  auto [err2, took2] = TimedMkdir(Mount(2, 2) + "/nothing");
  EXPECT_EQ(err2, ETIMEDOUT) << std::strerror(err2);
  EXPECT_LT(took2, 10.0);
  EXPECT_EQ(ReadFileOrEmpty(Mount(2, 1) + "/from-c1"), "c1 to s1");
  ASSERT_TRUE(Ok(Script({"heal", "s2"}))) << ReadFileOrEmpty(dir_ + "/script.log");

  ASSERT_TRUE(Ok(Script({"down"}))) << ReadFileOrEmpty(dir_ + "/script.log");
  up_ = false;
  for (int c = 1; c <= 2; ++c) {
    for (int s = 1; s <= 2; ++s) EXPECT_FALSE(IsMounted(Mount(c, s))) << Mount(c, s);
  }
  EXPECT_TRUE(FindProcessesWithArg(dir_).empty()) << "a daemon of the cluster survived";
}

}  // namespace
}  // namespace ringfs::testing
