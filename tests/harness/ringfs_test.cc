#include "tests/harness/ringfs_test.h"

#include <iostream>

namespace ringfs::testing {

void RingfsTestBase::SetUp() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  Watchdog::Arm(Budget(), std::string(info->test_suite_name()) + "." + info->name());
  ::umask(022);
  ASSERT_TRUE(CheckRoot());
  ASSERT_TRUE(SetUringEnabled(true));
}

::testing::AssertionResult RingfsTestBase::NewEnv() {
  env_ = std::make_unique<RingfsEnv>();
  return env_->Init();
}

void RingfsTestBase::TearDown() {
  if (env_) {
    const bool failed_before = HasFailure();
    // Capture the logs after the daemons have stopped: their last lines matter most.
    const std::string base = env_->base();
    env_->Teardown();
    if (!env_->teardown_notes().empty()) {
      ADD_FAILURE() << "unclean teardown of " << base << ": " << env_->teardown_notes();
    }
    if (failed_before || HasFailure()) {
      std::cerr << "===== daemon logs of the failed test (" << base << ", removed; set "
                << "RINGFS_KEEP_TMP=1 to keep it) =====\n"
                << env_->final_logs();
    }
    env_.reset();
  }
  Watchdog::Disarm();
}

void MountedTest::SetUp() {
  RingfsTestBase::SetUp();
  if (HasFatalFailure() || IsSkipped()) return;
  ASSERT_TRUE(NewEnv());
  ASSERT_TRUE(env_->StartServer(ServerOpts()));
  ASSERT_TRUE(env_->Mount(Options()));
}

}  // namespace ringfs::testing
