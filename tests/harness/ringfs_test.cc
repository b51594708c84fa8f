#include "tests/harness/ringfs_test.h"

#include <cerrno>
#include <iostream>
#include <thread>

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

void MountedTest::RemountWith(const std::string& extra) {
  ASSERT_TRUE(env_->Unmount());
  MountOptions options = Options();
  options.extra.push_back(extra);
  ASSERT_TRUE(env_->Mount(options));
}

uint64_t MountedTest::StatAtLeast(const std::string& key, uint64_t at_least) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  uint64_t value = 0;
  for (;;) {
    Stats stats = env_->ReadStats();
    value = stats.count(key) ? std::stoull(stats[key]) : 0;
    if (value >= at_least || std::chrono::steady_clock::now() >= deadline) return value;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

int MountedTest::WhileReconnecting(const std::function<int()>& attempt) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    int err = attempt();
    if ((err != ENOTCONN && err != EIO) || std::chrono::steady_clock::now() >= deadline) {
      return err;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace ringfs::testing
