// CallerStateOf: a dying caller from /proc/<tid>/stat.
#include "frontend/caller_state.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

namespace ringfs::frontend {
namespace {

// A line of /proc/<tid>/stat with `state`, `flags`, pending signals `pending` and `exit_code`.
std::string Stat(const std::string& comm, char state, uint64_t flags, uint64_t pending,
                 int exit_code = 0) {
  return "4242 (" + comm + ") " + state + " 1 4242 4242 0 -1 " + std::to_string(flags) +
         " 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 100 18446744073709551615 1 1 0 0 0 " +
         std::to_string(pending) + " 0 0 0 0 0 0 17 1 0 0 0 0 0 1 2 3 4 5 6 7 " +
         std::to_string(exit_code) + "\n";
}

TEST(CallerStateTest, DyingWhenKilledOrExitingByASignal) {
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'S', 0x400000, 0)), CallerState::kAlive);
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'S', 0x400000, 1u << 16)), CallerState::kAlive)
      << "SIGCHLD pending: caught, not dying";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'S', 0x400000, 1u << 8)), CallerState::kDying)
      << "SIGKILL pending";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'D', 0x400004, 0, SIGKILL)), CallerState::kDying)
      << "PF_EXITING, killed: closing its files from its exit";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'D', 0x400004, 0, SIGTERM)), CallerState::kDying);
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'D', 0x400004, 0, 3 << 8)), CallerState::kAlive)
      << "exit(3): waits for its files as a close() does";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'D', 0x400004, 1u << 8, 0)), CallerState::kDying)
      << "a plain exit, then killed";
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'Z', 0, 0)), CallerState::kDying);
  EXPECT_EQ(CallerStateFromStat(Stat("a) S 1 (b", 'S', 0, 1u << 8)), CallerState::kDying)
      << "parentheses and spaces in the command name";
  EXPECT_EQ(CallerStateFromStat("4242 (cp) S 1 2"), CallerState::kUnknown) << "cut short";
  std::string old_kernel = Stat("cp", 'D', 0x400004, 0);
  old_kernel.resize(old_kernel.find(" 17 1 0 0"));  // no exit_code field
  EXPECT_EQ(CallerStateFromStat(old_kernel), CallerState::kDying) << "exiting, code unknown";
  EXPECT_EQ(CallerStateFromStat("garbage"), CallerState::kUnknown);
}

TEST(CallerStateTest, TheRunningTestIsAlive) {
  EXPECT_EQ(CallerStateOf(::gettid()), CallerState::kAlive);
  EXPECT_EQ(CallerStateOf(0), CallerState::kUnknown) << "outside the pid namespace";
  EXPECT_EQ(CallerStateOf(999999999), CallerState::kUnknown) << "not visible";
}

}  // namespace
}  // namespace ringfs::frontend
