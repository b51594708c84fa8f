// CallerStateOf: a dying caller from /proc/<tid>/stat.
#include "frontend/caller_state.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace ringfs::frontend {
namespace {

// A line of /proc/<tid>/stat with `state`, `flags` and pending signals `pending`.
std::string Stat(const std::string& comm, char state, uint64_t flags, uint64_t pending) {
  std::string line = "4242 (" + comm + ") " + state + " 1 4242 4242 0 -1 " + std::to_string(flags) +
                     " 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 100 " +
                     "18446744073709551615 1 1 0 0 0 " + std::to_string(pending) +
                     " 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  return line;
}

TEST(CallerStateTest, DyingWhenExitingOrKilled) {
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'S', 0x400000, 0)), CallerState::kAlive);
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'S', 0x400000, 1u << 16)), CallerState::kAlive)
      << "SIGCHLD pending: caught, not dying";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'S', 0x400000, 1u << 8)), CallerState::kDying)
      << "SIGKILL pending";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'D', 0x400004, 0)), CallerState::kDying)
      << "PF_EXITING: closing its files from its exit";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'Z', 0, 0)), CallerState::kDying);
  EXPECT_EQ(CallerStateFromStat(Stat("a) S 1 (b", 'S', 0, 1u << 8)), CallerState::kDying)
      << "parentheses and spaces in the command name";
  EXPECT_EQ(CallerStateFromStat("4242 (cp) S 1 2"), CallerState::kUnknown) << "cut short";
  EXPECT_EQ(CallerStateFromStat("garbage"), CallerState::kUnknown);
}

TEST(CallerStateTest, TheRunningTestIsAliveAndAGoneThreadIsDying) {
  EXPECT_EQ(CallerStateOf(::gettid()), CallerState::kAlive);
  EXPECT_EQ(CallerStateOf(0), CallerState::kUnknown) << "outside the pid namespace";
  EXPECT_EQ(CallerStateOf(999999999), CallerState::kDying) << "gone";
}

}  // namespace
}  // namespace ringfs::frontend
