// CallerBeingKilled: SIGKILL pending in /proc/<pid>/status.
#include "frontend/caller_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace ringfs::frontend {
namespace {

TEST(CallerStateTest, SigkillPendingInEitherMask) {
  const char* idle =
      "Name:\tcp\nState:\tS (sleeping)\nSigQ:\t0/95000\nSigPnd:\t0000000000000000\n"
      "ShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\n";
  EXPECT_FALSE(KillPendingIn(idle));
  EXPECT_FALSE(KillPendingIn("Name:\tcp\nSigPnd:\t0000000000002000\nShdPnd:\t0000000000010000\n"))
      << "SIGPIPE and SIGCHLD, caught signals: not dying";
  EXPECT_TRUE(KillPendingIn("Name:\tcp\nSigPnd:\t0000000000000100\nShdPnd:\t0000000000000000\n"));
  EXPECT_TRUE(KillPendingIn("Name:\tcp\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000102\n"));
  EXPECT_FALSE(KillPendingIn("garbage"));
}

TEST(CallerStateTest, ALiveProcessIsNotBeingKilled) {
  EXPECT_FALSE(CallerBeingKilled(::getpid()));
  EXPECT_FALSE(CallerBeingKilled(0));
  EXPECT_FALSE(CallerBeingKilled(999999999)) << "gone";
}

}  // namespace
}  // namespace ringfs::frontend
