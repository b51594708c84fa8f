// The queue engine on a real mount under load (issue 3): switching the active set back and
// forth while both CPUs do verified I/O, and a background limit of 1 under writeback.
// Runtime changes go through the real control service, as an operator's would.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "controller/integration/control_test_base.h"
#include "tests/harness/system.h"

namespace ringfs::controller::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The issue asks for a 30 s workload; RINGFS_QUEUE_TEST_SECONDS shortens it for quick runs.
std::chrono::milliseconds WorkloadDuration() {
  const char* text = std::getenv("RINGFS_QUEUE_TEST_SECONDS");
  int seconds = text ? std::atoi(text) : 30;
  return std::chrono::seconds(seconds > 0 ? seconds : 30);
}

control::QueueState SetActive(control::QueueControl::Stub* stub, std::vector<uint32_t> cpus) {
  grpc::ClientContext context;
  control::SetActiveSetRequest request;
  for (uint32_t cpu : cpus) request.add_cpus(cpu);
  control::QueueState state;
  grpc::Status status = stub->SetActiveSet(&context, request, &state);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return state;
}

uint64_t Forwarded(const control::QueueState& state, uint32_t qid) {
  for (const auto& queue : state.queues()) {
    if (queue.qid() == qid) return queue.forwarded_total();
  }
  return 0;
}

// One thread's verified read/write traffic on its own file, pinned to one CPU.
struct Workload {
  std::string path;
  int cpu = 0;
  std::vector<char> model;
  std::atomic<uint64_t> operations{0};
  std::atomic<int> errors{0};
  std::string first_error;

  void Run(const std::atomic<bool>& stop) {
    PinToCpu(cpu);
    std::mt19937_64 random(1234 + cpu);
    int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) return Fail("open");
    std::vector<char> buffer(64 * 1024), readback(64 * 1024);
    while (!stop.load()) {
      size_t size = 1 + random() % buffer.size();
      size_t offset = random() % (model.size() - size);
      for (size_t i = 0; i < size; ++i) buffer[i] = static_cast<char>(random());
      if (pwrite(fd, buffer.data(), size, offset) != static_cast<ssize_t>(size)) return Fail("pwrite", fd);
      std::memcpy(model.data() + offset, buffer.data(), size);
      size_t check = 1 + random() % readback.size();
      size_t check_at = random() % (model.size() - check);
      if (pread(fd, readback.data(), check, check_at) != static_cast<ssize_t>(check)) return Fail("pread", fd);
      if (std::memcmp(readback.data(), model.data() + check_at, check) != 0) return Fail("verify", fd);
      struct stat info;
      if (fstat(fd, &info) != 0) return Fail("fstat", fd);
      operations += 3;
    }
    if (fsync(fd) != 0) return Fail("fsync", fd);
    close(fd);
  }

  void Fail(const char* what, int fd = -1) {
    if (errors++ == 0) first_error = std::string(what) + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
  }
};

class QueueEngineTest : public ControlTest {};

