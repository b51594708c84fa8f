#include "common/cpu_contention.h"

#include <gtest/gtest.h>

namespace ringfs {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(ParseProcStatTest, ReadsEveryCpuLineAndSkipsTheSum) {
  const char* text =
      "cpu  300 0 100 500 50 0 10 0 0 0\n"
      "cpu0 100 5 40 200 20 1 4 2 7 0\n"
      "cpu1 200 0 60 300 30 0 6 0 0 0\n"
      "intr 12345 0 0\n"
      "ctxt 999\n";
  absl::StatusOr<std::vector<CpuTimes>> cpus = ParseProcStat(text, 100);
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  ASSERT_EQ(cpus->size(), 2u);
  EXPECT_EQ((*cpus)[0].cpu, 0);
  // busy: user + nice + system + irq + softirq (guest is inside user); steal only in the total;
  // 10 ms a tick.
  EXPECT_EQ((*cpus)[0].busy_ns, (100u + 5 + 40 + 1 + 4) * 10 * kMs);
  EXPECT_EQ((*cpus)[0].total_ns, (100u + 5 + 40 + 1 + 4 + 200 + 20 + 2) * 10 * kMs);
  EXPECT_EQ((*cpus)[1].cpu, 1);
}

TEST(ParseProcStatTest, MalformedTextIsAnError) {
  EXPECT_FALSE(ParseProcStat("", 100).ok());
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3\n", 100).ok());
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 x 4 5 6 7 8\n", 100).ok());
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4 5 6 7 8\n", 0).ok());
}

// Samples of one CPU: `busy` and `total` in ms so far.
CpuTimes At(uint64_t busy_ms, uint64_t total_ms) { return {3, busy_ms * kMs, total_ms * kMs}; }
// The worker's schedstat: ms run, ms waited to run, times run.
ThreadSched Worker(uint64_t ran_ms, uint64_t waited_ms, uint64_t runs) {
  return {ran_ms * kMs, waited_ms * kMs, runs};
}

TEST(ParseSchedstatTest, ReadsTheThreeFields) {
  absl::StatusOr<ThreadSched> s = ParseSchedstat("135428520 9876543 3526\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->cpu_ns, 135428520u);
  EXPECT_EQ(s->run_delay_ns, 9876543u);
  EXPECT_EQ(s->runs, 3526u);
  EXPECT_FALSE(ParseSchedstat("").ok());
  EXPECT_FALSE(ParseSchedstat("1 2\n").ok());
  EXPECT_FALSE(ParseSchedstat("1 x 3\n").ok());
}

TEST(ParseTaskStateTest, TheLetterAfterTheLastParenthesis) {
  EXPECT_EQ(ParseTaskState("1234 (ringfs-mount) R 1 2 3"), 'R');
  EXPECT_EQ(ParseTaskState("1234 (a) b) S 1 2 3"), 'S');
  EXPECT_EQ(ParseTaskState(""), 0);
  EXPECT_EQ(ParseTaskState("1234 (x)"), 0);
}

TEST(CpuContentionTest, AWorkerThatNeverRanButIsRunnableIsStarved) {
  CpuContention c;
  c.Update(At(0, 0), Worker(0, 0, 0));
  ThreadSched waiting = Worker(0, 0, 0);
  EXPECT_FALSE(c.Update(At(200, 200), waiting));  // asleep: nothing asked of it
  waiting.runnable = true;
  EXPECT_TRUE(c.Update(At(400, 400), waiting));
}

TEST(CpuContentionTest, AWorkerThatWaitsToRunLeavesIdleUntilItsCpuQuietsDown) {
  CpuContention c;
  EXPECT_FALSE(c.Update(At(0, 0), Worker(0, 0, 0)));  // first look: nothing known
  // A busy CPU whose worker ran at once each time (its caller preempting it costs microseconds):
  // the application itself keeps the CPU busy; nothing to change.
  EXPECT_FALSE(c.Update(At(190, 200), Worker(20, 2, 1000)));
  // The worker waited 150 ms over 30 runs: 5 ms each.
  EXPECT_TRUE(c.Update(At(390, 400), Worker(21, 152, 1030)));
  // Once SCHED_OTHER it hardly waits, but the CPU stays busy with others' work: stays.
  EXPECT_TRUE(c.Update(At(580, 600), Worker(30, 153, 1100)));
  // 30% busy, of which the worker 5%: others 25%, still not below kLeave.
  EXPECT_TRUE(c.Update(At(640, 800), Worker(40, 153, 1200)));
  // Others 20%: back to SCHED_IDLE.
  EXPECT_FALSE(c.Update(At(690, 1000), Worker(50, 153, 1300)));
}

TEST(CpuContentionTest, TheWorkersOwnTimeIsNotOthersWork) {
  CpuContention c;
  c.Update(At(0, 0), Worker(0, 0, 0));
  EXPECT_TRUE(c.Update(At(100, 200), Worker(10, 100, 10)));
  // 90% busy, of which the worker ran 80%: others 10%.
  EXPECT_FALSE(c.Update(At(280, 400), Worker(170, 100, 100)));
}

TEST(CpuContentionTest, ShortIntervalsRestartsAndCountersGoingBackJudgeNothing) {
  CpuContention c;
  c.Update(At(0, 0), Worker(0, 0, 0));
  EXPECT_TRUE(c.Update(At(190, 200), Worker(1, 100, 10)));
  // 50 ms later, idle: too short to judge.
  EXPECT_TRUE(c.Update(At(190, 250), Worker(1, 100, 10)));
  // ...and measured from the last judged sample once long enough.
  EXPECT_FALSE(c.Update(At(190, 400), Worker(1, 100, 10)));
  // A restarted worker (its counters from 0) tells nothing this once, even with a long wait.
  EXPECT_FALSE(c.Update(At(300, 600), Worker(0, 90, 5)));
  EXPECT_TRUE(c.Update(At(490, 800), Worker(1, 190, 10)));
  // Counters that went back (CPU offline and online) start a new first look.
  EXPECT_TRUE(c.Update(At(10, 20), Worker(1, 190, 10)));
  EXPECT_TRUE(c.Update(At(200, 220), Worker(2, 190, 20)));  // others 94%: stays
}

}  // namespace
}  // namespace ringfs
