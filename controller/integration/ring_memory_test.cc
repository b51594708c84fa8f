// Issue 14 on a real mount: what a mount costs in memory while idle, with one and two CPUs in
// the active set; the pages of 1 MiB payloads going back once the entries rest (the sweep) or
// serve small requests (at commit); and, with initial_depth=1, a queue outside the active set
// growing its entries under verifying fio at depth 16.
// The accounting read here (ring_entries, ring_memory_bytes of ListQueues) is the one
// frontend/ring_memory_test.cc checks against mincore(2).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "controller/integration/control_test_base.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

constexpr uint64_t kEntryIdleBytes = 4096 + 16384;  // header page + resident head
constexpr uint64_t kMiB = 1024 * 1024;

// A queue whose entries rest: each one has nothing resident (it never served) or its header
// page and head (frontend/ring_memory.h); none holds the pages of a large payload.
bool AtRest(const control::QueueInfo& q) {
  return q.ring_memory_bytes() % kEntryIdleBytes == 0 &&
         q.ring_memory_bytes() <= q.ring_entries() * kEntryIdleBytes;
}

uint64_t ResidentKiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

std::string Describe(const control::QueueState& state) {
  std::string text;
  for (const auto& q : state.queues()) {
    text += "[qid " + std::to_string(q.qid()) + ": " + std::to_string(q.ring_entries()) +
            " entries, " + std::to_string(q.ring_memory_bytes()) + " bytes, held here " +
            std::to_string(q.entries_held()) + "] ";
  }
  return text;
}

// The budget: 32 MB + 2 MB per active CPU, whatever the number of possible CPUs.
void CheckIdleBudget(pid_t mount_pid, control::QueueControl::Stub* stub, int active) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const uint64_t rss = ResidentKiB(mount_pid) * 1024;
  const uint64_t budget = 32 * kMiB + active * 2 * kMiB;
  EXPECT_GT(rss, 0u);
  EXPECT_LE(rss, budget) << "idle ringfs-mount resident " << rss << " bytes, active CPUs "
                         << active;
  control::QueueState state = ListQueuesOrFail(stub);
  for (const auto& q : state.queues()) {
    // queue_depth entries registered, of which only those the probe and the control calls made
    // serve have anything resident: their header and head.
    EXPECT_EQ(q.ring_entries(), 16u);
    EXPECT_TRUE(AtRest(q)) << Describe(state);
    EXPECT_LE(q.ring_memory_bytes(), 4 * kEntryIdleBytes) << Describe(state);
  }
  ::testing::Test::RecordProperty("idle_rss_bytes", std::to_string(rss));
  printf("idle ringfs-mount: %lu KiB resident with %d active CPU(s); %s\n",
         static_cast<unsigned long>(rss / 1024), active, Describe(state).c_str());
}

// 48 MiB in 1 MiB O_DIRECT writes at depth 16 from CPU 1: 16 of queue 1's entries carry 1 MiB
// payloads, then rest in the kernel.
CommandResult WriteABurstFromCpu1(const std::string& fio, const std::string& file) {
  return RunCapture({fio, "--name=burst", "--thread", "--filename=" + file, "--size=48m",
                     "--bs=1m", "--rw=write", "--ioengine=io_uring", "--iodepth=16", "--direct=1",
                     "--cpus_allowed=1"},
                    std::chrono::seconds(60));
}

// After a burst on queue 1: its entries rest, and their worker's sweep returns the payload pages
// 2 s after their last large request (RingWorker::SweepIdleEntries): the queue's accounting
// comes back to rest and the process's RSS falls by more than `returned`.
void ExpectQueue1GivesItsPagesBack(pid_t mount_pid, control::QueueControl::Stub* stub,
                                   uint64_t returned) {
  const uint64_t rss_busy = ResidentKiB(mount_pid) * 1024;
  control::QueueState idle;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    idle = ListQueuesOrFail(stub);
  } while (!AtRest(QueueOf(idle, 1)) && std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(AtRest(QueueOf(idle, 1))) << Describe(idle);
  const uint64_t rss_idle = ResidentKiB(mount_pid) * 1024;
  EXPECT_LT(rss_idle + returned, rss_busy) << "the process gave the pages back";
  EXPECT_LE(rss_idle, 34 * kMiB) << "back within the idle budget of one active CPU";
  printf("after the burst: %lu KiB resident, idle again: %lu KiB\n",
         static_cast<unsigned long>(rss_busy / 1024), static_cast<unsigned long>(rss_idle / 1024));
}