TEST_F(QueueEngineTest, ActiveSetSwitchedTwentyTimesUnderLoadLosesNothing) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  auto stub = NewStub();
  std::vector<std::unique_ptr<Workload>> workloads;
  for (int cpu : {0, 1}) {
    auto w = std::make_unique<Workload>();
    w->path = mountpoint() + "/load-" + std::to_string(cpu);
    w->cpu = cpu;
    w->model.assign(8 << 20, 0);
    int fd = open(w->path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, w->model.size()), 0);
    close(fd);
    workloads.push_back(std::move(w));
  }
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (auto& w : workloads) threads.emplace_back([&w, &stop] { w->Run(stop); });

  const int kSwitches = 20;
  auto phase = WorkloadDuration() / kSwitches;
  int inactive_phases_checked = 0;
  for (int i = 0; i < kSwitches; ++i) {
    bool only_zero = i % 2 == 0;
    control::QueueState after = SetActive(stub.get(), only_zero ? std::vector<uint32_t>{0}
                                                                : std::vector<uint32_t>{0, 1});
    uint64_t forwarded_at_switch = Forwarded(after, 1);
    std::this_thread::sleep_for(phase);
    if (only_zero) {
      // The worker on CPU 1 left the active set: it finishes what it had, but sends nothing new
      // to the server (CPU 1's requests are handed to CPU 0's worker).
      EXPECT_EQ(Forwarded(ListQueuesOrFail(stub.get()), 1), forwarded_at_switch) << "switch " << i;
      ++inactive_phases_checked;
    }
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(inactive_phases_checked, kSwitches / 2);

  control::QueueState final_state = ListQueuesOrFail(stub.get());
  for (auto& w : workloads) {
    EXPECT_EQ(w->errors.load(), 0) << "CPU " << w->cpu << ": " << w->first_error;
    EXPECT_GT(w->operations.load(), 100u) << "CPU " << w->cpu << " made no progress";
    // What the server stored is what the model says.
    std::string exported = env_->export_dir() + "/load-" + std::to_string(w->cpu);
    int fd = open(exported.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    std::vector<char> stored(w->model.size());
    ASSERT_EQ(pread(fd, stored.data(), stored.size(), 0), static_cast<ssize_t>(stored.size()));
    close(fd);
    EXPECT_EQ(std::memcmp(stored.data(), w->model.data(), stored.size()), 0) << "CPU " << w->cpu;
  }
  // Both queues carried requests over the run, and CPU 1's were handed over while it was out.
  uint64_t handoffs = 0;
  for (const auto& queue : final_state.queues()) handoffs += queue.handoffs_out();
  EXPECT_GT(handoffs, 0u);
}

uint32_t EntriesHeld(const control::QueueState& state) {
  uint32_t held = 0;
  for (const auto& queue : state.queues()) held += queue.entries_held();
  return held;
}

// Every entry ever registered, by queue: held by some worker once the kernel waits on nothing.
uint32_t EntriesRegistered(const control::QueueState& state) {
  uint32_t registered = 0;
  for (const auto& queue : state.queues()) registered += queue.ring_entries();
  return registered;
}

uint32_t QueueDepth(control::QueueControl::Stub* stub) {
  grpc::ClientContext context;
  control::MountInfo info;
  grpc::Status status = stub->GetMountInfo(&context, control::GetMountInfoRequest(), &info);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return info.queue_depth();
}

// Regression (issue 9): a retiring worker's entries leave it as the kernel puts requests on them,
// each handed to the new owner with MSG_RING. The handoffs made in the loop pass that left the
// worker holding nothing (often all 16 at once) were still unsubmitted in its SQ when the loop
// ended, and the restart closed the ring: the entries vanished and their callers hung for good.
// CPU 1 stays idle until its worker may exit, so every one of its entries leaves after that.
TEST_F(QueueEngineTest, LastHandoffOfARetiringWorkerIsNotLost) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  auto stub = NewStub();
  const uint32_t depth = QueueDepth(stub.get());
  SetActive(stub.get(), {0});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the exit permission lands
  ASSERT_EQ(QueueOf(ListQueuesOrFail(stub.get()), 1).worker_state(), "retiring");

  // More callers on CPU 1 than it has entries, so each of its entries gets a request.
  constexpr int kCallers = 48;
  struct Shared {
    std::atomic<bool> stop{false};
    std::atomic<int> done{0};
    std::atomic<int> errors{0};
  };
  auto shared = std::make_shared<Shared>();
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    std::string path = mountpoint() + "/last-handoff-" + std::to_string(i);
    callers.emplace_back([shared, path] {
      PinToCpu(1);
      std::vector<char> block(64 * 1024, 'x');
      int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) ++shared->errors;
      while (fd >= 0 && !shared->stop.load()) {
        if (pwrite(fd, block.data(), block.size(), 0) != static_cast<ssize_t>(block.size()) ||
            pread(fd, block.data(), block.size(), 0) != static_cast<ssize_t>(block.size())) {
          ++shared->errors;
          break;
        }
      }
      if (fd >= 0) close(fd);
      ++shared->done;
    });
  }
  // The worker on CPU 1 ends once it has handed off all its entries.
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (QueueOf(ListQueuesOrFail(stub.get()), 1).worker_state() != "stopped" && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  shared->stop = true;
  deadline = Clock::now() + std::chrono::seconds(10);
  while (shared->done.load() < kCallers && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int hung = kCallers - shared->done.load();
  control::QueueState after = ListQueuesOrFail(stub.get());
  if (hung > 0) {
    // Free the callers (their requests fail with ECONNABORTED) so the test can end.
    ADD_FAILURE() << hung << " callers on CPU 1 hung (entries held: " << EntriesHeld(after)
                  << "); " << ringfs::testing::ForceUnmount(mountpoint());
  }
  for (auto& t : callers) t.join();
  if (hung > 0) return;
  EXPECT_EQ(shared->errors.load(), 0);
  EXPECT_EQ(QueueOf(after, 1).worker_state(), "stopped") << "CPU 1's worker never retired";
  EXPECT_EQ(EntriesHeld(after), EntriesRegistered(after)) << "ring entries vanished";
  EXPECT_EQ(QueueOf(after, 1).ring_entries(), depth);

  // And the worker comes back on a fresh ring and serves CPU 1 again.
  SetActive(stub.get(), {0, 1});
  std::thread probe([this, shared] {
    PinToCpu(1);
    struct stat info;
    if (stat(mountpoint().c_str(), &info) != 0) ++shared->errors;
    ++shared->done;
  });
  deadline = Clock::now() + std::chrono::seconds(10);
  while (shared->done.load() <= kCallers && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (shared->done.load() <= kCallers) {
    ADD_FAILURE() << "a stat on CPU 1 hung; " << ringfs::testing::ForceUnmount(mountpoint());
  }
  probe.join();
  EXPECT_EQ(shared->errors.load(), 0);
  {
    control::QueueState now = ListQueuesOrFail(stub.get());
    EXPECT_EQ(EntriesHeld(now), EntriesRegistered(now));
  }
}

class WritebackQueueEngineTest : public ControlTest {
 protected:
  ControlSpec Spec() const override {
    ControlSpec spec;
    spec.extra_mount_options = {"writeback_cache"};
    return spec;
  }
};

TEST_F(WritebackQueueEngineTest, BackgroundLimitOfOneHoldsWhileForegroundKeepsCompleting) {
  auto stub = NewStub();
  std::atomic<bool> stop{false};
  std::atomic<int> write_errors{0};
  std::atomic<uint64_t> stats_done{0};
  std::atomic<int> stat_errors{0};
  std::vector<std::thread> writers;
  for (int cpu : {0, 1}) {
    writers.emplace_back([&, cpu] {
      PinToCpu(cpu);
      std::vector<char> block(1 << 20, static_cast<char>('a' + cpu));
      std::string path = mountpoint() + "/writeback-" + std::to_string(cpu);
      while (!stop.load()) {
        int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { ++write_errors; return; }
        for (int i = 0; i < 32 && !stop.load(); ++i) {
          if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) ++write_errors;
        }
        if (fsync(fd) != 0) ++write_errors;  // forces the writeback the limit applies to
        close(fd);
      }
    });
  }
  // Let writeback get going, then clamp every worker to one background request.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  {
    grpc::ClientContext context;
    control::SetBackgroundLimitRequest request;
    request.set_limit(1);
    control::QueueState state;
    grpc::Status status = stub->SetBackgroundLimit(&context, request, &state);
    ASSERT_TRUE(status.ok()) << status.error_message();
    for (const auto& queue : state.queues()) EXPECT_EQ(queue.background_limit(), 1u);
  }
  std::thread stats([&] {
    std::string path = mountpoint() + "/writeback-0";
    while (!stop.load()) {
      struct stat info;
      if (stat(path.c_str(), &info) != 0 && errno != ENOENT) ++stat_errors;
      ++stats_done;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(8));
  control::QueueState during = ListQueuesOrFail(stub.get());
  stop = true;
  for (auto& t : writers) t.join();
  stats.join();

  EXPECT_EQ(write_errors.load(), 0);
  EXPECT_EQ(stat_errors.load(), 0);
  EXPECT_GT(stats_done.load(), 50u) << "foreground stat calls stalled behind writeback";
  uint64_t background = 0;
  for (const auto& queue : during.queues()) {
    // The high-water mark restarts when the limit changes: it covers only the time under L=1.
    EXPECT_LE(queue.background_inflight_max(), 1u) << "queue " << queue.qid();
    background += queue.forwarded_background();
  }
  EXPECT_GT(background, 0u) << "no writeback reached the server";
}

}  // namespace
}  // namespace ringfs::controller::testing
