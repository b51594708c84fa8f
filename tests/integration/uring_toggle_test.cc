// Behaviour when the kernel offers no ring (enable_uring = N): transport=uring refuses to mount,
// transport=auto falls back to classic. These tests flip a global kernel parameter, so ctest
// runs them RUN_SERIAL; TearDown always turns the ring back on.

#include <gtest/gtest.h>

#include "tests/harness/ringfs_test.h"

namespace ringfs::testing {
namespace {

class UringDisabledTest : public RingfsTestBase {
 protected:
  void SetUp() override {
    RingfsTestBase::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_TRUE(NewEnv());
    ASSERT_TRUE(env_->StartServer());
    ASSERT_TRUE(SetUringEnabled(false));
  }
  void TearDown() override {
    RingfsTestBase::TearDown();
    EXPECT_TRUE(SetUringEnabled(true));
  }
};

TEST_F(UringDisabledTest, UringTransportRefusesToMount) {
  MountOptions o;
  o.transport = "uring";
  auto status = env_->MountExpectingFailure(o, env_->server_address(), std::chrono::seconds(20));
  ASSERT_TRUE(status.has_value()) << "transport=uring without a ring neither mounted nor failed "
                                     "within 20 s";
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "transport=uring mounted although enable_uring is N: " << DescribeWaitStatus(*status);
  EXPECT_FALSE(IsMounted(env_->mount_dir()));
  EXPECT_NE(ReadFileOrEmpty(env_->mount_log()), "") << "it must say why";
}

TEST_F(UringDisabledTest, AutoFallsBackToClassicWithOneLogLine) {
  MountOptions o;
  o.transport = "auto";
  ASSERT_TRUE(env_->Mount(o));
  ASSERT_EQ(WriteFile(env_->Mnt("f"), "fallback"), 0);
  EXPECT_EQ(ReadFile(env_->Exp("f")), "fallback");
  ASSERT_TRUE(env_->Unmount());
  Stats stats = env_->ReadStats();
  EXPECT_EQ(stats["transport"], "classic") << ReadFileOrEmpty(env_->stats_path());
  EXPECT_EQ(StatNumber(stats, "ring_requests").value_or(1), 0u);
  const std::string log = ReadFileOrEmpty(env_->mount_log());
  EXPECT_NE(log.find("classic"), std::string::npos) << "the fallback must be logged:\n" << log;
}

}  // namespace
}  // namespace ringfs::testing