class RingMemoryOneActiveTest : public ControlTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.extra_mount_options = {"active=0", "idle_pages=return"};
    return spec;
  }
};

class RingMemoryAllActiveTest : public ControlTest {};

// initial_depth=1: queues register one entry and grow while their callers keep all busy.
class RingMemoryGrowTest : public ControlTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.extra_mount_options = {"active=0", "idle_pages=return", "initial_depth=1"};
    return spec;
  }
};

class RingMemoryKeepTest : public ControlTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.extra_mount_options = {"active=0", "idle_pages=keep"};
    return spec;
  }
};

// idle_pages=keep: plain rings (no DEFER_TASKRUN), so entries idle in the kernel keep the pages of
// their large payloads; the option is what it says, and the sweep is what returns them otherwise.
TEST_F(RingMemoryKeepTest, IdleEntriesKeepTheirPages) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string fio = FindInPath("fio");
  if (fio.empty()) GTEST_SKIP() << "fio is not installed (scripts/install-deps.sh installs it)";
  CommandResult run = WriteABurstFromCpu1(fio, mountpoint() + "/keep");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  auto stub = NewStub();
  control::QueueState state = ListQueuesOrFail(stub.get());
  EXPECT_GT(QueueOf(state, 1).ring_memory_bytes(), 4 * kMiB) << Describe(state);
}

// idle_pages=return: after a burst of 1 MiB writes at depth 16 the entries rest in the kernel,
// most of them not to be picked again soon (the kernel reuses the most recently committed
// first); their worker's sweep returns the payload pages 2 s after their last large request.
TEST_F(RingMemoryOneActiveTest, ABurstsPagesGoBackWhenItsEntriesRest) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string fio = FindInPath("fio");
  if (fio.empty()) GTEST_SKIP() << "fio is not installed (scripts/install-deps.sh installs it)";
  CommandResult run = WriteABurstFromCpu1(fio, mountpoint() + "/burst");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto stub = NewStub();
  control::QueueState busy = ListQueuesOrFail(stub.get());
  EXPECT_GT(QueueOf(busy, 1).ring_memory_bytes(), 4 * kMiB) << Describe(busy);
  ExpectQueue1GivesItsPagesBack(env_->mount_process()->pid(), stub.get(), 4 * kMiB);
}

TEST_F(RingMemoryAllActiveTest, IdleMountStaysWithinTheBudget) {
  auto stub = NewStub();
  const int active = ListQueuesOrFail(stub.get()).settings().active_cpus_size();
  CheckIdleBudget(env_->mount_process()->pid(), stub.get(), active);
}

TEST_F(RingMemoryOneActiveTest, IdleMountStaysWithinTheBudget) {
  auto stub = NewStub();
  ASSERT_EQ(ListQueuesOrFail(stub.get()).settings().active_cpus_size(), 1);
  CheckIdleBudget(env_->mount_process()->pid(), stub.get(), 1);
}

