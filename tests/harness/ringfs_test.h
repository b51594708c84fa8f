// gtest fixtures for tests that need a running server and mount. MountedTest is parameterized
// over the transport ("uring", "classic"); SetUp checks root, enables the ring, starts the
// server and the mount; TearDown stops everything (failing the test if the mount did not stop
// cleanly) and prints the daemons' logs when the test failed. One test thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tests/harness/fs_util.h"
#include "tests/harness/ringfs_env.h"

namespace ringfs::testing {

// Base for any test that builds its own RingfsEnv(s) (no automatic mount).
class RingfsTestBase : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Per-test time budget for the watchdog; ctest's TIMEOUT must be larger.
  virtual std::chrono::seconds Budget() const { return std::chrono::seconds(100); }

  // Creates and Init()s env_ (call from SetUp or the test body).
  ::testing::AssertionResult NewEnv();

  std::unique_ptr<RingfsEnv> env_;
};

class MountedTest : public RingfsTestBase, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override;
  // Options the fixture mounts with; the transport comes from the parameter.
  virtual MountOptions Options() const {
    MountOptions o;
    o.transport = GetParam();
    return o;
  }
  // Options the fixture starts the server with.
  virtual ServerOptions ServerOpts() const { return {}; }
  std::string Mnt(const std::string& rel) const { return env_->Mnt(rel); }
  std::string Exp(const std::string& rel) const { return env_->Exp(rel); }
  // A counter of the mount's stats file once it reaches `at_least` (the file is rewritten every
  // 200 ms), or its last value after 5 s.
  uint64_t StatAtLeast(const std::string& key, uint64_t at_least);
  // Unmounts the fixture's mount and mounts again with Options() plus the -o option `extra`.
  void RemountWith(const std::string& extra);
  // Runs `attempt` until it stops failing with ENOTCONN or EIO (the mount reconnecting), 20 s;
  // returns its last errno (0: success).
  int WhileReconnecting(const std::function<int()>& attempt);
};

// For INSTANTIATE_TEST_SUITE_P: names the instances "uring" / "classic".
inline std::string TransportName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

#define RINGFS_INSTANTIATE_TRANSPORTS(suite)                                         \
  INSTANTIATE_TEST_SUITE_P(Transports, suite, ::testing::Values("uring", "classic"), \
                           ::ringfs::testing::TransportName)

}  // namespace ringfs::testing
