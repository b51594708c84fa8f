// CallerStateOf: a dying caller from /proc/<tid>/stat.
#include "frontend/caller_state.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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
  EXPECT_EQ(CallerStateFromStat(Stat("cp", 'D', 0x400004, 0, 3 << 8)), CallerState::kExiting)
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

// The signal lines of /proc/<tid>/status (hex masks: bit n-1 is signal n).
std::string Status(uint64_t own, uint64_t shared, uint64_t blocked, int threads) {
  char text[512];
  std::snprintf(text, sizeof(text),
                "Name:\tcat\nState:\tD (disk sleep)\nThreads:\t%d\nSigQ:\t1/96367\n"
                "SigPnd:\t%016llx\nShdPnd:\t%016llx\nSigBlk:\t%016llx\n"
                "SigIgn:\t0000000000000000\nSigCgt:\t0000000000000200\n",
                threads, static_cast<unsigned long long>(own),
                static_cast<unsigned long long>(shared), static_cast<unsigned long long>(blocked));
  return text;
}

TEST(CallerStateTest, SignalledWhenASignalItDoesNotBlockWaits) {
  const uint64_t usr1 = uint64_t{1} << (SIGUSR1 - 1);
  const uint64_t kill = uint64_t{1} << (SIGKILL - 1);
  EXPECT_FALSE(SignalledFromStatus(Status(0, 0, 0, 1)));
  EXPECT_TRUE(SignalledFromStatus(Status(usr1, 0, 0, 4))) << "sent to the thread";
  EXPECT_TRUE(SignalledFromStatus(Status(0, usr1, 0, 1))) << "sent to its one-thread process";
  EXPECT_FALSE(SignalledFromStatus(Status(0, usr1, 0, 4)))
      << "sent to a process whose other threads may take it";
  EXPECT_FALSE(SignalledFromStatus(Status(usr1, usr1, usr1, 1))) << "blocked";
  EXPECT_TRUE(SignalledFromStatus(Status(kill, 0, usr1, 8))) << "killed: every thread has SIGKILL";
  EXPECT_FALSE(SignalledFromStatus("Name:\tcat\nSigPnd:\t0000000000000100\n")) << "cut short";
  EXPECT_FALSE(SignalledFromStatus("garbage"));
  // A key inside another line is not the field.
  EXPECT_FALSE(SignalledFromStatus("Name:\tSigPnd: 100\n" + Status(0, 0, 0, 1)));
  // Cut short inside the blocked mask: not read as a shorter mask.
  std::string cut = Status(usr1, 0, usr1, 1);
  cut.resize(cut.find("SigBlk:") + 12);
  EXPECT_FALSE(SignalledFromStatus(cut));
}

// A stopped process keeps a signal sent to it pending: what the mount sees of a caller signalled
// while its request waits.
TEST(CallerStateTest, AStoppedChildWithASignalWaitingIsSignalled) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigaction(SIGUSR1, &action, nullptr);
    raise(SIGSTOP);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  ASSERT_TRUE(WIFSTOPPED(status));
  EXPECT_FALSE(CallerSignalled(child));
  ASSERT_EQ(kill(child, SIGUSR1), 0);
  EXPECT_TRUE(CallerSignalled(child)) << "SIGUSR1 waits in its process's ShdPnd";
  ASSERT_EQ(kill(child, SIGKILL), 0);
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

TEST(CallerStateTest, TheRunningTestHasNoSignalWaiting) {
  EXPECT_FALSE(CallerSignalled(::gettid()));
  EXPECT_FALSE(CallerSignalled(0));
  EXPECT_FALSE(CallerSignalled(999999999));
  // A signal it blocks waits, and is not counted; the same one unblocked would be.
  sigset_t usr2, old;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr2, &old), 0);
  ASSERT_EQ(::tgkill(::getpid(), ::gettid(), SIGUSR2), 0);
  EXPECT_FALSE(CallerSignalled(::gettid()));
  siginfo_t info;
  const timespec none{0, 0};
  EXPECT_EQ(sigtimedwait(&usr2, &info, &none), SIGUSR2);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old, nullptr), 0);
}

}  // namespace
}  // namespace ringfs::frontend