// CPU 1 is outside the active set, so its queue's entries live on CPU 0's worker; fio at depth
// 16 pinned there keeps them all busy: the queue grows while the writes and their verification
// run, and nothing is lost or misdirected (fio verifies every block).
TEST_F(RingMemoryGrowTest, AQueueGrowsUnderLoadWithoutLosingAnything) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  const std::string fio = FindInPath("fio");
  if (fio.empty()) GTEST_SKIP() << "fio is not installed (scripts/install-deps.sh installs it)";
  // 96 MiB in 1 MiB blocks at depth 16 from CPU 1, checksummed: `mode` writes then verifies, or
  // only verifies what is there.
  auto run_fio = [&](const std::string& mode) {
    std::vector<std::string> argv = {
        fio, "--name=grow", "--thread", "--filename=" + mountpoint() + "/grow", "--size=96m",
        "--bs=1m", "--ioengine=io_uring", "--iodepth=16", "--direct=1", "--cpus_allowed=1",
        "--verify=crc32c", "--verify_fatal=1"};
    if (mode == "write") {
      argv.insert(argv.end(), {"--rw=write", "--do_verify=1"});
    } else {
      argv.insert(argv.end(), {"--rw=read", "--verify_only=1"});
    }
    return RunCapture(argv, std::chrono::seconds(90));
  };
  auto stub = NewStub();
  const uint32_t before = QueueOf(ListQueuesOrFail(stub.get()), 1).ring_entries();
  CommandResult run = run_fio("write");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  control::QueueState state = ListQueuesOrFail(stub.get());
  const control::QueueInfo queue = QueueOf(state, 1);
  EXPECT_GT(queue.ring_entries(), before) << Describe(state);
  EXPECT_LE(queue.ring_entries(), 16u) << "queue_depth bounds the growth";
  EXPECT_GT(queue.ring_memory_bytes(), kMiB) << "1 MiB payloads were resident";
  uint32_t held = 0, registered = 0;
  for (const auto& q : state.queues()) {
    held += q.entries_held();
    registered += q.ring_entries();
  }
  EXPECT_EQ(held, registered) << "every entry added is held by a worker: " << Describe(state);
  EXPECT_EQ(QueueOf(state, 1).failures(), 0u);
  printf("queue 1 grew from %u to %u entries; %s\n", before, queue.ring_entries(),
         Describe(state).c_str());

  // Then nothing: the entries wait in the kernel, most of them never to be picked again soon (the
  // kernel reuses the most recently committed first). Their worker's sweep returns the 1 MiB
  // payload pages 2 s after their last large request (RingWorker::SweepIdleEntries).
  ExpectQueue1GivesItsPagesBack(env_->mount_process()->pid(), stub.get(), 8 * kMiB);

  // And the entries still work: the data written before the pages went back reads back right.
  CommandResult verify = run_fio("verify");
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// An entry that carried a 1 MiB WRITE keeps its pages while large requests keep coming, and
// returns them when it next serves a small request after kRingTrimAfterNs (2 s).
TEST_F(RingMemoryOneActiveTest, LargePayloadPagesGoBackAfterTheQuietPeriod) {
  auto stub = NewStub();
  ASSERT_TRUE(PinToCpu(0));
  const std::string path = mountpoint() + "/trim";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  void* block = nullptr;
  ASSERT_EQ(posix_memalign(&block, 4096, kMiB), 0);
  std::memset(block, 'r', kMiB);
  ASSERT_EQ(pwrite(fd, block, kMiB, 0), static_cast<ssize_t>(kMiB)) << std::strerror(errno);
  control::QueueState after_write = ListQueuesOrFail(stub.get());
  EXPECT_GE(QueueOf(after_write, 0).ring_memory_bytes(), kMiB) << Describe(after_write);

  std::this_thread::sleep_for(std::chrono::milliseconds(2300));
  // Small requests from the same CPU reuse the most recently committed entry (the kernel's
  // available list is LIFO): the one that carried the write.
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(pread(fd, block, 4096, 4096 * i), 4096) << std::strerror(errno);
    EXPECT_EQ(static_cast<char*>(block)[0], 'r');
  }
  control::QueueState after_reads = ListQueuesOrFail(stub.get());
  const control::QueueInfo queue = QueueOf(after_reads, 0);
  EXPECT_TRUE(AtRest(queue)) << Describe(after_reads);
  // The data read back after the trim is the data written before it.
  ASSERT_EQ(pread(fd, block, kMiB, 0), static_cast<ssize_t>(kMiB));
  for (size_t i = 0; i < kMiB; i += 4096) ASSERT_EQ(static_cast<char*>(block)[i], 'r') << i;
  free(block);
  close(fd);
}

}  // namespace
}  // namespace ringfs::controller::testing
