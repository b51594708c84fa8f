// Runs as root (like the rest of the suite): the thread really switches, and the export's kernel
// answers.
#include "server/thread_creds.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <thread>

#include "common/unique_fd.h"
#include "server/test_client.h"

namespace ringfs::server {
namespace {

CallerIdentity Who(uid_t uid, gid_t gid, GroupList groups) {
  return CallerIdentity{uid, gid, std::make_shared<const GroupList>(std::move(groups)), false};
}

class ThreadCredsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanActAsCallers()) GTEST_SKIP() << "needs root";
    secret_ = dir_.Join("secret");
    UniqueFd fd(open(secret_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(mkdir(dir_.Join("team").c_str(), 0770), 0);
    ASSERT_EQ(chown(dir_.Join("team").c_str(), 0, 4242), 0);
    ASSERT_EQ(chmod(dir_.Join("team").c_str(), 0770), 0);  // whatever the umask
    ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  }
  // Each test body runs in a thread of its own, so the gtest thread never changes identity.
  template <typename F>
  void InThread(F f) {
    std::thread t([&] {
      f();
      ActAsServer();
    });
    t.join();
  }

  // Creates `path` as the thread's identity and checks the owner it got.
  static void ExpectCreatedAs(const std::string& path, uid_t uid, gid_t gid) {
    UniqueFd created(open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    ASSERT_TRUE(created.valid()) << strerror(errno);
    struct stat st {};
    ASSERT_EQ(fstat(created.get(), &st), 0);
    EXPECT_EQ(st.st_uid, uid);
    EXPECT_EQ(st.st_gid, gid);
  }

  testing::TempDir dir_;
  std::string secret_;
};

TEST_F(ThreadCredsTest, ACallerGetsTheExportsOwnAnswers) {
  InThread([&] {
    ASSERT_TRUE(ActAs(Who(65534, 65534, {65534})).ok());
    EXPECT_EQ(open(secret_.c_str(), O_RDONLY | O_CLOEXEC), -1);
    EXPECT_EQ(errno, EACCES);
    UniqueFd fd(open(dir_.Join("mine").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    EXPECT_FALSE(fd.valid()) << "the directory is 0755 root";
    // No capability survives: trusted.* needs CAP_SYS_ADMIN, which fsuid changes keep.
    EXPECT_NE(setxattr(dir_.path().c_str(), "trusted.x", "1", 1, 0), 0);
    // A supplementary group opens the 0770 directory; without it the directory is closed.
    ASSERT_TRUE(ActAs(Who(1000, 1000, {1000})).ok());
    EXPECT_EQ(open(dir_.Join("team/x").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644), -1);
    EXPECT_EQ(errno, EACCES);
    ASSERT_TRUE(ActAs(Who(1000, 1000, {1000, 4242})).ok());
    ExpectCreatedAs(dir_.Join("team/x"), 1000, 1000);
  });
}

TEST_F(ThreadCredsTest, ServerScopeAndSwitchBackAndSwitchCount) {
  InThread([&] {
    const uint64_t before = ThreadCredSwitches();
    ASSERT_TRUE(ActAs(Who(65534, 65534, {65534})).ok());
    auto same = Who(65534, 65534, {65534});
    ASSERT_TRUE(ActAs(same).ok());
    ASSERT_TRUE(ActAs(same).ok());  // the same list object: no switch
    EXPECT_EQ(ThreadCredSwitches(), before + 2);
    {
      ServerCredsScope as_server;
      UniqueFd fd(open(secret_.c_str(), O_RDONLY | O_CLOEXEC));
      EXPECT_TRUE(fd.valid());
    }
    EXPECT_EQ(open(secret_.c_str(), O_RDONLY | O_CLOEXEC), -1) << "back to the caller";
    ActAsServer();
    UniqueFd fd(open(secret_.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd.valid());
  });
}

// Acting as a root caller, the scope leaves the credentials alone (they already are what it
// wants): the thread keeps the caller's group for what it creates after the scope.
TEST_F(ThreadCredsTest, ARootCallerKeepsItsGroupThroughAServerScope) {
  InThread([&] {
    ASSERT_TRUE(ActAs(Who(0, 4242, {4242})).ok());
    {
      ServerCredsScope as_server;
      UniqueFd fd(open(secret_.c_str(), O_RDONLY | O_CLOEXEC));
      EXPECT_TRUE(fd.valid());
    }
    ExpectCreatedAs(dir_.Join("by-root"), 0, 4242);
  });
}

TEST_F(ThreadCredsTest, OtherThreadsKeepTheirIdentity) {
  std::thread other([&] { ASSERT_TRUE(ActAs(Who(65534, 65534, {65534})).ok()); });
  other.join();
  // setgroups through glibc would have changed this thread too; the raw call does not.
  UniqueFd fd(open(secret_.c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_TRUE(fd.valid());
  gid_t groups[4];
  EXPECT_GE(getgroups(4, groups), 0);
}

// What one switch costs (printed; no assertion on time): a worker alternating between two users
// pays it per request, one serving one user never.
TEST_F(ThreadCredsTest, SwitchCost) {
  InThread([&] {
    auto a = Who(1000, 1000, {1000, 4242});
    auto b = Who(1001, 1001, {1001});
    constexpr int kRounds = 20000;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRounds; ++i) ASSERT_TRUE(ActAs(i % 2 ? a : b).ok());
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - start).count();
    std::printf("identity switch: %.2f us\n", static_cast<double>(ns) / kRounds / 1000.0);
  });
}

}  // namespace
}  // namespace ringfs::server
