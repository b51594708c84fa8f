#include "frontend/cpu_contention.h"

#include <gtest/gtest.h>

namespace ringfs::frontend {
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
  // busy: user + nice + system + irq + softirq + steal (guest is inside user); 10 ms a tick.
  EXPECT_EQ((*cpus)[0].busy_ns, (100u + 5 + 40 + 1 + 4 + 2) * 10 * kMs);
  EXPECT_EQ((*cpus)[0].total_ns, (100u + 5 + 40 + 1 + 4 + 2 + 200 + 20) * 10 * kMs);
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

TEST(CpuContentionTest, OtherWorkAboveHalfTheCpuMakesItContendedUntilBelowAQuarter) {
  CpuContention c;
  EXPECT_FALSE(c.Update(At(0, 0), 0));        // first look: nothing known
  EXPECT_FALSE(c.Update(At(90, 200), 0));     // 45% busy
  EXPECT_TRUE(c.Update(At(200, 400), 0));     // 55%
  EXPECT_TRUE(c.Update(At(260, 600), 0));     // 30%: still above kLeave
  EXPECT_FALSE(c.Update(At(300, 800), 0));    // 20%
  EXPECT_FALSE(c.Update(At(380, 1000), 0));   // 40%: below kEnter
}

TEST(CpuContentionTest, TheWorkersOwnTimeIsNotContention) {
  CpuContention c;
  c.Update(At(0, 0), 0);
  // 90% busy, of which the worker ran 80%: others 10%.
  EXPECT_FALSE(c.Update(At(180, 200), 160 * kMs));
  // 90% busy, the worker 20%: others 70%.
  EXPECT_TRUE(c.Update(At(360, 400), 200 * kMs));
  // A restarted worker's time starts from 0 again: none of it is subtracted this once.
  EXPECT_TRUE(c.Update(At(540, 600), 10 * kMs));
}

TEST(CpuContentionTest, ShortIntervalsKeepTheLastJudgementAndCountersGoingBackRestart) {
  CpuContention c;
  c.Update(At(0, 0), 0);
  EXPECT_TRUE(c.Update(At(190, 200), 0));
  // 50 ms later, idle: too short to judge.
  EXPECT_TRUE(c.Update(At(190, 250), 0));
  // ...and measured from the last judged sample once long enough.
  EXPECT_FALSE(c.Update(At(190, 400), 0));
  // Counters that went back (CPU offline and online) start a new first look.
  EXPECT_FALSE(c.Update(At(10, 20), 0));
  EXPECT_TRUE(c.Update(At(200, 220), 0));
}

}  // namespace
}  // namespace ringfs::frontend
